"""What the installed ONNX Runtime accepts: the newest IR version and opset, probed once.

ONNX Runtime refuses models whose IR version is newer than the onnx it was built with, and
``onnx.helper.make_model`` stamps the newest IR the *installed onnx* knows; no API reports
ONNX Runtime's limit. So we ask it: build a one-node model per candidate IR version (newest
first) and keep the first one a CPU session accepts. Likewise for the default-domain opset.
These are the only sessions ``graphs`` ever creates.
"""

from __future__ import annotations

import functools

import onnx
from onnx import TensorProto, helper

#: The oldest opset the shared graph builder is used with; a mapper module that needs a newer one
#: says so (``OLDEST_OPSET``, ``graphs.common.oldest_opset``): MaxPool's Indices output needs 8.
MIN_OPSET = 8
#: The opset ``to_onnx`` uses unless told otherwise: RoiAlign-16 (coordinate_transformation_mode),
#: MaxPool-12 (int8/uint8, dilations), MaxRoiPool-1 all resolve at 16.
DEFAULT_OPSET = 16


def _identity_model(ir_version: int, opset: int) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model.SerializeToString()


def _loads(model: bytes) -> bool:
    import onnxruntime as ort  # only when probing: importing graphs must not load onnxruntime

    options = ort.SessionOptions()
    options.log_severity_level = 4
    # a one-node probe needs no thread pool: without one it starts no thread, so a limit on
    # threads (a cgroup's pids.max) cannot make a version it accepts look refused
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    try:
        ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any refusal means "not this version"
        return False
    return True


@functools.lru_cache(maxsize=None)
def max_ir_version() -> int:
    """The newest ONNX IR version the installed onnxruntime loads (probed once per process)."""
    for ir in range(onnx.IR_VERSION, 6, -1):
        if _loads(_identity_model(ir, 13)):
            return ir
    raise RuntimeError("the installed onnxruntime loads no IR version >= 7; is it installed correctly?")


@functools.lru_cache(maxsize=None)
def max_opset() -> int:
    """The newest default-domain opset both the installed onnx and onnxruntime support."""
    ir = max_ir_version()
    for opset in range(onnx.defs.onnx_opset_version(), DEFAULT_OPSET - 1, -1):
        if _loads(_identity_model(ir, opset)):
            return opset
    return DEFAULT_OPSET
