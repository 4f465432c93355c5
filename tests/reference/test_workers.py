"""The worker threads of the kernels' chunks (``reference/workers.py``): every task runs once,
in the caller's context, an error comes out of the block, and each thread's work arrays are its own."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ep_testbed.reference.workers import Workers, buffer


@pytest.mark.parametrize("threads", [1, 3])
def test_every_task_runs_once_and_its_writes_land(threads):
    out = np.zeros(50, dtype=np.int64)
    with Workers(threads) as pool:
        for i in range(out.size):
            pool.submit(lambda i=i: out.__setitem__(i, out[i] + i + 1))
    assert out.tolist() == list(range(1, 51))


@pytest.mark.parametrize("threads", [1, 3])
def test_a_task_error_comes_out_of_the_block(threads):
    ran = []
    with pytest.raises(ZeroDivisionError):
        with Workers(threads) as pool:
            pool.submit(lambda: ran.append(1))
            pool.submit(lambda: 1 // 0)
    assert ran == [1]


@pytest.mark.parametrize("threads", [1, 3])
def test_tasks_run_under_the_callers_errstate(threads):
    """A pool thread starts with NumPy's default error handling; the caller's ``np.errstate``
    reaches it (the bounds silence NaN and overflow warnings there, and so must their tasks)."""
    with pytest.raises(FloatingPointError):
        with np.errstate(divide="raise"), Workers(threads) as pool:
            pool.submit(lambda: np.float64(1.0) / np.float64(0.0))


def test_work_arrays_are_reused_per_thread_and_fresh_outside():
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()

    def task():
        a, b = buffer("x", (4, 8), np.float32), buffer("x", (2, 8), np.float32)
        with lock:
            seen.setdefault(threading.current_thread().name, []).extend(
                [a.__array_interface__["data"][0], b.__array_interface__["data"][0]])

    with Workers(3) as pool:
        for _ in range(30):
            pool.submit(task)
    assert 1 <= len(seen) <= 3
    for addresses in seen.values():
        assert len(set(addresses)) == 1  # one array per thread, whatever the size asked within it
    assert len({addresses[0] for addresses in seen.values()}) == len(seen)  # and none shared
    first, second = buffer("x", (4,), np.float32), buffer("x", (4,), np.float32)
    assert not np.shares_memory(first, second)
