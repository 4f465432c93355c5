"""How a case failed, as the case table and the case sections show it.

A failing row must never read as "0 error": an index-only failure has max abs 0, a NaN/inf
mismatch leaves max rel and max ULP at 0 (they are taken over the finite pairs), a crash has no
numbers at all. So every row gets a *failure figure* (``failure_figure``: elements outside
tolerance of the compared ones, and of those the NaN/inf and index mismatches; or what stopped
the comparison), and in a failed row an error cell that would read 0 or stay blank names the
kind of failure instead (``error_cell``). Failed rows sort above passing ones on every error
column (``failed``).
"""

from __future__ import annotations

import math
from typing import Any

from ..harness.core.results import EXPECTED_FAILURE, NOT_TESTED, WRONG, decode_number
from .results import CaseResult

#: Outcomes whose rows failed on the EP's answer (or never got one): what the figures explain.
FAILED = frozenset(WRONG + EXPECTED_FAILURE)
#: The message text the table shows at most, keeping the "worst ...: expected X, got Y" part.
MESSAGE_CHARS = 220


def _count(case: CaseResult, key: str) -> int:
    """An integer count of the case line (0 when missing or not a number)."""
    value = case.raw.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def compared_elements(case: CaseResult) -> int | None:
    """Elements compared over all outputs (from ``error_stats``; None when not recorded)."""
    stats = case.raw.get("error_stats")
    if not isinstance(stats, dict) or not stats:
        return None
    total = sum(s.get("elements", 0) for s in stats.values() if isinstance(s, dict)
                and isinstance(s.get("elements"), int))
    return total or None


def was_compared(case: CaseResult) -> bool:
    """True when the EP's outputs were compared with the reference (some error figure exists)."""
    return any(v is not None for v in case.errors.values()) or _count(case, "mismatches") > 0


def failure_kind(case: CaseResult) -> str:
    """One word for what went wrong in a failed row: NaN/inf (a NaN or infinity met a number:
    the finite-pair figures miss it), index, crash, timeout, error, no output (the EP raised or
    returned something unreadable: the message says which), n/a (another figure tells)."""
    if _count(case, "nonfinite_mismatches"):
        return "NaN/inf"
    if _count(case, "index_mismatches"):
        return "index"
    if case.outcome in ("crash", "timeout", "error"):
        return case.outcome
    return "n/a" if was_compared(case) else "no output"


def failure_figure(case: CaseResult) -> str:
    """The "outside tolerance" column: ``3 of 160 · 2 NaN/inf · 1 index`` for a compared case,
    ``crash`` / ``timeout`` / ``error`` / ``no output`` for one that was not, ``0`` for a pass
    (``N ties`` for tie-only), ``not run`` for not-on-ep / inexpressible."""
    if case.outcome in NOT_TESTED:
        return "not run"
    if not was_compared(case):
        return failure_kind(case) if case.outcome in FAILED else "—"
    bad, total = _count(case, "mismatches"), compared_elements(case)
    text = f"{bad} of {total}" if total else str(bad)
    extras = [(_count(case, "nonfinite_mismatches"), "NaN/inf"), (_count(case, "index_mismatches"), "index")]
    text += "".join(f" · {n} {label}" for n, label in extras if n)
    ties = _count(case, "ties")
    if ties:
        text += f" · {ties} tie{'s' if ties > 1 else ''}"
    return text


def failure_rank(case: CaseResult) -> float:
    """Sort value of the figure column: elements outside tolerance; -1 for a failed row that
    compared nothing (it still sorts with the failures: ``failed`` comes first)."""
    return float(_count(case, "mismatches")) if was_compared(case) else -1.0


def failed(case: CaseResult) -> bool:
    """Whether the row failed (``WRONG`` or ``known``); such rows sort first on error columns."""
    return case.outcome in FAILED


def error_cell(case: CaseResult, key: str) -> float | str | None:
    """The value of error column ``key`` (``max_abs``, ``max_rel``, ``max_ulp``): the number, or
    in a failed row where it would read 0 or blank, ``failure_kind``."""
    value = decode_number(case.errors.get(key))
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if failed(case) and (number is None or number == 0):
        return failure_kind(case)
    if number is not None and math.isnan(number):
        return "NaN"
    if number is not None and math.isinf(number):
        return "Inf" if number > 0 else "-Inf"
    return number


def short_message(message: str, limit: int = MESSAGE_CHARS) -> str:
    """``message`` for the table. A comparison's summary becomes its ``worst ...: expected X,
    got Y`` part alone: the counts and the largest errors have their own columns, and the worst
    element is what a reader scans the column for. Any other message is cut to about ``limit``
    characters."""
    worst = message.find(", worst ")
    if worst > 0:
        tail = message[worst + 2:].split("; tolerance", 1)[0]
        return tail if len(tail) <= limit else tail[:limit - 1] + "…"
    return message if len(message) <= limit else message[:limit - 1] + "…"


def _numbers(value: Any, keys: tuple[str, ...]) -> dict[str, float] | None:
    """``value`` as {key: number} when it is a dict holding a number under every key, else
    None (a results line is data: a malformed summary is left out, not shown half)."""
    if not isinstance(value, dict):
        return None
    out = {k: decode_number(value.get(k)) for k in keys}
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in out.values())
    return out if ok else None


def stats_rows(case: CaseResult) -> list[dict[str, Any]]:
    """Per float output of ``error_stats``: its name, dtype, counts, abs/ulp summaries and the
    minimum tolerance with a ``--tol`` a person can paste (None parts left out); outputs whose
    statistics are malformed are skipped."""
    stats = case.raw.get("error_stats")
    rows = []
    for name, s in (stats.items() if isinstance(stats, dict) else []):
        counts = _numbers(s, ("elements", "outside", "nonfinite"))
        if counts is None:
            continue
        minimum = s.get("min_tolerance")
        parts = {k: minimum.get(k) for k in ("atol", "rtol", "ulp")} if isinstance(minimum, dict) else None
        if parts is not None:
            parts = {k: v if isinstance(v, (int, float)) and not isinstance(v, bool) else None for k, v in parts.items()}
        dtype = s.get("dtype") if isinstance(s.get("dtype"), str) else None
        summary = ("mean", "p50", "p90", "p99", "max")
        rows.append({"name": str(name), "dtype": dtype, **{k: int(v) for k, v in counts.items()},
                     "abs": _numbers(s.get("abs"), summary), "ulp": _numbers(s.get("ulp"), summary),
                     "minimum": parts, "pastes": [f"{dtype}:{k}={v}" for k, v in (parts or {}).items()
                                                  if v is not None and dtype]})
    return rows


def scope_rank(case: CaseResult) -> int:
    """Where a case sorts when reports group failures by where they occur: a failure only on the
    EP under test first (the EP's own), then one it shares with the second EP, then the rest."""
    scope = case.scope
    return 0 if scope.startswith("only on ") else 1 if scope.startswith("shared with ") else 2


def why(case: CaseResult) -> str:
    """One line on where and why a failed case failed: its re-check label and attributed cause,
    e.g. ``only on CUDAExecutionProvider; helper: the operator agrees ...`` ("" when neither)."""
    parts = [case.scope] if case.scope else []
    attribution = case.attribution
    if attribution is not None:
        parts.append(f"{attribution['cause']}: {attribution['reason']}")
    return "; ".join(parts)


def also_on_text(case: CaseResult) -> str:
    """What the second EP did, in words: ``CPUExecutionProvider: known (fail), same failure``."""
    other = case.also_on
    if not other:
        return ""
    reported, raw = other.get("reported"), other.get("outcome")
    text = f"{other.get('ep', '?')}: {reported}" + (f" ({raw})" if raw and raw != reported else "")
    text += ", the same failure" if other.get("same_failure") else ", not the same failure"
    expected = other.get("expected_outcome")
    if isinstance(expected, dict) and expected.get("reason"):
        text += f"; its expectation: {expected.get('reason')}"
    return text
