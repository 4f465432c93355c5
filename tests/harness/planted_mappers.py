"""Mappers with planted helper nodes, for the attribution tests (``CaseConfig.mapper`` seam).

Each wraps ``graphs.to_onnx`` and adds helper nodes that the default mapper never emits, so
that a case fails on the CPU EP for a reason outside the operator:

- ``tf32_rois``: the ROI table goes through ``Cast`` to float16 and back before RoiAlign,
  rounding every coordinate to 10 mantissa bits: what the CUDA EP's TF32 MatMul did to the
  ROI rewrite on an H100 (float16 keeps 10 mantissa bits, as TF32 does);
- ``half_output``: the operator's output goes through the same pair after it
  (``half_output_float32``: only for a float32 desc that ONNX can express);
- ``fewer_samples``: the RoiAlign node takes one sample per bin where the desc asks for more,
  with no helper at all (a wrong composition).

Workers import this module by name: it must stay importable from ``tests/harness``.
"""

from __future__ import annotations

from onnx import TensorProto, helper

from ep_testbed.graphs import to_onnx


def _rounding_pair(mapping, tensor: str, hint: str) -> tuple[list, str]:
    """Two Cast nodes that round ``tensor`` to float16 and widen it back, and their output."""
    narrow = helper.make_node("Cast", [tensor], [f"{hint}_half"], name=f"Cast_{hint}_ToHalf", to=TensorProto.FLOAT16)
    wide = helper.make_node("Cast", [f"{hint}_half"], [f"{hint}_rounded"], name=f"Cast_{hint}_ToFloat",
                            to=TensorProto.FLOAT)
    mapping.helper_nodes += [narrow.name, wide.name]
    return [narrow, wide], f"{hint}_rounded"


def tf32_rois(desc, opset=None):
    """``graphs.to_onnx`` with the ROI table rounded to 10 mantissa bits before RoiAlign."""
    mapping = to_onnx(desc, opset)
    graph = mapping.model.graph
    nodes, rounded = _rounding_pair(mapping, "ROITensor", "ROIs")
    for node in graph.node:
        renamed = [rounded if name == "ROITensor" else name for name in node.input]
        del node.input[:]
        node.input.extend(renamed)
    existing = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + existing)
    return mapping


def half_output(desc, opset=None):
    """``graphs.to_onnx`` with the operator's output rounded to float16 and widened back."""
    mapping = to_onnx(desc, opset)
    graph = mapping.model.graph
    last = next(n for n in graph.node if "OutputTensor" in n.output)
    renamed = ["OutputTensor_exact" if o == "OutputTensor" else o for o in last.output]
    del last.output[:]
    last.output.extend(renamed)
    nodes, rounded = _rounding_pair(mapping, "OutputTensor_exact", "Output")
    del nodes[1].output[:]
    nodes[1].output.append("OutputTensor")
    graph.node.extend(nodes)
    return mapping


def fewer_samples(desc, opset=None):
    """``graphs.to_onnx`` with the RoiAlign node's sampling_ratio set to 1."""
    mapping = to_onnx(desc, opset)
    for node in mapping.model.graph.node:
        for attr in node.attribute:
            if node.op_type == "RoiAlign" and attr.name == "sampling_ratio":
                attr.i = 1
    return mapping


def half_output_float32(desc, opset=None):
    """``half_output`` for an expressible desc of float32 tensors; ``graphs.to_onnx`` unchanged
    for any other (an inexpressible desc stays inexpressible, a float16 output has nothing to
    lose): every float32 case fails the same way, in OutputTensor, number -> number."""
    mapping = to_onnx(desc, opset)
    if mapping.model is None or desc.input_tensor.data_type != "FLOAT32":
        return mapping
    return half_output(desc, opset)
