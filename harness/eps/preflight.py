"""The preflight: can this machine run cases on the EP at all? One clear stop instead of a wall of
failed sessions. ``ep-testbed doctor`` prints every finding; ``ep-testbed run`` runs the same
check first and stops with exit code 2 on the first fatal one.

In order, each a ``Finding`` (``ok``, ``warn`` or ``fatal``, one line, the fatal ones naming the
fix):

1. the ONNX Runtime wheels: exactly one distribution may provide the ``onnxruntime`` module
   (``onnxruntime`` and ``onnxruntime-directml`` both installed overwrite each other's files);
2. the EP is in this ONNX Runtime (``providers.resolve_ep``), or for a plugin EP
   (``harness.eps.adapters``): ONNX Runtime new enough for plugins, the package's documented
   minimum ONNX Runtime met, the library registered; then ONNX Runtime's device list for the
   EP, the device ``--ep-device`` chose (a selector naming none or several is fatal, naming the
   candidates; a plugin EP with no device is fatal);
3. the EP's own checks, its adapter's ``preflight`` (``harness.eps.holders``: its record's hook),
   which also reads the device run headers will name: for DirectML the DXGI adapters
   (``harness.eps.dxgi``): ``device_id`` a whole number within them, the chosen adapter not the
   Microsoft Basic Render Driver (ORT's dml_provider_factory.cc refuses it with
   ERROR_GRAPHICS_INVALID_DISPLAY_ADAPTER), a hardware adapter at all, DirectML.dll found, and
   whether ORT's device list names the same adapter; for DirectML under Wine its host and canary;
4. one session with one node (the catalog's probe case, ``graphs.cases.common.probe_case``: the
   case a registered operator's ``PROBE`` names, today a float32 MaxPool) builds, runs and is
   proven on the EP, with the run's session settings (``harness.eps.session.run_on_ep``); ORT's
   errors are explained where an EP's record knows their code (0x887A0002: no adapter at that index).

The EP's name is never branched on here: what to install when it is missing, and its own checks,
are its record's (``harness.eps.registry``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ...graphs import to_onnx
from ...graphs.cases.common import probe_case
from ..core.installed import distributions_of, ort_flavour, ort_version
from . import placement as placement_mod
from . import registry
from .adapters import PLUGIN_PREFIX, adapter_for, resolve
from .devices import from_json_list
from .dxgi import KNOWN_HRESULTS, check_adapters, check_cross  # noqa: F401  (DirectML's checks, re-exported)
from .gpu import identity, ort_view
from .plugins import KNOWN_PACKAGES
from .providers import EpNotAvailable, EpSpec, ProviderMissing, SessionSettings
from .session import SessionError, first_line, native_stderr, run_on_ep

#: The wheel that brings each of the testbed's own EPs (its record's first ``wheels``; the fix a
#: missing EP names).
WHEELS = {r.provider: r.wheels[0] for r in registry.records() if r.wheels}
#: The plugin package that brings an EP beside any onnxruntime wheel (its record's first
#: ``plugin_packages``; the other fix a missing EP names).
PLUGIN_PACKAGES = {r.provider: r.plugin_packages[0] for r in registry.records() if r.plugin_packages}


@dataclass
class Finding:
    """One line of the preflight: ``level`` is ok, note (what ONNX Runtime said of the EP; printed by
    ``run`` too), warn or fatal."""

    level: str
    text: str


@dataclass
class Preflight:
    """Every finding, in order, and the GPU identity record read on the way (DirectML only)."""

    findings: list[Finding] = field(default_factory=list)
    gpu: Optional[dict[str, Any]] = None

    @property
    def fatal(self) -> Optional[Finding]:
        """The first fatal finding (the run stops there), or None."""
        return next((f for f in self.findings if f.level == "fatal"), None)

    def add(self, level: str, text: str) -> bool:
        """Record a finding; False when it is fatal (the caller stops checking)."""
        self.findings.append(Finding(level, text))
        return level != "fatal"


def onnxruntime_distributions() -> list[str]:
    """The installed distributions that provide the ``onnxruntime`` module."""
    return sorted(set(distributions_of("onnxruntime")))  # none with broken metadata: nothing to compare


def check_wheels(result: Preflight, distributions: list[str]) -> bool:
    """Finding 1: one wheel provides ``onnxruntime``."""
    if len(distributions) > 1:
        return result.add("fatal", f"{' and '.join(distributions)} are all installed and overwrite each other's "
                                   f"onnxruntime module. Fix: pip uninstall -y {' '.join(distributions)}, then install "
                                   "only the one you test (on Windows: onnxruntime-directml), best in a fresh venv")
    return result.add("ok", f"{distributions[0] if distributions else ort_flavour()} {ort_version()} is the only "
                            "onnxruntime wheel")


def _missing_builtin(result: Preflight, provider: str) -> None:
    """The fatal finding for a built-in EP this ONNX Runtime lacks, naming the wheel (or plugin)
    that brings it: its record's ``wheels``, ``install_where``, ``plugin_packages``, and off its
    ``platform`` what its users are told ``elsewhere``."""
    record = registry.of_provider(provider) or registry.EpRecord(registry.alias_of(provider) or "ep", provider)
    wheel = record.wheels[0] if record.wheels else None
    fix = (f"{record.install_where}in a fresh venv: pip install {wheel} (it replaces onnxruntime; never install both)"
           if wheel else f"install an ONNX Runtime build that has {provider}")
    if record.plugin_packages:
        package = record.plugin_packages[0]
        fix += f"; or keep this onnxruntime and pip install {package}, then pass --ep {PLUGIN_PREFIX}{package}"
    if record.platform not in (None, sys.platform):
        fix += record.elsewhere
    result.add("fatal", f"{provider} is not in this ONNX Runtime ({ort_flavour()} {ort_version()} on "
                        f"{sys.platform}). Fix: {fix}")


def check_ep(result: Preflight, name: str | EpSpec, options: dict[str, str], available: Optional[list[str]],
             library: Optional[str] = None, device: Optional[str] = None) -> Optional[EpSpec]:
    """Finding 2: the EP is available (a plugin: registered), its device chosen; its ``EpSpec``
    or None (fatal finding recorded). ``name``: the ``--ep`` value, or the spec a command already
    resolved from it (then only its findings are added)."""
    if isinstance(name, EpSpec):
        ep = name
    else:
        try:
            ep = resolve(name, options, library=library, device=device, available=available)
        except ProviderMissing as exc:
            _missing_builtin(result, exc.provider)
            return None
        except EpNotAvailable as exc:
            result.add("fatal", str(exc))
            return None
    adapter = adapter_for(ep)
    line = adapter.found()
    if line:
        result.add("ok", line)
    if not adapter.holds_sessions:  # ORT's device list of this process lists the EP's devices
        check_devices(result, ep)
    return ep


def check_devices(result: Preflight, ep: EpSpec) -> None:
    """ONNX Runtime's device list for the EP, the one the run uses marked (``gpu.ort_view``; never
    fatal here: a plugin EP without a device, or a selector that fails, is refused by ``resolve``)."""
    view = ort_view(ep)
    mine = from_json_list(view["candidates"])
    chosen = (view["device"] or {}).get("index")
    for device in mine:
        result.add("ok", f"device {device.describe()}" + ("  <- runs here" if device.index == chosen else ""))
    if not mine:
        result.add("warn", f"ONNX Runtime lists no device for {ep.provider}: run headers name its device from "
                           "other readers, or as unknown")
    elif chosen is None:
        result.add("warn", f"ONNX Runtime lists {len(mine)} devices for {ep.provider} and the EP picks one itself: "
                           "pass --ep-device INDEX or KEY=VALUE so that results name the device")


def explain(error: str) -> str:
    """``error`` with the meaning of any code in it that an EP's record knows (``error_meanings``:
    the HRESULTs ORT's DirectML EP raises while choosing the adapter)."""
    meanings = [meaning for code, meaning in registry.error_meanings().items() if code in error.upper()]
    return error + (f" ({'; '.join(meanings)})" if meanings else "")


def session_fix(ep: EpSpec) -> str:
    """What to do when a session on ``ep`` fails to build or run (the fatal finding's ``Fix:``)."""
    if ep.holder == "plugin":
        rule = KNOWN_PACKAGES.get(ep.package or "")
        why = f" ({rule.no_device})" if rule and rule.no_device else ""
        return (f"the plugin lists the device but could not use it{why}; `ep-testbed devices` shows the device, check "
                "its driver")
    return f"run `ep-testbed doctor --ep {ep.alias}` and check the adapter, device_id and driver it lists"


def check_session(result: Preflight, ep: EpSpec, settings: SessionSettings) -> bool:
    """Finding 4: one node builds, runs and is proven on the EP."""
    case = probe_case()
    mapping = to_onnx(case.desc, opset=case.opset)
    model = mapping.require_model()
    what = "one-node " + "/".join(n.op_type for n in model.graph.node if n.name in mapping.op_nodes)
    if ep.is_cpu and ep.options:
        result.add("note", f"{ep.provider} takes no provider options (ONNX Runtime ignores them: "
                           "session.get_provider_options() reports none back), so these do nothing: --ep-option "
                           + ", ".join(f"{k}={v}" for k, v in ep.options.items()))
    try:
        with native_stderr() as said:  # an EP factory's raw, coloured log records become notes
            run = run_on_ep(model, mapping.feeds(case.inputs()), ep, settings, quiet=True)
    except SessionError as exc:
        _said(result, said)
        hint = vulkan_hint(said)
        return result.add("fatal", f"a {what} session failed on {ep.provider}: "
                                   f"{explain(first_line(exc.cause))}. Fix: {hint or session_fix(ep)}")
    _said(result, said)
    off = placement_mod.off_ep(run.placement, mapping.op_nodes, ep.provider)
    if off:
        return result.add("fatal", f"a {what} session ran, but not on {ep.provider}: "
                                   + ", ".join(f"{n} -> {run.placement.get(n, 'unproven')}" for n in off))
    return result.add("ok", f"a {what} session built and ran on {ep.provider} "
                            f"(placement: {run.placement_source})")


#: The Vulkan loader's words when a driver's ICD library loads but gives no vkCreateInstance, and
#: the library NVIDIA's ICD file names for X11 (the loader's ``loader_scanned_icd_add``).
_ICD_WITHOUT_INSTANCE = "Could not get 'vkCreateInstance' via 'vk_icdGetInstanceProcAddr' for ICD"
_NVIDIA_GLX_ICD = "libGLX_nvidia.so.0"


def vulkan_hint(said: list[str]) -> str | None:
    """What to do when the Vulkan loader said it could not start NVIDIA's ICD through
    libGLX_nvidia.so.0 (a WebGPU EP's Dawn, on Linux, then finds no adapter): that library wants
    an X display; NVIDIA's EGL library is the same driver without one. Seen on a headless H100
    container (driver 580): with an ICD file naming libEGL_nvidia.so.0 the WebGPU EP found the GPU
    and ran. None when the loader said nothing of the kind."""
    if not any(_ICD_WITHOUT_INSTANCE in line and _NVIDIA_GLX_ICD in line for line in said):
        return None
    return ("the Vulkan loader could not start NVIDIA's ICD through libGLX_nvidia.so.0, which needs an X display. "
            "On a headless machine write an ICD file naming NVIDIA's EGL library, e.g. "
            "'{\"file_format_version\": \"1.0.0\", \"ICD\": {\"library_path\": \"libEGL_nvidia.so.0\", "
            "\"api_version\": \"1.3.0\"}}', and point VK_DRIVER_FILES at it")


def _said(result: Preflight, said: list[str]) -> None:
    """Each line ONNX Runtime printed while the probe session was built or run, as a ``note``."""
    for line in said[:20]:
        result.add("note", f"ONNX Runtime said: {line[:400]}")


def check(name: str | EpSpec, options: Optional[dict[str, str]] = None, settings: SessionSettings = SessionSettings(),
          *, available: Optional[list[str]] = None, distributions: Optional[list[str]] = None,
          gpu_record: Optional[Callable[[EpSpec], dict[str, Any]]] = None, library: Optional[str] = None,
          device: Optional[str] = None) -> Preflight:
    """Run the checks for ``--ep name`` with its provider ``options``, ``--ep-library`` and
    ``--ep-device``, stopping at the first fatal one; ``name`` may be the ``EpSpec`` a command
    already resolved from those flags (``run``: resolved once). ``available``/``distributions``/
    ``gpu_record`` replace what is read from this machine (tests simulate a Windows GPU runner
    through them); ``result.gpu`` is the identity record run headers will hold."""

    result = Preflight()
    if not check_wheels(result, onnxruntime_distributions() if distributions is None else distributions):
        return result
    ep = check_ep(result, name, dict(options or {}), available, library, device)
    if ep is None:
        return result
    adapter = adapter_for(ep)
    if not adapter.preflight(result, lambda: identity(ep, gpu_record(ep)) if gpu_record else identity(ep)):
        return result
    check_session(result, ep, settings)
    if adapter.holds_sessions:
        adapter.close()  # the checks' own EP process (a DirectML host): the run's workers start their own
    return result


def check_wine_host(result: Preflight, ep: EpSpec) -> bool:
    """Finding 3 for ``--ep dml-wine``: its adapter's own checks (``WineDmlAdapter.preflight``:
    the host starts and names its device, the canary comes back exact)."""
    return adapter_for(ep).preflight(result, lambda: identity(ep))
