"""``diff_runs``: what changed between a baseline run A and a new run B (``ep-testbed diff A B``), and the CI gate.

Categories, by case id:
- newly failing: B's outcome is bad (fail, crash, timeout, error: ``harness.core.results.WRONG``; a
  ``fixed`` case says the expectations file is stale, not that the EP changed) and A's was not,
  including cases only B has (a new case that fails is a new problem);
- coverage lost: A tested the case (any outcome but ``harness.core.results.NOT_TESTED``) and B did
  not (``not-on-ep``, ``inexpressible``): a pass that stops reaching the EP is not a pass;
- gone: A has the case, B does not;
- fixed: A's outcome was bad and B's is pass or tie-only;
- error grown (a warning): both compared the outputs and B's error exceeds ``growth_factor``
  times A's. The error is ``max_ulp`` when both runs give it (one ULP floor, so 0 -> 1 ULP is
  not growth), else ``max_abs`` with ``abs_floor``. Growth that stays within tolerance is
  noise until it crosses the limit, and then the case is newly failing;
- still failing with another outcome (fail -> crash ...), other outcome changes, cases added.

Each change carries where B's failure occurs (``scope``: ``only on <EP>`` / ``shared with <EP>``,
from the run's re-check on a second EP) and its attributed cause; diff.txt and diff.html show
both, and the verdict line counts the newly failing cases by where they fail.

The gate (``DiffResult.regressed``, exit code 1) fails on: a newly failing case; lost coverage;
a gone case; a B that did not finish (no end line, or one that says interrupted); a B with no
case at all. ``GatePolicy`` relaxes each of the last four (``--allow-not-tested``,
``--allow-missing``, ``--allow-interrupted``, ``--allow-empty``) and can make growth fail too
(``--fail-on-growth``). ``DiffResult.reasons`` says in words why the gate failed.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..harness.core import emulation
from ..harness.core.results import NOT_TESTED, OUTCOMES, PASSING, WRONG, CaseLine, keep_keys
from ..harness.core.terminal import safe
from ..harness.core.untrusted_files import BadLine, output_folder, write_output
from .rendering import environment, format_number, short_op
from .results import CaseResult, ResultsError, Run, load_run, repeated_note, skipped_line

DIFF_HTML = "diff.html"
DIFF_TEXT = "diff.txt"
#: Run header fields whose difference changes what a comparison means (noted in the diff).
HEADER_KEYS = ("ep", "ort_flavour", "ort_version", "seed", "tolerances")
#: A case going bad: the EP or the harness got it wrong (``harness.core.results.WRONG``).  ``fixed``
#: fails a run but says the expectations file is stale, not that the EP changed, so a diff of
#: what the EP did leaves it out.
BAD_OUTCOMES = frozenset(WRONG)
#: Outcomes that count as "fixed" when a bad case reaches them (it ran on the EP and matched).
GOOD_OUTCOMES = frozenset(PASSING)
#: Outcomes that did not test the EP: reaching one from any other outcome loses coverage.
UNTESTED = frozenset(NOT_TESTED)


@dataclass(frozen=True)
class GatePolicy:
    """What the gate tolerates besides unchanged cases (all False: the strictest gate)."""

    allow_not_tested: bool = False   # a tested case may become not-on-ep / inexpressible
    allow_missing: bool = False      # a case of A may be missing from B (B is a filtered run)
    allow_interrupted: bool = False  # B may have stopped early
    allow_empty: bool = False        # B may have no case
    fail_on_growth: bool = False     # error growth beyond the factor fails the gate too


@dataclass
class Change:
    """One case's change from A to B (``before``/``after`` None: the case is not in that run)."""

    id: str
    op: str
    dtype: str
    before: str | None
    after: str | None
    error_before: float | None = None
    error_after: float | None = None
    metric: str = ""            # "max_ulp" or "max_abs" for growth
    share_after: float | None = None  # B's tolerance_used: how much of its tolerance B used
    message: str = ""
    scope: str = ""             # where B's failure occurs (re-checked on a second EP), "" if not re-checked
    cause: str = ""             # B's attributed cause, "" if none

    @property
    def factor(self) -> float | None:
        """``error_after / error_before`` (inf from 0; None when either is missing)."""
        if self.error_before is None or self.error_after is None:
            return None
        return self.error_after / self.error_before if self.error_before else float("inf")

    @property
    def group(self) -> str:
        """What rows are grouped by in diff.html: operator and transition."""
        return f"{self.op or '?'} · {self.before or 'absent'} → {self.after or 'absent'}"


@dataclass
class DiffResult:
    """Everything ``compare_runs`` found, and the gate's verdict under ``policy``."""

    run_a: Path
    run_b: Path
    policy: GatePolicy = field(default_factory=GatePolicy)
    newly_failing: list[Change] = field(default_factory=list)
    coverage_lost: list[Change] = field(default_factory=list)
    gone: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    grown: list[Change] = field(default_factory=list)
    still_failing_changed: list[Change] = field(default_factory=list)
    other_changes: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    unchanged: int = 0
    cases_a: int = 0
    cases_b: int = 0
    b_interrupted: bool = False
    a_interrupted: bool = False
    header_differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    #: The GPU identity line of each run's header (A, B), shown by both outputs.
    identities: tuple[str, str] = ("", "")
    #: The lines of each run's results.jsonl (A, B) that are no record of the schema, skipped:
    #: their cases are missing from that run as far as the diff can tell.
    unreadable: tuple[list[BadLine], list[BadLine]] = field(default_factory=lambda: ([], []))
    html_path: Path | None = None
    text_path: Path | None = None

    def gate(self) -> list[tuple[str, bool, str]]:
        """(key, failed, reason) per gate rule, in order; ``failed`` already honours the policy."""
        p = self.policy
        return [
            ("newly_failing", bool(self.newly_failing), f"{len(self.newly_failing)} case(s) newly failing"),
            ("coverage_lost", bool(self.coverage_lost) and not p.allow_not_tested,
             f"{len(self.coverage_lost)} tested case(s) no longer reach the EP (--allow-not-tested to accept)"),
            ("gone", bool(self.gone) and not p.allow_missing,
             f"{len(self.gone)} case(s) of A missing from B (--allow-missing to accept)"),
            ("interrupted", self.b_interrupted and not p.allow_interrupted,
             "run B did not finish (--allow-interrupted to accept)"),
            ("empty", self.cases_b == 0 and not p.allow_empty, "run B has no case (--allow-empty to accept)"),
            ("grown", bool(self.grown) and p.fail_on_growth,
             f"{len(self.grown)} case(s) with error grown (--fail-on-growth is set)"),
        ]

    @property
    def reasons(self) -> list[str]:
        """Why the gate failed, one phrase per broken rule (empty: no regression)."""
        return [reason for _, failed, reason in self.gate() if failed]

    @property
    def regressed(self) -> bool:
        """The CI gate: True when any rule of ``gate`` fails."""
        return bool(self.reasons)

    @property
    def warnings(self) -> list[str]:
        """What deserves a look without failing the gate: what the policy accepted, growth (unless
        it fails the gate), and a baseline that did not finish."""
        p, out = self.policy, []
        accepted = [(self.coverage_lost and p.allow_not_tested, f"{len(self.coverage_lost)} tested case(s) no longer "
                     "reach the EP"), (self.gone and p.allow_missing, f"{len(self.gone)} case(s) of A missing from B"),
                    (self.b_interrupted and p.allow_interrupted, "run B did not finish"),
                    (self.cases_b == 0 and p.allow_empty, "run B has no case")]
        out += [f"{text} (accepted by the gate's options)" for hit, text in accepted if hit]
        if self.grown and not p.fail_on_growth:
            out.append(f"{len(self.grown)} case(s) with error grown beyond the factor, outcome unchanged")
        if self.a_interrupted:
            out.append("the baseline A did not finish: cases it lacks count as added")
        for run, bad, counted in zip("AB", self.unreadable, ("added if B has them", "gone from B")):
            if bad:
                out.append(f"{len(bad)} line(s) of run {run}'s results.jsonl could not be read (line {bad[0].number}: "
                           f"{skipped_line(bad[0])}): their cases count as {counted}; repair them or rerun that run "
                           "for a full diff")
        return out

    def sections(self) -> list[tuple[str, str, list[Change]]]:
        """(key, title, changes) in report order."""
        return [
            ("newly_failing", "Newly failing", self.newly_failing),
            ("coverage_lost", "Coverage lost (no longer tested on the EP)", self.coverage_lost),
            ("gone", "Cases gone", self.gone),
            ("grown", "Error grown (warning)", self.grown),
            ("fixed", "Fixed", self.fixed),
            ("still_failing_changed", "Still failing, different outcome", self.still_failing_changed),
            ("other_changes", "Other outcome changes", self.other_changes),
            ("added", "Cases added", self.added),
        ]


def _change(a: CaseResult | None, b: CaseResult | None) -> Change:
    """The change of one case from ``a`` (None: not in A) to ``b`` (None: not in B)."""
    c = b or a
    assert c is not None
    return Change(id=c.id, op=short_op(c.op), dtype=c.dtype, before=a.outcome if a else None,
                  after=b.outcome if b else None, message=(b.message if b else "")[:300],
                  scope=b.scope if b else "", cause=((b.attribution or {}).get("cause", "") if b else ""))


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
                used = b.raw.get("tolerance_used")
                ch.share_after = float(used) if isinstance(used, (int, float)) else None
                return ch
            return None
    return None


def _bad(outcome: Any) -> bool:
    """Whether ``outcome`` counts as failing for the gate: a failing outcome, or one this version
    does not know (a newer writer's, or an edited line's), which the gate cannot vouch for."""
    return outcome in BAD_OUTCOMES or outcome not in OUTCOMES


def _classify(res: DiffResult, a: CaseResult, b: CaseResult, growth_factor: float, abs_floor: float) -> None:
    """File the change of a case both runs have under the right section of ``res``."""
    before, after = a.outcome, b.outcome
    bad_a, bad_b = _bad(before), _bad(after)
    if bad_b and not bad_a:
        res.newly_failing.append(_change(a, b))
    elif after in UNTESTED and before not in UNTESTED:
        res.coverage_lost.append(_change(a, b))
    elif bad_a and after in GOOD_OUTCOMES:
        res.fixed.append(_change(a, b))
    elif before != after:
        (res.still_failing_changed if bad_a and bad_b else res.other_changes).append(_change(a, b))
    elif (grown := _growth(a, b, growth_factor, abs_floor)) is not None:
        res.grown.append(grown)
    else:
        res.unchanged += 1


def compare_runs(a: Run, b: Run, growth_factor: float = 2.0, abs_floor: float = 1e-6,
                 policy: GatePolicy | None = None) -> DiffResult:
    """The diff of two loaded runs (no files written); ``ValueError`` for ``growth_factor < 1``."""
    if not growth_factor >= 1.0:
        raise ValueError(f"growth_factor={growth_factor!r}: must be a number >= 1 (2 means 'error doubled')")
    res = DiffResult(run_a=a.path, run_b=b.path, policy=policy or GatePolicy(), cases_a=len(a.cases),
                     cases_b=len(b.cases), a_interrupted=a.interrupted, b_interrupted=b.interrupted,
                     unreadable=(list(a.unreadable), list(b.unreadable)))
    ca, cb = a.by_id(), b.by_id()
    for key in HEADER_KEYS:
        if a.header.get(key) != b.header.get(key):
            res.header_differences.append((key, a.header.get(key), b.header.get(key)))
    res.identities = (gpu_summary(a.header), gpu_summary(b.header))
    for cid, cb_case in cb.items():
        ca_case = ca.get(cid)
        if ca_case is None:
            (res.newly_failing if _bad(cb_case.outcome) else res.added).append(_change(None, cb_case))
        else:
            _classify(res, ca_case, cb_case, growth_factor, abs_floor)
    res.gone = [_change(c, None) for cid, c in ca.items() if cid not in cb]
    return res


def gpu_summary(header: dict[str, Any]) -> str:
    """The run header's one-line GPU identity (``gpu.summary``), or why there is none."""
    gpu = header.get("gpu")
    return str(gpu.get("summary", "?")) if isinstance(gpu, dict) else "not recorded (a run made before GPU identity)"


def _change_line(ch: Change) -> str:
    """One case of diff.txt: id, transition, and for growth the errors and the factor."""
    extra = ""
    if ch.metric:
        extra = (f"  {ch.metric} {format_number(ch.error_before)} -> {format_number(ch.error_after)}"
                 f" (x{format_number(ch.factor)})")
        if ch.share_after is not None:
            extra += f", {format_number(ch.share_after)} of its tolerance in B"
    where = "; ".join(p for p in (ch.scope, f"cause: {ch.cause}" if ch.cause else "") if p)
    return f"  {ch.id}  [{ch.before or '-'} -> {ch.after or '-'}]{extra}" + (f"  ({where})" if where else "")


def diff_text(res: DiffResult, growth_factor: float) -> str:
    """diff.txt: the verdict line with its reasons, warnings, header differences, then every
    non-empty section."""
    counts = (f"{len(res.newly_failing)} newly failing, {len(res.coverage_lost)} coverage lost, {len(res.gone)} gone, "
              f"{len(res.grown)} error grown > {growth_factor:g}x, {len(res.fixed)} fixed, {len(res.added)} added, "
              f"{res.unchanged} unchanged; A {res.cases_a} cases, B {res.cases_b} cases")
    verdict = "REGRESSED: " + "; ".join(res.reasons) if res.regressed else "no regression"
    scoped = _scope_counts(res.newly_failing)
    if scoped:
        counts += f"; newly failing by where: {scoped}"
    lines = [f"ep-testbed diff: A={res.run_a} B={res.run_b}", f"verdict: {verdict} ({counts})"]
    lines += [f"warning: {w}" for w in res.warnings]
    lines += [f"GPU A: {res.identities[0]}", f"GPU B: {res.identities[1]}"]
    if res.identities[0] != res.identities[1]:
        lines.append("note: the runs name different GPU identities (device, driver, DirectML or ONNX Runtime)")
    for key, a, b in res.header_differences:
        if key == "tolerances":
            lines.append("note: the runs used different tolerances")
        else:
            lines.append(f"note: {key} differs: A={a!r} B={b!r}")
    for _, title, changes in res.sections():
        if changes:
            lines += ["", f"{title} ({len(changes)}):", *(_change_line(ch) for ch in changes)]
    return "\n".join(safe(line) for line in lines) + "\n"  # ids and values come from files: one visible line each


def _scope_counts(changes: list[Change]) -> str:
    """``"2 only on CUDAExecutionProvider, 1 shared with CPUExecutionProvider"`` ("" when none is labelled)."""
    counts: dict[str, int] = {}
    for ch in changes:
        if ch.scope:
            counts[ch.scope] = counts.get(ch.scope, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (not item[0].startswith("only on "), item[0]))
    return ", ".join(f"{n} {label}" for label, n in ordered)


def _report_link(run_dir: Path, out_dir: Path) -> str | None:
    """The relative path from ``out_dir`` to ``run_dir``'s report.html, None when it has none."""
    report = Path(run_dir) / "report.html"
    if not report.is_file():
        return None
    return Path(os.path.relpath(report.resolve(), Path(out_dir).resolve())).as_posix()


#: The keys of a case line the diff reads (``_change``, ``_growth``): all it keeps of a line, so
#: that two large runs are compared holding a few hundred bytes per case.
DIFF_KEYS = ("type", "id", "op", "dtype", "outcome", "scope", "errors", "tolerance_used")


def diff_view(line: CaseLine) -> CaseLine:
    """The part of a case line the diff reads (``DIFF_KEYS``, the dtype tag, the message's first
    300 characters, the attribution's cause)."""
    view = keep_keys(line, DIFF_KEYS)
    tags, attribution, message = line.get("tags"), line.get("attribution"), line.get("message")
    if isinstance(tags, dict) and "dtype" in tags:
        view["tags"] = {"dtype": tags["dtype"]}
    if isinstance(attribution, dict) and "cause" in attribution:
        view["attribution"] = {"cause": attribution["cause"]}
    if isinstance(message, str):
        view["message"] = message[:300]
    return view


class MixedRuns(ValueError):
    """One run is on an emulated device and the other on hardware (``diff_runs``)."""


def check_not_mixed(a: Run, b: Run) -> None:
    """Refuse to compare a run on an emulated device (DirectML under Wine) with one on hardware:
    neither is the other's baseline, as ``merge`` never joins them (``MixedRuns`` naming both)."""
    emulated = {"A": emulation.label(a.header), "B": emulation.label(b.header)}
    if bool(emulated["A"]) == bool(emulated["B"]):
        return
    side, other, hardware = ("A", "B", b) if emulated["A"] else ("B", "A", a)
    raise MixedRuns(f"RUN_{side} ran on an emulated device ({emulated[side]}) and RUN_{other} on hardware "
                    f"({gpu_summary(hardware.header)}): a run on an emulated device is no baseline for a "
                    "hardware run, nor the reverse.\nNote: compare runs of one kind, or pass --allow-mixed to diff "
                    "them anyway (both devices are named in the diff)")


def diff_runs(run_a: str | Path, run_b: str | Path, out_dir: str | Path, growth_factor: float = 2.0,
              abs_floor: float = 1e-6, *, policy: GatePolicy | None = None, allow_mixed: bool = False) -> DiffResult:
    """Compare baseline ``run_a`` with ``run_b``; write ``out_dir/diff.html`` and ``out_dir/diff.txt``.

    Returns the ``DiffResult`` (``.regressed`` is the CI gate under ``policy``).  Raises
    ``results.ResultsError`` when either folder has no readable results.jsonl, ``ValueError``
    for ``growth_factor < 1``, and ``MixedRuns`` (a ``ValueError``) when one run is on an
    emulated device and the other on hardware, unless ``allow_mixed``.
    """
    a, b = load_run(run_a, diff_view), load_run(run_b, diff_view)
    for run in (a, b):
        if run.repeated:  # the gate would judge whichever line came last
            raise ResultsError(f"{repeated_note(run)}; the diff is refused, as it could judge the wrong result")
    if not allow_mixed:
        check_not_mixed(a, b)
    res = compare_runs(a, b, growth_factor, abs_floor, policy)
    out = output_folder(out_dir)  # never written through a link planted in the folder
    res.text_path = write_output(out / DIFF_TEXT, diff_text(res, growth_factor))
    html = environment().get_template("diff.html.j2").render(
        res=res, a=a, b=b, growth_factor=growth_factor, link_a=_report_link(a.path, out),
        link_b=_report_link(b.path, out),
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    res.html_path = write_output(out / DIFF_HTML, html)
    return res
