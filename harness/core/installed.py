"""What is installed: the ONNX Runtime wheel and version, and the machine, as run headers record them.

A leaf of the foundation: the EP layer, the device identity and the expectations' version
ranges all read it, and it imports nothing of the testbed.

A broken ONNX Runtime is an install problem, never a crash or a bug of the testbed:
``guard_onnxruntime()`` (installed by the command line for the length of a command) stands in
front of the first ``import onnxruntime`` of the process. Before Python loads the package's
native modules (``onnxruntime_pybind11_state``, ``libonnxruntime.so*``), a child process loads
them (``probe_native``: a truncated library dies of SIGBUS there, not here; about 20 ms, once per
library file and process), and any error while the package initialises (a module missing, a
library that will not load) becomes ``OrtBroken``: one message naming the wheel and version to
reinstall (``reinstall_hint``). ``ort_version()`` raises it too for a package without a version.
"""

from __future__ import annotations

import csv
import functools
import importlib.abc
import importlib.metadata
import importlib.util
import inspect
import os
import platform
import signal
import socket
import subprocess
import sys
from typing import Any, Callable

#: Wheels that ship the ``onnxruntime`` module, most specific first (only one may be installed).
ORT_DISTRIBUTIONS = (
    "onnxruntime-directml", "onnxruntime-windowsml", "onnxruntime-openvino", "onnxruntime-gpu", "onnxruntime-webgpu",
    "onnxruntime-qnn", "onnxruntime-training", "onnxruntime",
)


@functools.lru_cache(maxsize=1)
def _module_distributions() -> dict[str, tuple[str, ...]]:
    """Top-level module -> the installed distributions that provide it, read once per process
    (a run header, the preflight and the plugin checks each ask, and what is installed does not
    change while a command runs). The same answer as ``importlib.metadata.packages_distributions``
    without its cost: on Python 3.12 that stats every file of every distribution (seconds where
    a few hundred packages are installed); this reads each one's ``top_level.txt``, else the
    first part of the paths its ``RECORD`` lists."""
    found: dict[str, list[str]] = {}
    try:
        for dist in importlib.metadata.distributions():
            name = dist.metadata["Name"]
            for module in _top_level_modules(dist) if name else ():
                found.setdefault(module, []).append(name)
    except Exception:  # broken metadata: nothing known (callers fall back or say what is missing)
        return {}
    return {module: tuple(names) for module, names in found.items()}


def _top_level_modules(dist: importlib.metadata.Distribution) -> set[str]:
    """The top-level modules ``dist`` provides: as its ``top_level.txt`` declares them, else the
    first directory of each path in its ``RECORD`` that can be a package and the
    module name of each file at the top."""
    declared = dist.read_text("top_level.txt")
    if declared and declared.split():
        return set(declared.split())
    modules = set()
    for row in csv.reader((dist.read_text("RECORD") or "").splitlines()):
        parts = row[0].replace("\\", "/").split("/") if row else []
        if len(parts) > 1 and parts[0].isidentifier() and parts[0] != "__pycache__":
            modules.add(parts[0])  # a package (not ``..``, ``x.dist-info``, ``numpy.libs``)
        elif len(parts) == 1 and (module := inspect.getmodulename(parts[0])):
            modules.add(module)
    return modules


def distributions_of(module: str) -> list[str]:
    """The installed distributions that provide top-level ``module`` (several for ``onnxruntime``
    when two wheels overwrite each other)."""
    return list(_module_distributions().get(module, ()))


def ort_flavour() -> str:
    """The installed wheel that provides ``onnxruntime`` (``onnxruntime-directml``, ...)."""
    names = distributions_of("onnxruntime")
    for candidate in ORT_DISTRIBUTIONS:
        if candidate in names:
            return candidate
    if names:
        return names[0]
    for candidate in ORT_DISTRIBUTIONS:  # e.g. an egg-link install without top_level.txt
        try:
            importlib.metadata.distribution(candidate)
            return candidate
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def ort_version() -> str:
    """The installed ONNX Runtime's ``__version__``; ``OrtBroken`` when it has none."""
    import onnxruntime  # loaded on first use: the CLI, reports and diffs start without it

    version = getattr(onnxruntime, "__version__", None)
    if not isinstance(version, str) or not version.strip():
        raise OrtBroken(f"the installed onnxruntime ({_where(onnxruntime)}) has no __version__, so what it is cannot "
                        f"be told or recorded.\nNote: {reinstall_hint()}")
    return version


class OrtBroken(ImportError):
    """The installed ONNX Runtime cannot be loaded or used as installed (the message names what to
    reinstall): an install problem, exit 2, never a bug of the testbed."""


def reinstall_hint() -> str:
    """``reinstall it: pip install --force-reinstall <wheel>==<version>``, from the installed
    distribution's metadata (the package itself may be what is broken)."""
    flavour = ort_flavour()
    try:
        pinned = f"{flavour}=={importlib.metadata.version(flavour)}"
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pinned = flavour if flavour != "unknown" else "onnxruntime"
    return f"this is an install problem, not a bug in ep-testbed: reinstall it: pip install --force-reinstall {pinned}"


def _where(module: Any) -> str:
    """Where a module was loaded from, for a message (escaped: a path holds any text)."""
    path = getattr(module, "__file__", None) or "?"
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in os.path.dirname(str(path)))


#: Seconds a child process may take to load ONNX Runtime's native modules (tens of ms when healthy).
PROBE_TIMEOUT = 60.0
#: (path, mtime, size) of each native library a child loaded without harm, in this process.
_PROBED: set[tuple[str, int, int]] = set()
#: The child's program: load each library named on its command line, in order.
_LOAD_LIBRARIES = ("import ctypes, os, sys\nanswer = os.dup(1)\nos.dup2(2, 1)\n"
                   "for path in sys.argv[1:]:\n    ctypes.CDLL(path)\nos.write(answer, b'loaded')\n")


def probe_native(paths: list[str], timeout: float = PROBE_TIMEOUT) -> str | None:
    """Load the shared libraries ``paths`` in a child process (``ctypes``, in order); None when
    it loaded them all and exited, else what happened (the loader's error, the signal that killed
    it, or a hang past ``timeout``). Libraries already probed unchanged are not loaded again."""
    return NativeProbe(paths).result(timeout)


class NativeProbe:
    """``probe_native`` begun now and finished by ``result``: the child loads the libraries while
    this process does other work (the command line starts it as it starts; ``guard_onnxruntime``)."""

    def __init__(self, paths: list[str]):
        """Start the child for the libraries of ``paths`` not yet probed unchanged (none: no child)."""
        self.paths = list(paths)
        self._keys = [_file_key(p) for p in self.paths]
        self._todo = [p for p, key in zip(self.paths, self._keys) if key not in _PROBED]
        self._proc: subprocess.Popen | None = None
        if self._todo:
            try:
                self._proc = subprocess.Popen([sys.executable, "-S", "-I", "-c", _LOAD_LIBRARIES, *self._todo],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, start_new_session=True)
            except OSError:  # no process could start (a process limit): the libraries load here, unprobed
                self._todo = []

    def discard(self) -> None:
        """Stop the child, its answer unwanted."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        if self._proc is not None:
            self._proc.communicate()
        self._proc = None

    def result(self, timeout: float = PROBE_TIMEOUT) -> str | None:
        """None when the child loaded every library and exited; else what happened (``probe_native``)."""
        if self._proc is None:
            return None
        try:
            out, err = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.communicate()
            return f"loading {', '.join(self._todo)} did not end within {timeout:g} s"
        code = self._proc.returncode
        if code == 0 and out.endswith(b"loaded"):
            _PROBED.update(key for key in self._keys if key[0])
            return None
        if code == 0:  # a library ended the process quietly while it loaded (exit(0) in a constructor)
            return "loading it ended the process that tried before it finished (status 0, nothing said)"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"loading it killed the process that tried ({name}, signal {-code})"
        text = err.decode("utf-8", "replace")
        last = [line for line in text.strip().splitlines() if line.strip()][-1:] or [f"status {code}"]
        return last[0].removeprefix("OSError: ")[:300]


def _file_key(path: str) -> tuple[str, int, int]:
    """``(real path, mtime in ns, size)``: a changed file is probed again."""
    try:
        st = os.stat(path)
    except OSError:
        return ("", 0, 0)
    return (os.path.realpath(path), st.st_mtime_ns, st.st_size)


#: The native modules of the ``onnxruntime`` package that importing it loads (other libraries of
#: its folder, an EP's, load only when that EP is asked for).
_NATIVE = ("onnxruntime_pybind11_state", "libonnxruntime.so", "libonnxruntime.")


class _GuardedLoader(importlib.abc.Loader):
    """The package's own loader, with every error of its initialisation made an ``OrtBroken``."""

    def __init__(self, loader: Any, origin: str):
        self._loader, self._origin = loader, origin

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        try:
            self._loader.exec_module(module)
        except (OrtBroken, KeyboardInterrupt):
            raise
        except Exception as exc:
            text = " ".join(str(exc).split())[:300]
            raise OrtBroken(f"the installed onnxruntime ({self._origin}) cannot be imported: {type(exc).__name__}: "
                            f"{text}.\nNote: {reinstall_hint()}") from exc


class _OnnxRuntimeGuard(importlib.abc.MetaPathFinder):
    """The import guard of the module docstring (a finder that stands first on ``sys.meta_path``)."""

    def __init__(self, early: bool = False) -> None:
        """``early``: begin the probe now (``NativeProbe``), for the import to come."""
        self._busy = False
        self._early: NativeProbe | None = None
        if early:
            spec = self._spec()
            if spec is not None:
                self._early = NativeProbe(_native_libraries(list(spec.submodule_search_locations)[0]))

    def _spec(self) -> Any:
        """The other finders' spec of the ``onnxruntime`` package (nothing executed), or None."""
        self._busy = True
        try:
            spec = importlib.util.find_spec("onnxruntime")
        except (ImportError, ValueError):
            return None
        finally:
            self._busy = False
        return spec if spec is not None and spec.loader is not None and spec.submodule_search_locations else None

    def discard(self) -> None:
        """End an early probe nobody waited for (the command never imported onnxruntime)."""
        early, self._early = self._early, None
        if early is not None:
            early.discard()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "onnxruntime" or self._busy:
            return None
        spec = self._spec()
        if spec is None:
            return None  # not installed (or not a package): the import's own error says so
        folder = list(spec.submodule_search_locations)[0]
        origin = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in folder)
        native = _native_libraries(folder)
        early, self._early = self._early, None
        probe = early if early is not None and early.paths == native else NativeProbe(native)
        problem = probe.result() if native else None
        if problem is not None:
            raise OrtBroken(f"the installed onnxruntime ({origin}) cannot be loaded: {problem}.\nNote: "
                            f"{reinstall_hint()}")
        spec.loader = _GuardedLoader(spec.loader, origin)
        return spec


def _native_libraries(folder: str) -> list[str]:
    """The native modules under ``folder``'s ``capi`` that importing the package loads, the core
    library first (the Python module links to it where the wheel ships it apart)."""
    capi = os.path.join(folder, "capi")
    try:
        names = sorted(os.listdir(capi))
    except OSError:
        return []
    core = [n for n in names if n.startswith(_NATIVE[1:]) and (".so" in n or n.endswith((".dll", ".dylib")))]
    module = [n for n in names if n.startswith(_NATIVE[0]) and n.endswith((".so", ".pyd"))]
    return [os.path.join(capi, n) for n in core + module if os.path.isfile(os.path.join(capi, n))]


def guard_onnxruntime(early: bool = False) -> Callable[[], None]:
    """Stand the import guard in front of ``import onnxruntime`` (module docstring) unless it is
    imported already; returns the function that removes it. ``early``: begin its probe now, so
    that it runs beside what the process does before the import (a command that will import it)."""
    if "onnxruntime" in sys.modules:
        return lambda: None
    guard = _OnnxRuntimeGuard(early)
    sys.meta_path.insert(0, guard)

    def remove() -> None:
        if guard in sys.meta_path:
            sys.meta_path.remove(guard)
        guard.discard()

    return remove


def machine_info() -> dict[str, str]:
    """Platform, Python, CPU and host name, as recorded in every run header."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": f"{cpu} ({os.cpu_count()} logical cores)",
        "hostname": socket.gethostname(),
    }


__all__ = ["ORT_DISTRIBUTIONS", "OrtBroken", "PROBE_TIMEOUT", "distributions_of", "guard_onnxruntime", "machine_info",
           "NativeProbe", "ort_flavour", "ort_version", "probe_native", "reinstall_hint"]
