"""Per-case attribution (harness/run/attribution.py): a failed case says whether the operator
diverged on the inputs it got or a helper changed them, naming the helper and the size of its
change. The helper cases are planted through the mapper seam (planted_mappers.py); the CUDA
EP's TF32 ROI rewrite is the one that motivated them, reproduced here on the CPU EP."""

from __future__ import annotations

import numpy as np
import pytest
from planted_mappers import fewer_samples, half_output, tf32_rois

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import Case
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run.attribution import change_of
from ep_testbed.harness.run.case_run import CaseConfig, run_case

CONFIG = CaseConfig(ep=resolve_ep("cpu"))
# scales and offsets that the ROI rewrite folds in: rewritten coordinates use every mantissa bit
DESC = roi_align_desc(True, sx=0.37, sy=0.53, ipo=0.25, opo=-0.25, samples=(2, 2), height=16, width=16)
CASE = Case(id="roi_align1/attribution", op=DESC.TYPE, desc=DESC, seed=3, recipe="random")


def test_default_mapper_passes_the_case_the_planted_helpers_break():
    line = run_case(CASE, CONFIG, mapper=to_onnx)
    assert line["outcome"] == "pass" and line["attribution"] is None


def test_a_helper_that_rounds_the_rois_is_named_not_the_operator():
    line = run_case(CASE, CONFIG, mapper=tf32_rois)
    assert line["outcome"] == "fail", line["message"]
    record = line["attribution"]
    assert record["cause"] == "helper", record["reason"]
    assert record["helper"] == "Cast_ROIs_ToHalf"
    assert [(n["node"], n["agrees"]) for n in record["nodes"]] == [("RoiAlign", True)]
    change = record["change"]
    assert change["operator"] == "RoiAlign" and change["input"] == "ROIs_rounded"
    # float16 keeps 11 significant bits: a relative change of at most 2^-11, and more than none
    assert 0 < change["helper"]["max_rel"] <= 2.0**-11
    assert change["at_input"]["elements"] > 0 and change["at_input"]["max_ulp"] > 1000
    assert "Cast node 'Cast_ROIs_ToHalf' changed them" in record["reason"]
    assert "RoiAlign node 'RoiAlign'" in record["reason"]


def test_a_helper_after_the_operator_is_named():
    line = run_case(CASE, CONFIG, mapper=half_output)
    assert line["outcome"] == "fail", line["message"]
    record = line["attribution"]
    assert record["cause"] == "helper" and record["helper"] == "Cast_Output_ToHalf", record["reason"]
    assert record["change"]["operator"] is None
    assert "changed its result" in record["reason"]


def test_a_wrong_composition_blames_the_mapping():
    line = run_case(CASE, CONFIG, mapper=fewer_samples)
    assert line["outcome"] == "fail"
    record = line["attribution"]
    assert record["cause"] == "composition", record["reason"]
    assert record["helper"] is None and record["nodes"][0]["agrees"] is True


def test_an_operator_divergence_is_the_operators():
    # ONNX's mode="max" (adaptive count) is the max of weighted corner terms on ORT's CPU EP
    desc = roi_align_desc(True, reduction="MAX", samples=(1, 2**32 - 1))
    case = Case(id="roi_align1/onnx-max", op=desc.TYPE, desc=desc, seed=0, recipe="random")
    line = run_case(case, CONFIG, mapper=to_onnx)
    assert line["outcome"] == "fail"
    record = line["attribution"]
    assert record["cause"] == "operator" and record["nodes"][0]["agrees"] is False
    assert record["reason"].startswith("the operator diverges on the inputs it got (ONNX's meaning of the node "
                                       "differs from the page in ReductionFunction, as its flags say): RoiAlign node")


def test_no_attribution_when_diagnosing_is_turned_off():
    from dataclasses import replace

    line = run_case(CASE, replace(CONFIG, diagnose=False), mapper=tf32_rois)
    assert line["outcome"] == "fail" and line["attribution"] is None


@pytest.mark.parametrize("ep, exact, rel, ulp", [
    (np.float16([1.0009765625]), np.float64([1.0005]), 4.8e-4, 0),     # a narrowing measured against its input
    (np.float32([1.5, 2.0]), np.float64([1.5, 2.0]), 0.0, 0),
    (np.float32([1.0001]), np.float64([1.0]), 1e-4, 839),
])
def test_change_of(ep, exact, rel, ulp):
    change = change_of(ep, exact)
    assert change["max_rel"] == pytest.approx(rel, rel=0.05, abs=1e-12)
    assert change["max_ulp"] == ulp
    assert change["elements"] == int(np.count_nonzero(ep.astype(np.float64) != exact))


def test_a_flagged_divergence_of_the_mapping_is_named():
    # an adaptive count capped at 2 samples: ONNX's count has no cap (flagged diverges), so a
    # large region samples more in ORT than the page allows; every node does what it means
    desc = roi_align_desc(True, samples=(1, 2), height=16, width=16, out=(2, 2))
    case = Case(id="roi_align1/capped", op=desc.TYPE, desc=desc, seed=0, recipe="whole-image")
    line = run_case(case, CONFIG, mapper=to_onnx)
    assert line["outcome"] == "fail", line["message"]
    record = line["attribution"]
    assert record["cause"] == "flagged", record["reason"]
    assert "(MinimumSamplesPerOutput, MaximumSamplesPerOutput)" in record["reason"]


def test_a_one_node_model_is_attributed_without_a_probe_session(monkeypatch):
    from ep_testbed.harness.eps import session as session_mod

    calls = []
    real = session_mod.run_on_ep
    monkeypatch.setattr(session_mod, "run_on_ep", lambda *a, **k: calls.append(1) or real(*a, **k))
    desc = roi_align_desc(True, reduction="MAX", samples=(1, 2**32 - 1))
    line = run_case(Case(id="roi_align1/one-node", op=desc.TYPE, desc=desc, seed=0, recipe="random"), CONFIG,
                    mapper=to_onnx)
    assert line["attribution"]["cause"] == "operator" and len(calls) == 1  # the case's own session only
    calls.clear()
    assert run_case(CASE, CONFIG, mapper=tf32_rois)["attribution"]["cause"] == "helper" and len(calls) == 2


def test_a_node_read_as_the_cases_own_desc_reuses_its_reference(monkeypatch):
    """A one-node model whose node reads back as the case's desc, on the case's own inputs, is
    judged with the reference the case already computed: the same record as computing it again,
    one reference computation fewer. An input that differs in one bit (-0.0 for 0.0) or another
    desc is computed anew."""
    from ep_testbed.harness.run import attribution

    desc = roi_align_desc(True, samples=(2, 2), bi_type="UINT64")  # ONNX's int64 batch indices read back so
    case = Case(id="roi_align1/known", op=desc.TYPE, desc=desc, seed=0, recipe="random")
    computed = []
    real = attribution.execute_with_bounds
    monkeypatch.setattr(attribution, "execute_with_bounds", lambda *a, **k: computed.append(1) or real(*a, **k))
    mapper = _perturbed(case)
    reused = run_case(case, CONFIG, mapper=mapper)
    # the perturbation is made past the EP, so the node agrees: the mapping is blamed (composition)
    assert reused["outcome"] == "fail" and reused["attribution"]["cause"] == "composition" and computed == []
    monkeypatch.setattr(attribution.Known, "of", lambda self, desc, inputs: None)
    again = run_case(case, CONFIG, mapper=mapper)
    assert computed == [1] and again["attribution"] == reused["attribution"]

    inputs = case.inputs()
    known = attribution.Known(desc, inputs, "reference")
    monkeypatch.undo()
    assert known.of(desc, dict(inputs)) == "reference"
    zeroed = dict(inputs, InputTensor=np.where(inputs["InputTensor"] == 0, -0.0, inputs["InputTensor"]).astype(
        inputs["InputTensor"].dtype))
    assert (inputs["InputTensor"] == 0).any() and known.of(desc, zeroed) is None
    assert known.of(roi_align_desc(True, samples=(2, 3), bi_type="UINT64"), inputs) is None


def _perturbed(case):
    """The default mapper with one output element of ``case`` changed (the worker's fault seam)."""
    from ep_testbed.harness.run import worker
    from ep_testbed.harness.run.case_run import load_mapper

    return worker.perturbing([("perturb", case.id)], case.id, load_mapper(CONFIG.mapper))
