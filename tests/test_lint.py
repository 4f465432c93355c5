"""The linter and the type checker, as part of the suite: the README's test command fails with
their output when the code picks up an unused name, a misordered import or a type error.

ruff checks every Python file (pyflakes and import order: pyproject.toml's [tool.ruff]); mypy
checks every module of the four code folders (pyproject.toml's [tool.mypy], run through tools/typecheck.py, which
lays the folders out as the ep_testbed namespace). Both are in the ``test`` extra: a missing one
fails here with the install command, since a check that did not run is not a pass.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(tool: str, argv: list[str]) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(tool) is None:
        pytest.fail(f"{tool} is not installed in {sys.executable}.\nNote: pip install -e '.[test]' installs it")
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing():
    done = _run("ruff", ["-m", "ruff", "check", "--no-cache", "."])
    assert done.returncode == 0, f"ruff check . (exit {done.returncode}):\n{done.stdout}{done.stderr}"


def test_mypy_finds_nothing_in_any_module():
    done = _run("mypy", ["tools/typecheck.py"])
    assert done.returncode == 0, f"python tools/typecheck.py (exit {done.returncode}):\n{done.stdout}{done.stderr}"
    assert "Success" in done.stdout, done.stdout
