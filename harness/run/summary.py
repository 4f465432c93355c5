"""The end-of-run summary table and the exit code a CI acts on."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable

from ..core import exit_codes
from ..core.results import FAILING, OUTCOMES, REPORT_ORDER, CaseLine
from ..core.terminal import safe


def failing_outcomes(fail_on_not_on_ep: bool = False, fail_on_inexpressible: bool = False) -> tuple[str, ...]:
    """Outcomes that make a run fail: always ``results.FAILING`` (``fixed`` included); the
    ``NOT_TESTED`` outcomes ``not-on-ep``/``inexpressible`` only on request."""
    extra = (("not-on-ep",) if fail_on_not_on_ep else ()) + (("inexpressible",) if fail_on_inexpressible else ())
    return FAILING + extra


def exit_code(counts: dict[str, int], failing: Iterable[str], interrupted: bool = False) -> int:
    """130 if interrupted (143 if by SIGTERM), 1 if any case has a failing outcome, 4 if nothing
    ran, else 0 (``core.exit_codes``)."""
    if interrupted:
        return exit_codes.interrupted_code()
    if any(counts.get(o, 0) for o in failing):
        return exit_codes.FAILED
    if not sum(counts.values()):
        return exit_codes.NO_CASES
    return exit_codes.OK


def table(lines: Iterable[CaseLine]) -> str:
    """Outcome counts per operator, plus a total row; columns only for outcomes that occurred.
    Names from the lines (operators, outcomes a newer writer added) are printed ``terminal.safe``."""
    per_op: dict[str, Counter] = defaultdict(Counter)
    total: Counter = Counter()
    for line in lines:
        op = safe(str(line.get("op") or "?").removeprefix("DML_OPERATOR_"), 60)
        outcome = line.get("outcome") if line.get("outcome") in OUTCOMES else safe(line.get("outcome"), 40)
        per_op[op][outcome] += 1
        total[outcome] += 1
    columns = [o for o in OUTCOMES if total[o] or o in ("pass", "fail")]
    columns += sorted(str(o) for o in total if o not in OUTCOMES)
    header = ["operator", *columns, "total"]
    rows = [[op, *(str(c[o]) for o in columns), str(sum(c.values()))] for op, c in sorted(per_op.items())]
    rows.append(["TOTAL", *(str(total[o]) for o in columns), str(sum(total.values()))])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))  # noqa: E731
    rule = "-" * len(fmt(header))
    return "\n".join([fmt(header), rule, *(fmt(r) for r in rows[:-1]), rule, fmt(rows[-1])])


def _failing_in_order(lines: Iterable[CaseLine], failing: Iterable[str]) -> list[CaseLine]:
    """The lines with a failing outcome, most severe outcome first (``results.REPORT_ORDER``), then by id."""
    failing = set(failing)
    rank = {outcome: i for i, outcome in enumerate(REPORT_ORDER)}
    bad = [line for line in lines if line.get("outcome") in failing]
    return sorted(bad, key=lambda l: (rank.get(l["outcome"], len(rank)), l["id"]))


def first_problem(lines: Iterable[CaseLine], failing: Iterable[str]) -> CaseLine | None:
    """The case ``problems`` lists first (None when none fails)."""
    bad = _failing_in_order(lines, failing)
    return bad[0] if bad else None


def problems(lines: Iterable[CaseLine], failing: Iterable[str], limit: int = 20) -> str:
    """The first ``limit`` cases with a failing outcome, one line each (id, outcome, message),
    most severe outcome first (``results.REPORT_ORDER``); ids and messages printed ``terminal.safe``."""
    bad = _failing_in_order(lines, failing)
    out = []
    for line in bad[:limit]:
        message = (line.get("message") or "").strip().splitlines()
        out.append(f"  {line['outcome']:<8} {safe(line['id'])}: {safe(message[0]) if message else ''}")
    if len(bad) > limit:
        out.append(f"  ... and {len(bad) - limit} more (see results.jsonl)")
    return "\n".join(out)


#: ``timings_table``'s columns: the line's ``timings`` key and its heading.
TIMING_COLUMNS = (("prepare_s", "prepare"), ("reference_s", "reference"), ("build_s", "EP build"), ("run_s", "EP run"),
                  ("judge_s", "judge"))


def timings_table(lines: Iterable[CaseLine]) -> str:
    """Where each case's time went, one row per case in the lines' order: its outcome, the cost
    it states (``tags``: ``seconds`` and ``memory_mb``, as the stress tier's cases do), its
    ``duration_s``, and its ``timings`` in seconds: preparing it (mapping, inputs, flags,
    reference) and, of that, the reference with its bounds; building and running its sessions
    on the EP (its share of a shared one); judging its outputs. A part a line lacks is ``-``."""
    def seconds(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, (int, float)) else "-"

    header = ["case", "outcome", "stated s", "stated MiB", "total s", *(title for _, title in TIMING_COLUMNS)]
    rows = []
    for line in lines:
        tags, timings = line.get("tags") or {}, line.get("timings") or {}
        rows.append([safe(str(line.get("id")), 100), safe(str(line.get("outcome")), 20), safe(tags.get("seconds") or "-", 12),
                     safe(tags.get("memory_mb") or "-", 12), seconds(line.get("duration_s")),
                     *(seconds(timings.get(key)) for key, _ in TIMING_COLUMNS)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join(["where each case's time went (seconds; the reference is part of prepare):", fmt(header),
                      "-" * len(fmt(header)), *(fmt(r) for r in rows)])
