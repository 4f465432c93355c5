"""How one case's error is distributed, and the smallest tolerance that would have passed it.

``harness.core.compare`` gives the verdict and the largest errors; a person triaging a failure also
wants what Polygraphy's comparator prints beside its verdict: the distribution of the error
(mean, median, p90, p99 of |a - e| and of the ULP distance) and the minimum tolerance that would
make the case pass. Both are computed here, per output, under the rule of ``harness.core.tolerances``
(the plain atol/rtol/ulp rule), and written into the case line's ``error_stats``.

``element_share`` is that rule per element: the share of its allowed error each element used
(0 exact, 1 at the limit, above 1 outside, ``inf`` for a NaN/inf that met a number). The report
draws heatmaps on this absolute scale; its maximum is ``Comparison.tolerance_used`` (the tests
hold the two equal, element by element, on random data).

The minimum tolerance changes one part of the rule and keeps the run's other two:
``atol`` (with the run's rtol and ulp), ``rtol`` (with the run's atol and ulp) and ``ulp`` (with
the run's atol and rtol). Each is the smallest value that passes every element, rounded *up*
to three significant digits so that the ``--tol`` it suggests passes when pasted. None where no
value of that part helps: a NaN or infinity that met a number, an element whose expected value
is 0 (for rtol), an index output (an index that points elsewhere is wrong at any tolerance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Collection, Mapping

import numpy as np

from .compare import Differences, differences, element_slices
from .tolerances import Tolerance, Tolerances

#: The percentiles the statistics give besides mean and max (50 is the median).
PERCENTILES = (50, 90, 99)


@dataclass
class ElementErrors:
    """Per element of one float output (flattened): |a - e|, ULP distance (0 where undefined),
    whether both are finite, whether the element passes, and its share of the tolerance."""

    absdiff: np.ndarray
    ulp: np.ndarray
    finite: np.ndarray
    ok: np.ndarray
    share: np.ndarray


def element_errors(expected: np.ndarray, actual: np.ndarray, tol: Tolerance,
                   diffs: Differences | None = None) -> ElementErrors:
    """The rule of ``harness.core.tolerances`` applied to each element of a float output.

    ``expected`` and ``actual`` have one float dtype and one shape. An element passes when NaN
    meets NaN, an infinity meets the same infinity, or both are finite and
    ``|a-e| <= atol + rtol*|e|`` or ``ulp <= tol.ulp``. Its share is the smaller of
    ``|a-e| / (atol + rtol*|e|)`` and ``ulp / tol.ulp`` (0 for an exact or equal non-finite pair,
    ``inf`` for a non-finite mismatch or a zero budget that an error exceeds). ``diffs``: what
    ``compare.differences`` already gave for this pair (computed here when None).
    """
    return _errors_of(diffs if diffs is not None else differences(np.asarray(expected), np.asarray(actual)), tol)


def _errors_of(diffs: Differences, tol: Tolerance) -> ElementErrors:
    """``element_errors`` of a pair's ``compare.differences``."""
    e, _, absdiff, ulp, finite, same_special = diffs
    bound = tol.allowed(np.where(finite, e.astype(np.float64), 0.0))  # the rule's arithmetic is float64's
    ok = same_special | (finite & tol.passes(absdiff, ulp, bound))
    share = tol.share(absdiff, ulp, bound)
    share[~finite] = np.where(ok[~finite], 0.0, np.inf)
    return ElementErrors(absdiff, ulp, finite, ok, share)


def _summary(values: np.ndarray) -> dict[str, float] | None:
    """mean, p50, p90, p99 and max of ``values`` (None when empty)."""
    if not values.size:
        return None
    v = values if values.dtype == np.float64 else values.astype(np.float64)
    if not v.any() and not np.signbit(v).any():  # all +0.0 (a passing case's errors): every figure is +0.0
        return {"mean": 0.0, **{f"p{p}": 0.0 for p in PERCENTILES}, "max": 0.0}
    stats = {"mean": float(v.mean())}
    stats.update({f"p{p}": float(q) for p, q in zip(PERCENTILES, np.percentile(v, PERCENTILES))})
    stats["max"] = float(v.max())
    return stats


def round_up(value: float, digits: int = 3) -> float:
    """``value`` rounded up to ``digits`` significant digits (a decimal a person can paste)."""
    if value <= 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(value)) - digits + 1
    step = 10.0 ** exponent
    rounded = float(f"{math.ceil(value / step - 1e-9) * step:.{digits}g}")
    while rounded < value:  # the decimal string may read back a hair below the exact value
        rounded = float(f"{rounded + step:.{digits}g}")
    return rounded


def _min_tolerance(diffs: Differences, ok: np.ndarray, tol: Tolerance) -> dict[str, float | int | None]:
    """The smallest atol, rtol and ulp (each with the run's other two parts) passing every
    element, before rounding (``Tolerance.smallest_passing``); None for a part no value of
    which helps, and for every part when a NaN or infinity met a number. A slice at a time: each
    part is the largest of its slices' (rtol None when a slice has none)."""
    e, _, absdiff, ulp, finite, _ = diffs
    if (~ok & ~finite).any():
        return {"atol": None, "rtol": None, "ulp": None}
    found = [tol.smallest_passing(absdiff[part], ulp[part], e[part].astype(np.float64), finite[part])
             for part in element_slices(e.size)]  # at least one: only an output with elements fails
    rtols = [f["rtol"] for f in found]
    return {"atol": max(float(f["atol"] or 0.0) for f in found),
            "rtol": None if None in rtols else max(float(r or 0.0) for r in rtols),
            "ulp": max(int(f["ulp"] or 0) for f in found)}


def _passes_and_largest_share(diffs: Differences, tol: Tolerance) -> tuple[np.ndarray, float | None]:
    """Where each element passes, and the largest share of its tolerance an element used (a NaN
    wins, as in one maximum): ``_errors_of`` a slice at a time, with no output-sized work array."""
    size = diffs[0].size
    ok, maxima = np.empty(size, dtype=bool), []
    for part in element_slices(size):
        errors = _errors_of(tuple(d[part] for d in diffs), tol)  # type: ignore[arg-type]
        ok[part] = errors.ok
        maxima.append(errors.share.max())
    return ok, (float(np.max(maxima)) if maxima else None)


def _rounded_passing(tol: Tolerance, part: str, value: float, diffs: Differences) -> float:
    """``value`` rounded up to three significant digits, raised further until the rule with
    ``part`` set to it passes every element (float rounding can leave the exact value a hair short)."""
    candidate = round_up(value)
    for _ in range(8):
        if _errors_of(diffs, replace(tol, **{part: candidate})).ok.all():  # type: ignore[arg-type]
            return candidate
        candidate = round_up(candidate * (1 + 1e-3) if candidate else 1e-30)
    return candidate


def output_stats(expected: np.ndarray, actual: np.ndarray, tol: Tolerance,
                 diffs: Differences | None = None) -> dict[str, Any]:
    """``error_stats`` of one float output (see ``error_statistics``); ``diffs`` as for
    ``element_errors``."""
    if diffs is None:
        diffs = differences(np.asarray(expected), np.asarray(actual))
    ok, share_max = _passes_and_largest_share(diffs, tol)
    e, _, absdiff, ulp, both_finite, _ = diffs
    failing = ~ok
    outside = int(failing.sum())
    finite = slice(None) if both_finite.all() else both_finite  # no copies of a whole output that is finite
    minimum = None
    if outside:  # a larger atol or rtol passes every element the run's passed: only the rest need checking
        minimum = _passing(tol, _min_tolerance(diffs, ok, tol), tuple(d[failing] for d in diffs))
    return {
        "elements": int(e.size), "outside": outside, "nonfinite": int((failing & ~both_finite).sum()),
        "abs": _summary(absdiff[finite]), "ulp": _summary(ulp[finite]), "share_max": share_max,
        "min_tolerance": minimum,
    }


def _passing(tol: Tolerance, minimum: dict[str, float | int | None],
             diffs: Differences) -> dict[str, float | int | None]:
    """``minimum`` with atol and rtol rounded up to values that pass when pasted into ``--tol``,
    checked on ``diffs`` (those of the elements the run's tolerance failed)."""
    return {part: _rounded_passing(tol, part, value, diffs) if part != "ulp" and value is not None
            else value for part, value in minimum.items()}


def _integer_stats(expected: np.ndarray, actual: np.ndarray, tol: Tolerance) -> dict[str, Any]:
    """``error_stats`` of an integer (not index) output: |a - e| against atol."""
    absdiff = np.abs(np.asarray(actual).astype(np.float64).ravel() - np.asarray(expected).astype(np.float64).ravel())
    absdiff[np.asarray(actual).ravel() == np.asarray(expected).ravel()] = 0.0
    return {"elements": int(absdiff.size), "outside": int((absdiff > tol.atol).sum()), "nonfinite": 0,
            "abs": _summary(absdiff), "ulp": None, "share_max": None,
            "min_tolerance": ({"atol": float(absdiff.max()), "rtol": None, "ulp": None}
                              if (absdiff > tol.atol).any() else None)}


def error_statistics(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray], tolerances: Tolerances,
                     index_outputs: Collection[str] = (),
                     computed: Mapping[str, Differences] | None = None) -> dict[str, dict[str, Any]]:
    """Output name -> its statistics, for every output both sides have with one shape:

    ``elements``, ``outside`` (elements outside tolerance), ``nonfinite`` (of those, a NaN or an
    infinity that met a number), ``abs`` and ``ulp`` (``mean``, ``p50``, ``p90``, ``p99``,
    ``max`` over the finite pairs; ``ulp`` None for integers), ``share_max``, ``dtype`` and, when
    some element is outside, ``min_tolerance`` (module docstring; None when every element passes). Index outputs (``index_outputs``) get ``elements``
    and ``differing`` only: their verdict is the comparison's (ties need the operator's window).
    ``computed``: ``Comparison.differences`` of the same outputs (``compare_outputs(...,
    keep_differences=True)``), taken instead of computing them again.
    """
    stats: dict[str, dict[str, Any]] = {}
    for name, exp in expected.items():
        act = actual.get(name)
        if act is None or np.shape(act) != np.shape(exp):
            continue
        exp, act = np.asarray(exp), np.asarray(act)
        dtype = exp.dtype.name.upper()
        if name in index_outputs:
            stats[name] = {"dtype": dtype, "elements": int(exp.size),
                           "differing": int((exp.astype(np.int64) != act.astype(np.int64)).sum())}
            continue
        tol = tolerances.for_dtype(dtype)
        if exp.dtype.kind == "f" and act.dtype == exp.dtype:
            stats[name] = {"dtype": dtype, **output_stats(exp, act, tol, (computed or {}).get(name))}
        elif exp.dtype.kind in "iu":
            stats[name] = {"dtype": dtype, **_integer_stats(exp, act, tol)}
    return stats
