"""Small cases for the harness tests, independent of the graphs catalog.

``LocalCase`` follows ``graphs.catalog.Case``'s contract (id, op, desc, seed, opset, tags,
inputs()); ``to_onnx`` is a deliberately tiny stand-in for ``graphs.to_onnx`` that handles only
what these tests need: MAX_POOLING2 with UINT64 indices as one MaxPool-12 node. Workers import
this module by name, so it must stay importable from ``tests/harness`` (the tests put that
folder on the workers' PYTHONPATH).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ep_testbed.graphs.flags import Flag
from ep_testbed.reference import MaxPooling2Desc, TensorDesc

HERE = __file__.rsplit("/", 1)[0]
MAPPER = "local_cases:to_onnx"


@dataclass(frozen=True)
class LocalCase:
    id: str
    desc: Any
    seed: int = 0
    opset: int | None = None
    tags: dict = field(default_factory=dict)
    ties: bool = False            # integer-valued inputs drawn from a tiny range: many equal maxima

    @property
    def op(self) -> str:
        return self.desc.TYPE

    def inputs(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        shape = self.desc.input_tensor.sizes
        x = rng.integers(0, 3, size=shape) if self.ties else rng.standard_normal(shape)
        return {"InputTensor": x.astype(np.float32)}


def max_pool_case(case_id: str, shape=(1, 2, 6, 6), window=(2, 2), strides=(2, 2), seed=0, ties=False,
                  indices=True) -> LocalCase:
    out = [shape[0], shape[1]] + [(shape[i + 2] - window[i]) // strides[i] + 1 for i in range(2)]
    desc = MaxPooling2Desc(
        input_tensor=TensorDesc("FLOAT32", tuple(shape)), output_tensor=TensorDesc("FLOAT32", tuple(out)),
        output_indices_tensor=TensorDesc("UINT64", tuple(out)) if indices else None, dimension_count=2,
        strides=tuple(strides), window_size=tuple(window), start_padding=(0, 0), end_padding=(0, 0),
        dilations=(1, 1))
    return LocalCase(case_id, desc, seed, None, {"dtype": "FLOAT32", "family": "local"}, ties)


class LocalMapping:
    def __init__(self, desc: MaxPooling2Desc, inexpressible: bool = False):
        self.flags = [Flag("WindowSize", list(desc.window_size), "exact", "kernel_shape")]
        if inexpressible:
            self.flags.append(Flag("Test", 1, "inexpressible", "a test flag: ONNX cannot express this"))
        self.expressible = not inexpressible
        self.op_nodes = ["pool"]
        self.helper_nodes: list[str] = []
        with_indices = desc.output_indices_tensor is not None
        outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(desc.output_tensor.sizes))]
        if with_indices:
            outputs.append(helper.make_tensor_value_info("I", TensorProto.INT64, list(desc.output_tensor.sizes)))
        node = helper.make_node("MaxPool", ["X"], ["Y", "I"] if with_indices else ["Y"], name="pool",
                                kernel_shape=list(desc.window_size), strides=list(desc.strides))
        graph = helper.make_graph(
            [node], "local", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(desc.input_tensor.sizes))],
            outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        self.model = None if inexpressible else model
        self.with_indices = with_indices

    def feeds(self, tensors):
        return {"X": tensors["InputTensor"]}

    def outputs(self, onnx_outputs):
        result = {"OutputTensor": np.asarray(onnx_outputs[0])}
        if self.with_indices:
            result["OutputIndicesTensor"] = np.asarray(onnx_outputs[1]).astype(np.uint64)
        return result


def to_onnx(desc, opset=None):
    return LocalMapping(desc)


def to_onnx_inexpressible_if_3x3(desc, opset=None):
    """A mapper that calls 3x3 windows inexpressible (to test the inexpressible path)."""
    return LocalMapping(desc, inexpressible=tuple(desc.window_size) == (3, 3))


def to_onnx_wrong_indices(desc, opset=None):
    """A mapper whose read-back shifts every index by one: a stand-in for an EP with wrong indices."""
    mapping = LocalMapping(desc)
    plain = mapping.outputs

    def shifted(onnx_outputs):
        out = plain(onnx_outputs)
        out["OutputIndicesTensor"] = out["OutputIndicesTensor"] + np.uint64(1)
        return out

    mapping.outputs = shifted
    return mapping


def build_catalog(ops=None, seed=0, count=12):
    """A small catalog of MaxPool cases with the catalog's signature (for CLI tests)."""
    cases = []
    for i in range(count):
        window = (3, 3) if i % 3 == 2 else (2, 2)
        cases.append(max_pool_case(f"max_pooling2/local-w{window[0]}-{i:02d}", shape=(1, 2, 7, 7), window=window,
                                   strides=(1, 1) if i % 2 else (2, 2), seed=seed * 1000 + i, ties=bool(i % 2)))
    return cases


def to_onnx_identity_op(desc, opset=None):
    """A mapper whose op nodes include an Identity in front of the MaxPool: ONNX Runtime's graph
    optimizations (``--graph-opt``) remove that node, so its placement cannot be proven and the
    case is ``not-on-ep``; without them it runs and passes. The outcome depends on the flag."""
    mapping = LocalMapping(desc)
    graph = mapping.model.graph
    graph.node[0].input[0] = "X_identity"
    graph.node.insert(0, helper.make_node("Identity", ["X"], ["X_identity"], name="identity"))
    onnx.checker.check_model(mapping.model)
    mapping.op_nodes = ["identity", "pool"]
    return mapping
