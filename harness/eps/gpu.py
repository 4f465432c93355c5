"""The device a run used, recorded in every run header and report (``identity``), so that a result
is tied to a device, a driver, a DirectML build and the package that provides the EP.

- Every EP: ONNX Runtime's own device list (``get_ep_devices``, ``harness.eps.devices``; ORT >=
  1.23): the device chosen with ``--ep-device``, a plugin EP's only device, the only device ORT
  lists for a built-in EP, or the one whose metadata the EP's ``device_id`` option names (the
  record's ``device_id_key``: DirectML's ``DxgiAdapterNumber``), recorded under ``ort_device``
  with how it was chosen; when ORT lists several and none was chosen, the candidates (the EP picks
  one itself, which is not readable), and when it lists none, why. A plugin EP's package and
  version are recorded as ``ep_package``.
- What the EP's adapter reads where ORT's list cannot tell (``EpAdapter.identity``: its record's
  reader): on Windows the DirectML EP's DXGI adapters, driver and DirectML.dll
  (``harness.eps.dxgi``), cross-checked against ORT's device list (``cross_check``: a
  disagreement is recorded and named in the summary); a CUDA-family EP's NVIDIA GPU from
  ``nvidia-smi`` (``harness.eps.nvidia``); the OpenVINO EP's device
  (``harness.eps.device_record``); the DirectML host's device under Wine.
- ``source`` says where the record's device comes from: ``dxgi``, ``openvino``, ``nvidia-smi``,
  ``dml-wine``, ``ort`` (ORT's device list alone), or ``none`` (nothing could be read: the
  summary says "unknown device" and why).

``identity_key`` is what must agree between shards of one run (``ep-testbed merge``). The
readers' names (``read_adapters``, ``dml_identity``, ``summary``, ...) are re-exported here.
"""

from __future__ import annotations

from typing import Any, Optional

from ..core import emulation
from ..core.installed import machine_info, ort_flavour, ort_version
from . import registry
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
    key = registry.of_spec(ep).device_id_key  # the device metadata the EP's device_id option matches
    by_option = [d for d in mine if key and d.metadata.get(key) == str(ep.options.get("device_id"))]
    if chosen is not None:
        how = f"--ep-device {ep.device}" if ep.device is not None else "the plugin EP's only device"
    elif len(mine) == 1:
        chosen, how = mine[0], "the only device ONNX Runtime lists for the EP"
    elif len(by_option) == 1:
        chosen, how = by_option[0], f"--ep-option device_id={ep.options['device_id']} (its {key})"
    else:
        how = None
    note = None
    if chosen is None:
        note = (f"ONNX Runtime lists {len(mine)} devices for {ep.provider} and none was chosen: the EP picks one "
                "itself (pass --ep-device to pin it)" if mine else f"ONNX Runtime lists no device for {ep.provider}")
    return {"device": chosen.to_json() if chosen else None, "selection": how,
            "candidates": [d.to_json() for d in mine], "note": note}


def identity(ep: EpSpec, record: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The identity record of a run on ``ep``, read from this machine: ``record`` (what its
    adapter reads, ``EpAdapter.identity``: DXGI for DirectML, the OpenVINO device, nvidia-smi; read
    here when None) with ONNX Runtime's device view (``ort_view``), the EP package, the DXGI
    reading's cross-check, ``source`` and ``summary``."""
    ort = {"distribution": ort_flavour(), "version": ort_version()}
    data = dict(record) if record is not None else adapter_for(ep).identity(ort)
    view = data.pop("ort_device", None) or ort_view(ep)
    data["ort_device"] = view
    if ep.package:
        data["ep_package"] = {"name": ep.package, "version": ep.package_version}
    if data.get("source") == "dxgi":
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
