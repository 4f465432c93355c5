"""Generated models are checker-clean, load in the installed onnxruntime at the probed IR
version, read every op tensor from graph inputs, and honour or refuse an explicit opset."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from graphs_testkit import session

from ep_testbed.graphs import OpsetError, max_ir_version, max_opset, to_onnx
from ep_testbed.graphs.cases.max_pooling2 import max_pooling2_desc
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.graphs.cases.roi_pooling import roi_pooling_desc
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import DescError

CATALOG = build_catalog()


def _producers(graph):
    return {out: node for node in graph.node for out in node.output}


def _reaches_graph_input(name, graph, producers, seen=None):
    inputs = {i.name for i in graph.input}
    if name in inputs:
        return True
    node = producers.get(name)
    return node is not None and any(_reaches_graph_input(i, graph, producers) for i in node.input if i)


#: The newest IR version onnxruntime 1.24.4 (what onnxruntime-directml ships) loads, from its refusal
#: of anything newer: "Unsupported model IR version: 14, max supported IR version: 13".
ORT_1_24_MAX_IR = 13


def test_every_catalog_model_is_checked_loads_and_reads_graph_inputs():
    initializers = 0
    for case in CATALOG:
        mapping = to_onnx(case.desc, case.opset)
        if mapping.model is None:
            continue
        model = mapping.model
        onnx.checker.check_model(model, full_check=True)
        # the lowest IR the opset needs, so older ONNX Runtime builds load it too
        assert model.ir_version == onnx.helper.find_min_ir_version_for(list(model.opset_import))
        assert model.ir_version <= ORT_1_24_MAX_IR
        refused = any(f.field == "StartPadding" and f.kind == "diverges" for f in mapping.flags)
        if refused:  # pads >= kernel: valid ONNX that ORT's CPU kernel refuses (test_graphs_diverges)
            with pytest.raises(Exception, match="Pad should be smaller"):
                session(mapping)
        else:
            session(mapping)  # loads in the installed onnxruntime
        inits = {i.name for i in model.graph.initializer}
        producers = _producers(model.graph)
        assert mapping.op_nodes and set(mapping.op_nodes) | set(mapping.helper_nodes) == {n.name for n in model.graph.node}
        for node in model.graph.node:
            if node.name in mapping.op_nodes:
                assert not any(i in inits for i in node.input), (case.id, node.name)
                # a node whose inputs are all constant would be folded on CPU at session creation
                assert any(_reaches_graph_input(i, model.graph, producers) for i in node.input), (case.id, node.name)
            initializers += sum(i in inits for i in node.input)
        assert [i.name for i in model.graph.input] == mapping.onnx_input_names
        assert [o.name for o in model.graph.output] == mapping.onnx_output_names
    assert initializers > 0  # helper constants exist and were checked above


def test_ir_version_probe_is_what_onnxruntime_loads():
    ir = max_ir_version()
    assert 7 <= ir <= onnx.IR_VERSION
    assert max_ir_version() is ir or max_ir_version() == ir   # cached
    mapping = to_onnx(roi_pooling_desc())
    model = onnx.ModelProto()
    model.CopyFrom(mapping.model)
    if ir < onnx.IR_VERSION:
        model.ir_version = ir + 1
        with pytest.raises(Exception):
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("opset", [8, 10, 11, 12, 13, 16, 18, 22])
def test_explicit_opset_is_honoured_for_maxpool(opset):
    desc = max_pooling2_desc(dtype="INT8", window=2, dilation=1 if opset < 10 else 2)
    mapping = to_onnx(desc, opset)
    assert mapping.opset == opset and mapping.model.opset_import[0].version == opset
    kind = [f.kind for f in mapping.flags if f.field == "InputTensor.DataType"]
    assert kind == (["composed"] if opset < 12 else ["exact"])
    session(mapping)


def test_explicit_opset_refusals_say_why():
    with pytest.raises(OpsetError, match="RoiAlign exists from opset 10"):
        to_onnx(roi_align_desc(True), 9)
    with pytest.raises(OpsetError, match="dilations"):
        to_onnx(max_pooling2_desc(dilation=2), 8)
    with pytest.raises(OpsetError, match="Indices"):
        to_onnx(roi_pooling_desc(), 7)
    with pytest.raises(OpsetError, match="up to"):
        to_onnx(roi_pooling_desc(), max_opset() + 1)
    assert to_onnx(roi_align_desc(True), max_opset()).opset == max_opset()


def test_invalid_desc_is_refused_with_the_field():
    with pytest.raises(DescError, match="OutputTensor.Sizes"):
        to_onnx(max_pooling2_desc(window=(4, 4), spatial=(2, 2)))  # the window does not fit: validation refuses
    bad = roi_pooling_desc()
    bad = type(bad)(**{**bad.__dict__, "output_tensor": type(bad.output_tensor)("FLOAT32", (1, 1, 1, 1))})
    with pytest.raises(DescError, match="OutputTensor"):
        to_onnx(bad)
