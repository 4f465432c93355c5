"""Runs the OpenVINO EP tests inside the OpenVINO venv.

onnxruntime-openvino and onnxruntime provide the same module, so the OpenVINO EP lives in its
own environment, made by ``tools/openvino-venv.sh`` (default ``.venv-openvino`` at the
repository root; ``EP_TESTBED_OPENVINO_PYTHON`` may name another interpreter). Each test file
below runs there with ``EP_TESTBED_REQUIRE_OPENVINO=1``, so a venv without the EP fails instead
of skipping. Without such a venv these tests are skipped with the command that creates it,
except under CI (``CI`` set), where ``.ci/run`` creates it and its absence is a failure.
"""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PYTHON = os.environ.get("EP_TESTBED_OPENVINO_PYTHON") or os.path.join(
    ROOT, ".venv-openvino", "Scripts" if os.name == "nt" else "bin", "python.exe" if os.name == "nt" else "python")


#: The OpenVINO test files, run together: one interpreter start and one OpenVINO load for both.
TEST_FILES = ["tests/harness/test_harness_openvino.py", "tests/models/test_models_openvino.py"]


@pytest.mark.slow
def test_openvino_tests_pass_in_the_openvino_venv():
    if not os.path.exists(VENV_PYTHON):
        message = f"no OpenVINO venv at {VENV_PYTHON}; create it with: bash tools/openvino-venv.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    import onnxruntime

    if "OpenVINOExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip(f"this interpreter has the OpenVINO EP: {', '.join(TEST_FILES)} run here directly")
    env = dict(os.environ, EP_TESTBED_REQUIRE_OPENVINO="1")
    p = subprocess.run([VENV_PYTHON, "-m", "pytest", *TEST_FILES, "-q", "-rs", "-p", "no:cacheprovider"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert " passed" in p.stdout and "skipped" not in p.stdout.splitlines()[-1], p.stdout[-2000:]
