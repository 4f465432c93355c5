"""``render_run``: one self-contained ``report.html`` for a run folder.

Layout: header (EP, ONNX Runtime, machine, seed, command, tolerances, counts), the op x dtype and
op x field matrices (each cell links to its cases), the case table (filtered and sorted in the page
by report.js, no server), then one section per case worth a closer look: failing, crashed,
timed-out, errored, known and fixed cases, and passing cases the harness kept artifacts for (its
worst N).  Pictures (see ``images``) are drawn for the first ``max_pictures`` of those sections,
most severe first, so a run with thousands of failures still opens quickly; the rest keep their
tables and a pointer to their artifact folder.
"""

from __future__ import annotations

import base64
import datetime as _dt
import heapq
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..harness.core import emulation
from ..harness.core.rerun import rerun_line
from ..harness.core.results import (
    ERROR_KEYS,
    EXPECTED_FAILURE,
    FAILING,
    NOT_TESTED,
    OUTCOMES,
    PASSING,
    REPORT_ORDER,
    part,
)
from ..harness.core.tolerances import Tolerances
from ..harness.core.untrusted_files import write_output
from ..reference.registry import index_output_names
from . import figures, findings, images
from .artifacts import (
    CaseArtifacts,
    IndexMismatch,
    index_categories,
    index_mismatches,
    load_artifacts,
    resolve_folder,
)
from .matrix import Matrix, build_matrix, case_fields
from .rendering import environment, script_json, short_op
from .repro import MAX_INLINE_BUNDLE, build_bundle, header_tolerances
from .results import CaseResult, Run, load_run_summary
from .shrinks import shrink_pairs

REPORT_FILE = "report.html"
#: Outcomes that always get a detail section: those that fail a run, and known divergences.
DETAILED_OUTCOMES = frozenset(FAILING + EXPECTED_FAILURE)
MESSAGE_LIMIT = 6000


@dataclass
class Detail:
    """Everything one case section shows."""

    anchor: str
    case: CaseResult
    rerun: str
    artifacts_path: str | None
    art: CaseArtifacts | None = None
    pictures: dict[str, list[images.SlicePictures]] = field(default_factory=dict)
    index_pictures: list[images.IndexSlicePicture] = field(default_factory=list)
    index_mismatches: list[IndexMismatch] = field(default_factory=list)
    index_ties: list[IndexMismatch] = field(default_factory=list)
    index_differing: int = 0
    bundle_uri: str | None = None
    bundle_note: str | None = None
    bundle_files: list[str] = field(default_factory=list)
    message: str = ""
    message_truncated: bool = False
    figure: str = ""
    stats: list[dict[str, Any]] = field(default_factory=list)
    group: str = ""          # the heading of its group (``group_title``)
    also_on: str = ""        # what the second EP did (``figures.also_on_text``)


def rerun_command(run: Run, case: CaseResult) -> str:
    """One shell line that reruns just this case with every option that changed its outcome
    (``harness.core.rerun``: EP and its options, graph optimizations, tolerances as ``--tol`` items,
    expectations, seed, timeout) into a fresh folder each time it is pasted (``{time}``): ``run -k``
    for a catalog or corpus case, ``fuzz --replay`` for a fuzzed one (``rerun.rerun_words``)."""
    return rerun_line(run.header, case.raw)


def run_tolerances(run: Run) -> Tolerances:
    """The tolerances the run judged its cases by (``repro.header_tolerances``)."""
    return header_tolerances(run.header)


def _severity(case: CaseResult) -> tuple:
    """Sort key of the case sections: where the failure occurs (``figures.scope_rank``: only on
    the EP under test, then shared with the second EP, then not re-checked), then
    ``REPORT_ORDER`` (an outcome it lacks first), then the largest error first, then id."""
    rank = REPORT_ORDER.index(case.outcome) if case.outcome in REPORT_ORDER else 0
    return (figures.scope_rank(case), rank, -(case.max_abs or 0.0), case.id)


def group_title(case: CaseResult, run: Run) -> str:
    """The heading of a case section's group (``_severity``'s first key)."""
    if case.scope:
        return f"Failing {case.scope}" if case.scope.startswith("only on ") else f"Failures {case.scope}"
    other = run.header.get("also_on")
    return "Not re-checked on a second EP" if other else "Cases"


#: A case whose arrays hold more than this many bytes gets no inline bundle, unbuilt: even the
#: best-compressing arrays would not fit ``MAX_INLINE_BUNDLE``.
RAW_BUNDLE_CAP = 16 * MAX_INLINE_BUNDLE


def wants_detail(case: CaseResult) -> bool:
    """A case gets a section when its outcome fails a run or is known, is an outcome the schema
    does not know, or the harness kept its folder."""
    return case.outcome in DETAILED_OUTCOMES or case.outcome not in OUTCOMES or bool(case.artifacts)


def _build_detail(run: Run, case: CaseResult, anchor: str, with_pictures: bool) -> Detail:
    """One case section: message, rerun line, and (from its artifact folder, if any) the arrays;
    with ``with_pictures`` also heatmaps, index mismatches and the inline repro bundle."""
    detail = _plain_detail(run, case, anchor)
    folder = resolve_folder(run.path, case.artifacts)
    if folder is None:
        return detail
    art = load_artifacts(folder, arrays=with_pictures)
    detail.art = art
    if with_pictures:
        for name, expected in art.expected.items():
            actual = art.actual.get(name)
            if actual is None or name in index_output_names():
                continue
            detail.pictures[name] = images.worst_slices(case.op, expected, actual,
                                                        tolerance=run_tolerances(run).for_dtype(expected.dtype.name.upper()))
        detail.index_mismatches, detail.index_ties, detail.index_differing = index_mismatches(art)
        codes = index_categories(art)
        if codes is not None:
            detail.index_pictures = images.index_slices(case.op, codes)
        raw = sum(a.nbytes for group in (art.inputs, art.expected, art.actual, art.allowance) for a in (group or {}).values())
        if raw > RAW_BUNDLE_CAP:  # compressing it only to find it too big to inline costs seconds
            detail.bundle_note = f"its arrays hold {raw // 2**20} MiB, too big to inline"
            return detail
        built = build_bundle(case, run.header, art, run_tolerances(run))
        if built is not None:
            bundle, names = built
            detail.bundle_files = sorted({n.split("/")[0] + ("/" if "/" in n else "") for n in names})
            if len(bundle) <= MAX_INLINE_BUNDLE:
                detail.bundle_uri = "data:application/zip;base64," + base64.b64encode(bundle).decode("ascii")
            else:
                detail.bundle_note = f"bundle is {len(bundle) // 1024} KB, too big to inline"
    return detail


def _table_rows(cases: Iterable[tuple[CaseResult, CaseResult]], anchors: dict[str, str], matrix: Matrix
                ) -> list[list[Any]]:
    """Compact rows for report.js: [id, op, dtype, outcome, max_abs, max_rel, max_ulp, s, anchor, message,
    fields, figure, failed, figure_rank, scope, scope_rank, cause], where fields holds the tags and
    the DML fields the by-field matrix links filter on; error cells and the figure follow
    ``figures`` (a failed row never reads 0 or blank); scope is the re-check's label and cause
    the attributed one ("" when none). ``cases``: each case as the matrix read it (its fields
    are worked out there) with its whole line."""
    rows = []
    for summary, c in cases:
        shown = matrix.keys_for(c.op)
        fields = {k: v for k, v in case_fields(summary).items() if k in shown or k in summary.tags}
        rows.append([
            c.id, short_op(c.op), c.dtype, c.outcome,
            *(figures.error_cell(c, k) for k in ERROR_KEYS),
            round(c.duration_s, 4), anchors.get(c.id), figures.short_message(c.message),
            fields, figures.failure_figure(c), int(figures.failed(c)), figures.failure_rank(c),
            c.scope, figures.scope_rank(c), (c.attribution or {}).get("cause", ""),
        ])
    return rows


def _scope_counts(run: Run) -> list[tuple[str, int, int]]:
    """``(label, cases, of them failing the run)`` per re-check label, only-on labels first."""
    counts: dict[str, list[int]] = {}
    for c in run.cases:
        if c.scope:
            entry = counts.setdefault(c.scope, [0, 0])
            entry[0] += 1
            entry[1] += c.outcome in FAILING
    return sorted(((label, n, bad) for label, (n, bad) in counts.items()),
                  key=lambda item: (not item[0].startswith("only on "), item[0]))


def failing_count(counts: dict[str, int]) -> int:
    """Cases whose outcome fails the run (``FAILING``): the report places failures by where they
    occur only when there is one (a known divergence re-checked on a second EP is listed in its
    case section, not as a failure)."""
    return sum(counts.get(o, 0) for o in FAILING)


def _plain_detail(run: Run, case: CaseResult, anchor: str) -> Detail:
    """A case section from its results line alone (message, rerun line, figure, statistics)."""
    message = case.message
    return Detail(anchor=anchor, case=case, rerun=rerun_command(run, case), artifacts_path=case.artifacts,
                  message=message[:MESSAGE_LIMIT], message_truncated=len(message) > MESSAGE_LIMIT,
                  figure=figures.failure_figure(case), stats=figures.stats_rows(case),
                  group=group_title(case, run), also_on=figures.also_on_text(case))


def _detail_within_memory(run: Run, case: CaseResult, anchor: str, with_pictures: bool) -> Detail:
    """``_build_detail``, or, when the case folder's arrays (a stress case's are hundreds of MB)
    do not fit in memory, the section from its results line with that said: the report renders
    what it can instead of failing for one large case."""
    try:
        return _build_detail(run, case, anchor, with_pictures)
    except MemoryError:
        pass  # out of the handler first, so the arrays read so far are freed
    detail = _plain_detail(run, case, anchor)
    folder = resolve_folder(run.path, case.artifacts)
    detail.art = CaseArtifacts(folder=folder or run.path, problems=[
        "its arrays did not fit in this machine's memory: pictures and the repro bundle are left out (the case "
        "folder keeps them; `ep-testbed report` on a machine with more memory draws them)"])
    return detail


def _sections(run: Run, max_details: int, max_pictures: int) -> tuple[list[Detail], dict[str, str], dict[str, int]]:
    """The case sections (at most ``max_details``, most severe first: ``_severity``, chosen with
    a bounded heap, so only those cases' whole lines are read and held), their anchors by case id,
    and the counts the page states (``not_detailed``, ``pictured``, ``with_artifacts``)."""
    chosen = [c for c in run.cases if wants_detail(c)]
    shown = heapq.nsmallest(max_details, chosen, key=_severity)  # == sorted(...)[:max_details], stable
    anchors = {c.id: f"c{i}" for i, c in enumerate(shown)}
    details = []
    pictured = 0  # the picture budget goes to sections that have artifacts to draw
    for c in run.whole(shown):
        with_pictures = bool(c.artifacts) and pictured < max_pictures
        pictured += with_pictures
        details.append(_detail_within_memory(run, c, anchors[c.id], with_pictures))
    return details, anchors, {"not_detailed": len(chosen) - len(shown), "pictured": pictured,
                              "with_artifacts": sum(1 for c in chosen if c.artifacts)}


def render_run(run_dir: str | Path, *, out: str | Path | None = None, max_pictures: int = 60,
               max_details: int = 500, run: Run | None = None) -> Path:
    """Write ``report.html`` for ``run_dir`` (default into ``run_dir``) and return its path.

    ``max_details`` caps the per-case sections (most severe first, ``harness.core.results.REPORT_ORDER``);
    ``max_pictures`` caps how many of those with artifacts get heatmaps and an inline repro bundle.
    ``run``: the folder already read (``load_run`` or ``load_run_summary``); by default it is read
    keeping each case's summary view, and whole lines are read again only for the sections and,
    one at a time, for the case table. Raises ``results.ResultsError`` when the folder has no
    readable results.jsonl.
    """
    run = run if run is not None else load_run_summary(run_dir)
    out_path = Path(out) if out is not None else Path(run_dir) / REPORT_FILE
    details, anchors, section_counts = _sections(run, max_details, max_pictures)
    counts = run.counts
    header = run.header
    matrix = build_matrix(run.cases)
    context = {
        "run": run,
        "header": header,
        "machine": part(header, "machine"),
        "tolerances": part(header, "tolerances"),
        "counts": [(o, counts.get(o, 0)) for o in REPORT_ORDER] + sorted(
            (o, n) for o, n in counts.items() if o not in OUTCOMES),
        "total": len(run.cases),
        "bad": failing_count(counts),
        "passed": sum(counts.get(o, 0) for o in PASSING),
        "skipped": sum(counts.get(o, 0) for o in NOT_TESTED),
        "matrix": matrix,
        "details": details,
        "shrinks": shrink_pairs(run, anchors),
        "findings": findings.group(run).findings,
        **section_counts,
        "max_pictures": max_pictures,
        "max_details": max_details,
        "report_command": f"ep-testbed report {shlex.quote(str(run_dir))}",
        "report_dir": shlex.quote(str(run_dir)),
        "anchors": anchors,
        "rows": script_json(_table_rows(zip(run.cases, run.whole(run.cases)), anchors, matrix)),
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "value_legend": images.legend_uri(images.VALUE_MAP),
        "scopes": _scope_counts(run) if failing_count(counts) else [],  # no failure: nothing to place
        "emulated": emulation.record(header),  # DirectML under Wine: the banner and both ONNX Runtimes
        "ort_versions": emulation.ort_versions(header),
        "NOT_HARDWARE": emulation.NOT_HARDWARE,
    }
    context["share_bar"], context["share_ticks"] = images.share_legend()
    html = environment().get_template("report.html.j2").render(**context)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_output(out_path, html)  # a link planted in the run folder is replaced, never written through
    return out_path
