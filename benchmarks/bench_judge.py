"""Time the judging of one large output against numpy.testing.assert_allclose on the same arrays.

    python benchmarks/bench_judge.py [--repeat N] [--elements N]

A case's ``judge`` step compares an EP's output with the reference's element by element under
the tolerance rule, the reference's rounding bound and its knife-edge ranges
(``harness.core.compare.compare_outputs``), then summarizes the errors
(``harness.core.error_stats.error_statistics``: percentiles, the smallest passing tolerance).
At a detector's size (RoiAlign 1000 x 256 x 7 x 7 = 12.5 million elements) that used to take
longer than the reference and the EP together. This prints, per output, the median wall time of
the judge (the comparison, keeping its per-element differences for the statistics where this
checkout can, then the statistics) and of the named peer, ``numpy.testing.assert_allclose``
(the rule ``|a - e| <= atol + rtol * |e|`` alone, no ULP distance, no bound, no statistics),
timed in turn round after round, and their ratio. The EP-like answer differs from the expected
one by a few ULPs in every element and by more in a few (which fail, so the smallest passing
tolerance is searched too). Runs on any checkout of the project (an older one judges without
``keep_differences``). A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ep_testbed.harness.core import error_stats  # noqa: E402
from ep_testbed.harness.core.compare import Allowance, compare_outputs  # noqa: E402
from ep_testbed.harness.core.tolerances import Tolerances  # noqa: E402

OUT = "OutputTensor"
#: Whether this checkout's comparison can hand its differences to the statistics.
KEEPS = "keep_differences" in inspect.signature(compare_outputs).parameters


def arrays(elements: int, dtype: type, seed: int = 0) -> tuple[np.ndarray, np.ndarray, Allowance]:
    """Expected values, an answer a few ULPs off everywhere (a hundred elements far off), and a
    rounding bound of about 4 ULPs per element."""
    rng = np.random.default_rng(seed)
    expected = rng.standard_normal(elements).astype(dtype)
    steps = rng.integers(-3, 4, elements)
    actual = expected.copy()
    up = np.nextafter(expected, np.asarray(np.inf, dtype))
    down = np.nextafter(expected, np.asarray(-np.inf, dtype))
    actual = np.where(steps > 0, up, np.where(steps < 0, down, actual)).astype(dtype)
    far = rng.choice(elements, 100, replace=False)
    actual[far] = expected[far] * dtype(1.01)
    bound = (np.abs(expected.astype(np.float64)) * float(np.finfo(dtype).eps) * 4).reshape(expected.shape)
    return expected, actual, Allowance(bounds={OUT: bound}, rule="bench bound")


def judge(expected: np.ndarray, actual: np.ndarray, tolerances: Tolerances, allowance: Allowance) -> None:
    """What a case's judge step computes for one float output."""
    extra = {"keep_differences": True} if KEEPS else {}
    comparison = compare_outputs({OUT: expected}, {OUT: actual}, tolerances, allowance=allowance, **extra)
    computed = {"computed": comparison.differences} if KEEPS else {}
    error_stats.error_statistics({OUT: expected}, {OUT: actual}, tolerances, **computed)


def peer(expected: np.ndarray, actual: np.ndarray, tolerances: Tolerances) -> None:
    """numpy.testing.assert_allclose under the rule's atol and rtol (it raises on the far elements)."""
    tol = tolerances.for_dtype(expected.dtype.name.upper())
    try:
        np.testing.assert_allclose(actual, expected, rtol=tol.rtol, atol=tol.atol)
    except AssertionError:
        pass


def main(argv: list[str] | None = None) -> int:
    """Print one row per output dtype (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--elements", type=int, default=1000 * 256 * 7 * 7)
    args = parser.parse_args(argv)
    tolerances = Tolerances.defaults()
    print(f"load average {os.getloadavg()}; judge keeps its differences: {KEEPS}")
    print(f"{'output':34} {'judge ms':>9} {'assert_allclose ms':>19} {'ratio':>6}")
    for dtype in (np.float32, np.float16):
        expected, actual, allowance = arrays(args.elements, dtype)
        rounds: dict[str, list[float]] = {"judge": [], "peer": []}
        for _ in range(args.repeat):
            for name, call in (("judge", lambda: judge(expected, actual, tolerances, allowance)),
                               ("peer", lambda: peer(expected, actual, tolerances))):
                start = time.perf_counter()
                call()
                rounds[name].append(time.perf_counter() - start)
        mine, theirs = statistics.median(rounds["judge"]), statistics.median(rounds["peer"])
        label = f"{np.dtype(dtype).name} x {args.elements:,}"
        print(f"{label:34} {mine * 1e3:9.0f} {theirs * 1e3:19.0f} {mine / theirs:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
