"""Findings: a run's failures grouped into the distinct ones, each written as a text an EP's
maintainers can act on (``ep-testbed findings RUN_DIR``, and a section of report.html).

A run may fail hundreds of cases that are a handful of bugs. A *finding* is every failing case
(``harness.core.results.WRONG``: fail, crash, timeout, error) with one key (``finding_key``):

- the failure's ``Signature`` (``harness.core.signature``: operator, outcome, how it failed, the
  failing outputs, the value classes of the worst element, the fields the mapper flagged
  ``diverges``; an ``error`` line, which has none, is keyed by operator alone);
- the data type;
- where it occurs: the line's ``scope`` (``shared with <EP>`` / ``only on <EP>``, from the
  re-check on a second EP), "" when not re-checked.

Of each finding the smallest case is kept (``line_elements``: the elements of its inputs and
outputs, a case with a case folder before one without): for a fuzz run, the minimal case a shrink
made of one of its cases (``shrinks.jsonl``) when its own run still failed the same way. Its
case folder gives the repro bundle the report builds (``repro.build_bundle``: the model, the
inputs, expected and actual outputs, ``repro.py`` judging with the run's own comparison, needing
numpy and onnxruntime alone).

``write_findings(run_dir, out_dir)`` writes, per finding, ``<out>/<slug>/FINDING.md`` (versions
and device, the emulated device labelled, what fails, expected vs got for the worst elements,
what the reference expects and why, the minimal desc, how to reproduce it with numpy and
onnxruntime alone and with ep-testbed), ``repro/`` and ``repro.zip``; then ``<out>/README.md``
listing them and ``<out>/findings.json``. ``known`` cases (an expectation explains them: already
filed) and ``fixed`` ones (a stale expectation: the testbed's to fix) are counted, not written.

The run folder is data: it is read through ``reports.results`` (``harness.core.results``' two-pass
readers: a summary view of every case, whole lines only of the failing ones, one at a time) and
``reports.artifacts`` (case folders inside the run folder, capped), shrinks through
``harness.core.shrink_records``; everything taken from it is escaped in the Markdown
(``rendering.md_text``, ``md_fence``), and everything written goes through
``harness.core.untrusted_files`` (never through a link planted in ``out``).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..harness.core import emulation
from ..harness.core.rerun import rerun_line
from ..harness.core.results import EXPECTED_FAILURE, WRONG, CaseLine, part
from ..harness.core.shrink_records import read_shrinks
from ..harness.core.signature import Signature, signature
from ..harness.core.terminal import safe
from ..harness.core.untrusted_files import open_output, output_folder
from .artifacts import load_artifacts, resolve_folder
from .rendering import format_number, md_code, md_fence, md_text, short_op
from .repro import build_bundle, header_tolerances
from .results import CaseResult, Run, load_run_summary, repeated_note, skipped_line

#: Where ``ep-testbed findings`` writes by default, inside the run folder.
FINDINGS_DIR = "findings"
INDEX_MD, INDEX_JSON, FINDING_MD, BUNDLE_DIR, BUNDLE_ZIP = ("README.md", "findings.json", "FINDING.md", "repro",
                                                            "repro.zip")
#: Outcomes a finding is made of: the EP (or the harness) got the case wrong.
FINDING_OUTCOMES = WRONG
#: Case ids a finding lists (the count says how many there are), worst elements it tabulates,
#: lines of a message it quotes.
IDS_SHOWN, WORST_SHOWN, MESSAGE_LINES = 20, 8, 12
#: The size of a case whose line says nothing of its size: after every case that says.
UNKNOWN_SIZE = 2**62


@dataclass
class Finding:
    """One distinct failure of a run (module docstring): its key, its cases, the smallest one."""

    signature: Signature
    dtype: str
    scope: str
    count: int = 0
    ids: list[str] = field(default_factory=list)
    line: CaseLine = field(default_factory=CaseLine)   # the smallest case's whole line
    size: int = UNKNOWN_SIZE
    shrunk_from: str | None = None    # the representative is the minimal case a shrink made of this case
    shrink: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[Signature, str, str]:
        """``finding_key`` of its cases."""
        return self.signature, self.dtype, self.scope

    @property
    def case_id(self) -> str:
        """The id of the smallest case (the one its bundle holds)."""
        return str(self.line.get("id", ""))

    def title(self) -> str:
        """``ROI_ALIGN float32: fail (values in OutputTensor, inf -> nan), only on CUDAExecutionProvider``."""
        where = f", {self.scope}" if self.scope else ""
        return f"{short_op(self.signature.op)} {self.dtype or 'any type'}: {self.signature.describe()}{where}"

    def slug(self, number: int) -> str:
        """A folder name: number, operator, type and a hash of the key (stable across runs of one kind)."""
        digest = hashlib.sha1(repr(self.key).encode("utf-8", "surrogatepass")).hexdigest()[:8]
        op = "".join(ch for ch in short_op(self.signature.op).lower() if ch.isalnum() or ch == "_")[:40] or "op"
        dtype = "".join(ch for ch in self.dtype.lower() if ch.isalnum())[:16] or "any"
        return f"{number:02d}-{op}-{dtype}-{digest}"

    def to_json(self) -> dict[str, Any]:
        """The finding as ``findings.json`` lists it."""
        return {"title": self.title(), "signature": self.signature.to_json(), "dtype": self.dtype,
                "scope": self.scope or None, "cases": self.count, "ids": self.ids, "smallest": self.case_id,
                "elements": None if self.size == UNKNOWN_SIZE else self.size, "shrunk_from": self.shrunk_from}


def finding_key(line: CaseLine) -> tuple[Signature, str, str]:
    """What a finding's cases share (module docstring): signature, data type, scope."""
    found = signature(line) or Signature(str(line.get("op", "")), str(line.get("outcome", "error")))
    case = CaseResult(line)
    return found, case.dtype, case.scope


def line_elements(line: CaseLine) -> int:
    """The elements of a case's inputs and outputs, as its line says (a fuzzed case's ``elements``
    tag; else the outputs its comparison counted); ``UNKNOWN_SIZE`` when it says nothing."""
    tag = CaseResult(line).tags.get("elements", "")
    if tag.isdigit():
        return int(tag)
    stats = line.get("error_stats")
    counted = [s.get("elements") for s in stats.values() if isinstance(s, dict)] if isinstance(stats, dict) else []
    total = sum(n for n in counted if isinstance(n, int) and not isinstance(n, bool) and n >= 0)
    return total or UNKNOWN_SIZE


def _rank(line: CaseLine, size: int) -> tuple[bool, int, str]:
    """Which of two cases represents a finding: one with a case folder (a bundle), the smaller, then by id."""
    return not line.get("artifacts"), size, str(line.get("id", ""))


@dataclass
class Grouped:
    """``group``'s answer: the findings, most cases first, and what was counted but not written."""

    findings: list[Finding]
    known: int = 0
    fixed: int = 0
    failing: int = 0


def group(run: Run) -> Grouped:
    """The run's findings (module docstring). Whole lines are read for the failing cases only, one
    at a time (``Run.whole``); a finding keeps the whole line of its smallest case alone."""
    shrinks = {r["minimal"]: r for r in read_shrinks(str(run.path)) if r.get("same_failure") is True}
    failing = [c for c in run.cases if c.outcome in FINDING_OUTCOMES]
    failing_ids = {c.id for c in failing}
    minimal_ids = {m for m, r in shrinks.items() if r["original"] in failing_ids}
    by_key: dict[tuple[Signature, str, str], Finding] = {}
    of_case: dict[str, Finding] = {}
    minimal_lines: list[CaseLine] = []
    for case in run.whole(failing):
        if case.id in minimal_ids:
            minimal_lines.append(case.raw)
            continue
        key = finding_key(case.raw)
        finding = by_key.setdefault(key, Finding(*key))
        finding.count += 1
        if len(finding.ids) < IDS_SHOWN:
            finding.ids.append(case.id)
        size = line_elements(case.raw)
        if not finding.line or _rank(case.raw, size) < _rank(finding.line, finding.size):
            finding.line, finding.size = case.raw, size
        of_case[case.id] = finding
    for line in minimal_lines:  # a shrunk case that still fails the same way represents its original's finding
        record = shrinks[str(line.get("id"))]
        origin = of_case.get(str(record["original"]))
        given = record.get("minimal_elements")
        size = given if isinstance(given, int) else line_elements(line)
        if origin is not None and line.get("artifacts") and (origin.shrunk_from is None or size < origin.size):
            origin.line, origin.size, origin.shrunk_from, origin.shrink = line, size, record["original"], record
    findings = sorted(by_key.values(), key=lambda f: (-f.count, f.title()))
    counts = run.counts
    return Grouped(findings, known=sum(counts.get(o, 0) for o in EXPECTED_FAILURE), fixed=counts.get("fixed", 0),
                   failing=len(failing) - len(minimal_lines))


# --- the Markdown of one finding -------------------------------------------------------------------

def _versions(header: dict[str, Any]) -> list[str]:
    """The table of versions and device (the emulated device labelled, both ONNX Runtimes named)."""
    gpu = part(header, "gpu")
    held = part(header, "ep_held_by")
    flag = header.get("ep_flag") or header.get("ep_alias")
    rows = [("Execution provider", md_text(header.get("ep") or "?", 80) + (f" ({md_code(f'--ep {flag}', 60)})"
                                                                           if flag else ""))]
    label = emulation.label(header)
    if label:
        rows.append(("**Emulated device**", f"{md_text(label, 300)}: {md_text(emulation.NOT_HARDWARE, 400)}"))
    rows.append(("ONNX Runtime", md_text(emulation.ort_versions(header)
                                         or f"{header.get('ort_flavour') or '?'} {header.get('ort_version') or '?'}",
                                         400)))
    package = part(gpu, "ep_package")
    if package or held.get("distribution"):
        name = package.get("name") or held.get("distribution")
        rows.append(("EP package", md_text(f"{name} {package.get('version') or held.get('version') or '?'}", 120)))
    directml = part(gpu, "directml")
    if directml.get("version"):
        rows.append(("DirectML", md_text(f"DirectML.dll {directml['version']}", 120)))
    rows.append(("Device", md_text(gpu.get("summary") or "not recorded", 400)))
    machine = part(header, "machine")
    if machine:
        rows.append(("Machine", md_text(", ".join(f"{k} {machine[k]}" for k in ("platform", "cpu", "python")
                                                  if machine.get(k)), 300)))
    rows.append(("Run", md_text(f"{header.get('command') or '?'} (started {header.get('started') or '?'})", 400)))
    return ["| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]


def _worst_table(case: CaseResult) -> list[str]:
    """Expected (the reference) vs got (the EP) for the worst elements, failing ones first."""
    worst = sorted(case.worst, key=lambda w: not w.get("failed"))[:WORST_SHOWN]
    if not worst:
        return ["No element was compared (the message above says what stopped the comparison)."]
    rows = ["| output | index | expected (reference) | got (EP) | abs error | outside tolerance |",
            "|---|---|--:|--:|--:|---|"]
    for w in worst:
        rows.append(f"| {md_text(w.get('output'), 60)} | {md_text(w.get('index'), 60)} | "
                    f"{md_text(format_number(w.get('expected')), 40)} | {md_text(format_number(w.get('actual')), 40)} "
                    f"| {md_text(format_number(w.get('abs')), 40)} | {'yes' if w.get('failed') else 'no'} |")
    return rows


def _why_expected(case: CaseResult) -> list[str]:
    """What the reference expects and why: the line's readings (when it has them), the
    expectation that came near, the tolerance the message states, the reference's decisions."""
    lines = []
    readings = case.raw.get("readings")
    if readings:
        lines += ["The readings of the reference behind this expectation (the line's `readings`):", "",
                  *md_fence(json.dumps(readings, indent=1, default=str)[:4000].splitlines(), "json"), ""]
    expected = case.expected_outcome
    if expected:
        lines.append(f"- An expectation matched this case: {md_text(expected.get('reason'), 600)} "
                     f"({md_text(expected.get('link'), 300)}).")
    tolerance = next((part.strip() for part in case.message.split(";") if part.strip().startswith("tolerance ")), "")
    if tolerance:
        lines.append(f"- The comparison: {md_text(tolerance, 600)}.")
    attribution = case.attribution
    if attribution:
        lines.append(f"- Attributed cause: **{md_text(attribution['cause'], 40)}**: "
                     f"{md_text(attribution['reason'], 600)}")
    lines.append("- The expected values are the NumPy reference's reading of DirectML's doc page for the operator; "
                 "where the page leaves something open, `reference/DECISIONS.md` of ep-testbed names the reading and "
                 "its evidence.")
    return lines


def _where(finding: Finding, case: CaseResult, header: dict[str, Any]) -> str:
    """One sentence on where the failure occurs (the re-check on a second EP)."""
    if finding.scope.startswith("only on "):
        other = header.get("also_on") or "the second EP"
        return (f"**{md_text(finding.scope, 120)}**: {md_text(other, 80)} computes these cases as the reference "
                "does, so this is this EP's own.")
    if finding.scope:
        return (f"**{md_text(finding.scope, 120)}**: the second EP fails the same way (an ONNX or ONNX Runtime "
                "semantic the EPs share, more likely than this EP's own kernel).")
    return "Not re-checked on a second EP (`--also-on none`, or the EP under test is the CPU EP)."


def finding_markdown(finding: Finding, header: dict[str, Any], bundle: list[str] | None,
                     desc: Any = None) -> str:
    """The ``FINDING.md`` of ``finding`` (module docstring); ``bundle``: the repro files written
    beside it (None: no case folder to build one from); ``desc``: the smallest case's desc.json."""
    case = CaseResult(finding.line)
    more = f" (and {finding.count - len(finding.ids)} more)" if finding.count > len(finding.ids) else ""
    size = "" if finding.size == UNKNOWN_SIZE else f", {finding.size} elements"
    if case.dtype and case.dtype != finding.dtype:
        size += f", {md_text(case.dtype, 20)}"  # a shrink may have changed the type: the minimal case says which
    shrunk = (f" It is the minimal case a shrink made of {md_code(finding.shrunk_from, 160)} "
              f"({md_text((finding.shrink or {}).get('original_elements'), 20)} elements), which fails the same way."
              if finding.shrunk_from else "")
    out = [f"# {md_text(header.get('ep') or '?', 80)}: {md_text(finding.title(), 400)}", "",
           f"{finding.count} case(s) of this run fail this way: "
           + ", ".join(md_code(i, 160) for i in finding.ids) + f"{more}.", "",
           f"The smallest is {md_code(finding.case_id, 160)}{size}.{shrunk}", "",
           _where(finding, case, header), "", "## Versions and device", "", *_versions(header), "",
           "## What fails", "", f"**{md_text(finding.signature.describe(), 300)}**. The run said of its smallest case:", "", *md_fence([safe(x, 2000) for x in case.message.splitlines()[:MESSAGE_LINES]], "text"),
           "", "## Expected vs got (worst elements)", "", *_worst_table(case), "",
           "## What the reference expects, and why", "", *_why_expected(case), ""]
    if desc is not None:
        out += ["## The minimal case", "", "Its desc, in DirectML's spelling (`desc.json`):", "",
                *md_fence(json.dumps(desc, indent=1, default=str)[:8000].splitlines(), "json"), ""]
    out += ["## Reproduce it", ""]
    if bundle:
        out += [f"With numpy and onnxruntime alone: `{BUNDLE_DIR}/` (also `{BUNDLE_ZIP}`) holds the model, its "
                "inputs, the expected and actual outputs, `check.json` and `repro.py`, which runs the model on the EP "
                "and judges it with the run's own comparison (exit 1: the failure reproduces, 0: within tolerance, "
                "2: no verdict):", "", *md_fence([f"cd {BUNDLE_DIR} && python repro.py"]), ""]
    else:
        out += ["The case has no case folder (no model or arrays were kept), so there is no repro bundle.", ""]
    out += ["With ep-testbed:", "", *md_fence([safe(rerun_line(header, finding.line), 4000)]), ""]
    return "\n".join(out)


# --- writing ------------------------------------------------------------------------------------------

@dataclass
class Written:
    """What ``write_findings`` wrote: the findings, their folders, the index, and what it counted."""

    grouped: Grouped
    folders: list[Path]
    index: Path
    unbundled: list[str] = field(default_factory=list)  # findings whose smallest case has no bundle
    #: What of the results file could not be counted: damaged lines, and ids with two results.
    skipped: list[str] = field(default_factory=list)


def _bundle(run: Run, finding: Finding) -> tuple[bytes, list[str], Any] | None:
    """``(zip, names, desc)`` of the smallest case's repro bundle, None without a case folder."""
    case = CaseResult(finding.line)
    folder = resolve_folder(run.path, case.artifacts)
    if folder is None:
        return None
    art = load_artifacts(folder)
    built = build_bundle(case, run.header, art, header_tolerances(run.header))
    return None if built is None else (*built, art.desc)


def _write_bundle(folder: Path, data: bytes) -> list[str]:
    """Write the bundle zip and its files beside it (``BUNDLE_DIR``); their names."""
    with open_output(folder / BUNDLE_ZIP) as f:
        f.write(data)
    names = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:  # our own bytes, built just now
        for name in z.namelist():
            parent, _, leaf = f"{BUNDLE_DIR}/{name}".rpartition("/")
            with open_output(output_folder(folder, parent) / leaf) as f:
                f.write(z.read(name))
            names.append(name)
    return names


def write_findings(run_dir: str | Path, out_dir: str | Path) -> Written:
    """Group the run's failures and write each finding (module docstring) under ``out_dir``.
    Raises ``results.ResultsError`` for a folder without a readable results.jsonl."""
    run = load_run_summary(run_dir)
    grouped = group(run)
    out = output_folder(out_dir)
    folders, unbundled, listed = [], [], []
    for number, finding in enumerate(grouped.findings, 1):
        folder = output_folder(out, finding.slug(number))
        bundle = _bundle(run, finding)
        names = _write_bundle(folder, bundle[0]) if bundle else None
        if bundle is None:
            unbundled.append(finding.case_id)
        with open_output(folder / FINDING_MD, "w") as f:
            f.write(finding_markdown(finding, run.header, names, bundle[2] if bundle else None))
        folders.append(folder)
        listed.append({**finding.to_json(), "folder": folder.name, "bundle": bool(names)})
    index = out / INDEX_MD
    with open_output(index, "w") as f:
        f.write(index_markdown(run, grouped, [folder.name for folder in folders]))
    with open_output(out / INDEX_JSON, "w") as f:
        json.dump({"run": str(Path(run_dir)), "ep": run.header.get("ep"),
                   "emulated_device": emulation.label(run.header), "failing": grouped.failing,
                   "known": grouped.known, "fixed": grouped.fixed, "findings": listed}, f, indent=1, default=str)
    skipped = [f"line {bad.number} skipped, {skipped_line(bad)}" for bad in run.unreadable]
    skipped += [note for note in [repeated_note(run)] if note]
    return Written(grouped, folders, index, unbundled, skipped)


def index_markdown(run: Run, grouped: Grouped, folders: list[str]) -> str:
    """``README.md`` of the findings folder: one line per finding, and what was not written."""
    label = emulation.label(run.header)
    out = [f"# Findings of {md_text(run.header.get('ep') or '?', 80)} ({md_text(run.header.get('command') or '?', 300)})",
           ""]
    if label:
        out += [f"**Emulated device**: {md_text(label, 300)}: {md_text(emulation.NOT_HARDWARE, 400)}.", ""]
    if not grouped.findings:
        out.append("No finding: no case of this run failed (fail, crash, timeout, error).")
    else:
        out += [f"{grouped.failing} failing case(s) in {len(grouped.findings)} distinct finding(s), each with its "
                "smallest case, a repro bundle and a text to file:", ""]
        out += [f"{n}. [{md_text(f.title(), 300)}]({folder}/{FINDING_MD}): {f.count} case(s), smallest "
                f"{md_code(f.case_id, 160)}" for n, (f, folder) in enumerate(zip(grouped.findings, folders), 1)]
    if grouped.known or grouped.fixed:
        out += ["", f"Not written: {grouped.known} known (an expectation explains them: already filed, its link in "
                f"report.html) and {grouped.fixed} fixed (an expectation that no longer holds: ep-testbed's to update)."]
    return "\n".join(out) + "\n"


__all__ = ["FINDINGS_DIR", "Finding", "Grouped", "Written", "finding_key", "finding_markdown", "group",
           "index_markdown", "line_elements", "write_findings"]
