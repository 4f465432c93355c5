"""A run as GitHub Actions shows it: the job summary (Markdown) and check annotations (workflow commands).

- ``job_summary(run_dir)``: Markdown for ``$GITHUB_STEP_SUMMARY``
  (https://docs.github.com/actions/using-workflows/workflow-commands-for-github-actions#adding-a-job-summary):
  the EP and device, the verdict, per operator the cases that pass, fail (every outcome that fails
  a run, ``harness.core.results.FAILING``), are known (an expectation said so), and a column per
  outcome that did not test the EP (``NOT_TESTED``: not-on-ep, inexpressible, emulation-gap); then
  the top failures, most severe first as summary.json orders them, each with how it failed in the
  words of the report, and their rerun lines.
- ``annotations(run_dir)``: one ``::error`` workflow command per failing case (title: outcome and
  case id; text: operator, dtype, how it failed in the words of report.html's "outside tolerance"
  column and junit.xml, ``reports.figures``, and the worst element), at most
  ``ANNOTATIONS`` of them (GitHub shows 10 error annotations per step:
  https://github.com/orgs/community/discussions/26680), then a ``::warning`` counting the rest;
  a ``::warning`` for a run that did not finish or lines that could not be read; a ``::notice``
  with the counts. They carry no ``file=``: a failing case belongs to the EP under test, not to a
  line of this repository, so they appear on the run's summary page rather than in a diff.

Nothing here writes a file or reads the environment: ``ep-testbed ci-summary`` prints, and the
workflow appends the Markdown to ``$GITHUB_STEP_SUMMARY`` and lets the runner read the workflow
commands from the step's output, so nothing third-party runs on the GPU runner. Everything taken
from results.jsonl is data: Markdown special characters are escaped and code is fenced so that no
case id can start a link, a table cell or a fence; workflow-command data and properties are escaped
as GitHub's toolkit escapes them (``escapeData``/``escapeProperty`` in
https://github.com/actions/toolkit/blob/main/packages/core/src/command.ts) after ``safe`` has made
every control character visible, so no case id or message can end a command or forge another.
"""


from pathlib import Path

from ..harness.core import emulation
from ..harness.core.results import EXPECTED_FAILURE, FAILING, NOT_TESTED, PASSING, REPORT_ORDER, part
from ..harness.core.terminal import safe
from . import figures
from .html_report import rerun_command
from .rendering import format_number, md_fence, md_text, short_op
from .results import CaseResult, Run, load_run, repeated_note

#: The summary table's outcome columns, built from the outcome groups (an outcome the schema does
#: not know counts as failing, as junit.xml counts it an error).
COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pass", PASSING), ("fail", FAILING), ("known", EXPECTED_FAILURE), *((o, (o,)) for o in NOT_TESTED))
#: Failing cases listed in the summary by default, and annotated at most (GitHub shows 10 per step).
TOP, ANNOTATIONS = 10, 10
#: The most failing cases a summary lists, whatever ``top`` asks: each row and rerun line is cut to
#: under 1.5 KB, which keeps a summary well under GitHub's 1 MiB per step (a larger one is refused).
MAX_TOP = 500
#: Characters of a message shown in a table cell or an annotation.
CELL_CHARS, ANNOTATION_CHARS = 200, 1000


def column_of(outcome: str) -> str:
    """The summary column an outcome is counted in."""
    return next((name for name, outcomes in COLUMNS if outcome in outcomes), "fail")


def _md(text: object, limit: int = CELL_CHARS) -> str:
    """``text`` as one line of inert Markdown (``rendering.md_text``)."""
    return md_text(text, limit)


def _severity(case: CaseResult) -> tuple:
    """summary.json's order of failing cases: outcome as ``REPORT_ORDER`` ranks it, largest error, id."""
    rank = REPORT_ORDER.index(case.outcome) if case.outcome in REPORT_ORDER else 0
    return rank, -(case.max_abs or 0.0), case.id


def failing_cases(run: Run) -> list[CaseResult]:
    """The cases whose outcome fails a run (or is unknown to the schema), most severe first."""
    return sorted((c for c in run.cases if column_of(c.outcome) == "fail"), key=_severity)


def _counts_table(run: Run) -> list[str]:
    """The per-operator table: one row per operator (short DML name), then the totals."""
    names = [name for name, _ in COLUMNS]
    rows: dict[str, dict[str, int]] = {}
    for case in run.cases:
        row = rows.setdefault(case.op, dict.fromkeys(names, 0))
        row[column_of(case.outcome)] += 1
    total = {name: sum(row[name] for row in rows.values()) for name in names}
    lines = ["| operator | " + " | ".join(names) + " | total |", "|---|" + "--:|" * (len(names) + 1)]
    for op in sorted(rows):
        lines.append(f"| {_md(short_op(op), 80)} | " + " | ".join(str(rows[op][n]) for n in names)
                     + f" | {sum(rows[op].values())} |")
    lines.append("| **all** | " + " | ".join(f"**{total[n]}**" for n in names) + f" | **{len(run.cases)}** |")
    return lines


def _verdict(run: Run, failing: list[CaseResult]) -> str:
    """One line: does the run fail, and by which outcomes; did it finish."""
    if failing:
        by: dict[str, int] = {}
        for case in failing:
            by[case.outcome] = by.get(case.outcome, 0) + 1
        text = f"**{len(failing)} case(s) fail the run** ({', '.join(f'{_md(o, 40)} {n}' for o, n in by.items())})"
    else:
        text = "**no case fails the run**"
    if run.interrupted:
        text += "; **the run did not finish** (no end line, or it says interrupted)"
    if run.unreadable_lines:
        text += f"; {len(run.unreadable_lines)} line(s) of results.jsonl could not be read"
    if run.repeated:
        text += f"; {len(run.repeated)} case id(s) have more than one result (the last line of each counts)"
    return text + "."


def _fence(lines: list[str]) -> list[str]:
    """``lines`` in a shell code fence no line can close (``rendering.md_fence``)."""
    return md_fence(lines)


def _failure_rows(run: Run, failing: list[CaseResult], top: int) -> list[str]:
    """The top failures' table and, folded, a rerun line for each."""
    shown = failing[:min(top, MAX_TOP)]
    lines = [f"#### Top failures ({len(shown)} of {len(failing)})", "",
             "| case | outcome | outside tolerance | max abs | what |", "|---|---|---|--:|---|"]
    for case in shown:
        what = figures.short_message(case.message.strip().splitlines()[0] if case.message.strip() else "")
        lines.append(f"| {_md(case.id, 160)} | {_md(case.outcome, 40)} | {_md(figures.failure_figure(case), 80)} | "
                     f"{_md(format_number(case.max_abs), 40)} | {_md(what)} |")
    reruns = [safe(rerun_command(run, case), 600) for case in shown]
    return lines + ["", "<details><summary>rerun lines</summary>", "", *_fence(reruns), "", "</details>"]


def job_summary(run_dir: str | Path, *, title: str | None = None, top: int = TOP) -> str:
    """The Markdown job summary of the run in ``run_dir`` (``ResultsError`` when it has no
    readable results): heading, EP and device, verdict, the per-operator table, the ``top``
    failing cases (at most ``MAX_TOP``) and their rerun lines."""
    run = load_run(run_dir)
    header = run.header
    gpu = part(header, "gpu")
    device, ep = gpu.get("summary"), header.get("ep") or "?"
    lines = [f"### {_md(title or f'ep-testbed on {ep}', 200)}", "",
             f"EP **{_md(ep, 120)}**, {_md(header.get('ort_flavour') or '?', 60)} "
             f"{_md(header.get('ort_version') or '?', 40)}; device: {_md(device or 'not recorded', 300)}", "",
             *([f"**Emulated device**: {_md(label, 300)}; {_md(emulation.NOT_HARDWARE, 400)}.", ""]
               if (label := emulation.label(header)) else []),
             _verdict(run, failing := failing_cases(run)), "", *_counts_table(run), "",
             "*fail* counts every outcome that fails a run (fail, crash, timeout, error, and fixed: an expectation "
             "that no longer holds); *known* failed as an expectation says; *not-on-ep*: an operator node ran "
             "elsewhere; *emulation-gap*: an emulated device could not run the EP's kernel; report.html and "
             "junit.xml are in the run's artifact."]
    if failing and top > 0:
        lines += ["", *_failure_rows(run, failing, top)]
    return "\n".join(lines) + "\n"


def _data(text: str) -> str:
    """Workflow-command data: control characters visible (``safe``), then ``%``, CR, LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A workflow-command property value: as data, and ``:`` and ``,`` escaped too."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, title: str, message: str) -> str:
    """One workflow command line ``::kind title=...::message``, every part made inert."""
    return f"::{kind} title={_property(safe(title, 200))}::{_data(safe(message, ANNOTATION_CHARS))}"


def _annotation_text(case: CaseResult) -> str:
    """A failing case in one line: operator and dtype, how it failed as the report's "outside
    tolerance" column says it, the largest error, and the message's worst element (or first line)."""
    first = case.message.strip().splitlines()[0] if case.message.strip() else ""
    figure = figures.failure_figure(case)
    how = f"{figure} outside tolerance, max abs {format_number(case.max_abs)}" if figures.was_compared(case) else figure
    return f"{short_op(case.op)} {case.dtype or '?'}: {case.outcome}, {how}" + (f"; {figures.short_message(first)}"
                                                                               if first else "")


def annotations(run_dir: str | Path, *, limit: int = ANNOTATIONS) -> list[str]:
    """The workflow commands for the run in ``run_dir`` (``ResultsError`` when it has no readable
    results): an ``::error`` per failing case (at most ``limit``), ``::warning`` lines for the rest
    and for an unfinished or damaged run, and a ``::notice`` with the counts."""
    run = load_run(run_dir)
    failing = failing_cases(run)
    lines = [command("error", f"{case.outcome}: {case.id}", _annotation_text(case)) for case in failing[:limit]]
    if len(failing) > limit:
        lines.append(command("warning", f"{len(failing) - limit} more failing case(s)",
                             f"not annotated (GitHub shows {ANNOTATIONS} error annotations per step): the job "
                             "summary lists the top ones, report.html and junit.xml every one"))
    if run.interrupted:
        lines.append(command("warning", "run did not finish",
                             f"{run.path / 'results.jsonl'} has no end line or it says interrupted: cases are missing"))
    if run.unreadable_lines:
        lines.append(command("warning", "unreadable results lines",
                             f"{len(run.unreadable_lines)} line(s) of {run.path / 'results.jsonl'} could not be read"))
    if repeated_note(run):
        lines.append(command("warning", "case ids with more than one result", str(repeated_note(run))))
    counts = {name: sum(column_of(c.outcome) == name for c in run.cases) for name, _ in COLUMNS}
    lines.append(command("notice", f"ep-testbed on {run.header.get('ep') or '?'}",
                         f"{len(run.cases)} cases: " + ", ".join(f"{n} {name}" for name, n in counts.items())))
    return lines


__all__ = ["ANNOTATIONS", "COLUMNS", "MAX_TOP", "TOP", "annotations", "column_of", "command", "failing_cases", "job_summary"]
