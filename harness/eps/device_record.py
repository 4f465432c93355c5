"""The run header's device record (``gpu``, read by ``harness.eps.gpu.identity``): its one-line
``summary``, what two shards of one run must share (``identity_key``), the record of a device
nothing could read (``none_identity``) and the OpenVINO EP's device (``openvino_identity``, read
for a built-in OpenVINO EP by ``openvino_record``, the OpenVINO record's identity reader).

- ``source`` says where the record's device comes from: ``dxgi``, ``openvino``, ``nvidia-smi``,
  ``ort`` (ORT's device list alone), ``dml-wine`` (the DirectML host's DXGI), or ``none``
  (nothing could be read: the summary says "unknown device" and why).
- OpenVINO EP: the OpenVINO device (``device_type``, default CPU) and its full name when the
  ``openvino`` package can tell.

``harness.eps.gpu`` re-exports this module's names.
"""

from __future__ import annotations

from typing import Any, Optional

from ..core.installed import machine_info
from ..core.results import part
from . import nvidia
from .devices import from_json
from .spec import EpSpec


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


def openvino_record(ep: EpSpec, ort: dict[str, str]) -> dict[str, Any]:
    """The OpenVINO device of a built-in OpenVINO EP (``openvino_identity``); a plugin's device is
    ONNX Runtime's to list (``source`` none here)."""
    if ep.holder != "built-in":
        return {"source": "none", "adapter": None, "onnxruntime": ort}
    return openvino_identity(ep.options, ort)


def none_identity(provider: str, ort: dict[str, str], note: str = "") -> dict[str, Any]:
    """The record of a run whose device could not be read: ``source`` none, the summary says
    "unknown device" and ``note`` why."""
    data = {"source": "none", "adapter": None, "onnxruntime": ort,
            "note": note or f"neither ONNX Runtime's device list nor a reader of this module names {provider}'s device"}
    data["summary"] = summary(data)
    return data


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
    adapter, dml, view = part(data, "adapter"), part(data, "directml"), part(data, "ort_device")
    device = part(view, "device") or None
    ort_key: Any
    try:
        ort_key = from_json(device).key() if device else None
    except ValueError:  # a damaged record: compared as it is
        ort_key = repr(device)
    package = part(data, "ep_package")
    return (data.get("source"), adapter.get("description"), adapter.get("vendor_id"), adapter.get("device_id"),
            adapter.get("device"), adapter.get("driver_version"), dml.get("version"), ort_key,
            package.get("name"), package.get("version"), (data.get("emulation") or {}).get("vkd3d"))
