"""Shared pieces of the model-run tests: the bundled models on disk, the CLI, a record of opened files."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import onnx

from ep_testbed.graphs.models import DEMO_SHAPES, write_demo_models
from ep_testbed.harness.cli import main

#: Paths opened (by any Python-level open: builtins.open, io.open, os.open, pathlib) while recording.
OPENED: list[str] = []
_RECORDING = [False]


def _audit(event: str, args: tuple) -> None:
    if _RECORDING[0] and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = args[0]
        OPENED.append(os.fsdecode(path) if not isinstance(path, str) else path)


sys.addaudithook(_audit)  # audit hooks cannot be removed; this one only records while _RECORDING is set


class recording_opens:
    """``with recording_opens() as opened:`` lists every path Python opened inside the block."""

    def __enter__(self) -> list[str]:
        OPENED.clear()
        _RECORDING[0] = True
        return OPENED

    def __exit__(self, *exc) -> None:
        _RECORDING[0] = False


def demo_models(folder: Path) -> dict[str, Path]:
    return write_demo_models(folder)


def shape_args(name: str) -> list[str]:
    return [arg for k, v in DEMO_SHAPES[name].items() for arg in ("--shape", f"{k}={v}")]


def run_cli(argv: list[str], capsys, isolated: bool = False) -> tuple[int, str, str]:
    """``ep-testbed ARGV`` in this process: ``(exit code, stdout, stderr)``. ``model run`` runs in
    this process too (``--in-process``, so that a test sees what it opens and what it patches),
    unless ``isolated`` or ``--timeout`` asks for the default child process."""
    if argv[:2] == ["model", "run"] and not isolated and "--timeout" not in argv and "--in-process" not in argv:
        argv = [*argv[:3], "--in-process", *argv[3:]]
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def result_of(out_dir: Path) -> dict:
    return json.loads((Path(out_dir) / "model_result.json").read_text())


def with_node_attribute(model: onnx.ModelProto, node_name: str, **attrs) -> onnx.ModelProto:
    """A copy of ``model`` with some attributes of one node replaced (or added)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    node = next(n for n in copy.graph.node if n.name == node_name)
    keep = [a for a in node.attribute if a.name not in attrs]
    del node.attribute[:]
    node.attribute.extend(keep)
    node.attribute.extend(onnx.helper.make_attribute(k, v) for k, v in attrs.items())
    return copy


def roi_pool_model(spatial_scale: float = 0.5) -> onnx.ModelProto:
    """image [1, 4, 16, 16] -> Relu -> MaxRoiPool(rois [num_rois, 5], pooled 3x3) -> pooled (not bundled)."""
    import numpy as np

    from ep_testbed.graphs.builder import GraphBuilder
    from ep_testbed.graphs.runtime import DEFAULT_OPSET

    b = GraphBuilder("roi_pool")
    image = b.input("image", np.float32, [1, 4, 16, 16])
    rois = b.input("rois", np.float32, ["num_rois", 5])
    relu = b.node("Relu", [image], role="helper", name="relu1", outputs=["relu1_out"])[0]
    b.node("MaxRoiPool", [relu, rois], role="op", name="roi_pool1", outputs=["pooled"], pooled_shape=[3, 3],
           spatial_scale=spatial_scale)
    b.output("pooled", np.float32, ["num_rois", 4, 3, 3])
    return b.model(DEFAULT_OPSET)


def control_flow_model() -> onnx.ModelProto:
    """x [1, 2, 8, 8], use_pool (bool) -> y: a top-level MaxPool, one in an If's then_branch and
    one in a Loop body (2 iterations), so attribution meets nodes it cannot capture."""
    from onnx import TensorProto as T
    from onnx import helper as h

    def value(name, elem=T.FLOAT, shape=(1, 2, 8, 8)):
        return h.make_tensor_value_info(name, elem, list(shape))

    pool = {"kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 1, 1]}
    then_g = h.make_graph([h.make_node("MaxPool", ["x"], ["t"], name="pool_in_then", **pool)], "then", [],
                          [value("t")])
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["e"], name="id_else")], "else", [], [value("e")])
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"], name="id_cond"),
                         h.make_node("MaxPool", ["v_in"], ["v_out"], name="pool_in_loop", kernel_shape=[3, 3],
                                     strides=[1, 1], pads=[1, 1, 1, 1])],
                        "body", [value("i", T.INT64, ()), value("cond_in", T.BOOL, ()), value("v_in")],
                        [value("cond_out", T.BOOL, ()), value("v_out")])
    nodes = [h.make_node("MaxPool", ["x"], ["p"], name="pool_top", **pool),
             h.make_node("If", ["use_pool"], ["branch"], name="if1", then_branch=then_g, else_branch=else_g),
             h.make_node("Constant", [], ["trip"], name="trip", value=h.make_tensor("trip", T.INT64, [], [2])),
             h.make_node("Constant", [], ["true"], name="true", value=h.make_tensor("true", T.BOOL, [], [True])),
             h.make_node("Loop", ["trip", "true", "p"], ["looped"], name="loop1", body=body),
             h.make_node("Add", ["branch", "looped"], ["y"], name="add1")]
    graph = h.make_graph(nodes, "control_flow", [value("x"), value("use_pool", T.BOOL, ())], [value("y")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
