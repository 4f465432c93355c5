"""A broken ONNX Runtime install as the attack: a copy of the installed package with a native
library missing or cut short, no ``__version__``, a version holding a terminal escape, a device
list that raises, a package that raises when imported; put first on ``PYTHONPATH``.

A broken onnxruntime is an install problem: exit 2, one message naming the wheel and version to
reinstall, never exit 70 or a death by signal. The oracle for the missing and truncated
libraries is Python itself: where ``import onnxruntime`` works from the copy, ep-testbed must work
too (exit 0); where it fails or crashes, ep-testbed must refuse in one message.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from environment_kit import BROKEN_ORT, broken_onnxruntime, check, clean_env, cli
from sandbox import ROOT

pytestmark = pytest.mark.slow  # copies onnxruntime, runs ep-testbed commands

COMMANDS = {"devices": ["devices", "--ep", "cpu"], "doctor": ["doctor", "--ep", "cpu"],
            "run": ["run", "--ep", "cpu", "--tier", "smoke", "--ops", "max_pooling2", "--jobs", "1", "--no-progress"]}
#: What each layout must get (exit codes): refused, naming the reinstall (2); a version that only
#: prints oddly works (its expectations' version ranges may then judge a case ``fixed``: 1); the
#: rest as ``import onnxruntime`` fares, except that a core library cut short is refused even where
#: the Python module does not load it (the install is broken: a plugin or a C API user would).
EXPECTED = {"no-version": (2,), "device-list-raises": (2,), "raises-at-import": (2,), "escape-in-version": (0, 1),
            "truncated-core-library": (2,), "pybind-state-exits": (2,)}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    return {how: broken_onnxruntime(tmp_path_factory.mktemp(how), how) for how in BROKEN_ORT}


def _imports(root) -> bool:
    """Whether Python itself imports onnxruntime from the copy at ``root`` (the oracle)."""
    done = subprocess.run([sys.executable, "-c", "import onnxruntime, sys; sys.exit(onnxruntime.__file__ is None)"],
                          env=clean_env(PYTHONPATH=str(root)), cwd=ROOT, capture_output=True, timeout=120)
    return done.returncode == 0


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("how", BROKEN_ORT)
def test_a_broken_onnxruntime_is_an_install_problem(tmp_path, layouts, how, command):
    root = layouts[how]
    expected = EXPECTED.get(how, (0,) if _imports(root) else (2,))
    out = ["--out", tmp_path / "r"] if command == "run" else []
    done = check(cli(*COMMANDS[command], *out, env=clean_env(PYTHONPATH=str(root))), expected)
    if expected == (2,):
        assert "pip install --force-reinstall onnxruntime" in done.stderr and "install problem" in done.stderr
        assert not (tmp_path / "r" / "results.jsonl").exists()
    if how == "escape-in-version" and command == "doctor":
        assert "1.2.3\\x1b[2J\\nverdict: pass" in done.stdout + done.stderr


def test_the_probe_is_made_once_per_library_file(tmp_path):
    from ep_testbed.harness.core import installed

    library = tmp_path / "libx.so"
    library.write_bytes(b"not a library")
    first = installed.probe_native([str(library)])
    assert first is not None and "libx.so" in first  # the loader's own error names it
    installed._PROBED.clear()
    assert installed.probe_native([]) is None
