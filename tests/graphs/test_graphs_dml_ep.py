"""The ``"dml-ep"`` reading of ``from_onnx`` pinned to ORT's DirectML EP source.

Source: microsoft/onnxruntime at c4780e65b, ``onnxruntime/core/providers/dml/`` (each test names
the file and lines). Expected values come from those lines, from ORT's CPU EP run here (for
the numbers a 1-D MaxPool computes) and from the ONNX MaxPool schema; nothing ran on DirectML.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from ep_testbed.graphs import import_node, predicted_divergences
from ep_testbed.reference import execute, validate


def _maxpool(n_out=2, **attrs):
    return helper.make_node("MaxPool", ["X"], ["Y", "I"][:n_out], name="pool", **attrs)


def _ort_maxpool(node, x, opset):
    """ORT's CPU EP on a one-MaxPool model: (Y, Indices)."""
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT if o == "Y" else
                                                             onnx.TensorProto.INT64, None) for o in node.output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})


@pytest.mark.parametrize("length,kernel,stride,pads", [(9, 3, 2, [1, 0]), (8, 2, 2, [0, 0]), (5, 1, 1, [0, 0])])
def test_one_d_maxpool_is_rank_4_with_batch_and_channel_shifted_left(length, kernel, stride, pads):
    """DmlOperator.h L37-43 pads every tensor desc to rank 4 with leading 1s ({N, C, L} ->
    {1, N, C, L}, the output alike) and DmlOperatorPooling.cpp L49-74 shifts the 1-D window onto
    the last axis ({k} -> {1, k}). The desc must be one the page accepts, and the reference on it
    must compute what ORT's CPU MaxPool computes on the 1-D node."""
    node = _maxpool(kernel_shape=[kernel], strides=[stride], pads=pads)
    x = np.random.default_rng(length).permutation(2 * 3 * length).astype(np.float32).reshape(2, 3, length)
    imported = import_node(node, [x.shape], [np.float32], "dml-ep", opset=12)
    desc = imported.desc
    out_len = (length + sum(pads) - kernel) // stride + 1
    assert desc.input_tensor.sizes == (1, 2, 3, length)
    assert desc.output_tensor.sizes == desc.output_indices_tensor.sizes == (1, 2, 3, out_len)
    assert desc.window_size == (1, kernel) and desc.strides == (1, stride)
    assert desc.start_padding == (0, pads[0]) and desc.end_padding == (0, pads[1])
    validate(desc)
    y, i = imported.outputs(execute(desc, imported.inputs([x])))
    want_y, want_i = _ort_maxpool(node, x, 12)
    assert y.shape == want_y.shape and np.array_equal(y, want_y) and np.array_equal(i, want_i)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_int8_uint8_maxpool_only_from_opset_12(dtype):
    """OperatorRegistration.cpp L757-760 register int8/uint8 (L600, Ints8Bit) on the MaxPool rows,
    but ONNX's MaxPool lists int8/uint8 only from MaxPool-12 (onnx.defs), so the DML EP takes them
    from opset 12; the "spec" reading keeps them at any opset (the mapper composes them there)."""
    schema_types = {o: set(onnx.defs.get_schema("MaxPool", o, "").type_constraints[0].allowed_type_strs)
                    for o in (11, 12)}
    assert "tensor(int8)" not in schema_types[11] and "tensor(int8)" in schema_types[12]
    node = _maxpool(kernel_shape=[2, 2])
    assert import_node(node, [[1, 1, 4, 4]], [dtype], "dml-ep", opset=12).desc.input_tensor.data_type == \
        np.dtype(dtype).name.upper()
    for opset in (8, 10, 11):
        with pytest.raises(ValueError, match="int8/uint8 from opset 12 only"):
            import_node(node, [[1, 1, 4, 4]], [dtype], "dml-ep", opset=opset)
    assert import_node(node, [[1, 1, 4, 4]], [dtype], "spec", opset=11).desc.input_tensor.data_type


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.int16])
def test_maxpool_types_the_dml_ep_never_registers_are_refused(dtype):
    """OperatorRegistration.cpp L600: T = Float16to32 | Ints8Bit only."""
    with pytest.raises(ValueError, match="registers MaxPool for float and float16"):
        import_node(_maxpool(kernel_shape=[2, 2]), [[1, 1, 4, 4]], [dtype], "dml-ep", opset=16)


def test_predicted_divergences_name_each_field_once():
    """The desc comparison and the EP's own flags may both name a field (RoiAlign-10's
    InputPixelOffset: DmlOperatorRoiAlign.cpp L39/L62; a ceil_mode size: OperatorHelper.cpp
    InitializeKernelOutputDimensions); the prediction lists it once."""
    roi = helper.make_node("RoiAlign", ["X", "R", "B"], ["Y"], name="roi", output_height=2, output_width=2)
    fields = [f.field for f in predicted_divergences(roi, [[1, 1, 8, 8], [2, 4], [2]],
                                                     [np.float32, np.float32, np.int64], opset=10)]
    assert fields == ["InputPixelOffset"]
    ceil = _maxpool(n_out=1, kernel_shape=[1, 1], strides=[2, 2], ceil_mode=1)
    flags = predicted_divergences(ceil, [[1, 1, 2, 2]], [np.float32])
    assert [f.field for f in flags] == ["OutputTensor"]  # one flag for both spatial axes
    assert flags[0].value["Sizes"] == [1, 1, 2, 2] and flags[0].reason.count("ceil_mode") == 2


def test_pads_not_smaller_than_the_window_are_a_cpu_refusal_not_a_dml_ep_divergence():
    """ORT's CPU kernel refuses pads >= kernel_shape (onnxruntime/core/providers/cpu/nn/pool_attributes.h
    "Pad should be smaller than kernel"); nothing under onnxruntime/core/providers/dml checks it, so
    the DML EP reading raises no flag and predicts nothing for it."""
    node = _maxpool(kernel_shape=[2, 2], pads=[2, 2, 0, 0])
    spec = import_node(node, [[1, 1, 5, 5]], [np.float32], "spec", opset=16)
    ep = import_node(node, [[1, 1, 5, 5]], [np.float32], "dml-ep", opset=16)
    assert any(f.field == "StartPadding" and f.kind == "diverges" for f in spec.flags)
    assert not any(f.kind == "diverges" for f in ep.flags)
    assert predicted_divergences(node, [[1, 1, 5, 5]], [np.float32], opset=16) == []
    assert ep.desc == spec.desc


@pytest.mark.slow
def test_model_run_reads_a_1d_maxpool_as_the_dml_ep_does(tmp_path):
    """``ep-testbed model run --reading dml-ep`` attributes a 1-D MaxPool node (the desc is rank 4
    and the reference accepts it) instead of erroring."""
    node = _maxpool(kernel_shape=[3], strides=[2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [1, 2, 9])],
                              [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, [1, 2, 4]),
                               helper.make_tensor_value_info("I", onnx.TensorProto.INT64, [1, 2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 8
    path = tmp_path / "pool1d.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "model", "run", str(path), "--ep", "cpu",
                        "--reading", "dml-ep", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    attribution = json.loads((out / "model_result.json").read_text())["attribution"]
    assert attribution["reading"] == "dml-ep"
    assert [(n["node"], n["desc_type"], n["status"]) for n in attribution["nodes"]] == [
        ("pool", "DML_OPERATOR_MAX_POOLING2", "match")]
