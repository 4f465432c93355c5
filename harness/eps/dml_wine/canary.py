"""The canary: one case whose every output is known and non-zero, run on the DirectML host
before anything is judged.

Stock Wine 8 carries vkd3d 1.6 inside ``wined3d.dll``: DirectML's sessions build and ``Run``
returns success, but vkd3d rejects the dispatches ("Invalid heap for base descriptor") and every
output stays zero. A run on such a host would report every case as a DirectML failure, so
``doctor`` and ``run`` refuse the host instead (``check``), naming vkd3d and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto, helper

from .host import EMULATION_SIGNATURES, SETUP_COMMAND, DmlWineHost

#: A 1x1x4x4 input of 1..16 and a 2x2, stride-2 MaxPool: the outputs are the window maxima
#: 6, 8, 14, 16 (every one non-zero, every one different) and their flat indices 5, 7, 13, 15.
CANARY_INPUT = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
CANARY_OUTPUT = np.array([[[[6, 8], [14, 16]]]], dtype=np.float32)
CANARY_INDICES = np.array([[[[5, 7], [13, 15]]]], dtype=np.int64)


def canary_model() -> bytes:
    """The canary's one-node model (IR 8, opset 12: any ONNX Runtime loads it)."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1, 2, 2])
    i = helper.make_tensor_value_info("I", TensorProto.INT64, [1, 1, 2, 2])
    node = helper.make_node("MaxPool", ["X"], ["Y", "I"], name="canary", kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph([node], "ep-testbed-canary", [x], [y, i])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], producer_name="ep-testbed")
    model.ir_version = 8
    return model.SerializeToString()


@dataclass
class CanaryResult:
    """``ok`` when DirectML computed the canary exactly; ``message`` says what it returned and, when
    not ok, why that happens and what to do."""

    ok: bool
    message: str
    outputs: dict[str, np.ndarray] = field(default_factory=dict)


def check(host: DmlWineHost, vkd3d: str, *, shared_device: bool = False) -> CanaryResult:
    """Run the canary on ``host``'s DirectML EP and compare it bit for bit with the known answer.
    ``vkd3d`` names the vkd3d in use, for the message (e.g. "1.14 (native DLLs of the set-up)")."""
    run = host.run(canary_model(), {"X": CANARY_INPUT}, shared_device=shared_device)
    if run.error_stage is not None:
        notes = "; ".join(run.emulation_notes[:2])
        return CanaryResult(False, f"the DirectML host could not run the canary MaxPool ({run.error_stage}: "
                                   f"{run.error_message.strip().splitlines()[0] if run.error_message else '?'})"
                                   + (f"; vkd3d said: {notes}" if notes else "") + f". Fix: `{SETUP_COMMAND}`")
    got = run.named()
    y, i = got.get("Y"), got.get("I")
    if y is not None and i is not None and np.array_equal(y, CANARY_OUTPUT) and np.array_equal(i, CANARY_INDICES):
        return CanaryResult(True, f"canary MaxPool exact on DirectML ({CANARY_OUTPUT.ravel().tolist()})", got)
    shown = "nothing" if y is None else np.asarray(y).ravel().tolist()
    zeros = y is not None and not np.any(y)
    why = (f"all zeros while ONNX Runtime reported success: vkd3d {vkd3d} rejects DirectML's dispatches"
           if zeros else f"wrong values under vkd3d {vkd3d}")
    seen = [s for s in EMULATION_SIGNATURES if s in run.stderr]
    return CanaryResult(False, f"the DirectML host computes wrong results: the canary MaxPool (expected "
                               f"{CANARY_OUTPUT.ravel().tolist()}) returned {shown}, {why}"
                               + (f" (vkd3d: {seen[0]!r})" if seen else "")
                               + ". Stock Wine 8 carries vkd3d 1.6 inside wined3d.dll, which does this; "
                               f"fix: `{SETUP_COMMAND}` (it puts vkd3d 1.14's DLLs beside the host, loaded "
                               "as native)", got)


__all__ = ["CANARY_INDICES", "CANARY_INPUT", "CANARY_OUTPUT", "CanaryResult", "canary_model", "check"]
