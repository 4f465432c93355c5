"""An interpreter that has numpy and onnxruntime and nothing else: where a repro bundle must run (test helper).

``make(folder)`` creates a venv without pip and without the system site-packages, then links into
its site-packages only the top-level entries of two installed distributions: numpy, and the one
that provides the ``onnxruntime`` module (onnxruntime, onnxruntime-directml, onnxruntime-openvino).
Their own dependencies are left out, as ``import onnxruntime`` needs none of them; ep-testbed,
onnx and every other package of this environment cannot be imported there. Folders are linked
(a directory junction where Windows refuses a symbolic link), so making one takes a fraction of
a second.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path


def distribution_of(module: str) -> str:
    """The installed distribution that provides top-level ``module``."""
    names = importlib.metadata.packages_distributions().get(module)
    if not names:
        raise LookupError(f"no installed distribution provides {module!r}")
    return names[0]


def top_level_entries(distribution: str) -> list[Path]:
    """The files and folders a distribution installs at the top of its site-packages (its
    ``.dist-info`` and anything installed outside site-packages, such as scripts, left out)."""
    dist = importlib.metadata.distribution(distribution)
    tops = {Path(str(f)).parts[0] for f in dist.files or ()}
    tops = {t for t in tops if t != ".." and not t.endswith(".dist-info") and t != "__pycache__"}
    return sorted(Path(str(dist.locate_file(t))) for t in tops)


def _link(source: Path, target: Path) -> None:
    """``target`` -> ``source``: a symbolic link, else (Windows without the privilege) a
    directory junction for a folder or a copy for a file."""
    try:
        os.symlink(source, target, target_is_directory=source.is_dir())
    except OSError:
        if not source.is_dir():
            shutil.copy2(source, target)
            return
        import _winapi  # only reached on Windows, where junctions need no privilege

        _winapi.CreateJunction(str(source), str(target))


def make(folder: Path) -> str:
    """The path of a new interpreter in ``folder`` that can import numpy and onnxruntime alone."""
    venv.EnvBuilder(with_pip=False, system_site_packages=False, symlinks=os.name != "nt").create(folder)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()
    for distribution in ("numpy", distribution_of("onnxruntime")):
        for entry in top_level_entries(distribution):
            _link(entry, Path(site) / entry.name)
    return str(python)


def clean_env() -> dict[str, str]:
    """This process's environment without the variables that would add folders to a child
    interpreter's import path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP",
                                                             "PYTHONUSERBASE")}


def importable(python: str, modules: list[str]) -> dict[str, bool]:
    """Which of ``modules`` ``python`` can import (asked of the interpreter itself)."""
    code = ("import importlib.util, sys\n"
            "for m in sys.argv[1:]: print(m, importlib.util.find_spec(m) is not None)")
    out = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, check=True,
                         env=clean_env()).stdout
    return {name: flag == "True" for name, flag in (line.split() for line in out.splitlines())}


if __name__ == "__main__":  # python tests/reports/bare_python.py FOLDER: make one and print its path
    print(make(Path(sys.argv[1])))
