"""Threads for a kernel's chunks of work, and the work arrays each thread reuses.

NumPy releases the GIL in ``take``, ``matmul`` and its ufunc loops, so chunks of regions computed
in a few threads run side by side, as a native kernel's intra-op threads do. Every chunk writes its
own part of the output; what a chunk computes does not depend on the thread that runs it or on the
number of threads, so results are the same bit for bit with one thread or many.

Memory stays bounded: at most ``2 x threads`` chunks are submitted and not yet finished at a time
(each holding its inputs), and each thread keeps one set of work arrays (``buffer``) for all the
chunks it runs, freed when the ``Workers`` block ends.
"""

from __future__ import annotations

import collections
import contextvars
import math
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Optional

import numpy as np

#: At most this many threads, whatever the machine has.
MAX_THREADS = 8

_local = threading.local()


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity where the platform says (a container's
    cpuset, ``taskset``), else every CPU of the machine. ``os.cpu_count`` alone counts CPUs the
    process may not use, and threads sized by it oversubscribe the ones it may."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_count() -> int:
    """The threads a kernel's chunks run in: ``usable_cpus``, at most ``MAX_THREADS``."""
    return max(1, min(usable_cpus(), MAX_THREADS))


def buffer(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A work array of ``shape`` and ``dtype`` (contents undefined): inside a ``Workers`` task, the
    same memory for every task of this thread that asks for ``name`` (fresh arrays of megabytes per
    chunk would cost their page faults again each time); elsewhere a new array."""
    store: Optional[dict[str, np.ndarray]] = getattr(_local, "buffers", None)
    if store is None:
        return np.empty(shape, dtype=dtype)
    count = math.prod(shape)
    have = store.get(name)
    if have is None or have.dtype != np.dtype(dtype) or have.size < count:
        have = store[name] = np.empty(count, dtype=dtype)
    return have[:count].reshape(shape)


class Workers:
    """Run tasks (functions of no argument) in up to ``threads`` threads, in a ``with`` block:
    ``submit`` queues one (waiting for the oldest when ``2 x threads`` are pending); leaving the
    block waits for all and raises the first task's error, if any. With one thread, or when a
    block submits a single task, the tasks run in the caller's thread (no thread is started for
    a small input). Each task runs in a copy of the caller's context (its ``np.errstate`` and the
    reference's element cap)."""

    def __init__(self, threads: Optional[int] = None):
        self.threads = thread_count() if threads is None else max(1, threads)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._first: Optional[Callable[[], None]] = None  # held until a second task asks for the pool
        self._pending: collections.deque[Future] = collections.deque()

    def __enter__(self) -> "Workers":
        return self

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task``: now, in the caller's thread, with one thread; else in the pool (the first
        task waits there for a second one), waiting for the oldest pending task first when
        ``2 x threads`` are pending."""
        if self.threads == 1:
            _inline(task)
            return
        if self._pool is None:
            if self._first is None:
                self._first = task
                return
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ep-testbed-reference")
            first, self._first = self._first, None
            self._pending.append(self._pool.submit(contextvars.copy_context().run, _with_buffers, first))
        while len(self._pending) >= 2 * self.threads:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(contextvars.copy_context().run, _with_buffers, task))

    def __exit__(self, *exc: object) -> None:
        if self._pool is None:
            first, self._first = self._first, None
            if first is not None and exc[0] is None:
                _inline(first)
            return
        try:
            if exc[0] is None:
                while self._pending:
                    self._pending.popleft().result()
        finally:
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)


def _inline(task: Callable[[], None]) -> None:
    """``task`` in the caller's thread, with work arrays of its own (``buffer``) for its duration."""
    had = getattr(_local, "buffers", None)
    if had is None:
        _local.buffers = {}
    try:
        task()
    finally:
        if had is None:
            _local.buffers = None


def _with_buffers(task: Callable[[], None]) -> None:
    """``task`` in a pool thread, with that thread's work arrays (``buffer``)."""
    if getattr(_local, "buffers", None) is None:
        _local.buffers = {}
    task()
