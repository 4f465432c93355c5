"""``diff_runs``: what changed between a baseline run A and a new run B (``ep-testbed diff A B``).

Categories, by case id:
- newly failing: B's outcome is bad (fail, crash, timeout, error: ``harness.results.WRONG``; a
  ``fixed`` case says the expectations file is stale, not that the EP changed) and A's was not,
  including cases only B has (a new case that fails is a new problem);
- fixed: A's outcome was bad and B's is pass or tie-only (a case that stopped reaching the EP,
  bad -> not-on-ep or inexpressible, is an outcome change, not a fix);
- error grown: both compared the outputs and B's error exceeds ``growth_factor`` times A's.  The
  error is ``max_ulp`` when both runs give it (one ULP floor, so 0 -> 1 ULP is not growth), else
  ``max_abs`` with ``abs_floor``;
- still failing with another outcome (fail -> crash ...), other outcome changes (pass -> not-on-ep
  ...), cases added (not failing) and cases gone.
``DiffResult.regressed`` is true when anything is newly failing or grew: the CI gate.  Cases gone
are reported but not a regression (B may be a filtered run); compare ``gone`` yourself if they are.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ep_testbed.harness.results import PASSING, WRONG

from .rendering import environment, format_number, short_op
from .results import CaseResult, Run, load_run

DIFF_HTML = "diff.html"
DIFF_TEXT = "diff.txt"
#: Run header fields whose difference changes what a comparison means (noted in the diff).
HEADER_KEYS = ("ep", "ort_flavour", "ort_version", "seed", "tolerances")
#: A case going bad: the EP or the harness got it wrong (``harness.results.WRONG``).  ``fixed``
#: fails a run but says the expectations file is stale, not that the EP changed, so a diff of
#: what the EP did leaves it out.
BAD_OUTCOMES = frozenset(WRONG)
#: Outcomes that count as "fixed" when a bad case reaches them (it ran on the EP and matched).
GOOD_OUTCOMES = frozenset(PASSING)


@dataclass
class Change:
    id: str
    op: str
    dtype: str
    before: str | None          # outcome in A (None: case not in A)
    after: str | None           # outcome in B (None: case not in B)
    error_before: float | None = None
    error_after: float | None = None
    metric: str = ""            # "max_ulp" or "max_abs" for growth
    message: str = ""

    @property
    def factor(self) -> float | None:
        """``error_after / error_before`` (inf from 0; None when either is missing)."""
        if self.error_before is None or self.error_after is None:
            return None
        return self.error_after / self.error_before if self.error_before else float("inf")


@dataclass
class DiffResult:
    run_a: Path
    run_b: Path
    newly_failing: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    grown: list[Change] = field(default_factory=list)
    still_failing_changed: list[Change] = field(default_factory=list)
    other_changes: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    gone: list[Change] = field(default_factory=list)
    unchanged: int = 0
    header_differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    #: The GPU identity line of each run's header (A, B), shown by both outputs.
    identities: tuple[str, str] = ("", "")
    html_path: Path | None = None
    text_path: Path | None = None

    @property
    def regressed(self) -> bool:
        """True when a case newly fails or its error grew beyond the factor."""
        return bool(self.newly_failing or self.grown)

    def sections(self) -> list[tuple[str, str, list[Change]]]:
        """(key, title, changes) in report order."""
        return [
            ("newly_failing", "Newly failing", self.newly_failing),
            ("grown", "Error grown", self.grown),
            ("fixed", "Fixed", self.fixed),
            ("still_failing_changed", "Still failing, different outcome", self.still_failing_changed),
            ("other_changes", "Other outcome changes", self.other_changes),
            ("added", "Cases added", self.added),
            ("gone", "Cases gone", self.gone),
        ]


def _change(a: CaseResult | None, b: CaseResult | None) -> Change:
    """The change of one case from ``a`` (None: not in A) to ``b`` (None: not in B)."""
    c = b or a
    assert c is not None
    return Change(id=c.id, op=short_op(c.op), dtype=c.dtype, before=a.outcome if a else None,
                  after=b.outcome if b else None, message=(b.message if b else "")[:300])


def _growth(a: CaseResult, b: CaseResult, factor: float, abs_floor: float) -> Change | None:
    """The change when B's error exceeds ``factor`` x A's (max_ulp if both have it, floor 1 ULP;
    else max_abs, floor ``abs_floor``; a NaN error in B counts as grown), else None."""
    ea, eb = a.errors, b.errors
    for metric, floor in (("max_ulp", 1.0), ("max_abs", abs_floor)):
        va, vb = ea.get(metric), eb.get(metric)
        if isinstance(va, (int, float)) and isinstance(vb, (int, float)):
            va, vb = float(va), float(vb)
            if vb != vb:  # NaN error in B: it can not be compared, count it as grown
                vb = float("inf")
            if vb > factor * max(va, floor):
                ch = _change(a, b)
                ch.error_before, ch.error_after, ch.metric = va, vb, metric
                return ch
            return None
    return None


def compare_runs(a: Run, b: Run, growth_factor: float = 2.0, abs_floor: float = 1e-6) -> DiffResult:
    """The diff of two loaded runs (no files written)."""
    if not growth_factor >= 1.0:
        raise ValueError(f"growth_factor={growth_factor!r}: must be a number >= 1 (2 means 'error doubled')")
    res = DiffResult(run_a=a.path, run_b=b.path)
    ca, cb = a.by_id(), b.by_id()
    for key in HEADER_KEYS:
        if a.header.get(key) != b.header.get(key):
            res.header_differences.append((key, a.header.get(key), b.header.get(key)))
    res.identities = (gpu_summary(a.header), gpu_summary(b.header))
    for cid, cb_case in cb.items():
        ca_case = ca.get(cid)
        if ca_case is None:
            (res.newly_failing if cb_case.outcome in BAD_OUTCOMES else res.added).append(_change(None, cb_case))
            continue
        before, after = ca_case.outcome, cb_case.outcome
        bad_a, bad_b = before in BAD_OUTCOMES, after in BAD_OUTCOMES
        if bad_b and not bad_a:
            res.newly_failing.append(_change(ca_case, cb_case))
        elif bad_a and after in GOOD_OUTCOMES:
            res.fixed.append(_change(ca_case, cb_case))
        elif before != after:
            (res.still_failing_changed if bad_a and bad_b else res.other_changes).append(_change(ca_case, cb_case))
        elif (grown := _growth(ca_case, cb_case, growth_factor, abs_floor)) is not None:
            res.grown.append(grown)
        else:
            res.unchanged += 1
    res.gone = [_change(c, None) for cid, c in ca.items() if cid not in cb]
    return res


def gpu_summary(header: dict[str, Any]) -> str:
    """The run header's one-line GPU identity (``gpu.summary``), or why there is none."""
    gpu = header.get("gpu")
    return str(gpu.get("summary", "?")) if isinstance(gpu, dict) else "not recorded (a run made before GPU identity)"


def diff_text(res: DiffResult, growth_factor: float) -> str:
    """diff.txt: the verdict line, header differences, then every non-empty section."""
    lines = [f"ep-testbed diff: A={res.run_a} B={res.run_b}",
             f"verdict: {'REGRESSED' if res.regressed else 'no regression'} "
             f"({len(res.newly_failing)} newly failing, {len(res.grown)} error grown > {growth_factor:g}x, "
             f"{len(res.fixed)} fixed, {len(res.added)} added, {len(res.gone)} gone, {res.unchanged} unchanged)",
             f"GPU A: {res.identities[0]}", f"GPU B: {res.identities[1]}"]
    if res.identities[0] != res.identities[1]:
        lines.append("note: the runs name different GPU identities (device, driver, DirectML or ONNX Runtime)")
    for key, a, b in res.header_differences:
        if key == "tolerances":
            lines.append("note: the runs used different tolerances")
        else:
            lines.append(f"note: {key} differs: A={a!r} B={b!r}")
    for _, title, changes in res.sections():
        if not changes:
            continue
        lines.append("")
        lines.append(f"{title} ({len(changes)}):")
        for ch in changes:
            extra = ""
            if ch.metric:
                extra = (f"  {ch.metric} {format_number(ch.error_before)} -> {format_number(ch.error_after)}"
                         f" (x{format_number(ch.factor)})")
            lines.append(f"  {ch.id}  [{ch.before or '-'} -> {ch.after or '-'}]{extra}")
    return "\n".join(lines) + "\n"


def diff_runs(run_a: str | Path, run_b: str | Path, out_dir: str | Path, growth_factor: float = 2.0,
              abs_floor: float = 1e-6) -> DiffResult:
    """Compare baseline ``run_a`` with ``run_b``; write ``out_dir/diff.html`` and ``out_dir/diff.txt``.

    Returns the ``DiffResult`` (``.regressed`` is the CI gate).  Raises ``results.ResultsError``
    when either folder has no readable results.jsonl, ``ValueError`` for ``growth_factor < 1``.
    """
    a, b = load_run(run_a), load_run(run_b)
    res = compare_runs(a, b, growth_factor, abs_floor)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    res.text_path = out / DIFF_TEXT
    res.text_path.write_text(diff_text(res, growth_factor), encoding="utf-8")
    html = environment().get_template("diff.html.j2").render(
        res=res, a=a, b=b, growth_factor=growth_factor,
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    res.html_path = out / DIFF_HTML
    res.html_path.write_text(html, encoding="utf-8")
    return res
