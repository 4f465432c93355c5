"""GPU identity (harness/eps/gpu.py): the DXGI, registry and version-resource readers run against
stand-ins laid out as Windows lays them out (tests/harness/fake_windows.py), and the identity
records built from them. Layouts and numbers come from dxgi.h (DXGI_ADAPTER_DESC1, the vtable
order), ORT's dml_provider_factory.cc (device_id, IsSoftwareAdapter) and Dawn's driver-version
split; nothing here touches a real GPU.
"""

import ctypes

import pytest
from fake_windows import E_FAIL, FakeAdapter, FakeDxgi, FakeWinreg, pe_with_version, signed

from ep_testbed.harness.eps import gpu
from ep_testbed.harness.eps.providers import EpSpec

ORT = {"distribution": "onnxruntime-directml", "version": "1.24.4"}
UMD = (32 << 48) | (0 << 32) | (15 << 16) | 6094  # 32.0.15.6094


def _machine():
    return FakeDxgi([FakeAdapter("NVIDIA GeForce RTX 4090", 0x10DE, 0x2684, memory=24 << 30, umd=UMD),
                     FakeAdapter("Intel(R) UHD Graphics 770", 0x8086, 0x4680, memory=128 << 20, umd=UMD + 1),
                     FakeAdapter("Microsoft Basic Render Driver", 0x1414, 0x8C, flags=2)])


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the x64 layout")
def test_adapter_desc1_has_the_x64_layout_of_dxgi_h():
    desc = gpu.DXGI_ADAPTER_DESC1
    assert ctypes.sizeof(desc) == 312
    assert (desc.VendorId.offset, desc.DedicatedVideoMemory.offset, desc.AdapterLuid.offset, desc.Flags.offset) == \
        (256, 272, 296, 304)
    assert bytes(gpu.guid(gpu.IID_IDXGIFactory1))[:4] == bytes.fromhex("78ae0a77")  # Data1 little-endian


def test_adapters_are_read_through_the_dxgi_vtables_and_released():
    dxgi = _machine()
    adapters = gpu.read_adapters(dxgi.create_factory)
    assert dxgi.asked_iid == bytes(gpu.guid(gpu.IID_IDXGIFactory1))
    assert [(a.index, a.description, a.vendor_id, a.device_id) for a in adapters] == [
        (0, "NVIDIA GeForce RTX 4090", 0x10DE, 0x2684), (1, "Intel(R) UHD Graphics 770", 0x8086, 0x4680),
        (2, "Microsoft Basic Render Driver", 0x1414, 0x8C)]
    assert [a.driver_version for a in adapters] == ["32.0.15.6094", "32.0.15.6095", None]
    assert [a.software for a in adapters] == [False, False, True]
    assert adapters[0].luid == "0x00000000:0x00001234" and adapters[0].dedicated_video_memory == 24 << 30
    assert dxgi.adapters[0].asked_iid == bytes(gpu.guid(gpu.IID_IDXGIDevice))
    assert [a.released for a in dxgi.adapters] == [1, 1, 1] and dxgi.factory.released == 1
    assert adapters[0].to_json()["vendor_id"] == "0x10DE" and adapters[2].to_json()["software"] is True


def test_dxgi_failures_name_the_call_and_hresult_and_release_what_was_taken():
    with pytest.raises(gpu.GpuError, match="CreateDXGIFactory1 failed: HRESULT 0x80004005"):
        gpu.read_adapters(FakeDxgi([], create_hr=E_FAIL).create_factory)
    broken = FakeDxgi([FakeAdapter("A", 1, 2), FakeAdapter("B", 1, 3)], enum_hr=E_FAIL)
    with pytest.raises(gpu.GpuError, match=r"EnumAdapters1\(1\) failed: HRESULT 0x80004005"):
        gpu.read_adapters(broken.create_factory)
    assert broken.factory.released == 1 and broken.adapters[0].released == 1
    bad_desc = FakeDxgi([FakeAdapter("A", 1, 2, desc_hr=signed(0x887A0001))])
    with pytest.raises(gpu.GpuError, match=r"GetDesc1\(0\) failed: HRESULT 0x887A0001"):
        gpu.read_adapters(bad_desc.create_factory)
    assert bad_desc.adapters[0].released == 1


def test_device_id_is_a_dxgi_index_and_the_default_is_labelled_a_guess():
    adapters = gpu.read_adapters(_machine().create_factory)
    chosen, how, problem = gpu.select_adapter(adapters, {"device_id": "1"})
    assert chosen.description.startswith("Intel") and how.startswith("device_id=1") and problem is None
    assert gpu.select_adapter(adapters, {"device_id": "3"})[2].startswith("device_id=3 is out of range: DXGI lists 3")
    assert "887A0002" in gpu.select_adapter(adapters, {"device_id": "3"})[2]
    assert "not a whole number" in gpu.select_adapter(adapters, {"device_id": "gpu0"})[2]
    chosen, how, _ = gpu.select_adapter(adapters, {})
    assert chosen.description.startswith("NVIDIA") and "guessed" in how
    warp_only = [a for a in adapters if a.software]
    assert gpu.select_adapter(warp_only, {})[2].startswith("no hardware adapter")
    # device_id can point at the Basic Render Driver; the record shows it (the preflight refuses it)
    assert gpu.select_adapter(adapters, {"device_id": "2"})[0].software


def test_the_registry_adds_the_drivers_date_and_provider():
    cls = gpu.DISPLAY_CLASS
    tree = {cls: {
        "0000": {"DriverDesc": "NVIDIA GeForce RTX 4090", "DriverVersion": "32.0.15.6094", "DriverDate": "10-1-2024",
                 "ProviderName": "NVIDIA", "MatchingDeviceId": "pci\\ven_10de&dev_2684&subsys_16f110de"},
        "0001": {"DriverDesc": "Intel(R) UHD Graphics 770", "MatchingDeviceId": "PCI\\VEN_8086&DEV_4680"},
        "0002": {"DriverDesc": "hidden"}, "Properties": {"x": "y"}, "Configuration": {}}}
    reg = FakeWinreg(tree, denied=(f"{cls}\\0002",))
    drivers = gpu.read_display_drivers(reg)
    assert [d.get("DriverDesc") for d in drivers] == ["NVIDIA GeForce RTX 4090", "Intel(R) UHD Graphics 770"]
    assert gpu.read_display_drivers(FakeWinreg({})) == []
    adapters = gpu.read_adapters(_machine().create_factory)
    record = gpu.dml_identity({"device_id": "0"}, adapters, drivers,
                              {"path": "C:\\venv\\onnxruntime\\capi\\DirectML.dll", "version": "1.15.4.0",
                               "bundled": True}, ORT)
    assert record["adapter"]["driver_date"] == "10-1-2024" and record["adapter"]["driver_provider"] == "NVIDIA"
    assert record["summary"] == ("NVIDIA GeForce RTX 4090 [10DE:2684], driver 32.0.15.6094, device_id=0, "
                                 "DirectML 1.15.4.0, onnxruntime-directml 1.24.4")
    assert len(record["adapters"]) == 3 and record["problem"] is None
    assert gpu.driver_entry(adapters[2], drivers) is None


def test_directml_version_is_read_from_the_version_resource(tmp_path):
    straddling = tmp_path / "DirectML.dll"
    straddling.write_bytes(pe_with_version((1, 15, 4, 0), at=(1 << 20) - 2, size=(1 << 20) + 4096))
    assert gpu.file_version(str(straddling)) == "1.15.4.0"
    late = tmp_path / "late.dll"
    late.write_bytes(pe_with_version((1, 13, 1, 7), at=(1 << 20) - 9, size=(1 << 20) - 9 + 16))
    assert gpu.file_version(str(late)) == "1.13.1.7"
    none = tmp_path / "none.dll"
    none.write_bytes(b"MZ" + b"\0" * 5000)
    assert gpu.file_version(str(none)) is None and gpu.file_version(str(tmp_path / "absent.dll")) is None


def test_identity_keys_tie_shards_to_adapter_driver_and_directml_not_to_slot():
    adapters = gpu.read_adapters(_machine().create_factory)
    dml = {"version": "1.15.4.0"}
    a = gpu.dml_identity({"device_id": "0"}, adapters, [], dml, ORT)
    moved = dict(a, adapter=dict(a["adapter"], luid="0x00000001:0x00009999", index=3), selection="device_id=3")
    newer = dict(a, adapter=dict(a["adapter"], driver_version="32.0.15.7000"))
    other = gpu.dml_identity({"device_id": "1"}, adapters, [], dml, ORT)
    assert gpu.identity_key(a) == gpu.identity_key(moved)
    assert gpu.identity_key(a) != gpu.identity_key(newer) and gpu.identity_key(a) != gpu.identity_key(other)
    assert gpu.identity_key(dict(a, directml={"version": "1.13.1.0"})) != gpu.identity_key(a)
    assert gpu.identity_key(None) == ("unrecorded",)


def test_identity_here_names_the_cpu_from_onnx_runtime_and_says_unknown_and_why_otherwise():
    cpu = gpu.identity(EpSpec("CPUExecutionProvider", "cpu"))
    listed = cpu["ort_device"]["device"]
    assert cpu["source"] == "ort" and listed["type"] == "CPU" and listed["ep"] == "CPUExecutionProvider"
    assert cpu["summary"].startswith(f"CPU {listed['vendor']} [{listed['pci_ids']}]") and "onnxruntime" in cpu["summary"]
    assert cpu["ort_device"]["selection"] == "the only device ONNX Runtime lists for the EP"
    for provider, why in (("DmlExecutionProvider", "Windows-only"),
                          ("CUDAExecutionProvider", "ONNX Runtime lists no device for CUDAExecutionProvider")):
        record = gpu.identity(EpSpec(provider, provider))
        assert record["source"] == "none" and record["summary"].startswith("unknown device (")
        assert why in record["summary"] and "no GPU" not in record["summary"]
    ov = gpu.openvino_identity({"device_type": "GPU.1"}, ORT)
    assert ov["adapter"]["device"] == "GPU.1" and ov["summary"].startswith("OpenVINO device GPU.1")
