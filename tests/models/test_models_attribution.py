"""Per-node attribution: a planted difference in one node is attributed to that node, and only it.

The plant: the EP under test runs a copy of the model in which one node's attributes are
perturbed (``run_model(..., run_as=copy)``), while attribution reads the original nodes. This is
what an EP computing something other than the node means looks like from outside.
"""

from __future__ import annotations

import numpy as np
import pytest
from models_testkit import with_node_attribute

from ep_testbed.graphs.models import DEMO_SHAPES, detection_head, resnet_stem
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.models.inputs import generate_inputs, input_specs, resolve_shapes
from ep_testbed.harness.models.outputs import compare_named
from ep_testbed.harness.models.run import ModelRunConfig, run_model
from ep_testbed.harness.models.untrusted import LoadedModel


def _loaded(model, tmp_path):
    return LoadedModel(model, tmp_path / f"{model.graph.name}.onnx", tmp_path, "0" * 64, [])


def _feeds(model, name):
    specs = input_specs(model)
    return generate_inputs(model, specs, resolve_shapes(specs, {k: (v,) for k, v in DEMO_SHAPES[name].items()}), 0)


CPU = ModelRunConfig(ep=resolve_ep("cpu"), reference=resolve_ep("cpu"))


def test_a_perturbed_roi_align_is_named_as_the_first_divergent_node(tmp_path):
    model = detection_head()
    planted = with_node_attribute(model, "roi_align1", spatial_scale=0.55)
    result = run_model(_loaded(model, tmp_path), _feeds(model, "detection_head"), CPU, run_as=planted)
    rows = {r["node"]: r for r in result["attribution"]["nodes"]}
    assert rows["pool1"]["status"] == "match"
    assert rows["roi_align1"]["status"] == "diverges"
    first = result["attribution"]["first_divergent"]
    assert first["node"] == "roi_align1" and first["op_type"] == "RoiAlign"
    assert first["errors"]["max_abs"] > 1e-3 and first["mismatches"] > 0
    # the whole-model failure this causes is what the attribution explains
    assert result["verdict"] == "fail" and result["outputs"][0]["outcome"] == "fail"
    assert set(result["_arrays"]["nodes"]) == {"roi_align1"}


def test_a_perturbed_max_pool_is_named_and_does_not_leak_into_the_roi_align_after_it(tmp_path):
    model = detection_head()
    # same output size (16x16), different windows: pads shift every window by one pixel
    planted = with_node_attribute(model, "pool1", pads=[1, 1, 0, 0])
    result = run_model(_loaded(model, tmp_path), _feeds(model, "detection_head"), CPU, run_as=planted)
    rows = {r["node"]: r for r in result["attribution"]["nodes"]}
    assert rows["pool1"]["status"] == "diverges"
    # RoiAlign is judged on the (wrong) pooled map the EP fed it, so it still matches
    assert rows["roi_align1"]["status"] == "match"
    # ... although its output differs from the reference EP's, whose pool was right
    assert rows["roi_align1"]["vs_reference_ep"]["mismatches"] > 0
    assert result["attribution"]["first_divergent"]["node"] == "pool1"


def test_the_planted_node_is_named_in_the_html_report_with_pictures(tmp_path):
    import json

    from ep_testbed.reports.model_report import render_model_report

    model = detection_head()
    planted = with_node_attribute(model, "roi_align1", output_height=4, sampling_ratio=1,
                                  coordinate_transformation_mode="output_half_pixel")
    result = run_model(_loaded(model, tmp_path), _feeds(model, "detection_head"), CPU, run_as=planted)
    arrays = result.pop("_arrays")
    np.savez(tmp_path / "node.npz", **arrays["nodes"]["roi_align1"])
    result["attribution"]["nodes"][1]["arrays"] = "node.npz"
    result.update(command="test", inputs={"source": "generated", "seed": 0, "specs": [], "shapes": {}})
    (tmp_path / "model_result.json").write_text(json.dumps(result))
    html = render_model_report(tmp_path).read_text()
    assert 'class="first"' in html and "First divergent node:</b> <code>roi_align1</code>" in html
    assert html.count('class="heat"') >= 3  # reference, EP and |diff| of at least one slice
    assert 'class="first-divergent"' in html


def test_index_outputs_compare_tie_aware_at_model_level():
    source = np.array([[[[1.0, 3.0, 3.0, 0.0]]]], np.float32)  # window of 4 with two maxima
    values = np.array([[[[3.0]]]], np.float32)
    expected = np.array([[[[1]]]], np.int64)
    tie, wrong = np.array([[[[2]]]], np.int64), np.array([[[[3]]]], np.int64)
    tol = CPU.tolerances
    row = compare_named({"idx": expected}, {"idx": tie}, tol, {"idx": (values, source)})[0]
    assert (row["outcome"], row["ties"], row["mismatches"], row["compared"]) == ("tie-only", 1, 0, 1)
    row = compare_named({"idx": expected}, {"idx": wrong}, tol, {"idx": (values, source)})[0]
    assert (row["outcome"], row["mismatches"]) == ("fail", 1)


def test_the_stem_attributes_values_and_indices_of_its_max_pool(tmp_path):
    model = resnet_stem()
    planted = with_node_attribute(model, "pool1", pads=[0, 0, 2, 2])  # same 16x16 output, shifted windows
    result = run_model(_loaded(model, tmp_path), _feeds(model, "resnet_stem"), CPU, run_as=planted)
    (row,) = result["attribution"]["nodes"]
    assert row["status"] == "diverges" and row["node"] == "pool1"
    assert {w["output"] for w in row["worst"]} <= {"features", "indices"}


@pytest.mark.parametrize("reading", ["spec", "dml-ep"])
def test_both_readings_attribute_the_demo_head(tmp_path, reading):
    model = detection_head()
    config = ModelRunConfig(ep=resolve_ep("cpu"), reference=resolve_ep("cpu"), reading=reading)
    result = run_model(_loaded(model, tmp_path), _feeds(model, "detection_head"), config)
    assert [r["status"] for r in result["attribution"]["nodes"]] == ["match", "match"]


def test_max_roi_pool_nodes_get_valid_rois_and_are_attributed(tmp_path):
    from models_testkit import roi_pool_model

    model = roi_pool_model()
    specs = input_specs(model)
    feeds = generate_inputs(model, specs, resolve_shapes(specs, {"num_rois": (40,)}), 0)
    rois = feeds["rois"]
    assert (rois[:, 0] == 0).all()  # one image: every batch index 0
    assert (rois[:, 1] <= rois[:, 3]).all() and (rois[:, 2] <= rois[:, 4]).all() and rois[:, 1:].max() <= 31
    assert (rois[:, 1:] == np.round(rois[:, 1:])).all()  # whole pixels: no corner on a rounding boundary
    result = run_model(_loaded(model, tmp_path), feeds, CPU)
    (row,) = result["attribution"]["nodes"]
    assert row["desc_type"] == "DML_OPERATOR_ROI_POOLING" and row["provider"] == "CPUExecutionProvider"
    # ORT's CPU kernel bins in float32 and rounds halves away from zero (its readings): whatever it does
    # here, the node is judged, not skipped, and an "explained" one is every element reproduced by a reading
    assert row["status"] in ("match", "diverges", "explained") and row["compared"] == 40 * 4 * 9
    assert row["status"] != "explained" or (row["readings"]["unexplained"] == 0 and row["readings"]["explained"])


def _max_pool_model(storage_order: int = 0):
    """x [1, 1, 2, 4] -> MaxPool(2x2, stride 2) -> y, idx (graph outputs)."""
    from onnx import TensorProto, helper

    from ep_testbed.graphs.runtime import DEFAULT_OPSET, max_ir_version

    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], name="pool", kernel_shape=[2, 2], strides=[2, 2],
                            storage_order=storage_order)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 2]),
                               helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 1, 1, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", DEFAULT_OPSET)])
    model.ir_version = max_ir_version()
    return model


def test_model_level_ties_follow_the_operator_records_index_rule():
    from ep_testbed.harness.models.outputs import tie_contexts

    x = np.array([[[[3.0, 1.0, 3.0, 0.0], [0.0, 3.0, 2.0, 3.0]]]], np.float32)  # every window's max is 3
    y = np.array([[[[3.0, 3.0]]]], np.float32)
    expected = np.array([[[[0, 2]]]], np.int64)
    ties = tie_contexts(_max_pool_model(), {"x": x, "y": y})
    assert set(ties) == {"idx"} and ties["idx"].in_window is not None
    tol = CPU.tolerances
    inside = np.array([[[[5, 7]]]], np.int64)    # the other 3 of each window
    row = compare_named({"idx": expected}, {"idx": inside}, tol, ties)[0]
    assert (row["outcome"], row["ties"], row["mismatches"]) == ("tie-only", 2, 0)
    outside = np.array([[[[2, 0]]]], np.int64)   # a 3, but of the other window
    row = compare_named({"idx": expected}, {"idx": outside}, tol, ties)[0]
    assert (row["outcome"], row["mismatches"]) == ("fail", 2)
    # without the record's rule the same indices would pass as ties on the value alone
    row = compare_named({"idx": expected}, {"idx": outside}, tol, {"idx": (y, x)})[0]
    assert row["outcome"] == "tie-only"


def test_column_major_indices_get_no_ties_at_model_or_node_level(tmp_path):
    from ep_testbed.harness.models.outputs import tie_contexts

    model = _max_pool_model(storage_order=1)
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4)
    assert tie_contexts(model, {"x": x, "y": np.zeros((1, 1, 1, 2), np.float32)}) == {}
    result = run_model(_loaded(model, tmp_path), {"x": x}, CPU)
    (row,) = result["attribution"]["nodes"]
    assert row["status"] == "match" and row["ties"] == 0 and row["compared"] == 4
