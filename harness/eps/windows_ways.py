"""The three ways a Windows GPU team holds an EP in 2026, and which of them this environment has.

1. **The onnxruntime-directml wheel**: ONNX Runtime with the DirectML EP built in (``--ep dml``).
   DirectML is in sustained engineering: "new feature development has moved to WinML"
   (https://onnxruntime.ai/docs/execution-providers/DirectML-ExecutionProvider.html), and 1.24.4
   is the wheel's last release on PyPI (https://pypi.org/project/onnxruntime-directml/#history).
2. **Windows ML**: the ``onnxruntime-windowsml`` wheel (the ``onnxruntime`` module, with the CPU
   and "DirectML (legacy)" EPs included, https://learn.microsoft.com/windows/ai/new-windows-ml/supported-execution-providers,
   which also says the vendor EPs download on Windows 11 24H2, build 26100, or later; its
   1.24.4.202603181718 win_amd64 wheel ships
   ``onnxruntime/capi/DirectML.dll`` and an ``onnxruntime.dll`` that names
   ``DmlExecutionProvider``; Microsoft's "Register execution providers" page lists
   CPUExecutionProvider and DmlExecutionProvider before any catalog EP is registered), so
   ``--ep dml`` runs DirectML there too; and the vendor EPs as plugin libraries from Windows ML's
   EP catalog, read from Python through the ``windowsml`` package (``harness.eps.winml_catalog``),
   each run as ``--ep NAME --ep-library PATH``.
3. **Plugin EP packages from PyPI** (``onnxruntime-ep-webgpu``, ``onnxruntime-ep-openvino``,
   ``onnxruntime-ep-nv-tensorrt-rtx``, ...) loaded into whichever onnxruntime is installed:
   ``--ep plugin:PACKAGE`` (``harness.eps.plugins``).

``find_ways()`` returns one ``Way`` per way: whether it was found, one line saying what (or how
to get it), and a line per EP it offers with the ``ep-testbed`` flags that run it. ``ep-testbed
doctor`` prints them. Every input is a seam (``platform``, ``distributions``, ``available``,
``catalog``, ``plugin_packages``), so the Windows answers are tested on any machine.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from ..core.terminal import safe
from . import plugins
from .providers import EpNotAvailable
from .winml_catalog import WINDOWSML, WINDOWSML_ORT, CatalogReading, read_catalog

DIRECTML_WHEEL = "onnxruntime-directml"
#: The DirectML EP's name in every wheel that holds it.
DML = "DmlExecutionProvider"
#: Shown when a way cannot exist on this platform.
WINDOWS_ONLY = "Windows only"
#: An EP name that may be pasted into a suggested command as it is (a catalog answer is data).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,120}")


@dataclass(frozen=True)
class Way:
    """One way of holding an EP: ``found``, one line (``text``), one line per EP it offers (``eps``)."""

    name: str
    found: bool
    text: str
    eps: tuple[str, ...] = ()


def installed_distributions() -> dict[str, str]:
    """Every installed distribution, normalised name (lower case, ``-``) -> version."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = str(dist.metadata.get("Name") or "")  # type: ignore[attr-defined]  # an email Message: get() misses quietly.lower().replace("_", "-")
        if name:
            found.setdefault(name, str(dist.version))
    return found


def available_providers() -> list[str]:
    """The installed ONNX Runtime's built-in EPs ([] when onnxruntime cannot be imported)."""
    try:
        import onnxruntime as ort  # loaded on first use: the CLI, reports and diffs start without it

        return list(ort.get_available_providers())
    except Exception:  # no or a broken onnxruntime: doctor's wheel check says so
        return []


def directml_wheel(platform: str, distributions: Mapping[str, str], available: list[str]) -> Way:
    """Way 1: the onnxruntime-directml wheel."""
    name = f"{DIRECTML_WHEEL} wheel"
    version = distributions.get(DIRECTML_WHEEL)
    if version:
        state = "in its provider list" if DML in available else "NOT in its provider list (a damaged install?)"
        return Way(name, True, f"{DIRECTML_WHEEL} {version}, {DML} {state} (its last release is 1.24.4)",
                   (f"{DML}: --ep dml [--ep-option device_id=N]",))
    if platform == "win32":
        return Way(name, False, "not installed. Get it: in a fresh venv, pip install -e \".[directml]\" (or pip install "
                                "onnxruntime-directml==1.24.4: it replaces onnxruntime), then --ep dml")
    return Way(name, False, f"not installed ({WINDOWS_ONLY}: DirectML needs Direct3D 12). Here, --ep dml-wine runs the "
                            "real DirectML.dll under Wine on an emulated device (bash tools/dml-wine.sh; no hardware "
                            "numerics)")


def _catalog_lines(reading: CatalogReading) -> tuple[str, tuple[str, ...]]:
    """(a summary of the catalog, one line per EP with the flags that run it or how to make it ready)."""
    if reading.error:
        return f"its EP catalog could not be read: {safe(reading.error, 300)}", ()
    lines = []
    for ep in reading.providers:
        about = f"{safe(ep.name, 120)} {safe(ep.version, 40)} ({safe(ep.ready_state or '?', 20)}"
        about += f", {safe(ep.certification, 20)})" if ep.certification else ")"
        if not _PLAIN_NAME.fullmatch(ep.name):
            lines.append(f"{about}: its name is not one ep-testbed passes on a command line")
        elif ep.ready:
            lines.append(f"{about}: --ep {ep.name} --ep-library \"{safe(ep.library_path, 400)}\"")
        else:
            lines.append(f"{about}: not installed yet; ensure_ready() downloads it: python -c \"import windowsml; "
                         f"[p.ensure_ready() for p in windowsml.EpCatalog().find_all_providers() if p.name == "
                         f"'{ep.name}']\"")
    ready = sum(ep.ready for ep in reading.providers)
    return f"its EP catalog lists {len(reading.providers)} EP(s), {ready} ready", tuple(lines)


def windows_ml(platform: str, distributions: Mapping[str, str], available: list[str],
               catalog: Callable[[], CatalogReading]) -> Way:
    """Way 2: Windows ML (onnxruntime-windowsml, and the windowsml package's EP catalog)."""
    name = "Windows ML"
    runtime, package = distributions.get(WINDOWSML_ORT), distributions.get(WINDOWSML)
    if not runtime and not package:
        if platform != "win32":
            return Way(name, False, f"not installed ({WINDOWS_ONLY}: the {WINDOWSML} package loads "
                                    "Microsoft.Windows.AI.MachineLearning.dll)")
        return Way(name, False, f"not installed. Get it: in a fresh venv, pip install -e \".[windowsml]\" (the "
                                f"{WINDOWSML} catalog and its {WINDOWSML_ORT}; the catalog's vendor EPs need Windows 11 "
                                "24H2 or later)")
    parts, eps = [], []
    if runtime:
        dml = f"{DML} built in: --ep dml" if DML in available else f"{DML} not in its provider list"
        parts.append(f"{WINDOWSML_ORT} {runtime} ({dml})")
        if DML in available:
            eps.append(f"{DML} (Windows ML's DirectML): --ep dml [--ep-option device_id=N]")
    if package:
        summary, lines = _catalog_lines(catalog())
        parts.append(f"{WINDOWSML} {package}: {summary}")
        eps.extend(lines)
        if not runtime:
            parts.append(f"its EPs are built for {WINDOWSML_ORT}: pip install \"{WINDOWSML}[with-ort]\" in a fresh "
                         "venv to get the matching ONNX Runtime")
    else:
        parts.append(f"for the vendor EPs of its catalog: pip install {WINDOWSML}")
    return Way(name, True, "; ".join(parts), tuple(eps))


def plugin_packages(packages: Callable[[], list[str]] = plugins.installed_packages,
                    load: Callable[[str, str], plugins.PluginPackage] = plugins.load_package) -> Way:
    """Way 3: plugin EP packages from PyPI, each loaded as ``--ep plugin:PACKAGE`` would (its
    documented ONNX Runtime minimum, library path and EP names checked)."""
    name = "plugin EP packages"
    found = packages()
    if not found:
        return Way(name, False, "none installed. Get one: pip install onnxruntime-ep-webgpu (or onnxruntime-ep-openvino, "
                                "onnxruntime-ep-nv-tensorrt-rtx, ...) beside onnxruntime >= 1.24.4, then --ep "
                                "plugin:PACKAGE")
    lines = []
    for dist in found:
        what = f"--ep plugin:{dist}"
        try:
            package = load(dist, what)
            plugins.check_runtime(what)
        except EpNotAvailable as exc:
            lines.append(f"{safe(dist, 120)}: unusable here: {safe(exc, 400)}")
            continue
        except Exception as exc:  # a package whose import raises: reported, never a doctor traceback
            lines.append(f"{safe(dist, 120)}: importing it raised {type(exc).__name__}: {safe(exc, 300)}")
            continue
        for ep in package.ep_names:
            flag = f"plugin:{dist}" if len(package.ep_names) == 1 else f"plugin:{dist}:{ep}"
            lines.append(f"{safe(ep, 120)} ({safe(dist, 120)} {safe(package.version, 40)}): --ep {safe(flag, 200)}")
    return Way(name, True, f"{len(found)} installed: {', '.join(safe(d, 120) for d in found)}", tuple(lines))


def find_ways(*, platform: Optional[str] = None, distributions: Optional[Mapping[str, str]] = None,
              available: Optional[list[str]] = None, catalog: Optional[Callable[[], CatalogReading]] = None,
              plugin_finder: Optional[Callable[[], Way]] = None) -> list[Way]:
    """The three ways, in order, as this environment has them; each argument replaces what is read
    from this machine (``sys.platform``, the installed distributions, ONNX Runtime's built-in EPs,
    Windows ML's catalog as ``winml_catalog.read_catalog`` reads it, the plugin package finder)."""
    platform = sys.platform if platform is None else platform
    distributions = installed_distributions() if distributions is None else distributions
    available = available_providers() if available is None else available
    return [directml_wheel(platform, distributions, available),
            windows_ml(platform, distributions, available, catalog or read_catalog),
            (plugin_finder or plugin_packages)()]


__all__ = ["DIRECTML_WHEEL", "Way", "available_providers", "directml_wheel", "find_ways", "installed_distributions",
           "plugin_packages", "windows_ml"]
