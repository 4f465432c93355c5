"""Plugin EPs through ONNX Runtime's real plugin API (harness/eps/plugins.py, adapters.py): the
``onnxruntime-ep-webgpu`` and ``onnxruntime-ep-openvino`` packages from PyPI, registered into the
installed onnxruntime.

The WebGPU plugin lists no device here (no Vulkan adapter); the OpenVINO plugin offers only Intel
devices, so it lists this machine's CPU where the CPU is Intel and nothing where it is AMD (both
kinds of machine run this suite: each test checks what its machine must show). What is proven for
a user without the hardware: the libraries register for real, the device list is empty, and every
refusal on the plugin path (no device, not a plugin package, a package that is not installed, a
library ONNX Runtime will not load, two libraries named) is exit 2 with one line and no traceback,
from every command that takes ``--ep``. (An ONNX Runtime too old for plugins, and one older than
a package's documented minimum, are refused in ``tests/test_plugin_old_ort_venv.py`` with a real
onnxruntime 1.23.2.) Running the catalog on a plugin's device was done on a GPU machine
(harness/README.md, "Plugin EPs"); selection on its recorded device list is tested in
``test_harness_devices.py``.

The packages are installed by ``bash tools/plugin-packages.sh`` (``.ci/run`` does it); without them
these tests are skipped with that command, except under CI (``CI`` set), where that is a failure.
"""

import importlib.util
import os
import subprocess
import sys

import onnxruntime as ort
import pytest
from local_cases import HERE

from ep_testbed.harness.eps import adapters, plugins
from ep_testbed.harness.eps.providers import EpNotAvailable

ROOT = os.path.dirname(os.path.dirname(HERE))
PACKAGES = ("onnxruntime_ep_webgpu", "onnxruntime_ep_openvino")


def intel_cpu() -> bool:
    """Whether this machine's CPU is Intel's (the OpenVINO plugin's CPU device is Intel only)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return "GenuineIntel" in info.read()
    except OSError:
        return False


@pytest.fixture(scope="module", autouse=True)
def plugin_packages():
    missing = [p for p in PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        message = f"plugin packages not installed: {', '.join(missing)}; install them with: bash tools/plugin-packages.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def cli(*args, timeout=300):
    """``ep-testbed ARGS`` in a fresh process: (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def one_line_refusal(code, err, prefix="ep-testbed: "):
    """The refusal's single stderr line (asserting exit 2, one line, no traceback)."""
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


def test_real_plugin_libraries_register_once_per_process_and_list_no_device_here():
    import onnxruntime_ep_openvino
    import onnxruntime_ep_webgpu

    for package in (onnxruntime_ep_webgpu, onnxruntime_ep_openvino):
        name = plugins.register(package.get_library_path(), "test")
        assert name.startswith("ep-testbed-") and plugins.register(package.get_library_path(), "test") == name
    listed = {d.ep_name for d in ort.get_ep_devices()}
    assert "CPUExecutionProvider" in listed
    assert "WebGpuExecutionProvider" not in listed  # this machine: no Vulkan adapter
    assert ("OpenVINOExecutionProvider" in listed) == intel_cpu()


@pytest.mark.parametrize("package,provider,version", [("onnxruntime-ep-webgpu", "WebGpuExecutionProvider", "0.4"),
                                                      ("onnxruntime_ep_openvino", "OpenVINOExecutionProvider", "1.8")])
def test_a_plugin_package_is_read_through_the_packaging_convention(package, provider, version):
    found = plugins.load_package(package, "--ep plugin:x")
    assert found.distribution == package.replace("_", "-") and found.version.startswith(version)
    assert found.ep_names == (provider,) and os.path.isfile(found.library)
    assert found.module == package.replace("-", "_")


@pytest.mark.parametrize("package,hint", [("onnxruntime-ep-webgpu", "libvulkan.so.1"),
                                          ("onnxruntime-ep-openvino", "only Intel devices")])
def test_a_plugin_with_no_device_here_is_refused_before_any_case(package, hint):
    if package == "onnxruntime-ep-openvino" and intel_cpu():  # it lists this machine's CPU: it is taken
        spec = adapters.resolve(f"plugin:{package}")
        assert spec.provider == "OpenVINOExecutionProvider" and spec.holder == "plugin"
        return
    with pytest.raises(EpNotAvailable) as info:
        adapters.resolve(f"plugin:{package}")
    text = str(info.value)
    assert text.startswith(f"--ep plugin:{package}: the plugin registered, but ONNX Runtime lists no device")
    assert hint in text and "\n" not in text


@pytest.mark.parametrize("argv", [
    ["run", "--out", "{tmp}/run", "--no-progress"],
    ["fuzz", "--budget", "5", "--out", "{tmp}/fuzz", "--no-progress"],
    ["model", "run", "{model}", "--out", "{tmp}/model"],
    ["doctor"],
    ["devices"],
], ids=lambda argv: argv[0] if argv[0] != "model" else "model-run")
def test_every_command_refuses_a_plugin_with_no_device_in_one_line(argv, tmp_path):
    model = os.path.join(ROOT, "tests", "data", "models", "resnet18_stem.onnx")
    args = [a.format(tmp=tmp_path, model=model) for a in argv]
    code, _, err = cli(*args, "--ep", "plugin:onnxruntime-ep-webgpu")
    line = one_line_refusal(code, err, "ep-testbed: doctor: " if argv[0] == "doctor" else "ep-testbed")
    assert "lists no device for WebGpuExecutionProvider" in line
    assert not any(tmp_path.iterdir()), "nothing may be written for a refused EP"


def test_the_pytest_plugin_refuses_a_plugin_with_no_device_as_a_usage_error():
    p = subprocess.run([sys.executable, "-m", "pytest", "tests/conformance", "-p", "no:cacheprovider", "--ep",
                        "plugin:onnxruntime-ep-webgpu", "--co", "-q"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 4 and "Traceback" not in p.stdout + p.stderr
    assert "lists no device for WebGpuExecutionProvider" in p.stderr


def test_the_openvino_plugin_runs_the_smoke_tier_where_it_lists_a_device(tmp_path):
    """Where the OpenVINO plugin lists this machine's CPU (an Intel one), the smoke tier runs on it
    with every node proven on OpenVINOExecutionProvider and no unexplained outcome; elsewhere the
    run is refused in one line."""
    code, out, err = cli("run", "--ep", "plugin:onnxruntime-ep-openvino", "--tier", "smoke", "--out",
                         str(tmp_path / "r"), "--no-progress", timeout=600)
    if not intel_cpu():
        assert "lists no device for OpenVINOExecutionProvider" in one_line_refusal(code, err)
        return
    import json

    lines = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    cases = [line for line in lines if line["type"] == "case"]
    assert code == 0 and cases, out + err
    for case in cases:
        if case["outcome"] in ("pass", "tie-only", "known"):
            assert set(case["placement"].values()) <= {"OpenVINOExecutionProvider"}, case["id"]


def test_a_library_path_registers_the_real_library_and_is_refused_for_no_device(tmp_path):
    import onnxruntime_ep_webgpu

    code, _, err = cli("run", "--ep", "webgpu", "--ep-library", onnxruntime_ep_webgpu.get_library_path(),
                       "--out", str(tmp_path / "run"))
    line = one_line_refusal(code, err)
    assert not (tmp_path / "run").exists()
    assert line.startswith(f"ep-testbed: --ep-library {onnxruntime_ep_webgpu.get_library_path()}: the plugin "
                           "registered, but ONNX Runtime lists no device for WebGpuExecutionProvider")


@pytest.mark.parametrize("args,words", [
    (["--ep", "plugin:numpy"], ["numpy is not an ONNX Runtime plugin EP package", "get_library_path()"]),
    (["--ep", "plugin:onnxruntime-ep-nothing"], ["no plugin package onnxruntime_ep_nothing",
                                                  "pip install onnxruntime-ep-nothing"]),
    (["--ep", "plugin:../x"], ["is not a package name"]),
    (["--ep", "webgpu", "--ep-library", "{tmp}/not-a-library.so"], ["refused the plugin library",
                                                                     "Failed to load library"]),
    (["--ep", "webgpu", "--ep-library", "/no/such/lib.so"], ["/no/such/lib.so does not exist"]),
    (["--ep", "webgpu", "--ep-library", "/tmp"], ["/tmp is not a regular file"]),
    (["--ep", "plugin:onnxruntime-ep-webgpu", "--ep-library", "/no/lib.so"], ["both name a plugin library"]),
    (["--ep", "plugin:onnxruntime-ep-webgpu:CUDAExecutionProvider"], ["provides WebGpuExecutionProvider, not "
                                                                       "CUDAExecutionProvider"]),
    (["--ep", "cpu", "--ep-device", "type=GPU"], ["--ep-device type=GPU: no device of CPUExecutionProvider matches",
                                                  "0: CPU "]),
])
def test_wrong_packages_libraries_and_selectors_are_one_line_refusals(args, words, tmp_path):
    (tmp_path / "not-a-library.so").write_text("not a shared library\n" * 200, encoding="utf-8")
    code, _, err = cli("run", *[a.format(tmp=tmp_path) for a in args], "--out", str(tmp_path / "run"))
    line = one_line_refusal(code, err)
    assert all(w in line for w in words), line
    assert not (tmp_path / "run").exists()


def test_a_package_below_its_documented_onnx_runtime_is_refused_naming_both_versions():
    with pytest.raises(EpNotAvailable) as info:
        plugins.check_package_minimum("onnxruntime-ep-webgpu", "0.4.0", "--ep plugin:onnxruntime-ep-webgpu",
                                      installed_ort="1.24.3")
    text = str(info.value)
    assert "onnxruntime-ep-webgpu 0.4.0 needs onnxruntime >= 1.24.4" in text and "1.24.3" in text
    assert "pypi.org/project/onnxruntime-ep-webgpu" in text
    plugins.check_package_minimum("onnxruntime-ep-webgpu", "0.4.0", "x", installed_ort="1.24.4")
    plugins.check_package_minimum("onnxruntime-ep-openvino", "1.8.1", "x", installed_ort="1.23.0")
    assert plugins.older("1.24.3", "1.24.4") and not plugins.older("1.24.4.dev0", "1.24.4")
    assert not plugins.older("1.30", "1.24.4") and plugins.older("1.9", "1.24.4")


def test_the_plugin_api_check_names_what_an_older_onnx_runtime_lacks():
    class Old:  # the API of onnxruntime 1.23: devices and registration, no graph assignment info
        register_execution_provider_library = get_ep_devices = staticmethod(lambda *a: None)

        class SessionOptions:
            def add_provider_for_devices(self):
                pass

        class InferenceSession:
            pass

    assert plugins.missing_api(Old) == ["InferenceSession.get_provider_graph_assignment_info"]
    assert plugins.missing_api(ort) == []
    assert len(plugins.missing_api(object())) == len(plugins.PLUGIN_API)
