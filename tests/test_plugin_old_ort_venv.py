"""The plugin path refused on a real older ONNX Runtime: onnxruntime 1.23.2 with onnxruntime-ep-webgpu 0.4.0.

1.23.2 has the plugin registration and device API but not ``InferenceSession.get_provider_graph_assignment_info``
(1.24.1), without which a plugin's placement cannot be proven node by node, and it is older than the
1.24.4 that onnxruntime-ep-webgpu's documentation asks for. Each refusal is exit 2 with one line and
no traceback; the device list and ``--ep-device`` still work for the CPU EP there.

The venv is made by ``bash tools/ort-venv.sh 1.23.2`` (``.venv-ort123``) plus ``bash
tools/plugin-packages.sh .venv-ort123/bin/python onnxruntime-ep-webgpu``; ``EP_TESTBED_OLD_PLUGIN_PYTHON``
may name another interpreter. Without it the tests are skipped with those commands, except under CI
(``CI`` set), where ``.ci/run`` makes it and its absence is a failure.
"""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = "Scripts" if os.name == "nt" else "bin"
VENV_PYTHON = os.environ.get("EP_TESTBED_OLD_PLUGIN_PYTHON") or os.path.join(
    ROOT, ".venv-ort123", BIN, "python.exe" if os.name == "nt" else "python")
VERSION = "1.23.2"


@pytest.fixture(scope="module")
def old_python():
    setup = ("bash tools/ort-venv.sh 1.23.2 && bash tools/plugin-packages.sh .venv-ort123/bin/python "
             "onnxruntime-ep-webgpu")
    if not os.path.exists(VENV_PYTHON):
        message = f"no onnxruntime {VERSION} venv at {VENV_PYTHON}; create it with: {setup}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    probe = subprocess.run([VENV_PYTHON, "-c", "import onnxruntime as o, onnxruntime_ep_webgpu as w; "
                                               "print(o.__version__); print(w.get_library_path())"],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, f"{probe.stderr[-1000:]}\nset it up with: {setup}"
    version, library = probe.stdout.split()
    assert version == VERSION, version
    return VENV_PYTHON, library


def cli(python, *args):
    p = subprocess.run([python, "-m", "ep_testbed.harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    return p.returncode, p.stdout, p.stderr


def refusal(code, err):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.slow
def test_a_package_whose_documented_minimum_is_not_met_is_refused(old_python, tmp_path):
    code, _, err = cli(old_python[0], "run", "--ep", "plugin:onnxruntime-ep-webgpu", "--out", str(tmp_path / "r"))
    line = refusal(code, err)
    assert line.startswith("ep-testbed: --ep plugin:onnxruntime-ep-webgpu: onnxruntime-ep-webgpu 0.4.0 needs "
                           "onnxruntime >= 1.24.4")
    assert f"this environment has onnxruntime {VERSION}" in line and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_an_onnx_runtime_too_old_for_plugins_is_refused_naming_what_it_lacks(old_python):
    code, out, err = cli(old_python[0], "doctor", "--ep", "webgpu", "--ep-library", old_python[1])
    line = refusal(code, err)
    assert f"onnxruntime {VERSION} is too old for plugin EPs: it lacks " \
           "InferenceSession.get_provider_graph_assignment_info" in line
    assert 'pip install -U "onnxruntime>=1.24.1"' in line and "FAIL (see stderr)" in out


@pytest.mark.slow
def test_devices_names_the_refused_plugin_and_still_lists_and_selects_the_cpu(old_python):
    code, out, err = cli(old_python[0], "devices")
    assert code == 0 and "CPUExecutionProvider" in out and "Traceback" not in err
    assert "plugin onnxruntime-ep-webgpu: not registered: " in out and "needs onnxruntime >= 1.24.4" in out
    code, out, _ = cli(old_python[0], "doctor", "--ep", "cpu", "--ep-device", "type=CPU")
    assert code == 0 and "<- runs here" in out and out.strip().endswith("ready")
