"""ONNX Runtime's device list (harness/eps/devices.py), ``--ep-device`` selection, ``ep-testbed devices``,
and the device a run header names (harness/eps/gpu.py).

No plugin EP lists a device on these machines (AMD CPUs, no GPU), so selection and identity are
tested on device lists: ``tests/data/devices/h100-xeon-plugins.json`` was recorded with
``ep-testbed devices --json`` on a machine with an H100 and a Xeon (the WebGPU and OpenVINO plugins
installed); the other two files are modelled on it and on ORT's Windows device discovery (each
file's ``about`` says which). The CPU EP's own device list is real here and exercises
``add_provider_for_devices`` end to end.
"""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from fake_windows import FakeAdapter, FakeDxgi
from local_cases import HERE

from ep_testbed.harness.cli import main
from ep_testbed.harness.core.untrusted_files import read_json
from ep_testbed.harness.eps import adapters, devices, gpu, plugins, preflight
from ep_testbed.harness.eps.devices import SelectorError, from_json_list, select
from ep_testbed.harness.eps.providers import EpNotAvailable, EpSpec

ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data", "devices")


def recorded(name):
    """The devices of one of the device-list files."""
    return from_json_list(read_json(os.path.join(DATA, name))["devices"])


H100 = "h100-xeon-plugins.json"


def test_a_recorded_list_reads_back_with_indexes_per_ep():
    listed = recorded(H100)
    assert [(d.ep, d.index, d.type) for d in listed] == [
        ("CPUExecutionProvider", 0, "CPU"), ("OpenVINOExecutionProvider", 0, "CPU"),
        ("OpenVINOExecutionProvider.AUTO", 0, "CPU"), ("WebGpuExecutionProvider", 0, "GPU")]
    gpu_device = listed[-1]
    assert gpu_device.pci_ids == "10DE:2330" and gpu_device.vendor == "" and gpu_device.vendor_name == "NVIDIA"
    assert gpu_device.describe() == "0: GPU NVIDIA [10DE:2330] pci_bus_id=0000:00:06.0, Discrete=1"
    two = recorded("two-h100-webgpu.json")
    assert [d.index for d in two] == [0, 1]


@pytest.mark.parametrize("selector,ep,expected", [
    ("0", "WebGpuExecutionProvider", "0000:00:06.0"),
    ("type=GPU", "WebGpuExecutionProvider", "0000:00:06.0"),
    ("vendor_id=0x10de", "WebGpuExecutionProvider", "0000:00:06.0"),
    ("vendor_id=4318,device_id=0x2330", "WebGpuExecutionProvider", "0000:00:06.0"),
    ("pci_bus_id=0000:00:06.0", "WebGpuExecutionProvider", "0000:00:06.0"),
    ("PCI_BUS_ID=0000:00:06.0", "WebGpuExecutionProvider", "0000:00:06.0"),
    ("ov_device=CPU", "OpenVINOExecutionProvider", None),
    ("type=cpu,ov_device=cpu", "OpenVINOExecutionProvider", None),
])
def test_a_selector_names_one_device_by_index_or_key_value(selector, ep, expected):
    chosen = select(recorded(H100), ep, selector)
    assert chosen.ep == ep and chosen.metadata.get("pci_bus_id") == expected


@pytest.mark.parametrize("name,ep,selector,words", [
    (H100, "WebGpuExecutionProvider", "type=NPU", ["no device of WebGpuExecutionProvider matches",
                                                  "0: GPU NVIDIA [10DE:2330] pci_bus_id=0000:00:06.0"]),
    (H100, "OpenVINOExecutionProvider", "ov_device=NPU", ["no device of OpenVINOExecutionProvider matches",
                                                         "ov_device=CPU"]),
    (H100, "WebGpuExecutionProvider", "1", ["has 1 device(s), indexes 0 to 0"]),
    (H100, "WebGpuExecutionProvider", "colour=red", ["no device of WebGpuExecutionProvider has a key 'colour'",
                                                    "pci_bus_id", "0: GPU NVIDIA"]),
    (H100, "WebGpuExecutionProvider", "GPU", ["expected an index (0, 1, ...) or KEY=VALUE"]),
    (H100, "CUDAExecutionProvider", "0", ["lists no device for CUDAExecutionProvider"]),
    ("two-h100-webgpu.json", "WebGpuExecutionProvider", "type=GPU",
     ["2 devices of WebGpuExecutionProvider match", "pci_bus_id=0000:00:06.0", "pci_bus_id=0000:00:07.0",
      "add a key that tells them apart"]),
])
def test_a_selector_naming_none_or_several_names_the_candidates(name, ep, selector, words):
    with pytest.raises(SelectorError) as info:
        select(recorded(name), ep, selector)
    text = str(info.value)
    assert text.startswith(f"--ep-device {selector}") and "\n" not in text
    assert all(w in text for w in words), text


def test_the_device_key_ignores_the_slot_and_keeps_the_model_and_driver():
    one, two = recorded("two-h100-webgpu.json")
    assert one.key() == two.key() and one != two
    ov = select(recorded(H100), "OpenVINOExecutionProvider", "0")
    assert ("ov_device", "CPU") in ov.key()[-1]


@pytest.mark.parametrize("item,field", [
    ({"ep": "X", "type": "TPU", "vendor": "", "vendor_id": 1, "device_id": 1}, "type 'TPU' is not one of CPU"),
    ({"ep": "X", "type": "GPU", "vendor": "", "vendor_id": -1, "device_id": 1}, "vendor_id must be a whole number"),
    ({"ep": "X", "type": "GPU", "vendor": "", "vendor_id": True, "device_id": 1}, "vendor_id must be a whole number"),
    ({"ep": "", "type": "GPU", "vendor": "", "vendor_id": 1, "device_id": 1}, "ep must be a string"),
    ({"ep": "X", "type": "GPU", "vendor": "", "vendor_id": 1, "device_id": 1, "metadata": {"a": 1}},
     "metadata: expected an object of strings"),
])
def test_a_malformed_recorded_device_is_named_by_field(item, field):
    with pytest.raises(ValueError) as info:
        from_json_list([item])
    assert "devices[0]" in str(info.value) and field in str(info.value)


def test_devices_from_a_recording_prints_marks_and_refuses_in_one_line(capsys):
    path = os.path.join(DATA, H100)
    assert main(["devices", "--from", path]) == 0
    out = capsys.readouterr().out
    assert "WebGpuExecutionProvider (Microsoft)\n  0: GPU NVIDIA [10DE:2330] pci_bus_id=0000:00:06.0, Discrete=1" in out
    assert "OpenVINOExecutionProvider (Intel)\n  0: CPU Intel [8086:0000] ov_device=CPU" in out
    assert main(["devices", "--from", path, "--ep", "webgpu", "--ep-device", "vendor_id=0x10DE", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["ep"] for d in data["devices"]] == ["WebGpuExecutionProvider"]
    assert data["chosen"]["metadata"]["pci_bus_id"] == "0000:00:06.0"
    two = os.path.join(DATA, "two-h100-webgpu.json")
    assert main(["devices", "--from", two, "--ep", "WebGpuExecutionProvider", "--ep-device", "type=GPU"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 devices of WebGpuExecutionProvider match" in err[0] and "0000:00:07.0" in err[0]


def test_devices_from_a_file_that_is_not_a_device_list_exits_2_naming_the_field(tmp_path, capsys):
    bad = tmp_path / "devices.json"
    bad.write_text(json.dumps({"devices": [{"ep": "X", "type": "GPU", "vendor": "", "vendor_id": "10de",
                                            "device_id": 1}]}), encoding="utf-8")
    assert main(["devices", "--from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "devices[0]: vendor_id must be a whole number" in err and "Traceback" not in err
    assert main(["devices", "--from", str(bad), "--ep", "plugin:onnxruntime-ep-webgpu"]) == 2
    assert "name the EP by its provider name" in capsys.readouterr().err


def test_the_cpu_ep_attached_through_its_device_runs_and_is_proven_on_it():
    plain = adapters.resolve("cpu")
    chosen = adapters.resolve("cpu", device="type=CPU")
    assert adapters.adapter_for(plain).device() is None and adapters.adapter_for(chosen).device().type == "CPU"

    class Options:
        added = None

        def add_provider_for_devices(self, devices_, options):
            self.added = (devices_, options)

    by_name, by_device = Options(), Options()
    assert adapters.adapter_for(plain).attach(by_name) == ["CPUExecutionProvider"] and by_name.added is None
    assert adapters.adapter_for(chosen).attach(by_device) is None and by_device.added[0][0].ep_name == \
        "CPUExecutionProvider"
    result = preflight.check("cpu", {}, device="0")
    assert result.fatal is None and result.gpu["ort_device"]["selection"] == "--ep-device 0"
    assert any(f.text.startswith("device 0: CPU ") and f.text.endswith("<- runs here") for f in result.findings)


def test_a_run_with_ep_device_records_the_device_and_repeats_the_selector(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--ep", "cpu", "--ep-device", "type=CPU", "--ops", "max_pooling2", "-k", "grid-float32-2d",
                 "--out", str(out), "--jobs", "1", "--no-progress"])
    capsys.readouterr()
    header = json.loads((out / "results.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert code == 0 and header["rerun_args"][:4] == ["--ep", "cpu", "--ep-device", "type=CPU"]
    assert header["gpu"]["ort_device"]["selection"] == "--ep-device type=CPU"
    assert header["ep_held_by"]["holder"] == "built-in"


@pytest.fixture
def fake_plugin(monkeypatch):
    """A plugin EP whose registration is a no-op and whose ORT devices come from a recorded list."""
    listing = {"devices": recorded(H100)}

    def pairs():
        return [(d, f"ort-device-{d.ep}-{d.index}") for d in listing["devices"]]

    monkeypatch.setattr(plugins, "register", lambda path, what: "fake")
    monkeypatch.setattr(devices, "read_pairs", pairs)
    monkeypatch.setattr(gpu, "read_devices", lambda: [d for d, _ in pairs()])
    monkeypatch.setattr(devices, "read_devices", lambda: [d for d, _ in pairs()])
    monkeypatch.setattr(adapters, "_INSTANCES", {})
    return listing


def _webgpu(**fields):
    return EpSpec("WebGpuExecutionProvider", "webgpu", holder="plugin", library="/x/libwebgpu.so",
                  package="onnxruntime-ep-webgpu", package_version="0.4.0", **fields)


def test_a_plugin_ep_attaches_its_only_device_and_the_header_names_it(fake_plugin):
    adapter = adapters.adapter_for(_webgpu())

    class Options:
        def add_provider_for_devices(self, devices_, options):
            self.added = (devices_, options)

    options = Options()
    assert adapter.attach(options) is None and options.added == (["ort-device-WebGpuExecutionProvider-0"], {})
    record = gpu.identity(_webgpu())
    assert record["source"] == "ort" and record["ep_package"] == {"name": "onnxruntime-ep-webgpu", "version": "0.4.0"}
    assert record["summary"] == ("GPU NVIDIA [10DE:2330] pci_bus_id=0000:00:06.0, Discrete=1, WebGpuExecutionProvider, "
                                 f"onnxruntime-ep-webgpu 0.4.0 on {record['onnxruntime']['distribution']} "
                                 f"{record['onnxruntime']['version']}")
    assert record["ort_device"]["selection"] == "the plugin EP's only device"
    assert adapter.describe() == {"holder": "plugin", "library": "/x/libwebgpu.so",
                                  "package": "onnxruntime-ep-webgpu", "version": "0.4.0"}


def test_a_plugin_ep_with_several_devices_or_none_is_refused_naming_them(fake_plugin):
    fake_plugin["devices"] = recorded("two-h100-webgpu.json")
    with pytest.raises(EpNotAvailable) as several:
        adapters.adapter_for(_webgpu()).device()
    assert "lists 2 devices for WebGpuExecutionProvider" in str(several.value)
    assert "pci_bus_id=0000:00:07.0" in str(several.value) and "--ep-device" in str(several.value)
    assert adapters.adapter_for(_webgpu(device="pci_bus_id=0000:00:07.0")).device().index == 1
    fake_plugin["devices"] = [d for d in recorded(H100) if d.ep == "CPUExecutionProvider"]
    adapters._INSTANCES.clear()
    with pytest.raises(EpNotAvailable) as none:
        adapters.adapter_for(_webgpu()).device()
    assert "lists no device for WebGpuExecutionProvider" in str(none.value) and "libvulkan.so.1" in str(none.value)


def test_identity_keys_follow_the_device_model_and_the_package_not_the_slot(fake_plugin):
    first = gpu.identity(_webgpu())
    fake_plugin["devices"] = [d for d in recorded("two-h100-webgpu.json")][1:]
    adapters._INSTANCES.clear()
    other_slot = gpu.identity(_webgpu())
    assert other_slot["ort_device"]["device"]["metadata"]["pci_bus_id"] == "0000:00:07.0"
    assert gpu.identity_key(first) == gpu.identity_key(other_slot)
    newer = dict(first, ep_package={"name": "onnxruntime-ep-webgpu", "version": "0.5.0"})
    other_gpu = json.loads(json.dumps(first))
    other_gpu["ort_device"]["device"]["device_id"] = 0x2331
    assert gpu.identity_key(newer) != gpu.identity_key(first) != gpu.identity_key(other_gpu)


def test_merge_refuses_shards_run_on_different_devices(tmp_path, capsys, fake_plugin):
    shards = []
    for n in (1, 2):
        out = tmp_path / f"s{n}"
        assert main(["run", "--ep", "cpu", "--ops", "max_pooling2", "-k", "grid-float32-2d", "--shard", f"{n}/2",
                     "--out", str(out), "--jobs", "1", "--no-progress"]) == 0
        shards.append(out)
    capsys.readouterr()
    headers = [out / "results.jsonl" for out in shards]
    lines = headers[1].read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["gpu"] = gpu.identity(_webgpu())
    headers[1].write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n", encoding="utf-8")
    assert main(["merge", *map(str, shards), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "ran on another device" in err and "GPU NVIDIA [10DE:2330]" in err and "--allow-mixed" in err


def _dml_machine(ort_devices, fake_plugin, monkeypatch):
    """DirectML simulated: two DXGI adapters, ORT's DML devices from ``ort_devices``."""
    fake_plugin["devices"] = ort_devices
    adapters._INSTANCES.clear()
    dxgi = FakeDxgi([FakeAdapter("NVIDIA GeForce RTX 4090", 0x10DE, 0x2684, memory=24 << 30, umd=1, luid=(0, 0xC3F1)),
                     FakeAdapter("Intel(R) UHD Graphics 770", 0x8086, 0xA780, memory=128 << 20, luid=(0, 0xD20A))])
    found = gpu.read_adapters(dxgi.create_factory)
    monkeypatch.setattr(preflight, "check_session", lambda result, ep, settings: result.add("ok", "session (simulated)"))
    return lambda ep: gpu.dml_identity(ep.options, found, [], {"path": "C:\\DirectML.dll", "version": "1.15.4.0"},
                                       {"distribution": "onnxruntime-directml", "version": "1.24.4"})


def test_directml_identity_cross_checks_dxgi_against_onnx_runtime(fake_plugin, monkeypatch):
    windows = {"available": ["DmlExecutionProvider", "CPUExecutionProvider"], "distributions": ["onnxruntime-directml"]}
    record = _dml_machine(recorded("windows-dml.json"), fake_plugin, monkeypatch)
    agree = preflight.check("dml", {"device_id": "0"}, gpu_record=record, **windows)
    assert agree.fatal is None and agree.gpu["cross_check"] == {"status": "agree", "details": []}
    assert "ONNX Runtime's device list names the same adapter as DXGI" in [f.text for f in agree.findings]
    swapped = recorded("windows-dml.json")  # ORT's entry for DXGI adapter 0 now holds the other GPU's ids
    swapped[1], swapped[2] = (replace(swapped[1], metadata=swapped[2].metadata),
                              replace(swapped[2], metadata=swapped[1].metadata))
    record = _dml_machine(swapped, fake_plugin, monkeypatch)
    disagree = preflight.check("dml", {"device_id": "0"}, gpu_record=record, **windows)
    check = disagree.gpu["cross_check"]
    assert check["status"] == "disagree" and any(d.startswith("PCI ids: DXGI 10DE:2684, ONNX Runtime 8086:A780")
                                                 for d in check["details"])
    assert "DXGI and ONNX Runtime's device list disagree" in disagree.gpu["summary"]
    assert any(f.level == "warn" and "disagree on the adapter" in f.text for f in disagree.findings)


def test_doctor_and_devices_here_list_the_cpu_ep_device():
    out = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "devices", "--ep", "cpu", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and json.loads(out.stdout)["devices"][0]["type"] == "CPU"
    doctor = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "doctor", "--ep", "cpu"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0 and "  ok   device 0: CPU " in doctor.stdout
    assert "run headers will record: CPU " in doctor.stdout
