"""Type-check every module of the four code folders with mypy, configured in pyproject.toml ([tool.mypy]).

    python tools/typecheck.py            # what tests/test_lint.py runs; extra arguments go to mypy

The four code folders install under one import namespace, ``ep_testbed`` (pyproject's
``package-dir``: ``reference`` is ``ep_testbed.reference``), through setuptools' editable finder,
which mypy cannot follow. So this lays them out as ``ep_testbed/<folder>`` (links, or copies
where links are not allowed) in a scratch folder kept between runs (mypy's cache lives there
too) and runs mypy in it. Exit code: mypy's (0 clean, 1 type errors, 2 usage).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The folders that install as ``ep_testbed.<folder>``.
FOLDERS = ("reference", "graphs", "harness", "reports")


def layout() -> Path:
    """The scratch folder holding ``ep_testbed/<folder>`` for every code folder of this checkout."""
    scratch = Path(tempfile.gettempdir()) / f"ep-testbed-typecheck-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}"
    package = scratch / "ep_testbed"
    package.mkdir(parents=True, exist_ok=True)
    for folder in FOLDERS:
        target = package / folder
        if target.is_symlink() and target.resolve() == ROOT / folder:
            continue
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        try:
            target.symlink_to(ROOT / folder, target_is_directory=True)
        except OSError:  # Windows without the right to make links: a copy (refreshed every run)
            shutil.copytree(ROOT / folder, target, ignore=shutil.ignore_patterns("__pycache__"))
    return scratch


def main(argv: list[str]) -> int:
    """Run mypy on the layout with the repository's configuration; its exit code."""
    scratch = layout()
    try:
        return subprocess.call([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                                "--cache-dir", str(scratch / ".mypy_cache"), *argv], cwd=scratch)
    finally:
        for folder in FOLDERS:  # copies go stale: never reuse one
            target = scratch / "ep_testbed" / folder
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
