"""A model the EP under test cannot build: a clean outcome, not a crash. The result says so with
ONNX Runtime's whole message, compares no output, and judges each attributed node alone on the
EP (a one-node model fed what the reference EP fed it)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from models_testkit import with_node_attribute

from ep_testbed.graphs.models import DEMO_SHAPES, detection_head
from ep_testbed.harness.eps import session
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.models.alone import node_feeds, one_node_model
from ep_testbed.harness.models.inputs import generate_inputs, input_specs, resolve_shapes
from ep_testbed.harness.models.run import ERROR_TEXT_LIMIT, ModelRunConfig, _failure, run_model, whole_message
from ep_testbed.harness.models.untrusted import LoadedModel

CPU = ModelRunConfig(ep=resolve_ep("cpu"), reference=resolve_ep("cpu"))


def _head(tmp_path):
    model = detection_head()
    specs = input_specs(model)
    feeds = generate_inputs(model, specs, resolve_shapes(specs, {k: (v,) for k, v in
                                                               DEMO_SHAPES["detection_head"].items()}), 0)
    return model, feeds, LoadedModel(model, tmp_path / "head.onnx", tmp_path, "0" * 64, [])


def test_a_model_the_ep_cannot_build_is_reported_and_its_nodes_are_judged_alone(tmp_path):
    model, feeds, loaded = _head(tmp_path)
    # what the EP is given: a MaxPool whose pad is not smaller than its kernel, which the CPU EP
    # refuses at session creation ("Pad should be smaller than kernel")
    refused = with_node_attribute(model, "pool1", pads=[2, 2, 2, 2])
    result = run_model(loaded, feeds, CPU, run_as=refused)
    failure = result["ep_failure"]
    assert failure["stage"] == "build" and "Pad should be smaller than kernel" in failure["message"]
    assert failure["nodes_alone"] == 2
    assert result["outputs"] == [] and result["verdict"] == "fail"
    assert result["verdict_reasons"][0].startswith("the model could not be built on CPUExecutionProvider")
    rows = {r["node"]: r for r in result["attribution"]["nodes"]}
    assert {n: r["status"] for n, r in rows.items()} == {"pool1": "match", "roi_align1": "match"}
    assert all(r["alone"] and r["message"].startswith("judged alone") for r in rows.values())
    assert result["placement"]["source"] == "one-node sessions" and result["placement"]["total"] == 2
    assert result["_arrays"]["outputs"] == {}


def test_a_node_judged_alone_is_fed_the_reference_eps_tensors_and_named_when_it_fails_alone(tmp_path):
    model, feeds, loaded = _head(tmp_path)
    result = run_model(loaded, feeds, CPU, ep_failure={"stage": "crash", "message": "it died"})
    assert [r["status"] for r in result["attribution"]["nodes"]] == ["match", "match"]
    # one node alone, built by hand: its graph inputs are the node's inputs, never initializers
    node = next(n for n in model.graph.node if n.name == "roi_align1")
    arrays = [np.zeros((1, 8, 16, 16), np.float32), np.zeros((3, 4), np.float32), np.zeros(3, np.int64)]
    alone = one_node_model(model, node, arrays)
    assert [i.name for i in alone.graph.input] == list(node.input) and not alone.graph.initializer
    y = ort.InferenceSession(alone.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, node_feeds(node, arrays))[0]
    assert y.shape[:2] == (3, 8)  # one pooled map per ROI and channel


def test_multi_line_session_errors_are_kept_whole(tmp_path):
    text = ("[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: basic_backend.cc:136\n"
            "Exception from src/inference/src/dev/plugin.cpp:53:\n\n\n"
            "Check 'boxes_dims[2] == m_coord_num' failed at non_max_suppression.cpp:116:\n"
            "NonMaxSuppression node with name 'NonMaxSuppression_1420' has unsupported 'boxes' input\n\n")
    error = session.SessionError("build", "OpenVINOExecutionProvider", RuntimeError(text))
    model, _, _ = _head(tmp_path)
    failed = _failure(error, model, {}, resolve_ep("cpu"), CPU, "m.onnx")
    message = str(failed)
    assert message.startswith("CPUExecutionProvider could not build a session for m.onnx: RuntimeError: ")
    assert message.splitlines()[-1] == "NonMaxSuppression node with name 'NonMaxSuppression_1420' has unsupported " \
                                       "'boxes' input"
    assert len(message.splitlines()) == 4  # blank lines dropped, none of the others


def test_a_very_long_error_keeps_its_start_and_its_end():
    text = "first line\n" + "x" * (3 * ERROR_TEXT_LIMIT) + "\nthe cause"
    kept = whole_message(RuntimeError(text))
    assert kept.startswith("RuntimeError: first line") and kept.endswith("the cause")
    assert len(kept) < ERROR_TEXT_LIMIT + 200 and "characters left out" in kept


def test_a_whole_model_the_ep_did_not_get_to_run_for_no_fault_of_its_own_is_named_so(tmp_path):
    """The emulated device refusing a shader says nothing wrong about the EP: the verdict names it
    (exit 0, as `run`'s emulation-gap). The EP declining nodes under --no-cpu-fallback is named
    not-on-ep and fails the gate the flag asks for; an EP that failed on its own fails, and so does
    a node judged alone that diverges whatever stopped the whole model."""
    from ep_testbed.harness.core.model_statuses import FAILING_VERDICTS, MODEL_VERDICTS

    _, feeds, loaded = _head(tmp_path)
    gap = {"stage": "build", "message": "an emulated device's layer failed", "emulation": ["vkd3d: no"]}
    declined = {"stage": "fallback-refused", "message": "does not take every node"}
    for failure, verdict in ((gap, "emulation-gap"), (declined, "not-on-ep"), ({"stage": "build", "message": "x"}, "fail"),
                             ({"stage": "crash", "message": "it died"}, "fail")):
        result = run_model(loaded, feeds, CPU, ep_failure=failure)
        assert result["verdict"] == verdict and (result["verdict_reasons"] == []) == (verdict != "fail")
        assert verdict in MODEL_VERDICTS and (verdict in FAILING_VERDICTS) == (verdict != "emulation-gap")
    assert "an emulation gap" in run_model(loaded, feeds, CPU, ep_failure=gap)["verdict_statement"]
    from ep_testbed.harness.models.run import verdict_of

    assert verdict_of({"ep_failure": gap, "verdict_reasons": ["node pool1 (MaxPool) diverges ..."]}) == "fail"
