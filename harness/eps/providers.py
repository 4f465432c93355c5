"""Which execution provider a run targets, the session settings it needs, and what is installed.

``resolve_ep("dml")`` turns a command-line alias or a full provider name into an ``EpSpec``,
checked against ``onnxruntime.get_available_providers()``; ``session_options`` builds the
``SessionOptions`` a conformance session runs with (see its docstring for every setting and
why); ``runtime_info`` describes the installed ONNX Runtime and the machine for the run header.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from ep_testbed.harness.core.installed import ort_flavour, ort_version

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

class EpNotAvailable(RuntimeError):
    """The requested execution provider is not in this ONNX Runtime build."""


@dataclass(frozen=True)
class EpSpec:
    """The execution provider under test: its ONNX Runtime name, the alias used for files, options,
    and how it is held (``holder``: the adapter of ``harness.eps.adapters`` that makes it usable).

    Plugin EPs (``holder == "plugin"``) carry the ``library`` registered with ONNX Runtime and, when
    it came from a package, that ``package`` and its ``package_version``. ``device`` is the
    ``--ep-device`` selector (None: a plugin's only device, or a built-in EP's own default). The
    spec is plain data: worker processes receive it and make the same EP usable for themselves."""

    provider: str
    alias: str
    options: dict[str, str] = field(default_factory=dict)
    holder: str = "built-in"
    library: str | None = None
    package: str | None = None
    package_version: str | None = None
    device: str | None = None

    @property
    def is_cpu(self) -> bool:
        """True for ONNX Runtime's CPU EP (which never has CPU fallback disabled)."""
        return self.provider == "CPUExecutionProvider"

    def to_json(self) -> dict[str, Any]:
        """Provider, alias and options, plus whichever of holder, library, package, package_version
        and device differ from a plain built-in EP."""
        data: dict[str, Any] = {"provider": self.provider, "alias": self.alias, "options": dict(self.options)}
        extra = {"holder": self.holder if self.holder != "built-in" else None, "library": self.library,
                 "package": self.package, "package_version": self.package_version, "device": self.device}
        data.update({k: v for k, v in extra.items() if v is not None})
        return data


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


def parse_provider_options(items: list[str] | None) -> dict[str, str]:
    """``["device_id=1", "performance_preference=high_performance"]`` -> dict; refuses items without ``=``."""
    options: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--ep-option {item!r}: expected KEY=VALUE, e.g. device_id=0")
        options[key.strip()] = value.strip()
    return options


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


#: Session config key that keeps ORT's DirectML EP from fusing its nodes (ORT >= 1.15;
#: onnxruntime/core/providers/dml/dml_session_options_config_keys.h; any value but "0" disables).
DML_DISABLE_GRAPH_FUSION = "ep.dml.disable_graph_fusion"


@dataclass(frozen=True)
class SessionSettings:
    """How conformance sessions are configured; recorded in the run header.

    ``dml_graph_fusion`` keeps DirectML graph fusion on (default off: see ``session_options``)."""

    graph_opt: bool = False
    intra_op_threads: int = 0  # 0: ONNX Runtime's default
    dml_graph_fusion: bool = False

    def to_json(self, ep: EpSpec) -> dict[str, Any]:
        """The settings as the run header records them (every session option this module sets)."""
        settings: dict[str, Any] = {
            "graph_optimization_level": "ORT_ENABLE_ALL" if self.graph_opt else "ORT_DISABLE_ALL",
            "disable_cpu_ep_fallback": not ep.is_cpu,
            "intra_op_num_threads": self.intra_op_threads,
        }
        if ep.provider == "DmlExecutionProvider":
            settings.update(enable_mem_pattern=False, execution_mode="ORT_SEQUENTIAL",
                            dml_graph_fusion=self.dml_graph_fusion)
        return settings


def session_options(ep: EpSpec, settings: SessionSettings, *, allow_fallback: bool = False,
                    profile_prefix: str | None = None) -> Any:
    """The ``onnxruntime.SessionOptions`` of a conformance session on ``ep``.

    - graph optimizations off unless ``settings.graph_opt``: no fusion or constant folding
      may replace the node under test;
    - for every EP but CPU, ``session.disable_cpu_ep_fallback = 1`` (unless ``allow_fallback``,
      used only to diagnose which node an EP refused): session creation fails instead of
      silently running a node on the CPU EP;
    - ``session.record_ep_graph_assignment_info = 1`` so the node -> EP assignment can be read
      back (ONNX Runtime versions without it ignore the key; profiling is used then);
    - DirectML: graph fusion off (``ep.dml.disable_graph_fusion = 1``) unless
      ``settings.dml_graph_fusion``: ORT applies DmlGraphFusionTransformer whatever the
      optimization level (inference_session.cc, "ignores the ORT graph optimization level"),
      compiling even a single node into ``DmlFusedNode_<p>_<i>``, so the profiling trace would
      never name the node under test; memory pattern off and sequential execution (ORT forces
      both for DirectML itself since 1.5, RegisterExecutionProvider; set here for clarity);
    - profiling on when ``profile_prefix`` is given (the per-node records carry the provider).
    """
    import onnxruntime as ort  # loaded on first use: the CLI, reports and diffs start without it

    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if settings.graph_opt
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.log_severity_level = 3  # errors only; the failure text reaches us through the exception
    if settings.intra_op_threads:
        so.intra_op_num_threads = settings.intra_op_threads
    for key, value in config_entries(ep, settings, allow_fallback=allow_fallback).items():
        so.add_session_config_entry(key, value)
    if ep.provider == "DmlExecutionProvider":
        so.enable_mem_pattern = False
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return so


def config_entries(ep: EpSpec, settings: SessionSettings, *, allow_fallback: bool = False) -> dict[str, str]:
    """The session config entries of a conformance session on ``ep`` (``session_options`` says why
    each is there); an EP whose sessions are built in another process is sent exactly these."""
    entries = {}
    if not ep.is_cpu and not allow_fallback:
        entries["session.disable_cpu_ep_fallback"] = "1"
    entries["session.record_ep_graph_assignment_info"] = "1"
    if ep.provider == "DmlExecutionProvider" and not settings.dml_graph_fusion:
        entries[DML_DISABLE_GRAPH_FUSION] = "1"
    return entries


def providers_arg(ep: EpSpec) -> list[Any]:
    """The ``providers=`` argument: only the EP under test (listing CPU too would conflict with
    ``disable_cpu_ep_fallback``; ONNX Runtime adds the CPU EP itself)."""
    return [(ep.provider, dict(ep.options))] if ep.options else [ep.provider]
