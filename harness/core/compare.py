"""Compare an EP's outputs with the reference's, under the rule of ``harness.core.tolerances``.

``compare_outputs(expected, actual, tolerances, inputs)`` takes both sides keyed by DML output
name (``OutputTensor``, ``OutputIndicesTensor``) in the desc's data types and returns a
``Comparison``: max abs / rel / ULP error, how many elements fail, how many index elements
differ only by a tie, the worst elements with their positions, and any structural problem
(missing output, wrong shape or dtype), which fails the case by itself.

Ties: an index output says *which* input element holds the maximum of its window. When the
EP's index differs from the reference's but both point at input elements of the same window
equal to the reference's maximum for that output position (NaN counts as equal to NaN), both
are valid answers to "where is the max" and the element counts as a tie, not a mismatch (a
reference index that points at no maximum is no tie: it is the reference's own fault). The
harness does not know window geometry (that is a DML formula): the caller passes the
operator's ``index_rule`` (registry) as ``in_window``; without it a tie is judged on the value
alone. Which outputs are indices, and of what, comes from the operator's record too
(``index_outputs``); the comparison itself knows no operator.
The value output itself is compared separately and must still match.

Allowances: the reference can say how far a correct kernel that rounds may lie from its exact
answer (``reference.execute_with_bounds`` under a precision model). Given an ``Allowance``, a
float element also passes when ``|a - e|`` is within its *bound*, or when ``a`` lies within the
bound of its *knife-edge range* ``[low, high]`` (the outputs that a decision rounding can flip
would give). So an element passes within ``max(tolerance rule, bound)``; the comparison counts
the elements that only the bound or only a knife-edge alternative accepted, and its summary
names the bound that applied. Without an allowance (``--strict-tolerance``) only the rule applies.

Non-finite alternatives: a range's infinite end is an alternative output itself, so an infinite
``a`` equal to ``low`` or ``high`` of a range with ``low <= high`` passes (a range with an
infinite end still accepts no finite ``a``: it would hold every number on one side). NaN is in no
range: an element where some alternative gives NaN is flagged (``nan_alternatives``, the
reference's ``Expected.nan_alternatives``), and a NaN ``a`` passes there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from .tolerances import Tolerance, Tolerances

WORST_COUNT = 5
#: ``differences``' per-element arrays of one float output: ``e`` and ``a`` (flat, in the output's
#: type), ``|a - e|`` (float64), the ULP distance, both finite, the same special value.
Differences = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Allowance:
    """What the reference allows a kernel beyond the tolerance rule, per value output: an element
    ``bound`` (>= 0, the shape of the output) and a knife-edge range ``(low, high)``; ``rule``
    names the bound as a person reads it ("fp32 rounding bound (...)")."""

    bounds: Mapping[str, np.ndarray] = field(default_factory=dict)
    alternatives: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    rule: str = ""
    #: The reference's knife-edge notes in brief: how many, under which model, the first one.
    knife_count: int = 0
    knife_model: str = ""
    knife_first: str = ""
    #: Per value output, the elements where a knife-edge alternative gives NaN (bool, the output's
    #: shape): a NaN there passes (module docstring).
    nan_alternatives: Mapping[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, expected: Any) -> "Allowance | None":
        """The allowance of a reference ``Expected`` (``reference.execute_with_bounds``); None for
        none or under the ``exact`` model (the tolerance rule alone)."""
        if expected is None or expected.model.compute is None or not (expected.bounds or expected.alternatives):
            return None
        first = expected.knife_edges[0].text() if expected.knife_edge_count else ""
        return cls(dict(expected.bounds), dict(expected.alternatives), expected.model.bound_phrase,
                   expected.knife_edge_count, expected.model.name, first,
                   dict(getattr(expected, "nan_alternatives", {})))

    def note(self, comparison: "Comparison") -> str:
        """The message's note on knife edges (``knife_edge_note``), from the allowance alone."""
        return _knife_text(self.knife_count, self.knife_model, self.knife_first, comparison)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The allowance as named arrays (``bound:<output>``, ``low:<output>``, ``high:<output>``,
        ``nan:<output>``, ``rule``), for an ``.npz`` beside a case's expected outputs, so a repro
        judges as the run did."""
        arrays: dict[str, np.ndarray] = {"rule": np.array(self.rule), "knife_count": np.array(self.knife_count),
                                         "knife_model": np.array(self.knife_model),
                                         "knife_first": np.array(self.knife_first)}
        arrays.update({f"bound:{name}": np.asarray(b) for name, b in self.bounds.items()})
        for name, (low, high) in self.alternatives.items():
            arrays[f"low:{name}"], arrays[f"high:{name}"] = np.asarray(low), np.asarray(high)
        arrays.update({f"nan:{name}": np.asarray(flags, dtype=bool) for name, flags in self.nan_alternatives.items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "Allowance | None":
        """The inverse of ``to_arrays`` (None for no arrays)."""
        if not arrays:
            return None
        bounds = {k[6:]: v for k, v in arrays.items() if k.startswith("bound:")}
        alternatives = {k[4:]: (v, arrays[f"high:{k[4:]}"]) for k, v in arrays.items()
                        if k.startswith("low:") and f"high:{k[4:]}" in arrays}
        text = {k: str(arrays[k]) if k in arrays else "" for k in ("rule", "knife_model", "knife_first")}
        count = int(arrays["knife_count"]) if "knife_count" in arrays else 0
        nan = {k[4:]: np.asarray(v, dtype=bool) for k, v in arrays.items() if k.startswith("nan:")}
        return cls(bounds, alternatives, text["rule"], count, text["knife_model"], text["knife_first"], nan)


@dataclass
class Comparison:
    """What ``compare_outputs`` found. Errors are None when no element of that kind was compared."""

    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: float | None = None
    #: The largest finite |a - e| (``max_abs`` is infinite as soon as one NaN/inf mismatches,
    #: which alone would hide how far the finite elements are off).
    max_abs_finite: float | None = None
    #: The largest share of its tolerance any value element used: 0 exact, <= 1 within, inf for
    #: a NaN/inf mismatch (for a float element, the smaller of |a-e| / (atol + rtol*|e|) and
    #: ulp / ulp budget). Ranks passing cases by how close they came to failing.
    tolerance_used: float | None = None
    mismatches: int = 0
    #: Of ``mismatches``: elements where NaN/inf met a number (or the other infinity), and index
    #: elements that point elsewhere than a tie allows.
    nonfinite_mismatches: int = 0
    index_mismatches: int = 0
    ties: int = 0
    compared: int = 0
    worst: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: The tolerance applied to each compared output (``"OutputTensor": "FLOAT32: |a-e| <= ..."``).
    applied: dict[str, str] = field(default_factory=dict)
    #: Elements outside the tolerance rule that the reference's rounding bound accepted, and
    #: those only a knife-edge alternative accepted (``Allowance``); the bound's name.
    bound_accepted: int = 0
    knife_accepted: int = 0
    bound_rule: str | None = None
    alternatives_offered: bool = False
    #: The largest |a - e| the bound accepted, and the bound at that element.
    largest_bound_accepted: tuple[float, float] | None = None
    #: Per compared output, flat: which elements are outside the rule and every allowance (the
    #: elements ``mismatches`` counts), so that readings can be tried on exactly those.
    failing: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per compared float output, what ``differences`` computed for it (``compare_outputs(...,
    #: keep_differences=True)``), so that ``error_stats`` judges the same pairs without computing
    #: them again; empty otherwise (they are the size of the output, eight times over).
    differences: dict[str, Differences] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        return self.mismatches == 0 and not self.problems

    def errors(self) -> dict[str, float | None]:
        return {"max_abs": self.max_abs, "max_rel": self.max_rel, "max_ulp": self.max_ulp}

    def summary(self) -> str:
        """One line for a result's ``message``: how many elements failed and how, the error
        figures, the worst element, and the tolerance that was applied (numpy.testing style)."""
        if self.problems:
            return "; ".join(self.problems)
        parts = [f"{self.mismatches} of {self.compared} elements outside tolerance"]
        if self.nonfinite_mismatches:
            parts.append(f"{self.nonfinite_mismatches} non-finite mismatches")
        if self.index_mismatches:
            parts.append(f"{self.index_mismatches} index mismatches")
        if self.ties:
            parts.append(f"{self.ties} index ties")
        parts += self._allowance_parts()
        for name, value in self.errors().items():
            if value is not None:
                parts.append(f"{name}={_fmt(value)}")
        if self.max_abs == math.inf and self.max_abs_finite is not None:
            parts.append(f"largest finite |a-e|={_fmt(self.max_abs_finite)}")
        if self.mismatches and self.worst:
            w = self.worst[0]
            parts.append(f"worst {w['output']}{w['index']}: expected {_fmt(w['expected'])}, got {_fmt(w['actual'])}")
        text = ", ".join(parts)
        if self.mismatches and self.applied:
            text += "; tolerance " + "; ".join(f"{name} {rule}" for name, rule in self.applied.items())
            if self.bound_rule:
                text += f", or within the {self.bound_rule}"
            if self.alternatives_offered:
                text += ", or a knife-edge alternative"
        return text

    def _allowance_parts(self) -> list[str]:
        """The summary's words on what the allowance accepted ("12 within the fp32 ... bound")."""
        parts = []
        if self.bound_accepted:
            worst = self.largest_bound_accepted
            parts.append(f"{self.bound_accepted} outside the tolerance rule but within the {self.bound_rule}"
                         + (f" (largest |a-e|={_fmt(worst[0])}, bound there {_fmt(worst[1])})" if worst else ""))
        if self.knife_accepted:
            parts.append(f"{self.knife_accepted} match a knife-edge alternative")
        return parts


def compare_outputs(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray],
                    tolerances: Tolerances, inputs: Mapping[str, np.ndarray] | None = None,
                    worst_count: int = WORST_COUNT,
                    in_window: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                    index_outputs: Mapping[str, tuple[str, str]] | None = None,
                    allowance: Allowance | None = None, keep_differences: bool = False) -> Comparison:
    """Compare every output in ``expected`` with the same-named one in ``actual``.

    ``index_outputs`` maps an index output to ``(value output it locates, input it indexes)``
    (an operator record's ``index_outputs``); ``in_window(output_positions, input_indices)``
    (flat positions) says whether an index lies in its output's window; ties need it to be true
    (see the module docstring). ``allowance``: the reference's element bounds and knife-edge
    ranges (module docstring); None: the tolerance rule alone. ``keep_differences``: keep each
    float output's ``differences`` in ``Comparison.differences`` (for ``error_stats``)."""
    index_outputs = index_outputs or {}
    result = Comparison(bound_rule=allowance.rule if allowance is not None and allowance.bounds else None,
                        alternatives_offered=allowance is not None and bool(allowance.alternatives))
    candidates: list[tuple[tuple[int, float], dict[str, Any]]] = []
    for name, exp in expected.items():
        exp = np.asarray(exp)
        if name not in actual:
            result.problems.append(f"{name}: missing from the EP's outputs")
            continue
        act = np.asarray(actual[name])
        if act.shape != exp.shape:
            result.problems.append(f"{name}: shape {list(act.shape)}, expected {list(exp.shape)}")
            continue
        if act.dtype != exp.dtype:
            result.problems.append(f"{name}: dtype {act.dtype}, expected {exp.dtype}")
            continue
        result.compared += exp.size
        if name in index_outputs and exp.dtype.kind in "iu":
            values_name, input_name = index_outputs[name]
            result.applied[name] = "exact index (or a tie: an equal value in the same window)"
            _compare_indices(result, candidates, name, exp, act, expected.get(values_name),
                             (inputs or {}).get(input_name), in_window, worst_count)
        elif exp.dtype.kind == "f":
            _compare_floats(result, candidates, name, exp, act, tolerances, worst_count,
                            _element_allowance(allowance, name, exp.shape))
            if not keep_differences:
                result.differences.pop(name, None)
        else:
            _compare_integers(result, candidates, name, exp, act, tolerances, worst_count)
    candidates.sort(key=lambda item: item[0], reverse=True)
    result.worst = [entry for _, entry in candidates[:worst_count]]
    return result


def allowance_record(reference: Any, comparison: Comparison) -> dict[str, Any]:
    """A result's ``bound`` (the precision model, its bound's name, how many elements only the
    bound and only a knife-edge alternative accepted; None without a reference ``Expected`` or
    under the ``exact`` model) and ``knife_edges`` (the reference's notes, at most its
    ``MAX_NOTES``), for ``comparison`` of that reference's outputs."""
    if reference is None or reference.model.compute is None:
        return {"bound": None, "knife_edges": []}
    bound = {"model": reference.model.name, "rule": reference.model.bound_phrase,
             "within_bound": comparison.bound_accepted, "knife_edge_accepted": comparison.knife_accepted,
             "knife_edges_found": reference.knife_edge_count}
    if comparison.largest_bound_accepted is not None:
        bound["largest_accepted"] = {"abs": comparison.largest_bound_accepted[0],
                                     "bound": comparison.largest_bound_accepted[1]}
    return {"bound": bound, "knife_edges": [edge.to_json() for edge in reference.knife_edges]}


def knife_edge_note(reference: Any, comparison: Comparison) -> str:
    """The message's note on knife edges: how many decisions, the first one, and whether the
    EP's output needed an alternative ("" when there is none)."""
    if reference is None or not reference.knife_edge_count or reference.model.compute is None:
        return ""
    return _knife_text(reference.knife_edge_count, reference.model.name, reference.knife_edges[0].text(), comparison)


def _knife_text(count: int, model: str, first: str, comparison: Comparison) -> str:
    """``"; note: N knife-edge decision(s) that <model> rounding can flip (...), e.g. <first>"``."""
    if not count:
        return ""
    used = (f"{comparison.knife_accepted} elements accepted as knife-edge alternatives" if comparison.knife_accepted
            else "the EP matched the reference's decisions")
    return f"; note: {count} knife-edge decision(s) that {model} rounding can flip ({used}), e.g. {first}"


def differences(exp: np.ndarray, act: np.ndarray) -> Differences:
    """Per element of one float output (flattened): ``e`` and ``a`` as the output holds them,
    ``|a - e|`` in float64 (inf where either is not finite, 0 where both are NaN or the same
    infinity), the ULP distance in the output's dtype (0 where undefined), whether both are
    finite, and whether they are the same special value (NaN for NaN, equal infinities): what the
    rule is applied to. Whoever computes with ``e`` or ``a`` widens a slice of them to float64
    (every value of the output's type is one in float64).

    Worked out ``SLICE_ELEMENTS`` at a time into the four arrays it makes, so that the temporaries
    stay in the cache: each element's values depend on that element alone, so the slices give what
    one pass over the whole output gives, bit for bit."""
    expected, actual = exp.ravel(), act.ravel()
    size = expected.size
    made = (np.empty(size), np.empty(size, dtype=np.int64), np.empty(size, dtype=bool), np.zeros(size, dtype=bool))
    for part in element_slices(size):
        _differences_into(expected[part], actual[part], *(array[part] for array in made))
    return (expected, actual, *made)


def _differences_into(exp: np.ndarray, act: np.ndarray, absdiff: np.ndarray, ulp: np.ndarray,
                      both_finite: np.ndarray, same_special: np.ndarray) -> None:
    """``differences`` of one slice, written into the slices of its arrays (``same_special``
    arrives all False)."""
    np.isfinite(exp, out=both_finite)
    both_finite &= np.isfinite(act)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: replaced below
        np.subtract(act, exp, out=absdiff, dtype=np.float64)  # both widened first: exact
    np.abs(absdiff, out=absdiff)
    if both_finite.all():  # the usual case at any size: no masks to apply, no copies to gather
        ulp[...] = ulp_distance(act, exp)
        return
    absdiff[~both_finite] = np.inf
    same_special[...] = (np.isnan(exp) & np.isnan(act)) | (np.isinf(exp) & (act == exp))
    absdiff[same_special] = 0.0
    ulp[...] = 0
    if both_finite.any():
        ulp[both_finite] = ulp_distance(act[both_finite], exp[both_finite])


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Representable values of ``a.dtype`` between ``a`` and ``b`` (int64; +0 and -0 are 0 apart).

    Only meaningful where both are finite; callers mask NaN/inf positions.
    """
    if a.dtype != b.dtype or a.dtype.kind != "f":
        raise TypeError(f"ulp_distance needs two arrays of one float dtype, got {a.dtype} and {b.dtype}")
    distance = np.subtract(_ordered(a), _ordered(b), dtype=np.int64)
    return np.abs(distance, out=distance)


def _ordered(x: np.ndarray) -> np.ndarray:
    """Map floats to integers of their own width that are consecutive for consecutive floats
    (sign-magnitude -> two's complement: a negative float's bits ``b`` become ``MIN - b``, its
    magnitude negated, which never overflows; -0 and +0 both become 0)."""
    int_type = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    bits = np.ascontiguousarray(x).view(int_type)
    return np.where(bits < 0, int_type(np.iinfo(int_type).min) - bits, bits)


def describe(data_type: str, tol: Tolerance) -> str:
    """The rule applied to one output, as a person reads it: ``FLOAT32: |a-e| <= 1e-05 + 0.0001*|e|
    or <= 4 ulp``; integers ``INT32: exact`` or ``|a-e| <= atol``."""
    if data_type.startswith("FLOAT"):
        text = f"{data_type}: |a-e| <= {tol.atol:g} + {tol.rtol:g}*|e|"
        return text + (f" or <= {tol.ulp} ulp" if tol.ulp is not None else "")
    return f"{data_type}: " + (f"|a-e| <= {tol.atol:g}" if tol.atol else "exact")


@dataclass
class _ElementAllowance:
    """One slice of an output's allowance, flat, in float64: the bound per element (zeros: none),
    the knife-edge range and where an alternative gives NaN (None: nowhere)."""

    bound: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    nan: np.ndarray | None = None


@dataclass
class _OutputAllowance:
    """One output's allowance, flat, as given (any float type); ``part`` converts a slice of it.
    ``bound`` None: no bound (zeros); ``low``/``high`` None: no range; ``nan`` None: nowhere."""

    bound: np.ndarray | None
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    nan: np.ndarray | None = None

    def part(self, part: slice, size: int) -> _ElementAllowance:
        """The allowance of the ``size`` elements of ``part``, in float64; a bound that is not a
        positive number is 0 (no bound)."""
        bound = np.zeros(size) if self.bound is None else np.asarray(self.bound[part], dtype=np.float64)
        bound = np.where(np.isfinite(bound) & (bound > 0), bound, 0.0)
        low = high = None
        if self.low is not None and self.high is not None:
            low, high = np.asarray(self.low[part], dtype=np.float64), np.asarray(self.high[part], dtype=np.float64)
        return _ElementAllowance(bound, low, high, None if self.nan is None else self.nan[part])

    def bound_at(self, position: int) -> float:
        """The bound of one element, as ``part`` gives it."""
        return float(self.part(slice(position, position + 1), 1).bound[0])


def _element_allowance(allowance: Allowance | None, name: str, shape: tuple[int, ...]) -> _OutputAllowance | None:
    """The flat allowance of output ``name``, or None (tolerance rule only). A bound or a range of
    another shape is ignored: it cannot belong to this output."""
    if allowance is None:
        return None
    bound = allowance.bounds.get(name)
    bound = np.asarray(bound).ravel() if bound is not None and np.shape(bound) == shape else None
    flags = allowance.nan_alternatives.get(name)
    nan = np.asarray(flags, dtype=bool).ravel() if flags is not None and np.shape(flags) == shape else None
    ranged = allowance.alternatives.get(name)
    if ranged is None or np.shape(ranged[0]) != shape or np.shape(ranged[1]) != shape:
        return _OutputAllowance(bound, nan=nan)
    return _OutputAllowance(bound, np.asarray(ranged[0]).ravel(), np.asarray(ranged[1]).ravel(), nan)


@dataclass
class _SliceFigures:
    """What one slice of a float output adds to the statistics that are maxima (None: no element
    of that kind), and whether a NaN or an infinity met a number in it."""

    largest_abs: float | None
    largest_rel: float | None
    largest_ulp: float | None
    used: float | None
    nonfinite_bad: bool


def _compare_floats(result: Comparison, candidates: list, name: str, exp: np.ndarray, act: np.ndarray,
                    tolerances: Tolerances, worst_count: int, allowance: _OutputAllowance | None = None) -> None:
    """Judge a float output element by element: the tolerance rule, else (with an allowance)
    the reference's bound, else a knife-edge alternative (module docstring). A slice at a time
    (``SLICE_ELEMENTS``): each element is judged alone, the counts add up and the figures are
    maxima, so the slices give what the whole output gives, with no output-sized work array
    beyond ``differences`` and the failing elements."""
    tol = tolerances.for_dtype(exp.dtype.name.upper())
    result.applied[name] = describe(exp.dtype.name.upper(), tol)
    diffs = result.differences[name] = differences(exp, act)
    e, a, absdiff, ulp, both_finite, _ = diffs
    bad = np.empty(e.size, dtype=bool)
    figures = [_judge_slice(result, tol, None if allowance is None else allowance.part(part, bad[part].size),
                            [d[part] for d in diffs], bad[part]) for part in element_slices(e.size)]
    _float_statistics(result, figures)
    result.failing[name] = bad
    _collect_worst(candidates, name, exp.shape, e, a, absdiff, bad, ulp, worst_count,
                   bound=None if allowance is None else allowance.bound_at, ulp_defined=both_finite)


def _judge_slice(result: Comparison, tol: Tolerance, allowance: _ElementAllowance | None, diffs: list[np.ndarray],
                 bad: np.ndarray) -> _SliceFigures:
    """Judge one slice (``differences`` of it, its allowance): write its failing elements into
    ``bad``, add its counts to ``result``, and return its maxima."""
    e, a, absdiff, ulp, both_finite, same_special = diffs
    e, a = e.astype(np.float64), a.astype(np.float64)  # a slice: the rule's arithmetic is float64's
    with np.errstate(invalid="ignore", over="ignore"):
        rule_abs = tol.allowed(e)
    judged = _Judged(tol.passes(absdiff, ulp, rule_abs), None, None, rule_abs)
    if allowance is not None:
        judged = _apply_allowance(result, allowance, a, absdiff, both_finite, judged)
        special = _special_alternatives(allowance, a) & ~same_special
        result.knife_accepted += int(special.sum())
        same_special = same_special | special
    ok = same_special | (both_finite & judged.accepted)
    np.logical_not(ok, out=bad)
    nonfinite_bad = bad & ~both_finite
    result.mismatches += int(bad.sum())
    result.nonfinite_mismatches += int(nonfinite_bad.sum())
    figures = _slice_statistics(e, absdiff, ulp, both_finite)
    return _SliceFigures(*figures, _tolerance_used(e, absdiff, ulp, tol, ok, both_finite, judged.allowed,
                                                   judged.knife_used), bool(nonfinite_bad.any()))


@dataclass
class _Judged:
    """Which elements the rule (``within``) or an allowance accepted, with what they were allowed:
    ``allowed`` the absolute allowance per element, ``knife_used`` the share of its slack an
    element accepted by a knife-edge range used (None: no range)."""

    within: np.ndarray
    accepted_by_bound: np.ndarray | None
    knife_used: np.ndarray | None
    allowed: np.ndarray

    @property
    def accepted(self) -> np.ndarray:
        accepted = self.within
        if self.accepted_by_bound is not None:
            accepted = accepted | self.accepted_by_bound
        if self.knife_used is not None:
            accepted = accepted | (self.knife_used <= 1)
        return accepted


def _apply_allowance(result: Comparison, allowance: _ElementAllowance, a: np.ndarray, absdiff: np.ndarray,
                     both_finite: np.ndarray, judged: _Judged) -> _Judged:
    """Accept elements within the bound of their expected value, or within the larger of the
    bound and the rule's absolute tolerance of their knife-edge range; count what only they
    accepted. (Slice by slice, the largest ``|a - e|`` the bound accepted stays the first
    largest of the output: a later slice replaces it only when larger.)"""
    bound = allowance.bound
    by_bound = both_finite & ~judged.within & (absdiff <= bound)
    knife_used = None
    if allowance.low is not None and allowance.high is not None:
        slack = np.maximum(bound, judged.allowed)
        with np.errstate(invalid="ignore", divide="ignore"):
            distance = np.maximum(np.maximum(allowance.low - a, a - allowance.high), 0.0)
            knife_used = np.where(distance == 0, 0.0, np.where(slack > 0, distance / np.where(slack > 0, slack, 1),
                                                               np.inf))
        knife_used = np.where(both_finite & np.isfinite(allowance.low) & np.isfinite(allowance.high), knife_used,
                              np.inf)
        result.knife_accepted += int((~judged.within & ~by_bound & (knife_used <= 1)).sum())
    result.bound_accepted += int(by_bound.sum())
    if by_bound.any():
        i = int(np.argmax(np.where(by_bound, absdiff, -1.0)))
        if result.largest_bound_accepted is None or absdiff[i] > result.largest_bound_accepted[0]:
            result.largest_bound_accepted = (float(absdiff[i]), float(bound[i]))
    return _Judged(judged.within, by_bound, knife_used, np.maximum(judged.allowed, bound))


def _special_alternatives(allowance: _ElementAllowance, a: np.ndarray) -> np.ndarray:
    """Where a non-finite ``a`` is a knife-edge alternative (module docstring): an infinity equal
    to an end of its range (``low <= high``: a range of NaN samples has ``low = inf > high``), or
    NaN where an alternative gives NaN."""
    special = np.zeros(a.shape, dtype=bool)
    if allowance.low is not None and allowance.high is not None:
        low, high = allowance.low, allowance.high
        special |= np.isinf(a) & (low <= high) & ((a == low) | (a == high))
    if allowance.nan is not None:
        special |= np.isnan(a) & allowance.nan
    return special


def _slice_statistics(e: np.ndarray, absdiff: np.ndarray, ulp: np.ndarray,
                      both_finite: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """The largest |a - e|, |a - e| / |e| (0 where e is 0) and ULP distance over the finite pairs
    of one slice; None where it has none."""
    if not both_finite.any():
        return None, None, None
    finite = slice(None) if both_finite.all() else both_finite  # a whole finite slice: no masked copies
    nonzero = both_finite & (e != 0)
    rel = (float(np.divide(absdiff, np.abs(e), out=np.zeros(absdiff.shape), where=nonzero).max())
           if nonzero.any() else None)
    return float(absdiff[finite].max()), rel, float(ulp[finite].max())


def _float_statistics(result: Comparison, figures: list[_SliceFigures]) -> None:
    """max abs / rel / ULP over the finite pairs of one output (its slices' maxima); max_abs
    becomes infinite when a NaN or an infinity met a number, while ``max_abs_finite`` keeps the
    largest finite difference; the output's ``tolerance_used`` (a NaN wins, as in one maximum)."""
    def largest(key: str) -> float | None:
        values = [getattr(f, key) for f in figures if getattr(f, key) is not None]
        return float(np.max(values)) if values else None

    largest_abs = largest("largest_abs")
    result.max_abs = _max(result.max_abs, largest_abs)
    result.max_abs_finite = _max(result.max_abs_finite, largest_abs)
    result.max_rel = _max(result.max_rel, largest("largest_rel"))
    result.max_ulp = _max(result.max_ulp, largest("largest_ulp"))
    result.tolerance_used = _max(result.tolerance_used, largest("used"))
    if any(f.nonfinite_bad for f in figures):
        result.max_abs = math.inf


def _tolerance_used(e: np.ndarray, absdiff: np.ndarray, ulp: np.ndarray, tol: Tolerance, ok: np.ndarray,
                    both_finite: np.ndarray, allowed: np.ndarray | None = None,
                    knife_used: np.ndarray | None = None) -> float | None:
    """The largest share of its allowance an element used (see ``Comparison.tolerance_used``):
    ``allowed`` is the absolute allowance per element (default the rule's ``atol + rtol*|e|``;
    with the reference's bound, the larger of the two), ``knife_used`` the share an element
    used of its knife-edge range's slack."""
    if not e.size:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        used = tol.share(absdiff, ulp, tol.allowed(e) if allowed is None else allowed)
    if knife_used is not None:
        used = np.minimum(used, knife_used)
    used[~ok & ~both_finite] = np.inf  # NaN/inf mismatches (where the ratios are undefined)
    used[ok & ~both_finite] = 0.0
    return float(used.max())


#: Elements a statistic that is a maximum takes at a time (its work arrays stay in the cache).
SLICE_ELEMENTS = 2**18


def element_slices(size: int) -> Iterator[slice]:
    """``slice`` objects covering ``range(size)`` in order, ``SLICE_ELEMENTS`` at a time."""
    return (slice(start, start + SLICE_ELEMENTS) for start in range(0, size, SLICE_ELEMENTS))


def _compare_integers(result: Comparison, candidates: list, name: str, exp: np.ndarray, act: np.ndarray,
                      tolerances: Tolerances, worst_count: int) -> None:
    tol = tolerances.for_dtype(exp.dtype.name.upper())
    result.applied[name] = describe(exp.dtype.name.upper(), tol)
    e = exp.ravel()
    a = act.ravel()
    absdiff = np.abs(a.astype(np.float64) - e.astype(np.float64))
    absdiff[a == e] = 0.0  # exact even beyond 2**53
    bad = absdiff > tol.atol
    result.failing[name] = bad
    if e.size:
        worst = float(absdiff.max())
        result.max_abs = _max(result.max_abs, worst)
        result.max_abs_finite = _max(result.max_abs_finite, worst)
        result.tolerance_used = _max(result.tolerance_used, 0.0 if worst == 0 else
                                     (worst / tol.atol if tol.atol else math.inf))
    result.mismatches += int(bad.sum())
    _collect_worst(candidates, name, exp.shape, e, a, absdiff, bad, None, worst_count)


def _compare_indices(result: Comparison, candidates: list, name: str, exp: np.ndarray, act: np.ndarray,
                     expected_values: np.ndarray | None, source: np.ndarray | None,
                     in_window: Callable[[np.ndarray, np.ndarray], np.ndarray] | None, worst_count: int) -> None:
    e = exp.ravel()
    a = act.ravel()
    differ = e != a
    tie = np.zeros(e.shape, dtype=bool)
    if differ.any() and expected_values is not None and source is not None:
        where = np.flatnonzero(differ)
        # both indices must point at a maximum of the window: then both answer "where is the max"
        tie[where] = _ties(where, a, expected_values, source, in_window) & _ties(where, e, expected_values, source,
                                                                                   in_window)
    bad = differ & ~tie
    result.failing[name] = bad
    result.ties += int(tie.sum())
    result.mismatches += int(bad.sum())
    result.index_mismatches += int(bad.sum())
    absdiff = np.where(differ, np.abs(a.astype(np.float64) - e.astype(np.float64)), 0.0)
    _collect_worst(candidates, name, exp.shape, e, a, absdiff, bad, None, worst_count, tie=tie)


def _ties(positions: np.ndarray, a: np.ndarray, expected_values: np.ndarray, source: np.ndarray,
          in_window: Callable[[np.ndarray, np.ndarray], np.ndarray] | None) -> np.ndarray:
    """Whether each differing index points inside the input at a value equal to the expected
    maximum of its output (NaN equal to NaN), in that output's window when ``in_window`` says."""
    flat = np.asarray(source).ravel()
    raw = a[positions]
    inside = raw < flat.size if raw.dtype.kind == "u" else (raw >= 0) & (raw < flat.size)
    index = np.where(inside, raw, 0).astype(np.int64)
    found, target = flat[index], np.asarray(expected_values).ravel()[positions]
    same = found == target
    if flat.dtype.kind == "f":
        same |= np.isnan(found) & np.isnan(target)
    if in_window is not None:
        same &= np.asarray(in_window(positions, index), dtype=bool)
    return inside & same


def _collect_worst(candidates: list, name: str, shape: tuple[int, ...], e: np.ndarray, a: np.ndarray,
                   absdiff: np.ndarray, bad: np.ndarray, ulp: np.ndarray | None, worst_count: int,
                   tie: np.ndarray | None = None, bound: Callable[[int], float] | None = None,
                   ulp_defined: np.ndarray | None = None) -> None:
    """Add this output's worst elements: failing ones first, then the largest differences.
    ``ulp`` is left out of an entry where ``ulp_defined`` is False (a NaN or an infinity);
    ``bound(position)`` (the reference's element bound) is added to the entry when given."""
    chosen = _worst_positions(absdiff, bad, worst_count, failing=True)
    if chosen.size < worst_count:
        chosen = np.concatenate([chosen, _worst_positions(absdiff, bad, worst_count - chosen.size, failing=False)])
    for i in chosen:
        entry: dict[str, Any] = {
            "output": name,
            "index": [int(v) for v in np.unravel_index(int(i), shape)],
            "expected": _scalar(e[i]),
            "actual": _scalar(a[i]),
            "abs": float(absdiff[i]),
            "failed": bool(bad[i]),
        }
        if ulp is not None and (ulp_defined is None or ulp_defined[i]):
            entry["ulp"] = int(ulp[i])
        if tie is not None and tie[i]:
            entry["tie"] = True
        if bound is not None:
            entry["bound"] = float(bound(int(i)))
        key = (1 if bad[i] else 0, float(absdiff[i]) if not math.isnan(absdiff[i]) else math.inf)
        candidates.append((key, entry))


def _worst_positions(absdiff: np.ndarray, bad: np.ndarray, count: int, failing: bool) -> np.ndarray:
    """The ``count`` positions of the failing elements (``failing``) or of the passing ones that
    differ at all whose ``absdiff`` is largest (``largest_first``'s order), found a slice at a
    time: each slice's own first ``count`` hold the output's first ``count``."""
    if count <= 0:
        return np.zeros(0, dtype=np.intp)
    parts = []
    for part in element_slices(absdiff.size):
        here = bad[part] if failing else ~bad[part] & (absdiff[part] > 0)
        positions = np.flatnonzero(here)
        parts.append(largest_first(positions + part.start, absdiff[part][positions], count))
    positions = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.intp)
    return largest_first(positions, absdiff[positions], count)


def largest_first(positions: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` of ``positions`` (ascending) whose ``values`` are largest, largest first and
    equal values in position order (NaN last): the first ``count`` of a stable sort by
    ``-values``, found without sorting every value (an output may hold millions)."""
    if count <= 0 or not positions.size:
        return positions[:0]
    if positions.size > 4 * count + 64:
        cut = np.partition(-values, count - 1)[count - 1]
        if not np.isnan(cut):  # with NaN among the first ``count``, every value takes part
            keep = -values <= cut  # all values tied with the count-th too: position order decides
            positions, values = positions[keep], values[keep]
    return positions[np.argsort(-values, kind="stable")[:count]]


def _scalar(value: Any) -> Any:
    value = value.item() if hasattr(value, "item") else value
    return value


def _max(current: float | None, new: float | None) -> float | None:
    """The larger of two figures, either of which may be None (an output without elements has none)."""
    if new is None:
        return current
    return new if current is None else max(current, new)


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
