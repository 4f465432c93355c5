"""One attributed node as a model of its own: owns ``one_node_model``, what a model run judges on
the EP under test when the whole model does not build, run, or survive there.

When the EP cannot take the whole model (OpenVINO failing on a NonMaxSuppression shape or a
Loop body, or crashing while it compiles), its nodes can still be judged one at a time: each
attributed node (``graphs.attributed_op_types()``) becomes a one-node model whose inputs are the tensors the
reference EP fed that node (graph inputs, never initializers, so that ONNX Runtime cannot fold
the node on the CPU at session creation), run on the EP under test and judged like any node.
The rows say so (``alone``): upstream EP error cannot show there, by construction.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
from onnx import helper


def one_node_model(model: onnx.ModelProto, node: onnx.NodeProto, arrays: Sequence[np.ndarray | None]
                   ) -> onnx.ModelProto:
    """``node`` alone, at ``model``'s IR version and opsets; every named input a graph input typed
    and shaped like its array in ``arrays`` (node input order), every named output a graph output."""
    inputs, seen = [], set()
    for name, array in zip(node.input, arrays):
        if name and name not in seen:
            seen.add(name)
            elem = helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype)
            inputs.append(helper.make_tensor_value_info(name, elem, list(np.asarray(array).shape)))
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    outputs = [helper.make_empty_tensor_value_info(name) for name in dict.fromkeys(node.output) if name]
    graph = helper.make_graph([copy], f"{node.name or node.op_type} alone", inputs, outputs)
    alone = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    alone.producer_name = "ep-testbed (one node of a model)"
    return alone


def node_feeds(node: onnx.NodeProto, arrays: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    """The feeds of ``one_node_model(model, node, arrays)``."""
    return {name: np.asarray(array) for name, array in zip(node.input, arrays) if name}


__all__ = ["node_feeds", "one_node_model"]
