"""Runs the model-level OpenVINO tests (test_models_openvino.py) inside the OpenVINO venv.

Same arrangement as tests/harness/test_openvino_venv.py: the venv made by
``tools/openvino-venv.sh`` (default ``.venv-openvino`` at the repository root;
``EP_TESTBED_OPENVINO_PYTHON`` may name another interpreter) runs the file with
``EP_TESTBED_REQUIRE_OPENVINO=1``, so a venv without the EP fails instead of skipping.
"""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PYTHON = os.environ.get("EP_TESTBED_OPENVINO_PYTHON") or os.path.join(
    ROOT, ".venv-openvino", "Scripts" if os.name == "nt" else "bin", "python.exe" if os.name == "nt" else "python")


def test_model_checks_on_openvino_in_its_venv():
    if not os.path.exists(VENV_PYTHON):
        message = f"no OpenVINO venv at {VENV_PYTHON}; create it with: bash tools/openvino-venv.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    import onnxruntime

    if "OpenVINOExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this interpreter has the OpenVINO EP: test_models_openvino.py runs here directly")
    env = dict(os.environ, EP_TESTBED_REQUIRE_OPENVINO="1")
    p = subprocess.run([VENV_PYTHON, "-m", "pytest", "tests/models/test_models_openvino.py", "-q", "-rs",
                        "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert " passed" in p.stdout and "skipped" not in p.stdout.splitlines()[-1], p.stdout[-2000:]
