"""What names the EP under test and how its sessions are configured: plain data every process shares.

``EpSpec`` is the execution provider a run targets (its ONNX Runtime name, the alias files use,
its options and how it is held), ``EpNotAvailable`` the one-line refusal of an EP this process
cannot use, ``parse_provider_options`` reads ``--ep-option`` items, and ``session_options`` /
``config_entries`` / ``providers_arg`` build what a conformance session runs with (see
``session_options`` for every setting and why). Nothing here knows which EPs exist: that is the
EP registry's (``harness.eps.registry``); ``harness.eps.providers`` re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class EpNotAvailable(RuntimeError):
    """The requested execution provider is not in this ONNX Runtime build."""


@dataclass(frozen=True)
class EpSpec:
    """The execution provider under test: its ONNX Runtime name, the alias used for files, options,
    and how it is held (``holder``: the adapter of ``harness.eps.adapters`` that makes it usable).

    Plugin EPs (``holder == "plugin"``) carry the ``library`` registered with ONNX Runtime and, when
    it came from a package, that ``package`` and its ``package_version``. ``device`` is the
    ``--ep-device`` selector (None: a plugin's only device, or a built-in EP's own default). The
    spec is plain data: worker processes receive it and make the same EP usable for themselves.
    ``adapter_module`` names the module that registers the EP's record when the testbed's own
    registry does not hold it (an EP registered by your code): a process that has not loaded that
    module imports it before it holds the EP (``harness.eps.adapters.adapter_for``)."""

    provider: str
    alias: str
    options: dict[str, str] = field(default_factory=dict)
    holder: str = "built-in"
    library: str | None = None
    package: str | None = None
    package_version: str | None = None
    device: str | None = None
    adapter_module: str | None = None

    @property
    def is_cpu(self) -> bool:
        """True for ONNX Runtime's CPU EP (which never has CPU fallback disabled)."""
        return self.provider == "CPUExecutionProvider"

    def to_json(self) -> dict[str, Any]:
        """Provider, alias and options, plus whichever of holder, library, package, package_version,
        device and adapter_module differ from a plain built-in EP."""
        data: dict[str, Any] = {"provider": self.provider, "alias": self.alias, "options": dict(self.options)}
        extra = {"holder": self.holder if self.holder != "built-in" else None, "library": self.library,
                 "package": self.package, "package_version": self.package_version, "device": self.device,
                 "adapter_module": self.adapter_module}
        data.update({k: v for k, v in extra.items() if v is not None})
        return data


def parse_provider_options(items: list[str] | None) -> dict[str, str]:
    """``["device_id=1", "performance_preference=high_performance"]`` -> dict; refuses items without ``=``."""
    options: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--ep-option {item!r}: expected KEY=VALUE, e.g. device_id=0")
        options[key.strip()] = value.strip()
    return options


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
