"""A run's failures re-checked on a second EP: is a failure this EP's own, or one it shares?

``run --also-on cpu`` (the default whenever the CPU EP is available and the EP under test is
another; ``--also-on none`` turns it off) runs each case that failed on the EP under test (raw
outcome ``fail``, ``crash`` or ``timeout``) again on the second EP, in workers of its own (a
crash there costs nothing; ``recheck_jobs`` of them), and labels it in the case line's ``scope``:

- ``shared with <second EP>``: the second EP fails it the same way: the same failure signature
  (``harness.core.signature``: outcome, kind, failing outputs, value classes of the worst
  element, diverging fields) and, where both runs attributed the failure
  (``harness.run.attribution``), the same cause;
- ``only on <EP under test>``: the second EP passes it, or fails it another way (the line's
  ``also_on`` says how).

``also_on`` records what the second EP did: its provider, raw outcome and message, failure
signature, attributed cause, and the expectation of its own that names the cause (its bundled
file and the shared causes that apply to it). The label never changes an outcome.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import replace
from typing import Any, Iterable, Iterator

from ..core.expectations import Expectations
from ..core.results import CaseLine
from ..core.signature import signature
from ..eps.providers import EpSpec
from .case_run import ArtifactPolicy, CaseConfig
from .pool import WorkerPool

#: Raw outcomes a run re-checks on the second EP.
RECHECKED = ("fail", "crash", "timeout")
#: Characters of the second EP's message kept in ``also_on``.
MESSAGE_CHARS = 300
#: Failures re-checked together at most per worker: those waiting when the workers are free go as
#: one batch, spread over them.
BATCH = 16
#: Re-check workers at most: enough to keep up with a GPU EP's failures on a machine with cores to
#: spare (measured: one CPU worker fell 5-6 s behind CUDA's 3000-case fuzz runs on 16 cores).
MAX_JOBS = 4


def shared_label(provider: str) -> str:
    """``"shared with CPUExecutionProvider"``."""
    return f"shared with {provider}"


def only_label(provider: str) -> str:
    """``"only on CUDAExecutionProvider"``."""
    return f"only on {provider}"


class Recheck:
    """Re-checks failing cases on ``other`` with the run's settings (no case folders, the
    expectations of ``other``): ``jobs`` workers (``recheck_jobs``), started with the run
    (``start``) or at the first failure, kept to the end and driven by a thread of its own, so
    that the run's workers get their next cases meanwhile; the failures waiting when they are free
    go to them as one batch.
    ``submit`` a line, take it back labelled from ``finished``; ``close`` hands back the lines
    whose re-check never finished, unlabelled."""

    def __init__(self, config: CaseConfig, other: EpSpec, timeout: float, expectations: Expectations,
                 env: dict[str, str] | None = None, extra_paths: Iterable[str] = (), jobs: int = 1):
        """``config``: the run's case settings (its EP is replaced by ``other``); ``timeout``:
        seconds per case; ``expectations``: ``other``'s (they name the cause there); ``jobs``: its
        worker processes."""
        self.config = replace(config, ep=other, run_dir=None)
        self.timeout, self.expectations, self.jobs = timeout, expectations, max(1, jobs)
        self.env, self.extra_paths = env, tuple(extra_paths)
        self._pool: WorkerPool | None = None
        self._todo: queue.Queue = queue.Queue()
        self._done: queue.Queue = queue.Queue()
        self._waiting: dict[str, CaseLine] = {}  # submitted and not yet in _done, by case id
        self._lock = threading.Lock()
        self._closing = False
        self._thread: threading.Thread | None = None

    @staticmethod
    def wants(line: CaseLine) -> bool:
        """Whether ``line``'s raw outcome is one re-checked (``RECHECKED``)."""
        return line.get("outcome") in RECHECKED

    def submit(self, case: Any, line: CaseLine) -> None:
        """Re-check ``case``, whose raw ``line`` failed, in the background."""
        with self._lock:
            self._waiting[line["id"]] = line
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="recheck", daemon=True)
            self._thread.start()
        self._todo.put((case, line))

    def finished(self, wait: bool = False) -> Iterator[CaseLine]:
        """The submitted lines whose re-check is done, labelled: those done now, or with ``wait``
        every one submitted (waiting for each)."""
        while True:
            with self._lock:
                if not self._waiting and self._done.empty():
                    return
            try:
                yield self._done.get(block=wait, timeout=1.0 if wait else None)
            except queue.Empty:
                if not wait or self._thread is None or not self._thread.is_alive():
                    return  # a thread that is gone labels nothing more: close() hands the rest back

    def start(self) -> None:
        """Start the second EP's worker now, without waiting for it: it starts its EP while the
        run's first cases run, so no failure waits for that."""
        self._worker_pool().start()

    def _worker_pool(self) -> WorkerPool:
        """The pool of the second EP's workers (made once)."""
        if self._pool is None:
            self._pool = WorkerPool(self.config, self.jobs, self.timeout, env=self.env, extra_paths=self.extra_paths,
                                    batch=BATCH)
        return self._pool

    def _serve(self) -> None:
        """The thread: label the submitted lines, those waiting together, until ``close``."""
        while True:
            items = [self._todo.get()]
            while len(items) < BATCH * self.jobs and not self._todo.empty():
                items.append(self._todo.get_nowait())
            if self._closing or any(item is None for item in items):
                return  # the lines not labelled go back unlabelled from close()
            try:
                labelled = self._labelled(items)
            except Exception as exc:  # the run goes on: the lines stay as they were, saying why
                labelled = [_noted(line, f"; Note: re-checking on {self.config.ep.provider} failed: "
                                         f"{type(exc).__name__}: {exc}") for _, line in items]
            with self._lock:
                if self._closing:
                    return  # closed meanwhile: the lines went back unlabelled
                for line in labelled:
                    if self._waiting.pop(line["id"], None) is not None:
                        self._done.put(line)

    def _labelled(self, items: list[tuple[Any, CaseLine]]) -> list[CaseLine]:
        """Copies of the ``(case, line)`` items' lines, labelled from one batch on the second EP."""
        submitted = {case.id: (case, line) for case, line in items}
        labelled = []
        def policy(case: Any) -> ArtifactPolicy:  # the second EP's readings are tried as its own run would
            return ArtifactPolicy(expected=self.expectations.candidates(case))

        for other in self._worker_pool().run([case for case, _ in items], policy, keep_workers=True):
            case, line = submitted[other["id"]]
            labelled.append(line.copy())
            self._apply(case, labelled[-1], other)
        return labelled

    def _apply(self, case: Any, line: CaseLine, other: CaseLine) -> None:
        """Label ``line`` from ``other``, the raw line of the same case on the second EP."""
        raw = other.copy()
        self.expectations.settle(case, other)
        mine, theirs = signature(line), signature(raw)
        same = mine is not None and theirs is not None and mine == theirs and _same_cause(line, raw)
        line["scope"] = shared_label(self.config.ep.provider) if same else only_label(line.get("ep") or "?")
        line["also_on"] = {
            "ep": self.config.ep.provider, "outcome": raw.get("outcome"), "reported": other.get("outcome"),
            "same_failure": same, "signature": theirs.to_json() if theirs else None,
            "cause": (raw.get("attribution") or {}).get("cause"),
            "expected_outcome": other.get("expected_outcome"),
            "message": str(raw.get("message") or "")[:MESSAGE_CHARS]}

    def close(self) -> list[CaseLine]:
        """Stop the thread and the worker (idempotent); the lines labelled and not yet taken, then
        those whose re-check did not finish, as they were submitted (unlabelled: ``scope`` None)."""
        with self._lock:
            self._closing = True
            unlabelled = list(self._waiting.values())
            self._waiting.clear()
        self._todo.put(None)
        if self._pool is not None:
            self._pool.close()  # a case the thread waits on ends now (its answer is dropped)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._pool, self._thread = None, None
        labelled = []
        while not self._done.empty():
            labelled.append(self._done.get())
        return labelled + unlabelled


def recheck_jobs(cores: int, run_jobs: int) -> int:
    """Re-check workers for a run of ``run_jobs`` workers on ``cores`` CPUs: one, and more only
    where half the cores the run and this process leave can take them (at most ``MAX_JOBS``), so a
    small machine's run keeps its cores."""
    return max(1, min(MAX_JOBS, (cores - run_jobs - 1) // 2))


def _noted(line: CaseLine, note: str) -> CaseLine:
    """A copy of ``line`` with ``note`` added to its message."""
    copy = line.copy()
    copy["message"] = f"{line.get('message') or ''}{note}"
    return copy


def _same_cause(mine: CaseLine, theirs: CaseLine) -> bool:
    """The attributed causes agree, or one side has none to compare (a crash, a refusal)."""
    a, b = (mine.get("attribution") or {}).get("cause"), (theirs.get("attribution") or {}).get("cause")
    return a is None or b is None or a == b
