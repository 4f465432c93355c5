"""The readings a worker computes for a failing case (``harness.run.readings.explain``) only where
they are looked at: each set of readings on the regions still holding an element no earlier set
explained. The record must be the one computing every set whole gives, element for element, on
real CPU EP runs of fuzzed ROI cases: with the bundled expectations (most failures explained) and
with entries naming a reading that explains little (elements left unexplained, whose first one
the record shows with each single reading's value there)."""

from __future__ import annotations

import numpy as np
import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.harness.core import expectations as exp
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.eps.registry import classes_of
from ep_testbed.harness.fuzz.draw import draw_round
from ep_testbed.harness.run import readings
from ep_testbed.harness.run.case_run import CaseConfig, run_batch
from ep_testbed.harness.run.case_steps import ArtifactPolicy

ROI_OPS = ["roi_pooling", "roi_align", "roi_align1"]
#: Entries that name readings which explain few of the CPU EP's differing elements.
FEW = exp.parse([{"id": f"{op}/*", "outcome": "fail", "readings": names, "reason": "r", "link": "l", "strict": False}
                 for op, names in (("roi_pooling", ["half-away-rounding"]),
                                   ("roi_align*", ["closed-edge", "zero-times-corner"]))])


def _records(cases, expectations, monkeypatch, cut: bool):
    """Each case's ``readings`` record (by id) from one in-process run on the CPU EP; ``cut``
    False computes every set of readings whole."""
    cuts = []
    select = readings.select_regions

    def counted(desc, inputs, rows):
        cuts.append(len(rows))
        return select(desc, inputs, rows)

    monkeypatch.setattr(readings, "select_regions", counted if cut else (lambda desc, inputs, rows: None))
    with np.errstate(all="ignore"):
        lines = run_batch([(c, ArtifactPolicy(expected=expectations.candidates(c)), to_onnx) for c in cases],
                          CaseConfig(ep=resolve_ep("cpu")))
    return {line["id"]: line.get("readings") for line in lines}, cuts


@pytest.mark.parametrize("which", ["bundled", "few"])
def test_readings_computed_on_the_regions_left_give_the_record_of_the_whole(which, monkeypatch):
    cases = draw_round(ROI_OPS, 1, 0, limit=100)
    expectations = exp.for_ep("cpu", classes=classes_of("CPUExecutionProvider")) if which == "bundled" else FEW
    cut, cuts = _records(cases, expectations, monkeypatch, cut=True)
    whole, _ = _records(cases, expectations, monkeypatch, cut=False)
    assert cut == whole
    explained = [r for r in cut.values() if r]
    assert len(explained) >= 20, "the sample holds failing ROI cases to explain"
    assert cuts, "some set was computed on fewer regions than the case has"
    if which == "few":
        left = [r for r in explained if r["unexplained"] and r["tried"]]
        assert left and all(set(r["first_unexplained"]["readings"]) == {t for t in r["tried"] if "+" not in t}
                            for r in left)
