"""``render_junit``: ``junit.xml`` with one ``<testcase>`` per case of results.jsonl.

Mapping, from ``harness.core.results`` (so a CI's JUnit view agrees with ``ep-testbed run``'s exit
code and summary.json: failures + errors are exactly the ``FAILING`` cases):
pass, tie-only (``PASSING``) -> passed; fail, fixed -> ``<failure>`` (fixed: the expectation file
is out of date, like pytest's strict xpass); crash, timeout, error (``NO_VERDICT``) and any
outcome the schema does not know -> ``<error>``; not-on-ep, inexpressible (``NOT_TESTED``), known
(``EXPECTED_FAILURE``) -> ``<skipped>`` with the reason (known is like pytest's xfail).
Text is escaped by ElementTree; characters XML 1.0 forbids (a crashed worker may print them)
are replaced with U+FFFD.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from ..harness.core import emulation
from ..harness.core.rerun import rerun_line
from ..harness.core.results import (
    EXPECTED_FAILURE,
    FAILING,
    NO_VERDICT,
    NOT_TESTED,
    PASSING,
)
from ..harness.core.untrusted_files import open_output
from . import figures
from .rendering import format_number, short_op
from .results import CaseResult, Run, load_run_summary

JUNIT_FILE = "junit.xml"
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
ERROR = frozenset(NO_VERDICT)
FAILURE = frozenset(FAILING) - ERROR
SKIPPED = frozenset(EXPECTED_FAILURE + NOT_TESTED)


def _clean(text: str) -> str:
    """``text`` with the characters XML 1.0 forbids replaced by U+FFFD."""
    return _XML_INVALID.sub("\ufffd", text)


def error_summary(case: CaseResult) -> str:
    """One line: outcome (with where it fails: ``only on <EP>`` / ``shared with <EP>``), how it
    failed (``figures``: elements outside tolerance and of them NaN/inf and index mismatches,
    then the error figures, a word where a number would read 0), the attributed cause and the
    first line of the message."""
    parts = [case.outcome + (f" ({case.scope})" if case.scope else "")]
    if case.attribution is not None:
        parts.append(f"cause: {case.attribution['cause']}")
    if figures.was_compared(case):
        parts.append(f"outside tolerance {figures.failure_figure(case)}")
        parts.append(", ".join(f"{k}={format_number(figures.error_cell(case, k))}" for k in case.errors))
    first = case.message.strip().splitlines()[0] if case.message.strip() else ""
    if first:
        parts.append(first[:300])
    return _clean(": ".join(parts[:1]) + (" — " + "; ".join(parts[1:]) if len(parts) > 1 else ""))


def _details(case: CaseResult, run: Run) -> str:
    """The body of a failure/error element: message, worst elements, flags, placement, artifacts,
    and the line that reruns the case (``rerun.rerun_line``)."""
    lines = [case.message.strip()] if case.message.strip() else []
    if case.scope:
        lines.append(f"where: {case.scope}" + (f" ({figures.also_on_text(case)})" if case.also_on else ""))
    if case.attribution is not None:
        lines.append(f"why ({case.attribution['cause']}): {case.attribution['reason']}")
    for w in case.worst[:10]:
        lines.append(f"{w.get('output', '')}{tuple(w.get('index', []))}: expected {format_number(w.get('expected'))}, "
                     f"actual {format_number(w.get('actual'))}, |diff| {format_number(w.get('abs'))}")
    for f in case.flags:
        lines.append(f"flag {f.get('kind', '')} {f.get('field', '')}={f.get('value', '')}: {f.get('reason', '')}")
    if case.placement:
        lines.append("placement: " + ", ".join(f"{n}->{p}" for n, p in case.placement.items()))
    if case.artifacts:
        lines.append(f"artifacts: {case.artifacts}")
    lines.append(f"rerun: {rerun_line(run.header, case.raw)}")
    return _clean("\n".join(lines))


def _properties(tc: ET.Element, case: CaseResult) -> None:
    """The case's ``scope`` (where it fails) and ``cause`` (why) as testcase properties, as pytest
    writes recorded properties, so a CI view can group failures by them."""
    values = {"scope": case.scope, "cause": (case.attribution or {}).get("cause", "")}
    if any(values.values()):
        props = ET.SubElement(tc, "properties")
        for name, value in values.items():
            if value:
                ET.SubElement(props, "property", name=name, value=_clean(value))


#: The suite attribute that counts each kind of test case element.
_COUNTED = {"failure": "failures", "error": "errors", "skipped": "skipped"}


def _kind(outcome: str) -> str | None:
    """The JUnit element a case of ``outcome`` gets: failure, error, skipped, or None (passed)."""
    if outcome in FAILURE:
        return "failure"
    if outcome in ERROR or outcome not in SKIPPED.union(PASSING):
        return "error"
    return "skipped" if outcome in SKIPPED else None


def _testcase(case: CaseResult, run: Run) -> ET.Element:
    """One ``<testcase>`` from the case's whole line (class docstring: the mapping)."""
    tc = ET.Element("testcase", classname=_clean(f"ep_testbed.{short_op(case.op)}.{case.dtype}"),
                    name=_clean(case.id), time=f"{case.duration_s:.3f}")
    summary = error_summary(case)
    _properties(tc, case)
    kind = _kind(case.outcome)
    if kind in ("failure", "error"):
        ET.SubElement(tc, kind, message=summary, type=case.outcome).text = _details(case, run)
    elif kind == "skipped":
        reason = case.message or (case.expected_outcome or {}).get("reason", "") or case.outcome
        where = f" ({case.scope})" if case.scope else ""
        ET.SubElement(tc, "skipped", message=_clean(f"{case.outcome}{where}: {reason}"[:500]), type=case.outcome)
    elif case.outcome == "tie-only":
        ET.SubElement(tc, "system-out").text = _clean(f"tie-only: {case.raw.get('ties', 0)} index tie(s)")
    return tc


def _suite(run: Run) -> ET.Element:
    """The ``<testsuite>`` element without its test cases: name, the counts and time of every
    case (from each case's outcome and duration alone), the run's properties."""
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for case in run.cases:
        counts["tests"] += 1
        total_time += case.duration_s
        kind = _kind(case.outcome)
        if kind is not None:
            counts[_COUNTED[kind]] += 1
    suite = ET.Element("testsuite", name=_clean(f"ep-testbed {run.header.get('ep', '')}"))
    for k, v in counts.items():
        suite.set(k, str(v))
    suite.set("time", f"{total_time:.3f}")
    props = ET.SubElement(suite, "properties")
    for key in ("ep", "ep_alias", "ort_flavour", "ort_version", "seed", "command", "started", "also_on"):
        if key in run.header:
            ET.SubElement(props, "property", name=key, value=_clean(str(run.header[key])))
    gpu = run.header.get("gpu")
    ET.SubElement(props, "property", name="gpu", value=_clean(str(gpu.get("summary")) if isinstance(gpu, dict)
                                                              else "not recorded"))
    label = emulation.label(run.header)
    if label:  # a run on an emulated device says so, and which ONNX Runtime ran what
        ET.SubElement(props, "property", name="emulated_device", value=_clean(f"{label}: {emulation.NOT_HARDWARE}"))
        ET.SubElement(props, "property", name="onnxruntime_versions",
                      value=_clean(str(emulation.ort_versions(run.header))))
    return suite


def _xml(element: ET.Element) -> bytes:
    """``element`` serialized as ``ElementTree.write(..., encoding="utf-8")`` writes it."""
    return ET.tostring(element, encoding="unicode").encode("utf-8", "xmlcharrefreplace")


def render_junit(run_dir: str | Path, *, out: str | Path | None = None, run: Run | None = None) -> Path:
    """Write ``junit.xml`` for ``run_dir`` (default into ``run_dir``) and return its path.

    ``run``: the folder already read (``load_run`` or ``load_run_summary``; by default the
    summary view). The suite's counts come from each case's outcome; the test cases are then
    written one at a time from each case's whole line (``Run.whole``), so memory holds one.
    """
    run = run if run is not None else load_run_summary(run_dir)
    suite = _xml(_suite(run))  # it always holds its properties: it ends in </testsuite>, never " />"
    closing = b"</testsuite>"
    out_path = Path(out) if out is not None else Path(run_dir) / JUNIT_FILE
    with open_output(out_path) as f:  # a link planted in the run folder is replaced, never written through
        f.write(b"<?xml version='1.0' encoding='utf-8'?>\n<testsuites>" + suite[:-len(closing)])
        for case in run.whole(run.cases):
            f.write(_xml(_testcase(case, run)))
        f.write(closing + b"</testsuites>")
    return out_path
