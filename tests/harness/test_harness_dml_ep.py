"""The DirectML EP's predictor (harness/eps/dml_ep.py) and harness/expectations/dml.json.

Every expected value below comes from ORT's DirectML EP source at c4780e65b
(``onnxruntime/core/providers/dml/DmlExecutionProvider/src/``, the lines each test names) and the
ONNX since-versions of the installed onnx; nothing here ran on DirectML.
"""

import json
import os
import subprocess
import sys

from local_cases import HERE
from onnx import TensorProto as T
from onnx import helper

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core import expectations as exp
from ep_testbed.harness.eps import dml_ep

ROOT = os.path.dirname(os.path.dirname(HERE))


def _model(op, inputs, outputs, opset, **attrs):
    """One node ``op`` with typed, shaped inputs/outputs ``[(name, type, shape)]`` at ``opset``."""
    node = helper.make_node(op, [n for n, _, _ in inputs], [n for n, _, _ in outputs], name="node", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _maxpool(dtype, opset, **attrs):
    return _model("MaxPool", [("x", dtype, [1, 2, 4, 4])], [("y", dtype, None), ("i", T.INT64, None)], opset,
                  kernel_shape=[2, 2], **attrs)


def _kinds(predictions):
    return sorted((p["kind"], p["field"]) for p in predictions)


def test_registered_since_versions_are_the_rows_of_operator_registration():
    """OperatorRegistration.cpp: REG_INFO(7|8|10|11|12, MaxPool) L756-760, MaxRoiPool L767,
    RoiAlign 10/16 L768-769, Cast L1090-1094, Reshape L871-875, Add/Mul L900-908, MatMul L1087-1089,
    ConstantOfShape L825-826, each resolved to its ONNX since-version (OperatorVersions.h)."""
    ops = ("MaxPool", "MaxRoiPool", "RoiAlign", "Cast", "Reshape", "Add", "Mul", "MatMul", "ConstantOfShape")
    since = {op: set().union(*(row.since_versions(op) for row in dml_ep.registrations(op))) for op in ops}
    assert since["MaxPool"] == {1, 8, 10, 11, 12}
    assert since["MaxRoiPool"] == {1} and since["RoiAlign"] == {10, 16}
    assert since["Cast"] == {6, 9, 13, 19, 21} and since["Reshape"] == {5, 13, 14, 19, 21}
    assert since["Add"] == since["Mul"] == {7, 13, 14} and since["MatMul"] == {1, 9, 13}
    assert since["ConstantOfShape"] == {9, 21}


def test_maxpool_types_follow_supported_type_list_maxpool():
    """L600: T = Float16to32 | Ints8Bit, I = Int64 from the opset-8 rows; L756: float only at opset 7."""
    int64_indices = [("device-dependent", "I")]  # the GPU must report INT64 (ExecutionProvider.cpp L740-850)
    assert _kinds(dml_ep.predict_model(_maxpool(T.FLOAT, 16))) == int64_indices
    assert _kinds(dml_ep.predict_model(_maxpool(T.UINT8, 12))) == int64_indices
    assert dml_ep.implied_outcome(dml_ep.predict_model(_maxpool(T.FLOAT, 16))) is None
    assert ("declined", "T") in _kinds(dml_ep.predict_model(_maxpool(T.DOUBLE, 16)))
    assert ("declined", "T") in _kinds(dml_ep.predict_model(_maxpool(T.INT32, 16)))
    no_indices = _model("MaxPool", [("x", T.INT8, [1, 2, 4, 4])], [("y", T.INT8, None)], 7, kernel_shape=[2, 2])
    assert _kinds(dml_ep.predict_model(no_indices)) == [("declined", "T")]  # the opset-7 row: float only


def test_an_opset_whose_since_version_has_no_row_has_no_dml_kernel():
    """No REG_INFO row for MaxPool-22 / RoiAlign-22 (kernel_registry.cc VerifyVersion: an open-ended
    kernel matches only its own since-version)."""
    predictions = dml_ep.predict_model(_maxpool(T.FLOAT, 22))
    assert [(p["kind"], p["value"]) for p in predictions] == [("declined", "MaxPool-22")]
    assert dml_ep.implied_outcome(predictions) == "not-on-ep"


def test_float64_casts_are_device_dependent_and_decide_nothing():
    """Cast registers AllScalars incl. float64 (L603, L273); the GPU's type support decides
    (ExecutionProvider.cpp DoesNodeContainSupportedDataTypes L740-850)."""
    cast = _model("Cast", [("x", T.INT16, [3])], [("y", T.DOUBLE, [3])], 16, to=T.DOUBLE)
    predictions = dml_ep.predict_model(cast)
    assert _kinds(predictions) == [("device-dependent", "T2")]
    assert dml_ep.implied_outcome(predictions) is None


def test_storage_order_1_is_declined_by_query_maxpool():
    """DmlOperatorPooling.cpp L184-197: QueryMaxPool declines storage_order != 0."""
    predictions = dml_ep.predict_model(_maxpool(T.FLOAT, 16, storage_order=1))
    assert ("declined", "MaxPool") in _kinds(predictions)
    assert dml_ep.implied_outcome(predictions) == "not-on-ep"


def test_non_square_max_roi_pool_and_roi_align_10_diverge():
    """DmlOperatorRoiPooling.cpp L29 (PooledSize filled {H, W} into {Width, Height});
    DmlOperatorRoiAlign.cpp L39/L62 (RoiAlign-10 read as half_pixel: InputPixelOffset 0.5)."""
    pool = _model("MaxRoiPool", [("x", T.FLOAT, [1, 2, 8, 8]), ("r", T.FLOAT, [3, 5])], [("y", T.FLOAT, None)], 16,
                  pooled_shape=[2, 3])
    assert _kinds(dml_ep.predict_model(pool)) == [("diverges", "PooledSize")]
    square = _model("MaxRoiPool", [("x", T.FLOAT, [1, 2, 8, 8]), ("r", T.FLOAT, [3, 5])], [("y", T.FLOAT, None)], 16,
                    pooled_shape=[3, 3])
    assert dml_ep.predict_model(square) == []
    align = [("x", T.FLOAT, [1, 2, 8, 8]), ("r", T.FLOAT, [3, 4]), ("b", T.INT64, [3])]
    old = _model("RoiAlign", align, [("y", T.FLOAT, None)], 10, output_height=2, output_width=2)
    assert [p["value"] for p in dml_ep.predict_model(old) if p["field"] == "InputPixelOffset"] == [0.5]
    assert _kinds(dml_ep.predict_model(_model("RoiAlign", align, [("y", T.FLOAT, None)], 16))) == [
        ("device-dependent", "T2")]  # int64 batch indices: the GPU's answer


def test_every_predicted_catalog_case_is_known_on_a_hardware_dml_run():
    """No catalog case the source predicts to fail or leave the EP is an unexpected outcome on a
    (not emulated) DirectML device; every predicted dml.json entry is used by some case (no dead
    prediction); every entry says where it was observed and what was seen, and the entries of the
    emulated device stay out of a hardware run."""
    expectations = exp.for_ep("dml", ort_version="1.24.4")
    rows = dml_ep.first_run_outlook(build_catalog(), expectations)
    assert [r["id"] for r in rows if r["entry"] is None] == []
    assert {r["reported"] for r in rows} == {"known", "not-on-ep"}  # divergences to prove, refusals
    predicted = [e for e in expectations.entries if e.predicted]
    assert {r["entry"] for r in rows} == {e.id for e in predicted}
    used = {(r["entry"], r["predicted"]) for r in rows}
    assert ("roi_pooling/*", "fail") in used and ("*", "not-on-ep") in used and ("roi_align*", "fail") in used
    for entry in predicted:
        assert entry.predicted_from and entry.reason.startswith("Predicted from source, then observed")
    for entry in expectations.entries:
        assert entry.link.startswith("https://") and entry.evidence and not entry.emulated_device
        assert dict(entry.observed_on)["directml"].startswith("1.15.4") and dict(entry.observed_on)["emulated"] is True
    emulated = exp.for_ep("dml", ort_version="1.24.4", emulated=True)
    assert [e for e in emulated.entries if e.emulated_device] == [
        e for e in emulated.entries if e not in expectations.entries]


def test_the_outlook_tool_exits_zero_and_says_what_it_counts():
    p = subprocess.run([sys.executable, "tools/dml_predictions.py", "--ops", "roi_pooling", "-v"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "unexpected on the first DML run (predicted, not covered by dml.json): 0" in p.stdout
    assert "not-on-ep  roi_pooling/grid-" in p.stdout and "diverges MaxRoiPool.PooledSize" in p.stdout


def test_a_run_applies_predicted_entries_through_the_eps_predictor(tmp_path, capsys):
    """The runner matches predicted entries: a dml.json-like file run on the CPU EP (which bins
    non-square shapes as ONNX says) reports the predicted DML divergence as ``fixed``."""
    data = json.loads(open(os.path.join(exp.EXPECTATIONS_DIR, "dml.json"), encoding="utf-8").read())
    path = tmp_path / "dml-like.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "run"
    code = run_command(parse_args(["run", "--ep", "cpu", "--ops", "roi_pooling", "-k", "pool2x3,pool2x2",
                                   "--expectations", str(path), "--out", str(out), "--jobs", "1", "--no-progress"]))
    capsys.readouterr()
    lines = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    cases = [l for l in lines if l["type"] == "case"]
    non_square = [c for c in cases if "pool2x3" in c["id"]]
    assert code == 1 and non_square and all(c["outcome"] == "fixed" for c in non_square)
    assert all("DmlOperatorRoiPooling.cpp L29" in c["expected_outcome"]["predicted_from"] for c in non_square)
    square = [c for c in cases if "pool2x2" in c["id"]]
    assert square and all(c["outcome"] == "pass" and c["expected_outcome"] is None for c in square)
