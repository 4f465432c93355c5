"""The DirectML EP's device on Windows, read through DXGI: the adapters, the one ``device_id`` names,
its driver and the DirectML.dll ONNX Runtime loads; and the preflight's checks of them.

The DXGI adapters are read through ``dxgi.dll`` with ctypes (no compiled dependency):
``CreateDXGIFactory1`` -> ``IDXGIFactory1::EnumAdapters1(i)`` until DXGI_ERROR_NOT_FOUND ->
``IDXGIAdapter1::GetDesc1`` (description, PCI vendor/device/subsystem ids, revision, memory, LUID,
flags) and ``IDXGIAdapter::CheckInterfaceSupport(IDXGIDevice)`` (the user-mode driver version, as
Dawn's PhysicalDeviceD3D.cpp reads it); the display class's registry keys add the driver's date
and provider. ``--ep-option device_id=N`` is a DXGI index (ORT's dml_provider_factory.cc calls
``EnumAdapters1(device_id)``); without it ORT picks the first hardware adapter in DXCore's
high-performance order, which this module can only guess (``selection`` says so). An adapter is
the Basic Render Driver (software, WARP) when its flags say software or its ids are 1414:008C,
the test ORT uses to refuse it (IsSoftwareAdapter). ``DirectML.dll``: the copy bundled next to
``onnxruntime.dll`` (the one ORT loads), its path and file version (read from the PE version
resource, VS_FIXEDFILEINFO). ORT's device list is a cross-check of the DXGI reading
(``cross_check``: the ORT device whose ``DxgiAdapterNumber`` is the chosen adapter's index must
have its PCI ids and LUID).

``dxgi_record`` is the DirectML EP record's identity reader and ``preflight`` its preflight hook
(``harness.eps.registry``); ``harness.eps.gpu`` re-exports this module's names.

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

from .device_record import none_identity, summary
from .spec import EpSpec

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
    chosen = same_name or found
    return chosen[0] if chosen else None


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


def dxgi_record(ep: EpSpec, ort: dict[str, str]) -> dict[str, Any]:
    """The identity record of a DirectML run read from this machine: the DXGI adapters (Windows),
    else a record without an adapter saying why."""
    if sys.platform != "win32":
        return none_identity(ep.provider, ort, "DXGI is Windows-only: no adapter can be read on this platform")
    try:
        adapters = read_adapters(windows_factory())
    except (OSError, GpuError) as exc:
        return none_identity(ep.provider, ort, f"the DXGI adapters could not be read: {exc}")
    import winreg  # Windows only

    return dml_identity(ep.options, adapters, read_display_drivers(winreg), directml_dll(), ort)


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


#: HRESULTs ORT's DirectML EP raises while choosing the adapter, and what they mean.
KNOWN_HRESULTS = {
    "887A0002": "DXGI_ERROR_NOT_FOUND: no adapter at that device_id (IDXGIFactory::EnumAdapters1)",
    "C0262002": "ERROR_GRAPHICS_INVALID_DISPLAY_ADAPTER: the adapter is the Microsoft Basic Render Driver, "
                "which the DirectML EP refuses",
    "887A0004": "DXGI_ERROR_UNSUPPORTED: the adapter cannot create a Direct3D 12 device at feature level 11_0",
}


def preflight(result: Any, ep: EpSpec, read: Callable[[], dict[str, Any]]) -> bool:
    """The DirectML EP's own preflight (finding 3): the adapter ``device_id`` names (or the
    default) is usable (``check_adapters``), and whether ORT's device list names the same one
    (``check_cross``); ``read()`` is the run header's device record. False after a fatal finding."""
    record = read()
    if not check_adapters(result, ep, record):
        return False
    check_cross(result, record)
    return True


def check_adapters(result: Any, ep: EpSpec, record: dict[str, Any]) -> bool:
    """Finding 3 (DirectML): the adapter ``device_id`` names (or the default) is usable."""
    result.gpu = record
    if record.get("source") != "dxgi":
        return result.add("warn", f"adapters not read: {record.get('note')}")
    for adapter in record.get("adapters", []):
        flag = " (software: Microsoft Basic Render Driver)" if adapter.get("software") else ""
        result.add("ok", f"adapter {adapter['index']}: {adapter['description']} [{adapter['vendor_id'][2:]}:"
                         f"{adapter['device_id'][2:]}] driver {adapter.get('driver_version') or '?'}{flag}")
    if record.get("problem"):
        hardware = [a for a in record.get("adapters", []) if not a.get("software")]
        hint = ("; hardware adapters: " + ", ".join(f"device_id={a['index']} ({a['description']})" for a in hardware)
                if hardware else "; install a GPU driver (the DirectML EP needs a Direct3D 12 hardware adapter)")
        return result.add("fatal", f"{record['problem']}. Fix: pass --ep-option device_id=N for a hardware adapter"
                                   f"{hint}")
    chosen = record["adapter"]
    if chosen.get("software"):
        return result.add("fatal", f"device_id={chosen['index']} is the Microsoft Basic Render Driver (WARP), which "
                                   "the DirectML EP refuses (ERROR_GRAPHICS_INVALID_DISPLAY_ADAPTER). Fix: pick a "
                                   "hardware adapter's device_id from the list above")
    result.add("ok", f"uses {chosen['description']}: {record['selection']}")
    if not (ep.options or {}).get("device_id") and sum(not a.get("software") for a in record["adapters"]) > 1:
        result.add("warn", "several hardware adapters and no device_id: results name a guessed adapter; pass "
                           "--ep-option device_id=N")
    dml = record.get("directml")
    if dml:
        result.add("ok", f"DirectML.dll {dml.get('version') or '(version unread)'} at {dml['path']}")
    else:
        result.add("warn", "DirectML.dll not found next to onnxruntime or in System32")
    return True


def check_cross(result: Any, record: dict[str, Any]) -> None:
    """DirectML: a warning when ORT's device list and DXGI name different adapters (``cross_check``)."""
    check = record.get("cross_check") or {}
    if check.get("status") == "disagree":
        result.add("warn", "DXGI and ONNX Runtime's device list disagree on the adapter: "
                           + "; ".join(check.get("details", [])))
    elif check.get("status") == "agree":
        result.add("ok", "ONNX Runtime's device list names the same adapter as DXGI")
