"""The device a run used, recorded in every run header and report (``identity``), so that a result
is tied to a device, a driver, a DirectML build and the package that provides the EP.

- Every EP: ONNX Runtime's own device list (``get_ep_devices``, ``harness.eps.devices``; ORT >=
  1.23): the device chosen with ``--ep-device``, a plugin EP's only device, or the only device ORT
  lists for a built-in EP, recorded under ``ort_device`` with how it was chosen; when ORT lists
  several and none was chosen, the candidates (the EP picks one itself, which is not readable), and
  when it lists none, why. A plugin EP's package and version are recorded as ``ep_package``.

- Windows, DirectML EP: the DXGI adapters, read through ``dxgi.dll`` with ctypes (no compiled
  dependency): ``CreateDXGIFactory1`` -> ``IDXGIFactory1::EnumAdapters1(i)`` until
  DXGI_ERROR_NOT_FOUND -> ``IDXGIAdapter1::GetDesc1`` (description, PCI vendor/device/subsystem
  ids, revision, memory, LUID, flags) and ``IDXGIAdapter::CheckInterfaceSupport(IDXGIDevice)``
  (the user-mode driver version, as Dawn's PhysicalDeviceD3D.cpp reads it); the display class's
  registry keys add the driver's date and provider. ``--ep-option device_id=N`` is a DXGI index
  (ORT's dml_provider_factory.cc calls ``EnumAdapters1(device_id)``); without it ORT picks the
  first hardware adapter in DXCore's high-performance order, which this module can only guess
  (``selection`` says so). An adapter is the Basic Render Driver (software, WARP) when its flags
  say software or its ids are 1414:008C, the test ORT uses to refuse it (IsSoftwareAdapter).
- ``DirectML.dll``: the copy bundled next to ``onnxruntime.dll`` (the one ORT loads), its path and
  file version (read from the PE version resource, VS_FIXEDFILEINFO).
- CUDA-family EPs (CUDA, TensorRT, TensorRT-RTX), where ONNX Runtime lists no device for them:
  the NVIDIA GPU ``device_id`` names, read from ``nvidia-smi`` (``harness.eps.nvidia``).
- OpenVINO EP: the OpenVINO device (``device_type``, default CPU) and its full name when the
  ``openvino`` package can tell.
- DirectML: ORT's device list is a cross-check of the DXGI reading (``cross_check``: the ORT device
  whose ``DxgiAdapterNumber`` is the chosen adapter's index must have its PCI ids and LUID); a
  disagreement is recorded and named in the summary.
- ``source`` says where the record's device comes from: ``dxgi``, ``openvino``, ``nvidia-smi``, ``ort`` (ORT's
  device list alone), or ``none`` (nothing could be read: the summary says "unknown device" and why).

``identity_key`` is what must agree between shards of one run (``ep-testbed merge``).
Vtable slots follow the method order of dxgi.h (IUnknown 0-2, IDXGIObject 3-6, IDXGIFactory 7-11,
IDXGIFactory1::EnumAdapters1 12; IDXGIAdapter EnumOutputs 7, GetDesc 8, CheckInterfaceSupport 9,
IDXGIAdapter1::GetDesc1 10), as in the public ctypes/comtypes bindings of ra1nty/DXcam
(dxcam/_libs/dxgi.py).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import struct
import sys
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Optional

from ep_testbed.harness.core import emulation
from ep_testbed.harness.core.installed import machine_info, ort_flavour, ort_version

from . import nvidia
from .adapters import adapter_for, ep_flag
from .devices import from_json, of_ep, read_devices
from .providers import EpNotAvailable, EpSpec

DXGI_ERROR_NOT_FOUND = 0x887A0002
DXGI_ERROR_UNSUPPORTED = 0x887A0004
DXGI_ADAPTER_FLAG_SOFTWARE = 2
#: Microsoft Basic Render Driver (WARP): ORT's IsSoftwareAdapter (dml_provider_factory.cc L147-158).
BASIC_RENDER_IDS = (0x1414, 0x8C)
IID_IDXGIFactory1 = "770aae78-f26f-4dba-a829-253c83d1b387"
IID_IDXGIDevice = "54ec77fa-1377-44e6-8c32-88fd5f44c84c"
#: Vtable slots (module docstring).
RELEASE, ENUM_ADAPTERS1, CHECK_INTERFACE_SUPPORT, GET_DESC1 = 2, 12, 9, 10
#: COM calls use the platform's calling convention (stdcall on 32-bit Windows; one convention on x64).
FUNCTYPE = getattr(ctypes, "WINFUNCTYPE", ctypes.CFUNCTYPE)
#: Enough adapters for any machine; a broken driver stack answering forever stops here.
MAX_ADAPTERS = 64


class GUID(ctypes.Structure):
    _fields_ = [("Data1", ctypes.c_uint32), ("Data2", ctypes.c_uint16), ("Data3", ctypes.c_uint16),
                ("Data4", ctypes.c_uint8 * 8)]


def guid(text: str) -> GUID:
    """A GUID structure from its text form (little-endian fields, as Windows lays them out)."""
    return GUID.from_buffer_copy(uuid.UUID(text).bytes_le)


class LUID(ctypes.Structure):
    _fields_ = [("LowPart", ctypes.c_uint32), ("HighPart", ctypes.c_int32)]


class DXGI_ADAPTER_DESC1(ctypes.Structure):
    """dxgi.h; WCHAR is UTF-16 (two bytes) on Windows, so it is spelled c_uint16 to keep one layout."""

    _fields_ = [("Description", ctypes.c_uint16 * 128), ("VendorId", ctypes.c_uint32),
                ("DeviceId", ctypes.c_uint32), ("SubSysId", ctypes.c_uint32), ("Revision", ctypes.c_uint32),
                ("DedicatedVideoMemory", ctypes.c_size_t), ("DedicatedSystemMemory", ctypes.c_size_t),
                ("SharedSystemMemory", ctypes.c_size_t), ("AdapterLuid", LUID), ("Flags", ctypes.c_uint32)]


class GpuError(RuntimeError):
    """The adapters could not be read (the message says which call failed and its HRESULT)."""


@dataclass
class Adapter:
    """One DXGI adapter as GetDesc1 and CheckInterfaceSupport describe it."""

    index: int
    description: str
    vendor_id: int
    device_id: int
    subsys_id: int
    revision: int
    dedicated_video_memory: int
    luid: str
    flags: int
    driver_version: Optional[str] = None

    @property
    def software(self) -> bool:
        """True for the Basic Render Driver / WARP, which ORT's DirectML EP refuses."""
        return bool(self.flags & DXGI_ADAPTER_FLAG_SOFTWARE) or (self.vendor_id, self.device_id) == BASIC_RENDER_IDS

    def to_json(self) -> dict[str, Any]:
        """The adapter with hexadecimal ids, as run headers record it."""
        data = asdict(self)
        data.update(vendor_id=f"0x{self.vendor_id:04X}", device_id=f"0x{self.device_id:04X}",
                    subsys_id=f"0x{self.subsys_id:08X}", software=self.software)
        return data


def _method(obj: int, slot: int, restype: Any, *argtypes: Any) -> Callable[..., Any]:
    """The COM method in vtable ``slot`` of the interface pointer ``obj``, bound to it."""
    vtable = ctypes.cast(obj, ctypes.POINTER(ctypes.POINTER(ctypes.c_void_p))).contents
    function = FUNCTYPE(restype, ctypes.c_void_p, *argtypes)(vtable[slot])
    return lambda *args: function(obj, *args)


def _release(obj: int) -> None:
    """IUnknown::Release on a COM pointer this module obtained."""
    _method(obj, RELEASE, ctypes.c_ulong)()


def _hresult(value: int) -> int:
    """A signed HRESULT as the unsigned 32-bit number Windows documents (0x887A0002...)."""
    return value & 0xFFFFFFFF


def _driver_version(quad: int) -> str:
    """The UMD version CheckInterfaceSupport returns, as Windows prints it (four 16-bit parts)."""
    quad &= 0xFFFFFFFFFFFFFFFF
    return ".".join(str((quad >> shift) & 0xFFFF) for shift in (48, 32, 16, 0))


def _describe(adapter: int, index: int) -> Adapter:
    """GetDesc1 and the driver version of one IDXGIAdapter1 pointer."""
    desc = DXGI_ADAPTER_DESC1()
    hr = _method(adapter, GET_DESC1, ctypes.c_long, ctypes.POINTER(DXGI_ADAPTER_DESC1))(ctypes.byref(desc))
    if hr < 0:
        raise GpuError(f"IDXGIAdapter1::GetDesc1({index}) failed: HRESULT 0x{_hresult(hr):08X}")
    umd = ctypes.c_longlong()
    check = _method(adapter, CHECK_INTERFACE_SUPPORT, ctypes.c_long, ctypes.POINTER(GUID),
                    ctypes.POINTER(ctypes.c_longlong))
    hr = check(ctypes.byref(guid(IID_IDXGIDevice)), ctypes.byref(umd))
    text = ctypes.string_at(ctypes.addressof(desc), ctypes.sizeof(desc.Description))
    luid = desc.AdapterLuid
    return Adapter(index=index, description=text.decode("utf-16-le", errors="replace").split("\0", 1)[0],
                   vendor_id=desc.VendorId, device_id=desc.DeviceId, subsys_id=desc.SubSysId, revision=desc.Revision,
                   dedicated_video_memory=int(desc.DedicatedVideoMemory),
                   luid=f"0x{luid.HighPart & 0xFFFFFFFF:08X}:0x{luid.LowPart:08X}", flags=desc.Flags,
                   driver_version=_driver_version(umd.value) if hr >= 0 else None)


def read_adapters(create_factory: Callable[..., int]) -> list[Adapter]:
    """Every DXGI adapter, in DXGI's order (the index ``device_id`` means), through
    ``create_factory`` (``dxgi.dll!CreateDXGIFactory1`` or a stand-in with its signature).
    ``GpuError`` naming the call and HRESULT when DXGI fails."""
    factory = ctypes.c_void_p()
    hr = create_factory(ctypes.byref(guid(IID_IDXGIFactory1)), ctypes.byref(factory))
    if hr < 0 or not factory.value:
        raise GpuError(f"CreateDXGIFactory1 failed: HRESULT 0x{_hresult(hr):08X}")
    adapters: list[Adapter] = []
    try:
        enum = _method(factory.value, ENUM_ADAPTERS1, ctypes.c_long, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p))
        for index in range(MAX_ADAPTERS):
            adapter = ctypes.c_void_p()
            hr = enum(index, ctypes.byref(adapter))
            if _hresult(hr) == DXGI_ERROR_NOT_FOUND:
                break
            if hr < 0 or not adapter.value:
                raise GpuError(f"IDXGIFactory1::EnumAdapters1({index}) failed: HRESULT 0x{_hresult(hr):08X}")
            try:
                adapters.append(_describe(adapter.value, index))
            finally:
                _release(adapter.value)
    finally:
        _release(factory.value)
    return adapters


def windows_factory() -> Callable[..., int]:
    """``dxgi.dll!CreateDXGIFactory1`` with its signature (Windows only)."""
    function = ctypes.WinDLL("dxgi").CreateDXGIFactory1  # type: ignore[attr-defined]
    function.argtypes = [ctypes.POINTER(GUID), ctypes.POINTER(ctypes.c_void_p)]
    function.restype = ctypes.c_long
    return function


#: The display adapters' device setup class (Microsoft's "System-Defined Device Setup Classes").
DISPLAY_CLASS = r"SYSTEM\CurrentControlSet\Control\Class\{4d36e968-e325-11ce-bfc1-08002be10318}"
DRIVER_VALUES = ("DriverDesc", "DriverVersion", "DriverDate", "ProviderName", "MatchingDeviceId")
#: Subkeys read at most: machines have a handful of display devices.
MAX_DRIVER_KEYS = 256


def read_display_drivers(winreg: Any) -> list[dict[str, str]]:
    """``DRIVER_VALUES`` of each numbered subkey of ``DISPLAY_CLASS`` (``winreg``, or a stand-in with
    its OpenKey/EnumKey/QueryValueEx); subkeys that cannot be read (``Properties`` needs an
    administrator) are skipped. Empty when the class key cannot be opened."""
    try:
        root = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, DISPLAY_CLASS)
    except OSError:
        return []
    entries = []
    with root:
        for i in range(MAX_DRIVER_KEYS):
            try:
                name = winreg.EnumKey(root, i)
            except OSError:  # no more subkeys
                break
            if not name.isdigit():
                continue
            try:
                with winreg.OpenKey(root, name) as key:
                    entries.append(_values(winreg, key))
            except OSError:
                continue
    return entries


def _values(winreg: Any, key: Any) -> dict[str, str]:
    """The ``DRIVER_VALUES`` a driver key has."""
    values = {}
    for field in DRIVER_VALUES:
        try:
            values[field] = str(winreg.QueryValueEx(key, field)[0])
        except OSError:
            continue
    return values


def driver_entry(adapter: Adapter, drivers: Iterable[dict[str, str]]) -> Optional[dict[str, str]]:
    """The display-class driver entry of ``adapter``: its PCI vendor and device id in
    ``MatchingDeviceId`` (``pci\\ven_10de&dev_2684...``), the same description preferred."""
    wanted = (adapter.vendor_id, adapter.device_id)
    found = []
    for entry in drivers:
        ids = re.search(r"ven_([0-9a-f]{4})&dev_([0-9a-f]{4})", entry.get("MatchingDeviceId", ""), re.IGNORECASE)
        if ids and (int(ids.group(1), 16), int(ids.group(2), 16)) == wanted:
            found.append(entry)
    same_name = [e for e in found if e.get("DriverDesc") == adapter.description]
    return (same_name or found or [None])[0]


#: VS_FIXEDFILEINFO.dwSignature, little-endian, as it sits in a PE file's version resource.
VERSION_SIGNATURE = b"\xbd\x04\xef\xfe"
#: The most a version scan reads (DirectML.dll 1.15.4 is 18 MB).
MAX_SCAN_BYTES = 256 * 1024 * 1024


def file_version(path: str) -> Optional[str]:
    """The file version (``"1.15.4.0"``) in a Windows PE file's VS_FIXEDFILEINFO, found by its
    signature; None when the file has none or cannot be read. Reads in 1 MiB chunks, at most
    ``MAX_SCAN_BYTES``."""
    tail = b""
    try:
        with open(path, "rb") as f:
            for _ in range(MAX_SCAN_BYTES // (1 << 20)):
                chunk = f.read(1 << 20)
                if not chunk:
                    return None
                data = tail + chunk
                at = data.find(VERSION_SIGNATURE)
                if at >= 0 and len(data) < at + 16:
                    data += f.read(16)
                if at >= 0 and len(data) >= at + 16:
                    _, _, ms, ls = struct.unpack_from("<4I", data, at)
                    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"
                tail = data[-(len(VERSION_SIGNATURE) - 1):]
    except OSError:
        return None
    return None


def directml_dll() -> Optional[dict[str, Any]]:
    """The DirectML.dll ORT loads: the copy in ``onnxruntime/capi`` (delay-loaded from the ORT
    module's folder, core/dll/delay_load_hook.cc), else System32's; path and file version."""
    spec = importlib.util.find_spec("onnxruntime")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = os.path.join(folder, "capi", "DirectML.dll")
        if os.path.isfile(path):
            return {"path": path, "version": file_version(path), "bundled": True}
    system = os.path.join(os.environ.get("SystemRoot", r"C:\Windows"), "System32", "DirectML.dll")
    if sys.platform == "win32" and os.path.isfile(system):
        return {"path": system, "version": file_version(system), "bundled": False}
    return None


def select_adapter(adapters: list[Adapter], options: dict[str, str]) -> tuple[Optional[Adapter], str, Optional[str]]:
    """``(adapter, how it was chosen, problem)`` for the DirectML EP's provider options: with
    ``device_id`` the DXGI adapter of that index (dml_provider_factory.cc: EnumAdapters1(device_id));
    without, a guess at DXCore's high-performance pick: the hardware adapter with the most
    dedicated memory. ``problem`` (adapter None) when the index is not a number or out of range,
    or there is no hardware adapter."""
    text = (options or {}).get("device_id")
    if text not in (None, ""):
        try:
            index = int(str(text).strip())
        except ValueError:
            return None, f"device_id={text}", f"device_id={text!r} is not a whole number"
        if not 0 <= index < len(adapters):
            span = f"0 to {len(adapters) - 1}" if adapters else "none"
            return None, f"device_id={index}", (f"device_id={index} is out of range: DXGI lists {len(adapters)} "
                                                f"adapter(s) ({span}); ORT would fail with HRESULT 0x887A0002")
        return adapters[index], f"device_id={index} (DXGI index)", None
    hardware = [a for a in adapters if not a.software]
    if not hardware:
        return None, "default", "no hardware adapter (only the Microsoft Basic Render Driver, which the DirectML EP refuses)"
    best = max(hardware, key=lambda a: a.dedicated_video_memory)
    return best, ("default: ORT takes the first hardware adapter in DXCore's high-performance order; guessed as the "
                  "one with the most dedicated memory (pass --ep-option device_id=N to pin it)"), None


def dml_identity(options: dict[str, str], adapters: list[Adapter], drivers: list[dict[str, str]],
                 directml: Optional[dict[str, Any]], ort: dict[str, str]) -> dict[str, Any]:
    """The identity record of a DirectML run from what was read (``identity`` reads it)."""
    adapter, selection, problem = select_adapter(adapters, options)
    chosen = None
    if adapter is not None:
        chosen = adapter.to_json()
        entry = driver_entry(adapter, drivers) or {}
        chosen.update(driver_date=entry.get("DriverDate"), driver_provider=entry.get("ProviderName"),
                      driver_version_registry=entry.get("DriverVersion"))
    data = {"source": "dxgi", "selection": selection, "adapter": chosen, "adapters": [a.to_json() for a in adapters],
            "directml": directml, "onnxruntime": ort, "problem": problem}
    data["summary"] = summary(data)
    return data


def openvino_identity(options: dict[str, str], ort: dict[str, str]) -> dict[str, Any]:
    """The OpenVINO device the EP runs on (``device_type``, default CPU), the devices the EP
    reports (``get_available_openvino_device_ids``), and a name: OpenVINO's FULL_DEVICE_NAME when
    the ``openvino`` package is importable, else for a CPU device the machine's CPU model."""
    device = (options or {}).get("device_type") or "CPU"
    name = None
    try:
        import openvino  # optional: onnxruntime-openvino runs without the Python package

        name = str(openvino.Core().get_property(device, "FULL_DEVICE_NAME"))
    except Exception:  # not installed, or a device (HETERO:..., AUTO) with no single name
        if device.upper().startswith("CPU"):

            name = machine_info()["cpu"]
    try:
        from onnxruntime.capi import _pybind_state

        available = [str(d) for d in _pybind_state.get_available_openvino_device_ids()]
    except Exception:  # another ONNX Runtime build
        available = []
    data = {"source": "openvino", "adapter": {"device": device, "description": name}, "available_devices": available,
            "onnxruntime": ort}
    data["summary"] = summary(data)
    return data


def none_identity(provider: str, ort: dict[str, str], note: str = "") -> dict[str, Any]:
    """The record of a run whose device could not be read: ``source`` none, the summary says
    "unknown device" and ``note`` why."""
    data = {"source": "none", "adapter": None, "onnxruntime": ort,
            "note": note or f"neither ONNX Runtime's device list nor a reader of this module names {provider}'s device"}
    data["summary"] = summary(data)
    return data


def ort_view(ep: EpSpec) -> dict[str, Any]:
    """What ONNX Runtime's device list says about ``ep``'s device: ``device`` (the chosen entry,
    or None), ``selection`` (how it was chosen), ``candidates`` (every entry of the EP) and
    ``note`` (why there is no device)."""
    try:
        mine = of_ep(read_devices(), ep.provider)
        chosen = adapter_for(ep).device()
    except EpNotAvailable as exc:  # the run itself refuses this EP; the record says why
        return {"device": None, "selection": None, "candidates": [], "note": str(exc)}
    dxgi = [d for d in mine if d.metadata.get("DxgiAdapterNumber") == str(ep.options.get("device_id"))]
    if chosen is not None:
        how = f"--ep-device {ep.device}" if ep.device is not None else "the plugin EP's only device"
    elif len(mine) == 1:
        chosen, how = mine[0], "the only device ONNX Runtime lists for the EP"
    elif ep.provider == "DmlExecutionProvider" and len(dxgi) == 1:  # device_id is a DXGI index for DirectML
        chosen, how = dxgi[0], f"--ep-option device_id={ep.options['device_id']} (its DxgiAdapterNumber)"
    else:
        how = None
    note = None
    if chosen is None:
        note = (f"ONNX Runtime lists {len(mine)} devices for {ep.provider} and none was chosen: the EP picks one "
                "itself (pass --ep-device to pin it)" if mine else f"ONNX Runtime lists no device for {ep.provider}")
    return {"device": chosen.to_json() if chosen else None, "selection": how,
            "candidates": [d.to_json() for d in mine], "note": note}


def _luid_key(text: str) -> Optional[int]:
    """``"0x00000000:0x0000C3F1"`` (this module's LUID form) -> ORT's LUID metadata number
    (HighPart << 32 | LowPart, device_discovery.cc GetLuidKey)."""
    high, sep, low = str(text).partition(":")
    try:
        return (int(high, 16) << 32) | int(low, 16) if sep else None
    except ValueError:
        return None


def cross_check(record: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    """DirectML: whether ORT's device list and the DXGI reading name the same adapter: the ORT
    device with the chosen adapter's ``DxgiAdapterNumber`` (else the chosen ORT device) must have
    its PCI ids and LUID. ``{"status": "agree" | "disagree" | "not compared", "details": [...]}``."""
    adapter = record.get("adapter") or {}
    entries = view.get("candidates") or []
    same_index = [d for d in entries if str(d.get("metadata", {}).get("DxgiAdapterNumber")) == str(adapter.get("index"))]
    device = same_index[0] if same_index else view.get("device")
    if not adapter or not device:
        why = "no DXGI adapter chosen" if not adapter else "ONNX Runtime lists no DirectML device for that adapter"
        return {"status": "not compared", "details": [why]}
    details = []
    ids = (int(str(adapter.get("vendor_id")), 16), int(str(adapter.get("device_id")), 16))
    if ids != (device.get("vendor_id"), device.get("device_id")):
        details.append(f"PCI ids: DXGI {ids[0]:04X}:{ids[1]:04X}, ONNX Runtime {device.get('pci_ids')}")
    luid = device.get("metadata", {}).get("LUID")
    if luid is not None and str(_luid_key(adapter.get("luid", ""))) != str(luid):
        details.append(f"LUID: DXGI {adapter.get('luid')}, ONNX Runtime {luid}")
    if not same_index:
        details.append(f"ONNX Runtime lists no DirectML device with DxgiAdapterNumber={adapter.get('index')}")
    return {"status": "disagree" if details else "agree", "details": details}


def summary(data: dict[str, Any]) -> str:
    """One line naming the device (or "unknown device" and why), the driver, DirectML, the EP
    package and ONNX Runtime, and any disagreement between DXGI and ORT's device list."""
    ort = data.get("onnxruntime") or {}
    runtime = f"{ort.get('distribution', '?')} {ort.get('version', '?')}"
    package = data.get("ep_package") or {}
    if package:
        runtime = f"{package.get('name')} {package.get('version')} on {runtime}"
    adapter = data.get("adapter") or {}
    device = (data.get("ort_device") or {}).get("device") or {}
    check = data.get("cross_check") or {}
    if data.get("source") == "dml-wine":
        emulation = data.get("emulation") or {}
        dml = data.get("directml") or {}
        return (f"{adapter.get('description') or 'no adapter'} (emulated: Wine {emulation.get('wine', '?')}, vkd3d "
                f"{emulation.get('vkd3d', '?')}, feature level {emulation.get('feature_level', '?')}, shader model "
                f"{emulation.get('shader_model', '?')}), DirectML {dml.get('version') or '?'}, {runtime}")
    if data.get("source") == "dxgi" and adapter:
        dml = data.get("directml") or {}
        text = (f"{adapter.get('description')} [{adapter.get('vendor_id', '?')[2:]}:{adapter.get('device_id', '?')[2:]}], "
                f"driver {adapter.get('driver_version') or adapter.get('driver_version_registry') or '?'}, "
                f"{data.get('selection', '').split(' ')[0]}, DirectML {dml.get('version') or '?'}, {runtime}")
        if check.get("status") == "disagree":
            text += f"; DXGI and ONNX Runtime's device list disagree: {'; '.join(check.get('details', []))}"
        return text
    if data.get("source") == "dxgi":
        return f"no usable adapter ({data.get('problem')}), {runtime}"
    if data.get("source") == "nvidia-smi":
        return nvidia.words(data, runtime)
    if data.get("source") == "openvino":
        return f"OpenVINO device {adapter.get('device')} ({adapter.get('description') or 'name not reported'}), {runtime}"
    if data.get("source") == "ort" and device:
        return f"{_device_words(device, data.get('cpu'))}, {device.get('ep')}, {runtime}"
    return f"unknown device ({data.get('note')}), {runtime}"


#: Device metadata worth a place in the one-line summary (what tells the device apart).
SUMMARY_METADATA = ("ov_device", "Description", "pci_bus_id", "DxgiAdapterNumber", "Discrete")


def _device_words(device: dict[str, Any], cpu: Optional[str]) -> str:
    """``GPU NVIDIA [10DE:2330] pci_bus_id=0000:19:00.0, Discrete=1`` (a CPU adds its model name)."""
    meta = {**(device.get("metadata") or {}), **(device.get("ep_metadata") or {})}
    items = [f"{k}={meta[k]}" for k in SUMMARY_METADATA if k in meta]
    name = f" {cpu}" if device.get("type") == "CPU" and cpu else ""
    return (f"{device.get('type')} {device.get('vendor_name') or device.get('vendor') or '?'} [{device.get('pci_ids')}]{name}"
            + (f" {', '.join(items)}" if items else ""))


def identity_key(data: Optional[dict[str, Any]]) -> tuple:
    """What two runs must share to be one run's shards: the source, the adapter's name and PCI
    ids, the driver and DirectML versions (not the LUID or index, which change across reboots and
    slots), ORT's device (EP, hardware type, PCI ids, driver or OpenVINO device: ``EpDevice.key``)
    and the EP package. A header without a record (older runs) gives ``("unrecorded",)``."""
    if not isinstance(data, dict):
        return ("unrecorded",)
    adapter = data.get("adapter") if isinstance(data.get("adapter"), dict) else {}
    dml = data.get("directml") if isinstance(data.get("directml"), dict) else {}
    view = data.get("ort_device") if isinstance(data.get("ort_device"), dict) else {}
    device = view.get("device") if isinstance(view.get("device"), dict) else None
    try:
        ort_key = from_json(device).key() if device else None
    except ValueError:  # a damaged record: compared as it is
        ort_key = repr(device)
    package = data.get("ep_package") if isinstance(data.get("ep_package"), dict) else {}
    return (data.get("source"), adapter.get("description"), adapter.get("vendor_id"), adapter.get("device_id"),
            adapter.get("device"), adapter.get("driver_version"), dml.get("version"), ort_key,
            package.get("name"), package.get("version"), (data.get("emulation") or {}).get("vkd3d"))


def _read_identity(ep: EpSpec, ort: dict[str, str]) -> dict[str, Any]:
    """The DXGI (DirectML, Windows) or OpenVINO (built-in EP) record, else a record without an adapter."""
    adapter = adapter_for(ep)
    if hasattr(adapter, "identity_record"):  # the adapter's own process knows its device
        return adapter.identity_record()
    if ep.provider == "OpenVINOExecutionProvider" and ep.holder == "built-in":
        return openvino_identity(ep.options, ort)
    if ep.provider in nvidia.CUDA_PROVIDERS and ep.holder == "built-in":  # a plugin's device: ORT lists it
        return _cuda_record(ep, ort)
    if ep.provider != "DmlExecutionProvider":
        return {"source": "none", "adapter": None, "onnxruntime": ort}
    if sys.platform != "win32":
        return none_identity(ep.provider, ort, "DXGI is Windows-only: no adapter can be read on this platform")
    try:
        adapters = read_adapters(windows_factory())
    except (OSError, GpuError) as exc:
        return none_identity(ep.provider, ort, f"the DXGI adapters could not be read: {exc}")
    import winreg  # type: ignore[import-not-found]  # Windows only

    return dml_identity(ep.options, adapters, read_display_drivers(winreg), directml_dll(), ort)


def _cuda_record(ep: EpSpec, ort: dict[str, str]) -> dict[str, Any]:
    """A CUDA-family EP's GPU from nvidia-smi; ``source`` none with the reason when it cannot be read
    (ONNX Runtime's device list, read next, may still name it)."""
    try:
        gpus = nvidia.read_gpus()
    except nvidia.NvidiaSmiError as exc:
        return {"source": "none", "adapter": None, "onnxruntime": ort, "note": str(exc)}
    return nvidia.cuda_identity(ep.options, gpus, os.environ.get("CUDA_VISIBLE_DEVICES"), ort)


def identity(ep: EpSpec, record: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The identity record of a run on ``ep``, read from this machine: ``record`` (DXGI for
    DirectML, the OpenVINO device; read here when None) with ONNX Runtime's device view
    (``ort_view``), the EP package, DirectML's cross-check, ``source`` and ``summary``."""
    ort = {"distribution": ort_flavour(), "version": ort_version()}
    data = dict(record) if record is not None else _read_identity(ep, ort)
    view = data.pop("ort_device", None) or ort_view(ep)
    data["ort_device"] = view
    if ep.package:
        data["ep_package"] = {"name": ep.package, "version": ep.package_version}
    if ep.provider == "DmlExecutionProvider" and data.get("source") == "dxgi":
        data["cross_check"] = cross_check(data, view)
    if data.get("source") == "none" and view.get("device"):
        data["source"] = "ort"
        data.pop("note", None)
    elif data.get("source") == "none":
        data["note"] = "; ".join(n for n in (data.get("note"), view.get("note")) if n) or None
    if (view.get("device") or {}).get("type") == "CPU":
        data["cpu"] = machine_info()["cpu"]
    data["summary"] = summary(data)
    return data


def runtime_info(ep: EpSpec | None = None) -> dict[str, Any]:
    """The ONNX Runtime flavour, version and available providers, plus ``machine_info()``; with
    ``ep``, also ``gpu``: the identity of the device it runs on (``identity``), ``ep_held_by``:
    how the EP is held (built into the wheel, or a plugin library and its package), ``ep_flag``
    (the ``--ep`` value that selects it again: ``adapters.ep_flag``) and, on an emulated device,
    ``emulated_device`` (``core.emulation``: its label and which ONNX Runtime ran what)."""
    import onnxruntime  # loaded on first use: the CLI, reports and diffs start without it

    info = {
        "ort_flavour": ort_flavour(),
        "ort_version": ort_version(),
        "available_providers": list(onnxruntime.get_available_providers()),
        "machine": machine_info(),
    }
    if ep is not None:
        info["ep_flag"] = ep_flag(ep)
        info["gpu"] = identity(ep)
        info["ep_held_by"] = adapter_for(ep).describe()
        emulated = emulation.emulated_device(info["gpu"], info["ort_flavour"], info["ort_version"])
        if emulated is not None:  # the label every front end shows, and which ONNX Runtime ran what
            info["emulated_device"] = emulated
    return info
