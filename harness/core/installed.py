"""What is installed: the ONNX Runtime wheel and version, and the machine, as run headers record them.

A leaf of the foundation: the EP layer, the device identity and the expectations' version
ranges all read it, and it imports nothing of the testbed.
"""

from __future__ import annotations

import functools
import importlib.metadata
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
    """Top-level module -> the installed distributions that provide it, read once per process:
    ``importlib.metadata.packages_distributions`` reads every distribution's file list (a
    fifth of a second with a few hundred installed), and a run header, the preflight and the
    plugin checks each ask (what is installed does not change while a command runs)."""
    try:
        return {module: tuple(names) for module, names in importlib.metadata.packages_distributions().items()}
    except Exception:  # broken metadata: nothing known (callers fall back or say what is missing)
        return {}


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
