"""What ONNX Runtime's WebGPU EP will do with a case's operator node, predicted from its public source.

Nothing here was observed on WebGPU by this module: every prediction names the source line it rests
on, and ``harness/expectations/webgpu.json`` turns the predictions into expectations that a real run
(the ``onnxruntime-ep-webgpu`` plugin, or the ``onnxruntime-webgpu`` wheel) confirms (``known``) or
refutes (``fixed``). Only the operator nodes are predicted (MaxPool, RoiAlign, MaxRoiPool): the
helper nodes a mapper adds decide no verdict.

Source: microsoft/onnxruntime, ``onnxruntime/core/providers/webgpu/`` (commits in the URLs below):

- ``nn/pool.cc`` L28-L50, L61-L70: MaxPool is registered for opsets 1-7, 8-9, 10, 11 and 12+, with
  ``T`` in ``WebGpuSupportedFloatTypes()`` (float and float16 only: ``webgpu_supported_types.h``
  L18-L21, L36-L39) and, from opset 8, ``I`` (the Indices output) as int64. Any other input type
  has no WebGPU kernel: the node is ``declined`` (CPU fallback is refused, so ``not-on-ep``).
- ``nn/pool.cc`` L226: ``Pool::ComputeInternal`` returns an error when the node has a second
  output ("The Indices output is not supported yet."): the kernel claims the node at session
  creation and refuses it when run (``refused``: the case fails with that message).
- ``nn/pool.cc`` L87-L97: the max-pool shader starts every window at ``f16(-65504)`` (float16) or
  ``f32(lowest float)`` (float32) and takes ``max(value, x)``; a window whose every element is
  -inf therefore yields that finite number where DirectML (and the reference) give -inf
  (``diverges``, predicted only for a case whose expected output holds such a window).
- ``webgpu_execution_provider.cc`` (its list of kernel classes): no RoiAlign and no MaxRoiPool
  kernel at any opset (``declined``).

``predict_case(case)`` answers for a catalog case (each prediction a dict: ``node``, ``op_type``,
``field``, ``kind``, ``value``, ``reason``, ``source``).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import onnx
from onnx import TensorProto as T

from ...graphs import to_onnx
from ...reference import execute

_COMMIT = "https://github.com/microsoft/onnxruntime/blob/{}/onnxruntime/core/providers/webgpu/"
POOL = _COMMIT.format("8b77e058e5a9e82e20a0b50de9618ec70f1faee4") + "nn/pool.cc"
TYPES = _COMMIT.format("096943e5bc878a35cba7eccd3d8ee01e0b84396f") + "webgpu_supported_types.h#L18-L21"
KERNELS = _COMMIT.format("003f772b21abba32d4310f97b4c8e8035beacf4f") + "webgpu_execution_provider.cc"

#: MaxPool's ``T`` on WebGPU (WebGpuSupportedFloatTypes).
FLOAT_TYPES = frozenset({T.FLOAT, T.FLOAT16})
#: Where each window of the max-pool shader starts (pool.cc L87-L94), by input type.
WINDOW_START: dict[int, float] = {T.FLOAT16: -65504.0, T.FLOAT: float(np.finfo(np.float32).min)}
#: Operator node types the WebGPU EP has no kernel for.
NO_KERNEL = ("RoiAlign", "MaxRoiPool")


def _prediction(node: onnx.NodeProto, field: str, kind: str, value: Any, reason: str, source: str) -> dict:
    """One prediction (module docstring)."""
    return {"node": node.name, "op_type": node.op_type, "field": field, "kind": kind, "value": value,
            "reason": reason, "source": source}


def _input_type(model: onnx.ModelProto, name: str) -> int | None:
    """The element type of value ``name`` of ``model`` (graph input, value info or output), if known."""
    graph = onnx.shape_inference.infer_shapes(model).graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        if value.name == name:
            return value.type.tensor_type.elem_type
    return None


def predict_node(model: onnx.ModelProto, node: onnx.NodeProto) -> list[dict]:
    """What the WebGPU EP does with one operator node: ``declined`` (no kernel for its type or
    op), ``refused`` (the Indices output), or nothing predicted."""
    if node.op_type in NO_KERNEL:
        return [_prediction(node, node.op_type, "declined", node.op_type,
                            f"the WebGPU EP registers no {node.op_type} kernel", KERNELS)]
    if node.op_type != "MaxPool":
        return []
    dtype = _input_type(model, node.input[0])
    if dtype is not None and dtype not in FLOAT_TYPES:
        return [_prediction(node, "T", "declined", T.DataType.Name(dtype),
                            "the WebGPU EP registers MaxPool for float and float16 only", POOL + "#L61-L70")]
    if len(node.output) > 1 and node.output[1]:
        return [_prediction(node, "Indices", "refused", "int64",
                            "the WebGPU EP's MaxPool kernel takes the node, then returns an error when it runs: "
                            "\"The Indices output is not supported yet.\"", POOL + "#L226")]
    return []


def window_predictions(model: onnx.ModelProto, node: onnx.NodeProto, expected: Iterable[np.ndarray]) -> list[dict]:
    """``diverges`` when a float MaxPool's expected output holds -inf: the shader's window starts
    at a finite number and stays there for a window of -inf only."""
    dtype = _input_type(model, node.input[0])
    if dtype is None or dtype not in WINDOW_START or not any(np.isneginf(np.asarray(v, dtype=np.float64)).any()
                                           for v in expected if np.issubdtype(np.asarray(v).dtype, np.floating)):
        return []
    return [_prediction(node, "WindowStart", "diverges", WINDOW_START[dtype],
                        f"the WebGPU max-pool shader starts each window at {WINDOW_START[dtype]:g}, so a window of "
                        "-inf only returns that finite number instead of -inf", POOL + "#L87-L97")]


def predict_case(case: Any) -> list[dict]:
    """Every prediction for a catalog case's operator nodes; empty when it has no model (inexpressible)
    or cannot be mapped (the run itself reports that)."""
    try:
        mapping = to_onnx(case.desc, opset=getattr(case, "opset", None))
    except Exception:  # the run reports a mapper error; nothing to predict
        return []
    if mapping.model is None:
        return []
    nodes = [n for n in mapping.model.graph.node if n.name in set(mapping.op_nodes)]
    found = [p for node in nodes for p in predict_node(mapping.model, node)]
    if not found and any(n.op_type == "MaxPool" for n in nodes):
        try:
            expected = execute(case.desc, case.inputs()).values()
        except Exception:  # the reference refuses the case: the run says so
            return found
        found = [p for node in nodes if node.op_type == "MaxPool"
                 for p in window_predictions(mapping.model, node, expected)]
    return found


__all__ = ["FLOAT_TYPES", "NO_KERNEL", "WINDOW_START", "predict_case", "predict_node", "window_predictions"]
