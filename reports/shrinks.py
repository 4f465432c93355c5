"""The fuzz section of a report: every shrunk failure, its original and its minimal case side by side.

A fuzz run (``ep-testbed fuzz``) writes ``shrinks.jsonl`` next to ``results.jsonl``
(``harness.core.shrink_records``: the one schema); both cases of a record have their own line and
case section in the report. ``shrink_pairs`` reads the records and joins each with the two
lines: outcomes, element counts, the fields that changed, what shrinking cost, the command
that redraws the original, and the minimal case's repro bundle inline (minimal cases are
small). A run without the file has no fuzz section.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from ..harness.core.rerun import replay_words, shell_line
from ..harness.core.shrink_records import read_shrinks
from .artifacts import load_artifacts, resolve_folder
from .repro import MAX_INLINE_BUNDLE, build_bundle, header_tolerances
from .results import CaseResult, Run


@dataclass
class ShrinkPair:
    """One shrunk failure as the report shows it."""

    record: dict[str, Any]
    original: CaseResult | None
    minimal: CaseResult | None
    original_anchor: str | None = None
    minimal_anchor: str | None = None
    replay: str = ""
    bundle_uri: str | None = None
    bundle_files: list[str] = field(default_factory=list)
    bundle_note: str | None = None

    @property
    def signature(self) -> str:
        """``fail (values in OutputTensor, number -> number; diverging: ...)`` from the record."""
        sig = self.record.get("signature") or {}
        detail = str(sig.get("kind") or "")
        if sig.get("outputs"):
            detail += f" in {', '.join(map(str, sig['outputs']))}"
        if sig.get("values"):
            detail += f", {sig['values']}"
        if sig.get("diverging"):
            detail += f"; diverging: {', '.join(map(str, sig['diverging']))}"
        return f"{sig.get('outcome', '?')} ({detail})" if detail else str(sig.get("outcome", "?"))


def shrink_pairs(run: Run, anchors: dict[str, str]) -> list[ShrinkPair]:
    """The pairs of ``run`` (none without ``shrinks.jsonl``); ``anchors`` maps case ids to their
    report sections, so each side links to its full section."""
    cases = {c.id: c for c in run.cases}
    pairs = []
    for record in read_shrinks(str(run.path)):
        original, minimal = record["original"], record["minimal"]
        pair = ShrinkPair(record, _whole(run, cases, original), _whole(run, cases, minimal), anchors.get(original),
                          anchors.get(minimal), _replay_command(run, original))
        if pair.minimal is not None:
            _attach_bundle(pair, run)
        pairs.append(pair)
    return pairs


def _whole(run: Run, cases: dict[str, CaseResult], case_id: str) -> CaseResult | None:
    """The case ``case_id`` of ``run`` with its whole line (``Run.whole``), None if the run has none."""
    case = cases.get(case_id)
    return None if case is None else next(run.whole([case]))


def _replay_command(run: Run, case_id: str) -> str:
    """The command that redraws and reruns a fuzzed case from its id alone: the rerun line of
    the drawn case (``rerun.rerun_line``), with the run's options."""
    return shell_line(replay_words(run.header, case_id))


def _attach_bundle(pair: ShrinkPair, run: Run) -> None:
    """The minimal case's repro bundle as a data URI (or why there is none)."""
    folder = resolve_folder(run.path, pair.minimal.artifacts if pair.minimal else None)
    if folder is None:
        pair.bundle_note = "the run kept no case folder for it"
        return
    built = build_bundle(pair.minimal, run.header, load_artifacts(folder), header_tolerances(run.header))
    if built is None:
        pair.bundle_note = "its case folder has no model or inputs"
        return
    bundle, pair.bundle_files = built
    if len(bundle) > MAX_INLINE_BUNDLE:
        pair.bundle_note = f"bundle is {len(bundle) // 1024} KB, too big to inline"
        return
    pair.bundle_uri = "data:application/zip;base64," + base64.b64encode(bundle).decode("ascii")
