"""What is installed: the ONNX Runtime wheel and version, and the machine, as run headers record them.

A leaf of the foundation: the EP layer, the device identity and the expectations' version
ranges all read it, and it imports nothing of the testbed.
"""

from __future__ import annotations

import csv
import functools
import importlib.metadata
import inspect
import os
import platform
import socket
import sys

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
    import onnxruntime  # loaded on first use: the CLI, reports and diffs start without it

    return str(onnxruntime.__version__)


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


__all__ = ["ORT_DISTRIBUTIONS", "distributions_of", "machine_info", "ort_flavour", "ort_version"]
