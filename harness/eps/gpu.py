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

``identity_key`` is what must agree between shards of one run (``ep-testbed merge``). The DXGI
reading is ``harness.eps.dxgi``'s, the summary, the OpenVINO record and ``identity_key``
``harness.eps.device_record``'s, the nvidia-smi record ``harness.eps.nvidia``'s; their names are
re-exported here.
"""
from __future__ import annotations

from typing import Any, Optional

from ep_testbed.harness.core import emulation
from ep_testbed.harness.core.installed import machine_info, ort_flavour, ort_version

from . import nvidia
from .adapters import adapter_for, ep_flag
from .device_record import SUMMARY_METADATA, identity_key, none_identity, openvino_identity, openvino_record, summary
from .devices import of_ep, read_devices
from .dxgi import (
    BASIC_RENDER_IDS,
    CHECK_INTERFACE_SUPPORT,
    DISPLAY_CLASS,
    DRIVER_VALUES,
    DXGI_ADAPTER_DESC1,
    DXGI_ADAPTER_FLAG_SOFTWARE,
    DXGI_ERROR_NOT_FOUND,
    DXGI_ERROR_UNSUPPORTED,
    ENUM_ADAPTERS1,
    FUNCTYPE,
    GET_DESC1,
    GUID,
    KNOWN_HRESULTS,
    LUID,
    MAX_ADAPTERS,
    MAX_DRIVER_KEYS,
    MAX_SCAN_BYTES,
    RELEASE,
    VERSION_SIGNATURE,
    Adapter,
    GpuError,
    IID_IDXGIDevice,
    IID_IDXGIFactory1,
    cross_check,
    directml_dll,
    dml_identity,
    driver_entry,
    dxgi_record,
    file_version,
    guid,
    read_adapters,
    read_display_drivers,
    select_adapter,
    windows_factory,
)
from .providers import EpNotAvailable, EpSpec


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


def _read_identity(ep: EpSpec, ort: dict[str, str]) -> dict[str, Any]:
    """The DXGI (DirectML, Windows) or OpenVINO (built-in EP) record, else a record without an adapter."""
    adapter = adapter_for(ep)
    if hasattr(adapter, "identity_record"):  # the adapter's own process knows its device
        return adapter.identity_record()
    if ep.provider == "OpenVINOExecutionProvider":
        return openvino_record(ep, ort)
    if ep.provider in nvidia.CUDA_PROVIDERS:
        return nvidia.cuda_record(ep, ort)
    if ep.provider != "DmlExecutionProvider":
        return {"source": "none", "adapter": None, "onnxruntime": ort}
    return dxgi_record(ep, ort)


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


__all__ = ["Adapter", "BASIC_RENDER_IDS", "CHECK_INTERFACE_SUPPORT", "DISPLAY_CLASS", "DRIVER_VALUES", "DXGI_ADAPTER_DESC1", "DXGI_ADAPTER_FLAG_SOFTWARE", "DXGI_ERROR_NOT_FOUND", "DXGI_ERROR_UNSUPPORTED", "ENUM_ADAPTERS1", "FUNCTYPE", "GET_DESC1", "GUID", "GpuError", "IID_IDXGIDevice", "IID_IDXGIFactory1", "KNOWN_HRESULTS", "LUID", "MAX_ADAPTERS", "MAX_DRIVER_KEYS", "MAX_SCAN_BYTES", "RELEASE", "SUMMARY_METADATA", "VERSION_SIGNATURE", "cross_check", "directml_dll", "dml_identity", "driver_entry", "dxgi_record", "file_version", "guid", "identity", "identity_key", "none_identity", "openvino_identity", "openvino_record", "ort_view", "read_adapters", "read_display_drivers", "runtime_info", "select_adapter", "summary", "windows_factory"]
