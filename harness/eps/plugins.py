"""Plugin execution providers: shared libraries ONNX Runtime loads at run time (the EP ABI).

A plugin EP never appears in ``get_available_providers()``. Its library is registered with
``onnxruntime.register_execution_provider_library(name, path)``, after which
``get_ep_devices()`` lists the devices it supports, and a session attaches it with
``SessionOptions.add_provider_for_devices(devices, options)``
(https://onnxruntime.ai/docs/execution-providers/plugin-ep-libraries/usage.html). On PyPI a
plugin ships as a package that provides ``get_library_path()`` and ``get_ep_name()`` /
``get_ep_names()`` (``onnxruntime-ep-webgpu``, ``onnxruntime-ep-openvino``; their
``__init__.py``) and no ONNX Runtime of its own: it loads into the one installed.

This module holds what is specific to that way of holding an EP:

- ``check_runtime()``: the installed ONNX Runtime has the whole plugin API this harness uses
  (``PLUGIN_API``; ``MIN_ORT``), else ``EpNotAvailable`` in one line;
- ``load_package(spec)``: a plugin package by its distribution or module name, its version
  checked against the ONNX Runtime its documentation asks for (``KNOWN_PACKAGES``), its library
  path and EP names read through the packaging convention, each failure one line;
- ``register(path)``: registers a library once per process (every worker process registers
  for itself: registration lives in ORT's process-wide environment).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass
from typing import Any

from ep_testbed.harness.core.installed import distributions_of, ort_flavour, ort_version
from ep_testbed.harness.core.terminal import safe

from .providers import EpNotAvailable

#: The Python API a plugin EP run needs, as (owner, attribute): registration, the device list and
#: attaching a device (ONNX Runtime 1.23), and the graph assignment info (1.24.1), without which
#: the nodes a plugin compiles into one partition cannot be proven to have run on it.
PLUGIN_API = (("onnxruntime", "register_execution_provider_library"), ("onnxruntime", "get_ep_devices"),
              ("SessionOptions", "add_provider_for_devices"), ("InferenceSession", "get_provider_graph_assignment_info"))
#: The first ONNX Runtime release whose Python API has every piece of ``PLUGIN_API``.
MIN_ORT = "1.24.1"


@dataclass(frozen=True)
class PackageRule:
    """What a plugin package's documentation requires of the ONNX Runtime it loads into
    (``min_ort``, stated at ``source``), and why it may list no device (``no_device``)."""

    min_ort: str
    source: str
    no_device: str = ""


#: Plugin packages whose documented ONNX Runtime minimum is checked before their library is
#: loaded (a library built for a newer ORT refuses registration, or worse, misbehaves).
KNOWN_PACKAGES: dict[str, PackageRule] = {
    "onnxruntime-ep-webgpu": PackageRule(
        "1.24.4", "https://pypi.org/project/onnxruntime-ep-webgpu/ (Prerequisites: onnxruntime 1.24.4 or later)",
        "it found no WebGPU adapter: on Linux it needs the Vulkan loader libvulkan.so.1 and a Vulkan driver for the "
        "GPU, on Windows a current GPU driver (the package's Troubleshooting section)"),
    "onnxruntime-ep-openvino": PackageRule(
        "1.23.0", "https://pypi.org/project/onnxruntime-ep-openvino/ (Prerequisites: onnxruntime>=1.23.0)",
        "it offers only Intel devices (vendor id 0x8086) that OpenVINO can open: "
        "onnxruntime/core/providers/openvino/ov_factory.cc, GetSupportedDevices"),
}


def release(version: str) -> tuple[int, ...]:
    """``"1.24.4"`` -> ``(1, 24, 4)`` (digits of each part; a ``.dev``/``+local`` tail is ignored)."""
    parts = []
    for part in str(version).split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def older(version: str, minimum: str) -> bool:
    """Whether release ``version`` is below ``minimum`` (missing parts count as 0)."""
    have, want = release(version), release(minimum)
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) < want + (0,) * (width - len(want))


def missing_api(ort: Any) -> list[str]:
    """The pieces of ``PLUGIN_API`` this ``onnxruntime`` module lacks (``Owner.name``)."""
    missing = []
    for owner, name in PLUGIN_API:
        holder = ort if owner == "onnxruntime" else getattr(ort, owner, None)
        if not callable(getattr(holder, name, None)):
            missing.append(name if owner == "onnxruntime" else f"{owner}.{name}")
    return missing


def check_runtime(what: str) -> None:
    """``EpNotAvailable`` (one line, naming ``what`` the user asked for) when the installed ONNX
    Runtime lacks part of the plugin API."""
    import onnxruntime as ort  # loaded on first use: the CLI, reports and diffs start without it

    missing = missing_api(ort)
    if missing:
        raise EpNotAvailable(f"{what}: {ort_flavour()} {ort_version()} is too old for plugin EPs: it lacks "
                             f"{', '.join(missing)}. Fix: pip install -U \"onnxruntime>={MIN_ORT}\" (or the same "
                             "version of your onnxruntime flavour), then install the plugin beside it")


@dataclass(frozen=True)
class PluginPackage:
    """A plugin package as found: distribution name and version, module, library path, EP names."""

    distribution: str
    version: str
    module: str
    library: str
    ep_names: tuple[str, ...]


def _distribution(module: str) -> tuple[str, str] | None:
    """``(distribution, version)`` of the installed distribution providing ``module``, if any."""
    for name in distributions_of(module):  # none with broken metadata: the import below says what is missing
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def check_package_minimum(distribution: str, version: str, what: str, installed_ort: str | None = None) -> None:
    """``EpNotAvailable`` when ``distribution`` documents a minimum ONNX Runtime above the one installed."""
    rule = KNOWN_PACKAGES.get(distribution)
    have = installed_ort or ort_version()
    if rule is not None and older(have, rule.min_ort):
        raise EpNotAvailable(f"{what}: {distribution} {version} needs onnxruntime >= {rule.min_ort} ({rule.source}); "
                             f"this environment has {ort_flavour()} {have}. Fix: pip install -U "
                             f"\"onnxruntime>={rule.min_ort}\", or install an older {distribution} made for "
                             f"{have}")


def _call(module: Any, name: str, what: str) -> Any:
    """``module.name()``; ``EpNotAvailable`` naming the function when it raises."""
    try:
        return getattr(module, name)()
    except Exception as exc:  # the package's own error, e.g. its library file is missing
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise EpNotAvailable(f"{what}: {module.__name__}.{name}() raised {type(exc).__name__}: {safe(text, 200)}. "
                             f"Fix: reinstall the package (pip install --force-reinstall {module.__name__})") from None


def _ep_names(module: Any, what: str) -> tuple[str, ...]:
    """The EP names a plugin package declares (``get_ep_names()``, else ``[get_ep_name()]``)."""
    if callable(getattr(module, "get_ep_names", None)):
        names = _call(module, "get_ep_names", what)
    elif callable(getattr(module, "get_ep_name", None)):
        names = [_call(module, "get_ep_name", what)]
    else:
        names = None
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise EpNotAvailable(f"{what}: {module.__name__} is not an ONNX Runtime plugin EP package: get_ep_names() "
                             "or get_ep_name() must name its EP(s) (as onnxruntime-ep-webgpu and "
                             "onnxruntime-ep-openvino do)")
    return tuple(names)


def load_package(spec: str, what: str) -> PluginPackage:
    """The plugin package ``spec`` names (distribution ``onnxruntime-ep-webgpu`` or module
    ``onnxruntime_ep_webgpu``): its documented ONNX Runtime minimum checked first, then its
    library path and EP names read. ``EpNotAvailable`` (one line, naming ``what``) for a package
    that is not installed, not a plugin package, or made for a newer ONNX Runtime."""
    module_name = spec.strip().replace("-", "_")
    if not module_name.isidentifier():
        raise EpNotAvailable(f"{what}: {safe(spec, 80)!r} is not a package name (e.g. plugin:onnxruntime-ep-webgpu)")
    found = _distribution(module_name)
    if found is not None:
        check_package_minimum(*found, what)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EpNotAvailable(f"{what}: no plugin package {module_name} in this environment ({safe(exc, 120)}). "
                             f"Fix: pip install {module_name.replace('_', '-')} beside onnxruntime") from None
    if not callable(getattr(module, "get_library_path", None)):
        raise EpNotAvailable(f"{what}: {module_name} is not an ONNX Runtime plugin EP package: it has no "
                             "get_library_path() (plugin packages such as onnxruntime-ep-webgpu provide "
                             "get_library_path() and get_ep_name()/get_ep_names())")
    library = _call(module, "get_library_path", what)
    names = _ep_names(module, what)
    if not isinstance(library, (str, os.PathLike)) or not os.path.isfile(library):
        raise EpNotAvailable(f"{what}: {module_name}.get_library_path() gave {safe(library, 200)!r}, which is not a "
                             f"file. Fix: pip install --force-reinstall {module_name.replace('_', '-')}")
    distribution, version = found or (module_name, str(getattr(module, "__version__", "unknown")))
    return PluginPackage(distribution, version, module_name, os.fspath(library), names)


def installed_packages() -> list[str]:
    """The distributions installed here that follow the plugin packages' naming
    (``onnxruntime-ep-*``), plus the ``KNOWN_PACKAGES`` that are installed, sorted."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = str(dist.metadata.get("Name") or "").lower().replace("_", "-")
        if name.startswith("onnxruntime-ep-") or name in KNOWN_PACKAGES:
            found.add(name)
    return sorted(found)


def check_library_file(path: str, what: str) -> str:
    """The absolute path of ``--ep-library PATH``; ``EpNotAvailable`` when it is not a regular file."""
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        why = "does not exist" if not os.path.lexists(full) else "is not a regular file"
        raise EpNotAvailable(f"{what}: {safe(full, 200)} {why}. Fix: pass the plugin's shared library "
                             "(.so/.dll/.dylib), e.g. the path its package's get_library_path() returns")
    return full


#: Library path -> the name it was registered under, in this process.
_REGISTERED: dict[str, str] = {}


def register(path: str, what: str) -> str:
    """Register the plugin library ``path`` with this process's ONNX Runtime (once; later calls
    return the same registration name). ``EpNotAvailable`` with ORT's reason when it refuses."""
    import onnxruntime as ort  # loaded on first use: the CLI, reports and diffs start without it

    key = os.path.realpath(path)
    if key in _REGISTERED:
        return _REGISTERED[key]
    check_runtime(what)
    name = f"ep-testbed-{len(_REGISTERED) + 1}"
    try:
        ort.register_execution_provider_library(name, key)
    except Exception as exc:  # ORT's reason: not a library, no CreateEpFactories, built for another ORT
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EpNotAvailable(f"{what}: ONNX Runtime {ort_version()} refused the plugin library {safe(key, 200)}: "
                             f"{safe(text, 300)}") from None
    _REGISTERED[key] = name
    return name


__all__ = ["KNOWN_PACKAGES", "MIN_ORT", "PLUGIN_API", "PackageRule", "PluginPackage", "check_library_file",
           "check_package_minimum", "check_runtime", "installed_packages", "load_package", "missing_api", "older",
           "register", "release"]
