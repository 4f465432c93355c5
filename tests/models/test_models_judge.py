"""The verdict on one node: empty nodes, differences a flag explains (RoiAlign's 1x1 clamp of
regions under one pixel), differences nothing explains, and what they do to a model run's verdict.

The EP's node outputs here are ONNX Runtime's CPU kernel run on the node alone, so "what the
node means" is what ORT computes, not something this file asserts by hand.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from onnx import TensorProto as T
from onnx import helper as h

from ep_testbed.harness.core.model_statuses import AGREES, DIVERGING, NODE_STATUSES, NOT_JUDGED, PREDICTED
from ep_testbed.harness.core.tolerances import Tolerances
from ep_testbed.harness.models.judge import judge_node
from ep_testbed.harness.models.run import verdict_reasons

TOL = Tolerances.defaults()


def _roi_align(ctm: str = "output_half_pixel", mode: str = "avg", scale: float = 0.25, out: int = 3,
               sampling_ratio: int = 2) -> onnx.NodeProto:
    return h.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="ra", mode=mode, output_height=out,
                       output_width=out, sampling_ratio=sampling_ratio, spatial_scale=scale,
                       coordinate_transformation_mode=ctm)


def _ort(node: onnx.NodeProto, arrays: list[np.ndarray]) -> np.ndarray:
    """The node alone on ORT's CPU EP."""
    types = {np.dtype(np.float32): T.FLOAT, np.dtype(np.int64): T.INT64}
    ins = [h.make_tensor_value_info(n, types[a.dtype], list(a.shape)) for n, a in zip(node.input, arrays)]
    graph = h.make_graph([node], "one", ins, [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip(node.input, arrays)))[0]


def _judge(node: onnx.NodeProto, arrays: list[np.ndarray], y: np.ndarray, reading: str = "spec") -> dict:
    row = {"node": node.name}
    judge_node(row, node, arrays, {"y": y}, reading, TOL, 17)
    return row


def _arrays(rois: list[list[float]], seed: int = 0) -> list[np.ndarray]:
    # Feature values within +-2 keep float32 rounding of sample coordinates (|gradient| x 1e-6)
    # under the float32 atol, so that only the region rule decides these tests.
    x = np.random.default_rng(seed).uniform(-2, 2, (1, 4, 16, 20)).astype(np.float32)
    r = np.asarray(rois, dtype=np.float32).reshape(-1, 4)
    return [x, r, np.zeros(len(r), np.int64)]


def test_every_status_is_in_exactly_one_group():
    groups = AGREES + PREDICTED + DIVERGING + NOT_JUDGED
    assert sorted(groups) == sorted(NODE_STATUSES) and len(groups) == len(set(groups))


def test_a_roi_align_fed_no_roi_is_an_empty_match_and_a_wrong_shape_still_diverges():
    node = _roi_align()
    arrays = _arrays([])
    y = _ort(node, arrays)
    assert y.shape == (0, 4, 3, 3)
    row = _judge(node, arrays, y)
    assert row["status"] == "match" and row["compared"] == 0
    assert row["empty"] == ["ROITensor", "BatchIndicesTensor", "OutputTensor"]
    assert "empty" in row["message"] and "sizes must be at least 1" in row["message"]
    wrong = _judge(node, arrays, np.zeros((1, 4, 3, 3), np.float32))
    assert wrong["status"] == "diverges" and "shape [1, 4, 3, 3], expected [0, 4, 3, 3]" in wrong["message"]


def test_a_region_under_one_pixel_that_ort_raises_to_1x1_is_explained_and_only_that_row():
    # row 1 is 0.5 x 2 feature pixels (scale 0.25): output_half_pixel raises its width to 1
    node = _roi_align()
    arrays = _arrays([[4, 4, 40, 40], [20, 8, 22, 16], [0, 0, 60, 50]])
    y = _ort(node, arrays)
    row = _judge(node, arrays, y)
    assert row["mismatches"] > 0  # the DirectML reference samples the half-pixel region as it is
    assert row["status"] == "explained", row["reason"]
    assert [e["row_count"] for e in row["explained"]] == [1] and row["explained"][0]["rows"] == [1]
    assert row["unexplained"]["mismatches"] == 0
    assert "Force malformed ROIs to be 1x1" in row["reason"] and "ROIs 1," in row["reason"]


def test_an_error_outside_the_explained_rows_still_diverges_and_is_counted_alone():
    node = _roi_align()
    arrays = _arrays([[4, 4, 40, 40], [20, 8, 22, 16], [0, 0, 60, 50]])
    y = _ort(node, arrays).copy()
    y[2, 1, 0, 0] += 0.5  # planted in a region of normal size
    row = _judge(node, arrays, y)
    assert row["status"] == "diverges"
    assert row["unexplained"]["mismatches"] == 1
    assert row["unexplained"]["worst"][0]["index"] == [2, 1, 0, 0]
    assert "explained by no flag" in row["reason"] and "ROIs 1," in row["reason"]


def test_half_pixel_has_no_clamp_so_nothing_is_explained_and_ort_matches():
    node = _roi_align(ctm="half_pixel")
    arrays = _arrays([[20, 8, 22, 16]])
    row = _judge(node, arrays, _ort(node, arrays))
    assert row["status"] == "match"
    # an EP that clamped here anyway would not be excused
    clamped = _ort(_roi_align(), arrays)
    assert _judge(node, arrays, clamped)["status"] == "diverges"


def test_onnx_max_mode_differs_where_its_flag_predicts_and_is_flagged_not_diverging():
    node = _roi_align(mode="max")
    arrays = _arrays([[4, 4, 40, 40], [0, 0, 60, 50]])
    row = _judge(node, arrays, _ort(node, arrays))
    assert row["status"] == "flagged", row["message"]
    assert "ReductionFunction" in row["reason"]


@settings(max_examples=examples(25), deadline=None)
@given(x1=st.floats(0, 70), y1=st.floats(0, 55), w=st.floats(0, 12), hgt=st.floats(0, 12),
       sampling=st.sampled_from([0, 1, 2]))
def test_whatever_the_region_size_ort_agrees_with_the_reference_or_the_clamp(x1, y1, w, hgt, sampling):
    """ORT's output_half_pixel RoiAlign is, region by region, either the page's or the 1x1-raised
    region's (the only ROI-dependent difference the mapper knows of)."""
    node = _roi_align(sampling_ratio=sampling)
    arrays = _arrays([[x1, y1, x1 + w, y1 + hgt], [2, 2, 50, 50]])
    row = _judge(node, arrays, _ort(node, arrays))
    assert row["status"] in AGREES, (row["message"], row.get("reason"))
    assert row["status"] != "explained" or (min(w, hgt) * 0.25 < 1)


def _result(outputs=("pass",), statuses=("match",), baseline=None) -> dict:
    return {"reference_ep": {"provider": "CPUExecutionProvider"},
            "outputs": [{"name": f"o{i}", "outcome": o, "message": "m"} for i, o in enumerate(outputs)],
            "baseline": baseline,
            "attribution": {"nodes": [{"node": f"n{i}", "op_type": "RoiAlign", "status": s, "message": "msg",
                                       "unexplained": None} for i, s in enumerate(statuses)]}}


@pytest.mark.parametrize("statuses, fails", [
    (("match", "explained", "flagged", "tie-only"), False),
    (("match", "not-attributed", "error", "not-attributable"), False),
    (("match", "diverges"), True),
])
def test_the_verdict_fails_exactly_on_a_node_that_diverges_unexplained(statuses, fails):
    reasons = verdict_reasons(_result(statuses=statuses))
    assert bool(reasons) == fails
    assert all("n1 (RoiAlign) diverges" in r for r in reasons)


def test_the_verdict_names_outputs_and_baseline_regressions_too():
    reasons = verdict_reasons(_result(outputs=("pass", "fail"),
                                      baseline={"outcome": "regression", "regressed": ["o0"]}))
    assert reasons[0].startswith("output o1 differs from CPUExecutionProvider") and "baseline regression: o0" in reasons


def _detector_level0(seed: int) -> list[np.ndarray]:
    """A full-size detector's level-0 RoiAlign, in small: a 200x266 feature map (an 800x1066 image
    at stride 4) of noise with large values, and proposals at large coordinates, most of them under
    four image pixels wide or high (under one feature pixel at spatial_scale 0.25)."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(0, 1, (1, 4, 200, 266)) * 100).astype(np.float32)
    n = 40
    x1, y1 = rng.uniform(0, 1060, n), rng.uniform(0, 795, n)
    w, hgt = rng.uniform(0, 6, n), rng.uniform(0, 6, n)
    big = rng.random(n) < 0.3
    w[big] *= 30
    hgt[big] *= 30
    rois = np.stack([x1, y1, x1 + w, y1 + hgt], 1).astype(np.float32)
    return [x, rois, np.zeros(n, np.int64)]


@pytest.mark.parametrize("seed", [5, 6])
def test_raised_regions_are_judged_against_their_own_rounding_bounds(seed):
    """ORT's output_half_pixel RoiAlign raises a region under one pixel to 1x1 and samples it
    there; a correct float32 kernel may lie from that exact answer by the raised region's rounding
    bound (or match one of its knife-edge alternatives). Judged against the original region's
    allowance instead (its samples lie elsewhere), elements of raised rows were left unexplained
    on full-size detectors (and on these seeds); with their own allowance none is."""
    from ep_testbed.graphs import import_node
    from ep_testbed.harness.core.compare import Allowance, compare_outputs
    from ep_testbed.reference import execute_with_bounds

    node = _roi_align(scale=0.25, out=7, sampling_ratio=2)
    arrays = _detector_level0(seed)
    y = _ort(node, arrays)
    row = _judge(node, arrays, y)
    assert row["status"] == "explained", row["reason"]
    assert row["unexplained"]["mismatches"] == 0 and row["explained"][0]["row_count"] > 10
    # the raised rows need their own allowance: against the raised outputs, the original
    # regions' allowance leaves elements outside, the raised regions' own accepts them all
    imported = import_node(node, [a.shape for a in arrays], [a.dtype for a in arrays], "spec", 17)
    alternative = imported.alternatives(arrays)[0]
    raised = execute_with_bounds(imported.desc, imported.inputs(alternative.inputs), "fp32")
    original = execute_with_bounds(imported.desc, imported.inputs(arrays), "fp32")
    rows = np.asarray(alternative.rows)

    def outside_with(reference) -> int:
        allowance = Allowance.of(reference)
        cut = Allowance({k: v[rows] for k, v in allowance.bounds.items()},
                        {k: (lo[rows], hi[rows]) for k, (lo, hi) in allowance.alternatives.items()}, allowance.rule)
        return compare_outputs({"OutputTensor": raised.outputs["OutputTensor"][rows]}, {"OutputTensor": y[rows]},
                               TOL, allowance=cut).mismatches

    assert outside_with(raised) == 0 < outside_with(original)
