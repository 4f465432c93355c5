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
- ``load_package(spec)``: a plugin package by its distribution or module name, found through
  the installed distributions' metadata before anything is imported (``find_distribution``: a
  name no installed distribution provides, such as the standard library's ``this``, is refused
  unimported), its version checked against the ONNX Runtime its documentation asks for
  (``KNOWN_PACKAGES``), its library path and EP names read through the packaging convention,
  each failure one line;
- ``register(path)``: registers a library once per process (every worker process registers
  for itself: registration lives in ORT's process-wide environment).

What a plugin runs when it is loaded (its package's ``__init__``, the library's constructors,
``CreateEpFactories``, the factory's functions) runs first in a child process
(``probe_load``): the package imported, the library registered with ONNX Runtime, the device
list read, the process ended. A segfault, an abort, a hang or an exception there is one
``EpNotAvailable`` line naming the package or library; only then does this process load it
(once per library file, by path, modification time and size).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from ..core.installed import ort_flavour, ort_version
from ..core.terminal import safe
from .spec import EpNotAvailable

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


def _normal(name: str) -> str:
    """A distribution name as packaging compares them (PEP 503: case and runs of ``-_.`` folded)."""
    out, last = [], ""
    for ch in name.lower():
        ch = "-" if ch in "-_." else ch
        if not (ch == "-" and last == "-"):
            out.append(ch)
        last = ch
    return "".join(out)


def find_distribution(spec: str) -> tuple[str, str, str] | None:
    """``(distribution, version, module)`` of the installed distribution ``spec`` names, by its
    distribution name (``onnxruntime-ep-webgpu``) or the top-level module it provides
    (``onnxruntime_ep_webgpu``), read from metadata alone (nothing imported); None when no
    installed distribution is or provides it."""
    wanted, as_module = _normal(spec), spec.replace("-", "_")
    by_module = None
    for dist in importlib.metadata.distributions():
        try:
            name = str(dist.metadata.get("Name") or "")  # type: ignore[attr-defined]  # an email Message: get() misses quietly
            modules = sorted(_top_level(dist))
        except Exception:  # broken metadata of some other distribution: not this one
            continue
        if not name:
            continue
        if _normal(name) == wanted:
            module = as_module if as_module in modules else (modules[0] if len(modules) == 1 else as_module)
            return name, str(dist.version), module
        if by_module is None and as_module in modules:
            by_module = (name, str(dist.version), as_module)
    return by_module


def _top_level(dist: importlib.metadata.Distribution) -> set[str]:
    """The top-level modules ``dist`` provides (``installed._top_level_modules``)."""
    from ..core.installed import _top_level_modules

    return _top_level_modules(dist)


def check_package_minimum(distribution: str, version: str, what: str, installed_ort: str | None = None) -> None:
    """``EpNotAvailable`` when ``distribution`` documents a minimum ONNX Runtime above the one installed."""
    rule = KNOWN_PACKAGES.get(distribution)
    have = installed_ort or ort_version()
    if rule is not None and older(have, rule.min_ort):
        raise EpNotAvailable(f"{what}: {distribution} {version} needs onnxruntime >= {rule.min_ort} ({rule.source}); "
                             f"this environment has {ort_flavour()} {have}. Fix: pip install -U "
                             f"\"onnxruntime>={rule.min_ort}\", or install an older {distribution} made for "
                             f"{have}")


#: Seconds a probe process may take to import a plugin package, load its library into ONNX
#: Runtime and read the device list (a GPU plugin starting its device takes seconds).
PROBE_TIMEOUT = float(os.environ.get("EP_TESTBED_PROBE_TIMEOUT", "120"))

#: What the probe process runs (``probe_load``): argv[1] is ``{"module": ..., "library": ...}``;
#: it prints one JSON object and exits 0 whatever the package or ONNX Runtime said; only a crash
#: or a hang of what it loaded ends it otherwise. Standard library and onnxruntime only.
_PROBE = r"""
import json, os, sys
if sys.path[:1] == [""]:
    del sys.path[0]  # never a module of the working folder
answer = os.fdopen(os.dup(1), "w")  # the facts' own channel: what the plugin prints goes to stderr
os.dup2(2, 1)
request, said = json.loads(sys.argv[1]), {}

def say(**facts):
    said.update(facts)

def text(exc):
    return (type(exc).__name__, " ".join(str(exc).split())[:300])

def call(module, name):
    try:
        return getattr(module, name)()
    except Exception as exc:
        say(error=("call", name) + text(exc))
        raise SystemExit

def main():
    library = request.get("library")
    if request.get("module"):
        import importlib
        try:
            module = importlib.import_module(request["module"])
        except BaseException as exc:
            say(error=("import", request["module"]) + text(exc))
            return
        say(has_library=callable(getattr(module, "get_library_path", None)), version=str(getattr(module, "__version__", "")))
        if not said["has_library"]:
            return
        value = call(module, "get_library_path")
        say(library=value if isinstance(value, str) else None, library_repr=repr(value)[:200])
        names = call(module, "get_ep_names") if callable(getattr(module, "get_ep_names", None)) else (
            [call(module, "get_ep_name")] if callable(getattr(module, "get_ep_name", None)) else None)
        say(names=list(names) if isinstance(names, (list, tuple)) else None)
        library = said["library"]
    if not library or not os.path.isfile(library):
        return
    import onnxruntime as ort
    if not callable(getattr(ort, "register_execution_provider_library", None)):
        return
    try:
        ort.register_execution_provider_library("ep-testbed-probe", library)
    except Exception as exc:
        say(refused=text(exc)[1])
        return
    try:
        devices = list(ort.get_ep_devices())
        say(devices=[[d.ep_name, d.ep_vendor, str(d.device.type), dict(d.ep_metadata), dict(d.device.metadata)]
                     for d in devices])
    except Exception as exc:
        say(error=("devices", "get_ep_devices") + text(exc))
    say(registered=True)

try:
    main()
except SystemExit:
    pass
said["done"] = True  # what it loaded let it get here (a library may exit(0) the process that loads it)
answer.write(json.dumps(said))
answer.flush()
"""

#: The environment variable listing the library files (path|mtime|size) a parent process probed,
#: so that its workers register them without a probe of their own.
PROBED_ENV = "EP_TESTBED_PROBED_PLUGINS"
#: What was probed in this process: (module or library path, mtime, size) -> the probe's facts.
_PROBED: dict[tuple[str, int, int], dict[str, Any]] = {}


def _key(path: str) -> tuple[str, int, int]:
    """``(real path, mtime in ns, size)`` of a library file: a changed file is probed again."""
    try:
        st = os.stat(path)
    except OSError:
        return (os.path.realpath(path), 0, 0)
    return (os.path.realpath(path), st.st_mtime_ns, st.st_size)


def probe_load(what: str, *, module: str | None = None, library: str | None = None,
               timeout: float | None = None) -> dict[str, Any]:
    """Import plugin package ``module`` (its library path and EP names read) and/or register
    ``library`` with ONNX Runtime and read the device list, all in a child process (module
    docstring); the facts it printed. ``EpNotAvailable`` naming ``what`` when the child died of a
    signal, hung past ``timeout`` seconds, or could not run; its Python errors are in the facts
    (``error``, ``refused``) for the caller to word."""
    key = (f"module:{module}", 0, 0) if module else _key(str(library))
    if key in _PROBED:
        return _PROBED[key]
    if not module and _mark(key) in os.environ.get(PROBED_ENV, "").split(os.pathsep):
        return {}  # the process that started this one (a worker's run) probed this very file
    thing = f"the plugin package {module}" if module else f"the plugin library {safe(library, 200)}"
    limit = PROBE_TIMEOUT if timeout is None else timeout
    request = json.dumps({"module": module, "library": library})
    try:
        proc = subprocess.Popen([sys.executable, "-c", _PROBE, request], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise EpNotAvailable(f"{what}: cannot start a process to try {thing} in ({safe(exc.strerror or exc)}): "
                             "ep-testbed loads a plugin into itself only after a probe process did") from None
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise EpNotAvailable(f"{what}: loading {thing} did not end within {limit:g} s in a probe process (a hang in "
                             "its start, CreateEpFactories or its device list); ep-testbed did not load it. Fix: "
                             f"{_fix(module)}") from None
    if proc.returncode != 0:
        how = _death(proc.returncode)
        tail = " ".join(err.decode("utf-8", "replace").split())[-200:]
        raise EpNotAvailable(f"{what}: loading {thing} {how}" + (f" ({safe(tail)})" if tail else "")
                             + f"; ep-testbed did not load it. Fix: {_fix(module)}")
    try:
        facts = json.loads(out.decode("utf-8", "replace") or "{}")
    except ValueError:
        facts = {}
    facts = facts if isinstance(facts, dict) else {}
    if not facts.get("done"):  # it ended the process quietly (exit(0) in a constructor, an exit handler)
        tail = " ".join(err.decode("utf-8", "replace").split())[-200:]
        raise EpNotAvailable(f"{what}: loading {thing} ended the probe process that tried it before it finished "
                             f"(status 0, nothing said)" + (f" ({safe(tail)})" if tail else "")
                             + f"; ep-testbed did not load it. Fix: {_fix(module)}")
    _PROBED[key] = facts
    loaded = _key(str(facts.get("library") or library)) if facts.get("registered") else None
    if loaded is not None:
        _PROBED[loaded] = facts
        # the processes this one starts (its workers) load the same file without probing it again
        marks = [m for m in os.environ.get(PROBED_ENV, "").split(os.pathsep) if m]
        os.environ[PROBED_ENV] = os.pathsep.join(dict.fromkeys([*marks, _mark(loaded)]))
    return facts


def _mark(key: tuple[str, int, int]) -> str:
    """A probed library as ``PROBED_ENV`` lists it."""
    return f"{key[0]}|{key[1]}|{key[2]}"


def _death(code: int) -> str:
    """``-11`` -> ``killed it (SIGSEGV, signal 11)``; ``3`` -> ``ended it with status 3``."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "a signal"
        return f"killed the probe process that tried it ({name}, signal {-code})"
    return f"ended the probe process that tried it with status {code}"


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to a probe process and whatever it started (its own session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()


def _fix(module: str | None) -> str:
    """What to do about a plugin that breaks the process loading it."""
    if module:
        return (f"reinstall or remove it (pip install --force-reinstall {module.replace('_', '-')}), or ask its "
                "maintainers for a build for this ONNX Runtime")
    return "pass a plugin library built for this ONNX Runtime (its package's get_library_path() names one)"


def load_package(spec: str, what: str) -> PluginPackage:
    """The plugin package ``spec`` names (distribution ``onnxruntime-ep-webgpu`` or module
    ``onnxruntime_ep_webgpu``), found through installed distributions' metadata before anything
    is imported: its documented ONNX Runtime minimum checked first, then (in a probe process,
    ``probe_load``) imported, its library path and EP names read, its library loaded.
    ``EpNotAvailable`` (one line, naming ``what``) for a package that is not installed, raises or
    crashes when imported, is not a plugin package, or is made for a newer ONNX Runtime."""
    module_name = spec.strip().replace("-", "_")
    if not module_name.isidentifier():
        raise EpNotAvailable(f"{what}: {safe(spec, 80)!r} is not a package name (e.g. plugin:onnxruntime-ep-webgpu)")
    found = find_distribution(spec.strip())
    if found is None:
        raise EpNotAvailable(f"{what}: no plugin package {module_name} in this environment (no installed distribution "
                             f"is or provides it). Fix: pip install {module_name.replace('_', '-')} beside onnxruntime")
    distribution, version, module_name = found
    check_package_minimum(distribution, version, what)
    ort_version()  # ONNX Runtime itself loads (or is refused) before a plugin is tried with it
    facts = probe_load(what, module=module_name)
    _refuse_errors(facts, distribution, module_name, what)
    if not facts.get("has_library"):
        raise EpNotAvailable(f"{what}: {module_name} is not an ONNX Runtime plugin EP package: it has no "
                             "get_library_path() (plugin packages such as onnxruntime-ep-webgpu provide "
                             "get_library_path() and get_ep_name()/get_ep_names())")
    names = facts.get("names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise EpNotAvailable(f"{what}: {module_name} is not an ONNX Runtime plugin EP package: get_ep_names() "
                             "or get_ep_name() must name its EP(s) (as onnxruntime-ep-webgpu and "
                             "onnxruntime-ep-openvino do)")
    library = facts.get("library")
    if not isinstance(library, str) or not os.path.isfile(library):
        raise EpNotAvailable(f"{what}: {module_name}.get_library_path() gave {safe(facts.get('library_repr'), 200)}, "
                             f"which is not a file. Fix: pip install --force-reinstall {distribution}")
    return PluginPackage(distribution, version, module_name, library, tuple(names))


def _refuse_errors(facts: dict[str, Any], distribution: str, module: str, what: str) -> None:
    """``EpNotAvailable`` for an error the probe process met importing or asking the package."""
    error = facts.get("error")
    if not (isinstance(error, list) and len(error) == 4):
        return
    stage, name, kind, text = (str(part) for part in error)
    if stage == "import":
        raise EpNotAvailable(f"{what}: importing {module} (from {distribution}) raised {safe(kind)}: {safe(text, 200)}. "
                             f"Fix: reinstall it (pip install --force-reinstall {distribution}) or remove it")
    if stage == "call":
        raise EpNotAvailable(f"{what}: {module}.{safe(name)}() raised {safe(kind)}: {safe(text, 200)}. "
                             f"Fix: reinstall the package (pip install --force-reinstall {distribution})")


def installed_packages() -> list[str]:
    """The distributions installed here that follow the plugin packages' naming
    (``onnxruntime-ep-*``), plus the ``KNOWN_PACKAGES`` that are installed, sorted."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = str(dist.metadata.get("Name") or "")  # type: ignore[attr-defined]  # an email Message: get() misses quietly.lower().replace("_", "-")
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
    probe_load(what, library=key)  # what loading it runs runs first in a child: a crash there is one line
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
           "check_package_minimum", "check_runtime", "find_distribution", "installed_packages", "load_package",
           "missing_api", "older", "probe_load", "register", "release"]
