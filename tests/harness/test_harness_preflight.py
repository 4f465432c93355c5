"""The preflight (harness/eps/preflight.py) behind ``ep-testbed doctor`` and the start of ``ep-testbed run``.

Here there is no DirectML: a Windows GPU runner is simulated (the EP in the provider list, DXGI
adapters from fake_windows, the session check stubbed); the real machine's answer (no DirectML
EP) is tested as a user sees it. Adapter rules come from ORT's dml_provider_factory.cc
(EnumAdapters1(device_id), IsSoftwareAdapter)."""

import os
import subprocess
import sys

import pytest
from fake_windows import FakeAdapter, FakeDxgi
from local_cases import HERE

from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.eps import gpu, preflight

ROOT = os.path.dirname(os.path.dirname(HERE))
WINDOWS = {"available": ["DmlExecutionProvider", "CPUExecutionProvider"], "distributions": ["onnxruntime-directml"]}
ORT = {"distribution": "onnxruntime-directml", "version": "1.24.4"}
DML_DLL = {"path": "C:\\venv\\Lib\\site-packages\\onnxruntime\\capi\\DirectML.dll", "version": "1.15.4.0",
           "bundled": True}


def _runner(*adapters):
    """gpu_record for a machine with these simulated adapters."""
    found = gpu.read_adapters(FakeDxgi(list(adapters)).create_factory)
    return lambda ep: gpu.dml_identity(ep.options, found, [], DML_DLL, ORT)


NVIDIA = dict(description="NVIDIA GeForce RTX 4090", vendor=0x10DE, device=0x2684, memory=24 << 30, umd=1)
WARP = dict(description="Microsoft Basic Render Driver", vendor=0x1414, device=0x8C, flags=2)


@pytest.fixture
def stub_session(monkeypatch):
    calls = []

    def session(result, ep, settings):
        calls.append((ep.provider, settings.dml_graph_fusion))
        return result.add("ok", f"a one-node MaxPool session built and ran on {ep.provider} (simulated)")

    monkeypatch.setattr(preflight, "check_session", session)
    return calls


def test_a_ready_gpu_runner_passes_and_names_its_adapter(stub_session):
    result = preflight.check("dml", {"device_id": "0"}, gpu_record=_runner(FakeAdapter(**NVIDIA), FakeAdapter(**WARP)),
                             **WINDOWS)
    assert result.fatal is None and stub_session == [("DmlExecutionProvider", False)]
    texts = [f.text for f in result.findings]
    assert any(t.startswith("adapter 1: Microsoft Basic Render Driver") and "software" in t for t in texts)
    assert any(t.startswith("uses NVIDIA GeForce RTX 4090: device_id=0") for t in texts)
    assert any(t.startswith("DirectML.dll 1.15.4.0 at C:") for t in texts)
    assert result.gpu["summary"].startswith("NVIDIA GeForce RTX 4090 [10DE:2684]")


@pytest.mark.parametrize("options,adapters,expected", [
    ({"device_id": "2"}, [NVIDIA, WARP], "device_id=2 is out of range: DXGI lists 2 adapter(s) (0 to 1)"),
    ({"device_id": "1"}, [NVIDIA, WARP], "device_id=1 is the Microsoft Basic Render Driver (WARP)"),
    ({}, [WARP], "no hardware adapter (only the Microsoft Basic Render Driver"),
    ({"device_id": "one"}, [NVIDIA], "device_id='one' is not a whole number"),
])
def test_unusable_adapters_stop_before_any_session(stub_session, options, adapters, expected):
    result = preflight.check("dml", options, gpu_record=_runner(*(FakeAdapter(**a) for a in adapters)), **WINDOWS)
    assert result.fatal is not None and result.fatal.text.startswith(expected), result.fatal
    assert "Fix:" in result.fatal.text and stub_session == []


def test_several_hardware_adapters_without_device_id_warn(stub_session):
    intel = dict(description="Intel(R) UHD Graphics 770", vendor=0x8086, device=0x4680, memory=1 << 27)
    result = preflight.check("dml", {}, gpu_record=_runner(FakeAdapter(**intel), FakeAdapter(**NVIDIA)), **WINDOWS)
    assert result.fatal is None and result.gpu["adapter"]["description"] == "NVIDIA GeForce RTX 4090"
    assert any(f.level == "warn" and "pass --ep-option device_id=N" in f.text for f in result.findings)


def test_two_onnxruntime_wheels_are_a_fatal_conflict(stub_session):
    result = preflight.check("dml", {}, available=WINDOWS["available"],
                             distributions=["onnxruntime", "onnxruntime-directml"])
    assert result.fatal.text.startswith("onnxruntime and onnxruntime-directml are all installed")
    assert "pip uninstall -y onnxruntime onnxruntime-directml" in result.fatal.text and stub_session == []


def test_session_errors_are_explained_by_their_hresult():
    text = preflight.explain("RuntimeError: ...dml_provider_factory.cc(513)...Exception(1) tid(1c) 887A0002 The object "
                             "was not found.")
    assert "no adapter at that device_id" in text
    assert preflight.explain("other") == "other"


#: What the Vulkan loader printed under the WebGPU EP on a headless NVIDIA H100 container (driver
#: 580.159.04, onnxruntime-webgpu 1.27.0), before Dawn found no adapter.
LOADER_SAID = ("Warning: loader_scanned_icd_add: Could not get 'vkCreateInstance' via 'vk_icdGetInstanceProcAddr' "
               "for ICD libGLX_nvidia.so.0\nWarning: vkCreateInstance: Found no drivers!\n")


def test_a_vulkan_icd_that_needs_a_display_is_named_with_the_headless_fix(monkeypatch):
    import os

    def no_adapter(*args, **kwargs):
        os.write(2, LOADER_SAID.encode())  # native code's stderr, which the check reads back
        raise preflight.SessionError("build", "WebGpuExecutionProvider",
                                     RuntimeError("Failed to get a WebGPU adapter: No supported adapters."))

    monkeypatch.setattr(preflight, "run_on_ep", no_adapter)
    result = preflight.Preflight()
    assert preflight.check_session(result, preflight.resolve("cpu"), preflight.SessionSettings()) is False
    fatal = result.fatal.text
    assert "No supported adapters" in fatal and "libEGL_nvidia.so.0" in fatal
    assert "VK_DRIVER_FILES" in fatal and "doctor" not in fatal
    assert any("vkCreateInstance" in f.text for f in result.findings if f.level == "note")
    assert preflight.vulkan_hint(["Warning: vkCreateInstance failed with VK_ERROR_INCOMPATIBLE_DRIVER"]) is None


def test_the_real_session_check_runs_one_node_on_the_ep():
    result = preflight.check("cpu", {})
    assert result.fatal is None
    assert result.findings[-1].text == ("a one-node MaxPool session built and ran on CPUExecutionProvider "
                                        "(placement: trace-node)")


def test_doctor_without_the_ep_exits_2_with_one_line_naming_the_fix():
    p = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "doctor", "--ep", "dml"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ep-testbed: doctor: DmlExecutionProvider is not in this ONNX Runtime")
    assert "Fix: on a Windows machine with a GPU, in a fresh venv: pip install onnxruntime-directml" in lines[0]
    ready = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "doctor"], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
    assert ready.returncode == 0 and ready.stdout.strip().endswith("ready") and "one-node MaxPool" in ready.stdout


def test_run_stops_before_any_case_when_the_preflight_fails(tmp_path, capsys, monkeypatch):
    """The workers start their EP while the preflight runs (a CUDA or Dawn device start is most of
    a short run's time); a refused preflight stops them: no case runs and no worker is left."""
    from ep_testbed.harness.cli import run as run_cli

    pools, procs = [], []

    def starting(*args, **kwargs):
        pools.append(start_workers(*args, **kwargs))
        return pools[-1]

    def fatal(name, options, settings, **plugin):
        procs.extend(worker.proc for worker in pools[0]._workers)
        assert procs, "no worker was starting during the preflight"
        result = preflight.Preflight()
        result.add("fatal", "device_id=7 is out of range (simulated). Fix: pass --ep-option device_id=N")
        return result

    start_workers = run_cli.start_workers
    monkeypatch.setattr(run_cli, "start_workers", starting)
    monkeypatch.setattr(preflight, "check", fatal)
    out = tmp_path / "run"
    code = run_command(parse_args(["run", "--out", str(out), "--no-progress", "--jobs", "2"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx", worker_paths=(HERE,))
    err = capsys.readouterr().err
    assert code == 2 and "preflight: device_id=7 is out of range (simulated)" in err
    assert not (out / "results.jsonl").exists()
    assert len(procs) == 2 and all(proc.poll() is not None for proc in procs), "a worker outlived the refusal"


def test_run_resolves_its_ep_once(tmp_path, capsys, monkeypatch):
    """``run`` resolves ``--ep`` once (``run_config``) and hands the preflight that spec: the
    preflight's findings are the same, and it never resolves the flags again."""
    from ep_testbed.harness.cli import options

    calls = []

    def counting(resolve):
        def counted(*args, **kwargs):
            calls.append(args[0])
            return resolve(*args, **kwargs)
        return counted

    monkeypatch.setattr(options, "resolve", counting(options.resolve))
    monkeypatch.setattr(preflight, "resolve", counting(preflight.resolve))
    seen = []
    monkeypatch.setattr(preflight, "check_session", lambda result, ep, settings: seen.append(ep) or result.add(
        "fatal", "stopped after the checks (simulated)"))
    code = run_command(parse_args(["run", "--out", str(tmp_path / "run"), "--no-progress", "--jobs", "1",
                                   "--also-on", "none"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx", worker_paths=(HERE,))
    assert code == 2 and "stopped after the checks (simulated)" in capsys.readouterr().err
    assert calls == ["cpu"] and [ep.provider for ep in seen] == ["CPUExecutionProvider"]
