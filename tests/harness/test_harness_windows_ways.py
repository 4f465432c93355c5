"""The three ways a Windows team holds an EP (harness/eps/windows_ways.py) and Windows ML's EP
catalog read in a child interpreter (harness/eps/winml_catalog.py), as ``ep-testbed doctor``
reports them.

Windows cannot run here: the Windows answers come through the module's seams (platform,
installed distributions, ONNX Runtime's EP list, the catalog reader, the plugin finder), and the
catalog reader runs for real, in a child interpreter, against a ``windowsml`` package written by
fake_windows with the API the PyPI package documents. This machine's own answer (Linux, no
DirectML, no Windows ML) is checked through the real ``doctor`` command."""

import os
import subprocess
import sys
import time

import pytest
from fake_windows import write_fake_windowsml
from local_cases import HERE

from ep_testbed.harness.eps import plugins, windows_ways, winml_catalog
from ep_testbed.harness.eps.plugins import PluginPackage
from ep_testbed.harness.eps.providers import EpNotAvailable
from ep_testbed.harness.eps.winml_catalog import CatalogEp, CatalogReading, parse_answer, read_catalog

ROOT = os.path.dirname(os.path.dirname(HERE))
TRT_RTX = {"name": "NvTensorRtRtxExecutionProvider", "version": "1.8.14.0", "ready_state": "Ready",
           "certification": "Certified", "package_family_name": "MicrosoftCorporationII.WinML.NVIDIA.TRT-RTX.EP_8wekyb3d8bbwe",
           "library_path": "C:\\Program Files\\WindowsApps\\NVIDIA.TRT-RTX.EP\\onnxruntime_providers_nv_tensorrt_rtx.dll"}
OPENVINO = {"name": "OpenVINOExecutionProvider", "version": "1.8.63.0", "ready_state": "NotReady",
            "certification": "Certified", "library_path": ""}
WINDOWS_ML = {"onnxruntime-windowsml": "1.24.4.202603181718", "windowsml": "2.5.96"}
WINDOWS_ORT = ["DmlExecutionProvider", "CPUExecutionProvider"]


def _env(folder):
    """This environment with ``folder`` first on the child's PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def _no_plugins():
    return windows_ways.Way("plugin EP packages", False, "none installed (simulated)")


def test_the_catalog_is_read_through_the_windowsml_api_in_a_child(tmp_path):
    reading = read_catalog(env=_env(write_fake_windowsml(tmp_path, [TRT_RTX, OPENVINO])))
    assert reading.error is None
    assert [ep.name for ep in reading.providers] == [TRT_RTX["name"], OPENVINO["name"]]
    trt, ov = reading.providers
    assert trt.library_path == TRT_RTX["library_path"] and trt.ready_state == "Ready" and trt.ready
    assert trt.certification == "Certified" and trt.package_family_name == TRT_RTX["package_family_name"]
    assert ov.ready_state == "NotReady" and not ov.ready  # never made ready: the fake's ensure_ready() would raise


def test_a_catalog_that_crashes_on_release_still_answers(tmp_path):
    """The reader leaves before the catalog is released (the crash some NPU drivers cause there)."""
    reading = read_catalog(env=_env(write_fake_windowsml(tmp_path, [TRT_RTX], mode="crash-on-release")))
    assert reading.error is None and [ep.name for ep in reading.providers] == [TRT_RTX["name"]]


@pytest.mark.parametrize("mode,expected", [
    ("import-error", "ImportError: winml is only supported on Windows"),
    ("crash-on-find", "the catalog reader exited with code"),
])
def test_a_catalog_that_cannot_be_read_is_one_line_never_a_crash(tmp_path, mode, expected):
    reading = read_catalog(env=_env(write_fake_windowsml(tmp_path, [TRT_RTX], mode=mode)))
    assert reading.providers == () and reading.error.startswith(expected), reading.error
    assert "\n" not in reading.error


def test_a_hanging_catalog_is_cut_off_at_the_timeout(tmp_path):
    started = time.monotonic()
    reading = read_catalog(env=_env(write_fake_windowsml(tmp_path, [TRT_RTX], mode="hang")), timeout=3)
    assert reading.error == "the catalog reader did not answer within 3 s"
    assert time.monotonic() - started < 30


def test_the_childs_answer_is_read_as_untrusted_data():
    assert parse_answer(b"").error == "the catalog reader printed no JSON answer"
    assert parse_answer(b"not json\n").error == "the catalog reader printed no JSON answer"
    assert parse_answer(b'{"providers": 3}').error == "the catalog reader's answer has no list of providers"
    answer = (b'noise\n{"providers": [{"name": "A", "version": 7}, {"name": ""}, 5, {"version": "1"}, '
              b'{"name": "B", "library_path": "' + b"x" * 5000 + b'"}]}\n')
    reading = parse_answer(answer)
    assert [ep.name for ep in reading.providers] == ["A", "B"] and reading.providers[0].version == "7"
    assert len(reading.providers[1].library_path) == winml_catalog.MAX_FIELD_CHARS
    many = ('{"providers": [' + ",".join('{"name": "E%d"}' % i for i in range(500)) + "]}").encode()
    assert len(parse_answer(many).providers) == winml_catalog.MAX_PROVIDERS


def test_a_windows_ml_machine_finds_directml_built_in_and_the_catalog_eps(tmp_path):
    folder = write_fake_windowsml(tmp_path, [TRT_RTX, OPENVINO])
    ways = windows_ways.find_ways(platform="win32", distributions=WINDOWS_ML, available=WINDOWS_ORT,
                                  catalog=lambda: read_catalog(env=_env(folder)), plugin_finder=_no_plugins)
    dml_wheel, winml, plugin = ways
    assert not dml_wheel.found and "pip install -e \".[directml]\"" in dml_wheel.text and "--ep dml" in dml_wheel.text
    assert winml.found and winml.text.startswith("onnxruntime-windowsml 1.24.4.202603181718 (DmlExecutionProvider "
                                                 "built in: --ep dml); windowsml 2.5.96: its EP catalog lists 2 EP(s), "
                                                 "1 ready")
    assert winml.eps[0].startswith("DmlExecutionProvider (Windows ML's DirectML): --ep dml")
    assert winml.eps[1] == (f"NvTensorRtRtxExecutionProvider 1.8.14.0 (Ready, Certified): --ep "
                            f"NvTensorRtRtxExecutionProvider --ep-library \"{TRT_RTX['library_path']}\"")
    assert winml.eps[2].startswith("OpenVINOExecutionProvider 1.8.63.0 (NotReady, Certified): not installed yet; "
                                   "ensure_ready() downloads it")
    assert "p.name == 'OpenVINOExecutionProvider'" in winml.eps[2]
    assert plugin.found is False


def test_the_directml_wheel_is_found_with_the_flags_that_run_it():
    way = windows_ways.directml_wheel("win32", {"onnxruntime-directml": "1.24.4"}, WINDOWS_ORT)
    assert way.found and way.text.startswith("onnxruntime-directml 1.24.4, DmlExecutionProvider in its provider list")
    assert way.eps == ("DmlExecutionProvider: --ep dml [--ep-option device_id=N]",)
    broken = windows_ways.directml_wheel("win32", {"onnxruntime-directml": "1.24.4"}, ["CPUExecutionProvider"])
    assert broken.found and "NOT in its provider list" in broken.text


def test_windowsml_without_its_onnxruntime_says_how_to_get_the_matching_one(tmp_path):
    folder = write_fake_windowsml(tmp_path, [TRT_RTX])
    way = windows_ways.windows_ml("win32", {"windowsml": "2.5.96", "onnxruntime-directml": "1.24.4"}, WINDOWS_ORT,
                                  lambda: read_catalog(env=_env(folder)))
    assert way.found and "its EPs are built for onnxruntime-windowsml: pip install \"windowsml[with-ort]\"" in way.text
    runtime_only = windows_ways.windows_ml("win32", {"onnxruntime-windowsml": "1.24.4"}, WINDOWS_ORT,
                                           lambda: pytest.fail("no windowsml package: the catalog is not read"))
    assert runtime_only.found and runtime_only.text.endswith("for the vendor EPs of its catalog: pip install windowsml")


def test_an_unreadable_catalog_is_reported_in_the_windows_ml_line():
    way = windows_ways.windows_ml("win32", WINDOWS_ML, WINDOWS_ORT,
                                  lambda: CatalogReading(error="the catalog reader exited with code 0xC0000005"))
    assert way.found and "its EP catalog could not be read: the catalog reader exited with code 0xC0000005" in way.text
    hostile = windows_ways.windows_ml("win32", WINDOWS_ML, WINDOWS_ORT, lambda: CatalogReading(providers=(
        CatalogEp("X$(rm -rf ~)", "1", "Ready", "", "C:\\x.dll"), CatalogEp("Evil\nline", "1", "NotReady"))))
    assert all("rm -rf" not in line or "not one ep-testbed passes" in line for line in hostile.eps)
    assert not any("\n" in line for line in hostile.eps) and "--ep-library" not in " ".join(hostile.eps)


@pytest.mark.parametrize("platform,expected", [
    ("win32", ["not installed. Get it: in a fresh venv, pip install -e \".[directml]\"",
               "not installed. Get it: in a fresh venv, pip install -e \".[windowsml]\" (the windowsml catalog"]),
    ("linux", ["not installed (Windows only: DirectML needs Direct3D 12). Here, --ep dml-wine",
               "not installed (Windows only: the windowsml package loads"]),
])
def test_nothing_installed_says_how_to_get_each_way(platform, expected):
    ways = windows_ways.find_ways(platform=platform, distributions={"onnxruntime": "1.24.4"}, available=[],
                                  catalog=lambda: pytest.fail("no windowsml: the catalog is not read"),
                                  plugin_finder=lambda: windows_ways.plugin_packages(packages=lambda: []))
    assert [w.found for w in ways] == [False, False, False]
    assert [w.text[:len(e)] for w, e in zip(ways, expected)] == expected
    assert ways[2].text.startswith("none installed. Get one: pip install onnxruntime-ep-webgpu")


def test_plugin_packages_are_loaded_as_plugin_ep_would_load_them(monkeypatch):
    monkeypatch.setattr(plugins, "check_runtime", lambda what: None)  # an ONNX Runtime with the plugin API
    loaded = {"onnxruntime-ep-webgpu": PluginPackage("onnxruntime-ep-webgpu", "0.4.0", "onnxruntime_ep_webgpu",
                                                     "/x/libwebgpu.so", ("WebGpuExecutionProvider",)),
              "onnxruntime-ep-multi": PluginPackage("onnxruntime-ep-multi", "1.0", "onnxruntime_ep_multi", "/x/m.so",
                                                    ("AEp", "BEp"))}

    def load(dist, what):
        if dist == "onnxruntime-ep-broken":
            raise OSError("a DLL its __init__ loads is missing")
        if dist not in loaded:
            raise EpNotAvailable(f"{what}: onnxruntime-ep-old 0.1 needs onnxruntime >= 9.0")
        return loaded[dist]

    names = sorted([*loaded, "onnxruntime-ep-old", "onnxruntime-ep-broken"])
    way = windows_ways.plugin_packages(packages=lambda: names, load=load)
    assert way.found and way.text == ("4 installed: onnxruntime-ep-broken, onnxruntime-ep-multi, onnxruntime-ep-old, "
                                      "onnxruntime-ep-webgpu")
    assert way.eps == ("onnxruntime-ep-broken: importing it raised OSError: a DLL its __init__ loads is missing",
                       "AEp (onnxruntime-ep-multi 1.0): --ep plugin:onnxruntime-ep-multi:AEp",
                       "BEp (onnxruntime-ep-multi 1.0): --ep plugin:onnxruntime-ep-multi:BEp",
                       "onnxruntime-ep-old: unusable here: --ep plugin:onnxruntime-ep-old: onnxruntime-ep-old 0.1 needs "
                       "onnxruntime >= 9.0",
                       "WebGpuExecutionProvider (onnxruntime-ep-webgpu 0.4.0): --ep plugin:onnxruntime-ep-webgpu")


def test_doctor_prints_a_line_per_way_for_this_machine():
    """The real command on this machine: no DirectML wheel and no Windows ML off Windows; the plugin
    packages line agrees with what is installed here."""
    p = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "doctor"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    start = lines.index('  ways to hold an EP (README.md, "Windows"):')
    ways = [line.strip() for line in lines[start + 1:] if line.startswith("    ") and not line.startswith("          ")]
    assert len(ways) == 3 and ways[0].split()[1:3] == ["onnxruntime-directml", "wheel:"]
    assert ways[1].split()[1:3] == ["Windows", "ML:"] and ways[2].split()[1:4] == ["plugin", "EP", "packages:"]
    installed = plugins.installed_packages()
    assert ways[2].startswith("found" if installed else "none")
    if sys.platform != "win32":
        assert ways[0].startswith("none  onnxruntime-directml wheel: not installed (Windows only")
        assert ways[1].startswith("none  Windows ML: not installed (Windows only")
    assert lines[-1] == "ready"
