"""A toy EP, registered through the EP registry alone (nothing else in the testbed is edited):
``--ep toy``, ONNX Runtime's CPU EP held under another name, ``ToyExecutionProvider``.

Its adapter (``ToyAdapter``) builds its sessions itself (``holds_sessions``), on the CPU EP in this
process, and gives back where each node ran under the toy's name: so a case proven on the CPU EP is
proven on the toy, and every verdict is the CPU EP's. It is a test's toy, labelled so on every
command's first line (the record's ``label``); no result of it is a result of any EP but the CPU EP.

Its record (``RECORD``) fills every field of ``harness.eps.registry.EpRecord``: a default of one
worker and two cases a session, the ``onnxruntime-kernels`` class (it runs ONNX Runtime's own
kernels, so the causes ``shared.json`` writes for that class apply), a predictor, a device-loss
pattern, its own identity reader and preflight check, an error code's meaning, and devices its
adapter lists. Importing this module registers it; worker processes import it when they hold the
toy (the spec names this module, ``EpSpec.adapter_module``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import onnx

from ep_testbed.harness.eps.ep_run import EpRun, SessionError
from ep_testbed.harness.eps.holders import EpAdapter
from ep_testbed.harness.eps.registry import EpRecord, LossPattern, register
from ep_testbed.harness.eps.session import run_on_ep
from ep_testbed.harness.eps.spec import EpSpec, SessionSettings

NAME = "toy"
PROVIDER = "ToyExecutionProvider"
CPU = EpSpec("CPUExecutionProvider", "cpu")
#: What the toy's identity reader records (its device is the CPU, which ONNX Runtime lists under the CPU EP).
NOTE = "the toy EP is the CPU EP under another name"
#: The toy's words for a lost device, and an error code whose meaning ``doctor`` adds.
LOST = "TOY_DEVICE_GONE"
CODE, MEANING = "70Y0C0DE", "TOY_ERROR: the toy's own error code"
#: The field the toy's predictor names for every MaxPool node.
PREDICTED_FIELD = "ToyWindow"


class ToyAdapter(EpAdapter):
    """Holds ``--ep toy``: sessions on the CPU EP, their placement given back under the toy's name."""

    holder = NAME
    holds_sessions = True

    def describe(self) -> dict[str, Any]:
        """How the toy is held: its own adapter, wrapping the CPU EP."""
        return {"holder": NAME, "wraps": CPU.provider}

    def found(self) -> str:
        """The preflight's line for the toy."""
        return f"{PROVIDER} is available (a toy: the CPU EP under another name)"

    def run_session(self, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], settings: SessionSettings, *,
                    allow_fallback: bool = False, profile: bool = True, quiet: bool = False,
                    initializers: Mapping[str, np.ndarray] | None = None) -> EpRun:
        """The session on the CPU EP, with each node the CPU EP ran named as the toy's."""
        try:
            run = run_on_ep(model, feeds, CPU, settings, allow_fallback=allow_fallback, profile=profile, quiet=quiet,
                            initializers=initializers)
        except SessionError as exc:
            raise SessionError(exc.stage, PROVIDER, exc.cause) from None
        run.placement = {node: PROVIDER if where == CPU.provider else where for node, where in run.placement.items()}
        return run

    def hosted_devices(self) -> list[dict[str, Any]]:
        """The toy's one device, as its own listing names it."""
        return [{"index": 0, "description": "the CPU, under the toy's name", "chosen": True}]

    def hosted_words(self, devices: list[dict[str, Any]]) -> list[str]:
        """``ep-testbed devices``' lines for the toy's devices."""
        return [f"{PROVIDER} (a toy EP) lists {len(devices)} device(s):",
                *(f"  {d['index']}: {d['description']}" for d in devices)]


def identity(spec: EpSpec, ort: dict[str, str]) -> dict[str, Any]:
    """The toy's device record: nothing read, and why."""
    return {"source": "none", "adapter": None, "onnxruntime": ort, "note": NOTE}


def preflight(result: Any, spec: EpSpec, read: Callable[[], dict[str, Any]]) -> bool:
    """The toy's own check: it reads the device record and says so."""
    result.gpu = read()
    return result.add("ok", "the toy's own preflight check ran")


def predict(case: Any) -> list[dict[str, Any]]:
    """A prediction for every max_pooling2 case (the toy "computes" a window of its own)."""
    if not str(getattr(case, "id", "")).startswith("max_pooling2/"):
        return []
    return [{"node": "pool", "op_type": "MaxPool", "field": PREDICTED_FIELD, "kind": "diverges", "value": 0,
             "reason": "a toy prediction", "source": __file__}]


RECORD = register(EpRecord(
    NAME, PROVIDER, adapter=ToyAdapter, default_jobs=1, default_batch=2, classes=("onnxruntime-kernels",),
    predictor=predict, device_loss=(LossPattern(LOST, "the toy's device was lost (a test's words)", __file__),),
    identity=identity, preflight=preflight, error_meanings={CODE: MEANING},
    label="a toy: the CPU EP under another name, not a result of any other EP"))
