"""Which execution provider a run targets, the session settings it needs, and what is installed.

``resolve_ep("dml")`` turns a command-line alias or a full provider name into an ``EpSpec``,
checked against ``onnxruntime.get_available_providers()``; the spec, the session settings and
``session_options`` (see its docstring for every setting and why) are ``harness.eps.spec``'s,
re-exported here.
"""

from __future__ import annotations

import sys

from ep_testbed.harness.core.installed import ort_flavour, ort_version

from .spec import (
    DML_DISABLE_GRAPH_FUSION,
    EpNotAvailable,
    EpSpec,
    SessionSettings,
    config_entries,
    parse_provider_options,
    providers_arg,
    session_options,
)

#: Command-line alias -> ONNX Runtime provider name. Any other full provider name is accepted as is.
ALIASES: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "dml": "DmlExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
}


#: What a DirectML request off Windows is told (``resolve_ep``, the preflight of ``run``, ``doctor``).
DML_WINE_HINT = ("; on Linux, --ep dml-wine runs ONNX Runtime's real DirectML EP (DirectML.dll and onnxruntime.dll "
                 "of onnxruntime-directml) under Wine on an emulated device: set it up with `bash tools/dml-wine.sh`, "
                 "then `ep-testbed doctor --ep dml-wine` (DirectML's own algorithms, never a hardware result)")


def alias_of(provider: str) -> str:
    """The short alias of a provider name (``DmlExecutionProvider`` -> ``dml``)."""
    for alias, name in ALIASES.items():
        if name == provider:
            return alias
    return provider.removesuffix("ExecutionProvider").lower() or provider


def resolve_ep(name: str, options: dict[str, str] | None = None,
               available: list[str] | None = None) -> EpSpec:
    """The ``EpSpec`` for ``name`` (an alias from ``ALIASES`` or a full provider name).

    Raises ``EpNotAvailable`` naming the installed providers (and the wheel that would bring
    the requested one) when this ONNX Runtime does not have it.
    """
    if available is None:
        import onnxruntime  # loaded on first use: the CLI, reports and diffs start without it

        available = list(onnxruntime.get_available_providers())
    key = name.strip()
    provider = ALIASES.get(key.lower(), key)
    if provider not in available:
        by_lower = {p.lower(): p for p in available}
        provider = by_lower.get(provider.lower(), provider)
    if provider not in available:
        hint = {
            "DmlExecutionProvider": " (install the onnxruntime-directml wheel on Windows, instead of onnxruntime)"
                                    + ("" if sys.platform == "win32" else DML_WINE_HINT),
            "OpenVINOExecutionProvider": " (install onnxruntime-openvino, instead of onnxruntime)",
            "CUDAExecutionProvider": " (install onnxruntime-gpu, instead of onnxruntime)",
        }.get(provider, "")
        raise EpNotAvailable(
            f"--ep {name}: {provider} is not available in this ONNX Runtime "
            f"({ort_flavour()} {ort_version()}){hint}. Installed providers: {', '.join(available)}. "
            f"Aliases: {', '.join(f'{a}={p}' for a, p in ALIASES.items())}.")
    return EpSpec(provider=provider, alias=alias_of(provider), options=dict(options or {}))


#: EPs whose ``device_id`` provider option is a device index: a whole number >= 0 (ONNX Runtime's
#: documented options, e.g. https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html
#: "device_id: The device ID", and TensorRT's, ROCm's and MIGraphX's pages alike). The CPU EP is
#: listed because it takes no provider options at all (ONNX Runtime drops them:
#: ``InferenceSession.get_provider_options()`` reports none back), so a ``device_id`` there is at
#: best ignored, and a negative one is a typo worth refusing. DirectML's is checked against the
#: DXGI adapters themselves, naming them (``gpu.select_adapter``); OpenVINO's (deprecated)
#: ``device_id`` is a device name string and plugin EPs define their own, so neither is here.
INDEX_DEVICE_ID = ("CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider",
                   "NvTensorRTRTXExecutionProvider", "ROCMExecutionProvider", "MIGraphXExecutionProvider")
#: The largest device index accepted (ONNX Runtime reads it into a C ``int``).
MAX_DEVICE_ID = 2**31 - 1


def check_provider_options(provider: str, options: dict[str, str]) -> None:
    """ValueError naming the option, what ``provider`` allows and what to do, for a value ONNX
    Runtime would refuse or misread, where its documentation says what is allowed (``device_id``
    of ``INDEX_DEVICE_ID``); other keys are passed on for ONNX Runtime to judge."""
    value = options.get("device_id")
    if value is None or provider not in INDEX_DEVICE_ID:
        return
    if not (value.isascii() and value.isdigit() and len(value) <= 10 and int(value) <= MAX_DEVICE_ID):
        raise ValueError(f"--ep-option device_id={value[:40]!r}: {provider} takes a device index, a whole number from 0 "
                         f"to {MAX_DEVICE_ID}.\nNote: `ep-testbed devices --ep {alias_of(provider)}` (or `ep-testbed "
                         "doctor`) lists the devices with their index")


__all__ = ["ALIASES", "DML_DISABLE_GRAPH_FUSION", "DML_WINE_HINT", "EpNotAvailable", "EpSpec", "INDEX_DEVICE_ID",
           "MAX_DEVICE_ID", "SessionSettings", "alias_of", "check_provider_options", "config_entries",
           "parse_provider_options", "providers_arg", "resolve_ep", "session_options"]
