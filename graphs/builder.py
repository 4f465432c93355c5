"""A small graph builder: named inputs, nodes, constants; finishes into a checked ModelProto."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

ONNX_TYPES: dict[np.dtype, int] = {
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
    np.dtype(np.float16): onnx.TensorProto.FLOAT16,
    np.dtype(np.float64): onnx.TensorProto.DOUBLE,
    np.dtype(np.int64): onnx.TensorProto.INT64,
    np.dtype(np.int32): onnx.TensorProto.INT32,
    np.dtype(np.int16): onnx.TensorProto.INT16,
    np.dtype(np.int8): onnx.TensorProto.INT8,
    np.dtype(np.uint64): onnx.TensorProto.UINT64,
    np.dtype(np.uint32): onnx.TensorProto.UINT32,
    np.dtype(np.uint16): onnx.TensorProto.UINT16,
    np.dtype(np.uint8): onnx.TensorProto.UINT8,
}


def onnx_type(dtype: Any) -> int:
    return ONNX_TYPES[np.dtype(dtype)]


class GraphBuilder:
    """Collects inputs, outputs, nodes and helper constants; ``op`` nodes and ``helper``
    nodes are recorded separately so that placement can be proven for the former."""

    def __init__(self, name: str):
        self.name = name
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.op_nodes: list[str] = []
        self.helper_nodes: list[str] = []
        self._count = 0

    def input(self, name: str, dtype: Any, shape: Sequence[int | str]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, onnx_type(dtype), list(shape)))
        return name

    def output(self, name: str, dtype: Any, shape: Sequence[int | str]) -> str:
        self.outputs.append(helper.make_tensor_value_info(name, onnx_type(dtype), list(shape)))
        return name

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self._fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op_type: str, inputs: Sequence[str], *, role: str, name: Optional[str] = None,
             outputs: Optional[Sequence[str]] = None, n_out: int = 1, **attrs: Any) -> list[str]:
        name = name or self._fresh(op_type)
        outputs = list(outputs) if outputs is not None else [f"{name}_out{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=name, **attrs))
        (self.op_nodes if role == "op" else self.helper_nodes).append(name)
        return outputs

    def cast(self, x: str, dtype: Any, *, output: Optional[str] = None, hint: str = "Cast") -> str:
        return self.node("Cast", [x], role="helper", name=self._fresh(hint), to=onnx_type(dtype),
                         outputs=[output] if output else None)[0]

    def reshape(self, x: str, shape: Sequence[int], *, output: Optional[str] = None, hint: str = "Reshape") -> str:
        shape_name = self.const(hint + "_shape", np.asarray(shape, dtype=np.int64))
        return self.node("Reshape", [x, shape_name], role="helper", name=self._fresh(hint),
                         outputs=[output] if output else None)[0]

    def rename(self, old: str, new: str) -> str:
        """Give the value ``old`` the name ``new`` (e.g. a graph output's DML name)."""
        for node in self.nodes:
            for seq in (node.input, node.output):
                for i, name in enumerate(seq):
                    if name == old:
                        seq[i] = new
        return new

    def model(self, opset: int) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="ep-testbed")
        # The lowest IR version the opset needs, not the newest the installed onnx knows: a model
        # written here must load in older ONNX Runtime builds too (onnxruntime-directml 1.24.4
        # loads IR <= 13), and an IR newer than the opset requires buys nothing.
        model.ir_version = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        onnx.checker.check_model(model, full_check=True)
        return model

    def _fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"
