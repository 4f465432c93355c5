"""Stand-ins for the Windows interfaces the harness reads, so their code paths run here.

- ``FakeDxgi``: COM objects built in memory with ctypes (a pointer to a vtable of callbacks), laid
  out as dxgi.h declares IDXGIFactory1 and IDXGIAdapter1 (slot numbers as in
  ra1nty/DXcam dxcam/_libs/dxgi.py), and a ``CreateDXGIFactory1`` with its signature. The code
  under test calls them exactly as it calls dxgi.dll.
- ``FakeWinreg``: the few ``winreg`` calls the harness makes, over a dict tree.
- ``pe_with_version``: bytes holding a VS_FIXEDFILEINFO, as a DLL's version resource does.
- ``write_fake_windowsml``: a ``windowsml`` package for a child interpreter's ``PYTHONPATH``, with
  the catalog API its PyPI README documents (``EpCatalog``, ``find_all_providers()``,
  ``ExecutionProvider`` properties, ``EpReadyState``/``EpCertification``), answering from a JSON
  file, and misbehaving on request as the real one can (refusing to import off Windows, crashing
  while enumerating or on release, hanging).
"""

from __future__ import annotations

import ctypes
import json
import pathlib
import struct

from ep_testbed.harness.eps import gpu

FUNCTYPE = gpu.FUNCTYPE
# Vtable slots in dxgi.h's method order (IUnknown QueryInterface 0, AddRef 1, Release 2;
# IDXGIObject 3-6; IDXGIAdapter EnumOutputs 7, GetDesc 8, CheckInterfaceSupport 9;
# IDXGIAdapter1::GetDesc1 10; IDXGIFactory 7-11; IDXGIFactory1::EnumAdapters1 12), spelled out
# here rather than taken from the module under test.
RELEASE, CHECK_INTERFACE_SUPPORT, GET_DESC1, ENUM_ADAPTERS1 = 2, 9, 10, 12
S_OK = 0
E_FAIL = -2147467259  # 0x80004005


def signed(hresult: int) -> int:
    """An HRESULT as the signed 32-bit value a COM method returns."""
    return hresult - (1 << 32) if hresult & 0x80000000 else hresult


class FakeCom:
    """One COM object: ``pointer`` is its interface pointer; ``slots`` map a vtable slot to
    ``(restype, argtypes after this, python function(this, *args))``."""

    def __init__(self, slots: dict, size: int = 16):
        self.released = 0
        slots = {RELEASE: (ctypes.c_ulong, (), self._release), **slots}
        self._callbacks = []
        self._table = (ctypes.c_void_p * size)()
        for slot, (restype, argtypes, function) in slots.items():
            callback = FUNCTYPE(restype, ctypes.c_void_p, *argtypes)(function)
            self._callbacks.append(callback)
            self._table[slot] = ctypes.cast(callback, ctypes.c_void_p).value
        self._object = (ctypes.c_void_p * 1)(ctypes.addressof(self._table))
        self.pointer = ctypes.addressof(self._object)

    def _release(self, this):
        self.released += 1
        return 0


class FakeAdapter(FakeCom):
    """An IDXGIAdapter1 answering GetDesc1 (slot 10) and CheckInterfaceSupport (slot 9)."""

    def __init__(self, description: str, vendor: int, device: int, *, memory: int = 0, flags: int = 0,
                 umd: int | None = None, luid: tuple[int, int] = (0, 0x1234), desc_hr: int = S_OK):
        self.fields = dict(description=description, vendor=vendor, device=device, memory=memory, flags=flags,
                           umd=umd, luid=luid, desc_hr=desc_hr)
        self.asked_iid = None
        super().__init__({
            GET_DESC1: (ctypes.c_long, (ctypes.POINTER(gpu.DXGI_ADAPTER_DESC1),), self._get_desc1),
            CHECK_INTERFACE_SUPPORT: (ctypes.c_long, (ctypes.POINTER(gpu.GUID), ctypes.POINTER(ctypes.c_longlong)),
                                          self._check_interface_support)})

    def _get_desc1(self, this, desc):
        f = self.fields
        if f["desc_hr"] != S_OK:
            return f["desc_hr"]
        d = desc.contents
        text = f["description"].encode("utf-16-le")[:254]
        ctypes.memmove(ctypes.addressof(d), text, len(text))
        d.VendorId, d.DeviceId, d.SubSysId, d.Revision = f["vendor"], f["device"], 0x12345678, 0xA1
        d.DedicatedVideoMemory, d.Flags = f["memory"], f["flags"]
        d.AdapterLuid.HighPart, d.AdapterLuid.LowPart = f["luid"]
        return S_OK

    def _check_interface_support(self, this, iid, umd):
        self.asked_iid = bytes(iid.contents)
        if self.fields["umd"] is None or self.asked_iid != bytes(gpu.guid(gpu.IID_IDXGIDevice)):
            return signed(gpu.DXGI_ERROR_UNSUPPORTED)
        umd[0] = self.fields["umd"]
        return S_OK


class FakeDxgi:
    """A factory over ``adapters`` and the ``CreateDXGIFactory1`` stand-in (``create_factory``)."""

    def __init__(self, adapters: list[FakeAdapter], enum_hr: int | None = None, create_hr: int = S_OK):
        self.adapters, self.enum_hr, self.create_hr = adapters, enum_hr, create_hr
        self.factory = FakeCom({ENUM_ADAPTERS1: (ctypes.c_long, (ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)),
                                                     self._enum_adapters1)})
        self.create_factory = FUNCTYPE(ctypes.c_long, ctypes.POINTER(gpu.GUID), ctypes.POINTER(ctypes.c_void_p))(
            self._create)
        self.asked_iid = None

    def _create(self, iid, out):
        self.asked_iid = bytes(iid.contents)
        if self.create_hr != S_OK:
            return self.create_hr
        out[0] = self.factory.pointer
        return S_OK

    def _enum_adapters1(self, this, index, out):
        if self.enum_hr is not None and index == len(self.adapters) - 1:
            return self.enum_hr
        if index >= len(self.adapters):
            return signed(gpu.DXGI_ERROR_NOT_FOUND)
        out[0] = self.adapters[index].pointer
        return S_OK


class _Key:
    def __init__(self, path, node):
        self.path, self.node = path, node

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeWinreg:
    """``winreg``'s OpenKey/EnumKey/QueryValueEx over ``tree`` (nested dicts: subkeys are dicts,
    values anything else); paths in ``denied`` raise PermissionError like an admin-only key."""

    HKEY_LOCAL_MACHINE = "HKLM"

    def __init__(self, tree: dict, denied: tuple[str, ...] = ()):
        self.tree, self.denied = tree, denied

    def OpenKey(self, parent, sub):
        base = self.tree if parent == self.HKEY_LOCAL_MACHINE else parent.node
        path = sub if parent == self.HKEY_LOCAL_MACHINE else f"{parent.path}\\{sub}"
        if path in self.denied:
            raise PermissionError(5, "Access is denied")
        node = base.get(sub)
        if not isinstance(node, dict):
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return _Key(path, node)

    def EnumKey(self, key, index):
        names = [k for k, v in key.node.items() if isinstance(v, dict)]
        if index >= len(names):
            raise OSError(259, "No more data is available")
        return names[index]

    def QueryValueEx(self, key, name):
        value = key.node.get(name)
        if value is None or isinstance(value, dict):
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return value, 1


def pe_with_version(version: tuple[int, int, int, int], at: int, size: int) -> bytes:
    """``size`` bytes with a VS_FIXEDFILEINFO (signature, struct version, file version) at ``at``."""
    a, b, c, d = version
    info = struct.pack("<4I", 0xFEEF04BD, 0x00010000, (a << 16) | b, (c << 16) | d) + b"\0" * 36
    data = bytearray(b"MZ" + b"\x90" * (size - 2))
    data[at:at + len(info)] = info
    return bytes(data)


_FAKE_WINDOWSML = """
import enum, json, os, time

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "catalog.json"), encoding="utf-8") as _f:
    _CONFIG = json.load(_f)
if _CONFIG["mode"] == "import-error":
    raise ImportError("winml is only supported on Windows")


class EpReadyState(enum.IntEnum):
    Ready = 0
    NotReady = 1
    NotPresent = 2


class EpCertification(enum.IntEnum):
    Unknown = 0
    Certified = 1
    Uncertified = 2


class ExecutionProvider:
    def __init__(self, fields):
        self.name, self.version = fields["name"], fields.get("version", "")
        self.package_family_name = fields.get("package_family_name", "")
        self.library_path = fields.get("library_path", "")
        self.package_root_path = ""
        self.ready_state = EpReadyState[fields.get("ready_state", "Ready")]
        self.certification = EpCertification[fields.get("certification", "Certified")]

    def ensure_ready(self):
        raise AssertionError("reading the catalog must not download an EP")


class EpCatalog:
    def __init__(self):
        self.released = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def find_all_providers(self):
        if _CONFIG["mode"] == "crash-on-find":
            os.abort()
        if _CONFIG["mode"] == "hang":
            time.sleep(3600)
        print("log noise a native library printed")
        return [ExecutionProvider(p) for p in _CONFIG["providers"]]

    def close(self):
        if _CONFIG["mode"] == "crash-on-release" and not self.released:
            os.abort()  # as WinMLEpCatalogRelease has done on some NPU drivers
        self.released = True

    def __del__(self):
        self.close()
"""

#: What ``write_fake_windowsml``'s package can be told to do.
FAKE_WINDOWSML_MODES = ("ok", "import-error", "crash-on-find", "crash-on-release", "hang")


def write_fake_windowsml(folder: pathlib.Path, providers: list[dict], mode: str = "ok") -> pathlib.Path:
    """Write ``folder/windowsml/`` answering ``providers`` (dicts of ExecutionProvider fields,
    enums by name) in ``mode`` (``FAKE_WINDOWSML_MODES``); returns ``folder`` (for ``PYTHONPATH``)."""
    assert mode in FAKE_WINDOWSML_MODES, mode
    package = pathlib.Path(folder) / "windowsml"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(_FAKE_WINDOWSML, encoding="utf-8")
    (package / "catalog.json").write_text(json.dumps({"mode": mode, "providers": providers}), encoding="utf-8")
    return pathlib.Path(folder)
