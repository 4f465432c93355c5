"""ONNX Runtime's device list: which hardware each execution provider can run on, and choosing one.

``onnxruntime.get_ep_devices()`` (ORT >= 1.22 in C, >= 1.23 in Python) pairs each EP with each
hardware device it supports: the EP's name, vendor, metadata and default options, and the
hardware's type (CPU, GPU, NPU), vendor, PCI vendor and device ids and metadata. The metadata is
what tells two devices apart: on Linux ``pci_bus_id``, ``Discrete`` and ``card_idx`` (ORT's
onnxruntime/core/platform/linux/device_discovery.cc, GetGpuDeviceFromSysfs), on Windows
``DxgiAdapterNumber``, ``LUID``, ``DxgiHighPerformanceIndex``, ``DxgiVideoMemory``, ``Description``
and ``Discrete`` (onnxruntime/core/platform/windows/device_discovery.cc, GetDeviceInfoD3D12 and
GetDeviceInfoDxcore); a plugin EP adds its own, e.g. the OpenVINO plugin's ``ov_device``
(onnxruntime/core/providers/openvino/ov_factory.cc, GetSupportedDevices). Plugin EPs list devices
only after their library is registered (``harness.eps.adapters``).

- ``EpDevice``: one entry, as plain data (``to_json``/``from_json``: what ``ep-testbed devices
  --json`` prints and what recorded device lists hold); ``index`` is its position among its EP's
  devices in ORT's order, which is what ``--ep-device N`` means.
- ``read_devices()``: the entries of this process's ONNX Runtime (empty where the API is absent).
- ``select(devices, provider, selector)``: the device ``--ep-device SELECTOR`` names among the
  provider's devices: an index, or ``key=value`` items (comma-separated, all must hold) over the
  hardware (``type``, ``vendor``, ``vendor_id``, ``device_id``, ``ep_vendor``) and any hardware or
  EP metadata key (``pci_bus_id``, ``DxgiAdapterNumber``, ``ov_device``...). No match, several
  matches or an unknown key raise ``SelectorError`` naming the candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from ..core.installed import OrtBroken, reinstall_hint
from ..core.terminal import safe

#: Hardware types ORT reports (OrtHardwareDeviceType).
HARDWARE_TYPES = ("CPU", "GPU", "NPU")
#: Selector keys that are fields of the entry rather than metadata keys.
FIELD_KEYS = ("type", "vendor", "vendor_id", "device_id", "ep_vendor")
#: Keys compared as numbers (``0x10de`` and ``4318`` are the same vendor).
NUMBER_KEYS = ("vendor_id", "device_id")
#: Metadata that names a device's driver or build, part of a run's identity when present.
IDENTITY_METADATA = ("ov_device", "DriverVersion", "driver_version")
#: Metadata that tells devices apart, in the order a one-line description shows it (the rest is in
#: ``to_json``: the OpenVINO plugin alone adds a dozen OpenVINO properties).
IDENTIFYING_METADATA = ("ov_device", "ov_meta_device", "FULL_DEVICE_NAME", "Description", "pci_bus_id", "card_idx",
                        "DxgiAdapterNumber", "DxgiHighPerformanceIndex", "LUID", "Discrete", "DriverVersion",
                        "driver_version")
#: PCI vendor ids -> names, for devices whose vendor ONNX Runtime leaves empty (its Linux device
#: discovery reads only the ids: onnxruntime/core/platform/linux/device_discovery.cc, "TODO vendor name").
PCI_VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x1022: "AMD", 0x8086: "Intel", 0x1414: "Microsoft",
               0x5143: "Qualcomm", 0x106B: "Apple", 0x13B5: "ARM"}


class SelectorError(ValueError):
    """``--ep-device`` names no device, several, or a key no device has; the message lists the candidates."""


@dataclass(frozen=True)
class EpDevice:
    """One (EP, hardware device) pair of ``get_ep_devices()``; ``index``: its place among its EP's devices."""

    ep: str
    type: str
    vendor: str
    vendor_id: int
    device_id: int
    ep_vendor: str = ""
    ep_metadata: Mapping[str, str] = field(default_factory=dict)
    ep_options: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    index: int = 0

    def to_json(self) -> dict[str, Any]:
        """The entry as ``ep-testbed devices --json`` and run headers record it (``vendor`` as ORT
        reports it, ``vendor_name`` with the PCI table's name where that is empty; ids also in hex)."""
        return {"ep": self.ep, "index": self.index, "type": self.type, "vendor": self.vendor,
                "vendor_name": self.vendor_name,
                "vendor_id": self.vendor_id, "device_id": self.device_id, "pci_ids": self.pci_ids,
                "ep_vendor": self.ep_vendor, "ep_metadata": dict(self.ep_metadata),
                "ep_options": dict(self.ep_options), "metadata": dict(self.metadata)}

    @property
    def vendor_name(self) -> str:
        """The vendor ORT reports, else the name of its PCI vendor id, else ``?``."""
        return self.vendor or PCI_VENDORS.get(self.vendor_id, "?")

    def identifying(self) -> dict[str, str]:
        """The hardware and EP metadata that tells devices apart (``IDENTIFYING_METADATA``), in that order."""
        meta = {**self.metadata, **self.ep_metadata}
        return {key: meta[key] for key in IDENTIFYING_METADATA if key in meta}

    @property
    def pci_ids(self) -> str:
        """``"10DE:2330"``: the vendor and device ids as PCI tools print them."""
        return f"{self.vendor_id:04X}:{self.device_id:04X}"

    def describe(self) -> str:
        """One terminal-safe line: ``0: GPU NVIDIA [10DE:2330] pci_bus_id=0000:19:00.0, Discrete=1``
        (the identifying metadata; ``to_json`` has all of it)."""
        items = ", ".join(f"{k}={v}" for k, v in self.identifying().items())
        return safe(f"{self.index}: {self.type} {self.vendor_name} [{self.pci_ids}]" + (f" {items}" if items else ""),
                    300)

    def key(self) -> tuple:
        """What two runs must share to have run on the same kind of device: the EP, the hardware
        type and PCI ids, and the metadata that names a driver or an OpenVINO device (not the bus,
        slot, index or LUID, which change with the machine and the boot)."""
        meta = {**self.metadata, **self.ep_metadata}
        return (self.ep, self.type, self.vendor_id, self.device_id,
                tuple((k, meta[k]) for k in IDENTITY_METADATA if k in meta))

    def value(self, key: str) -> str | None:
        """The value a selector ``key`` compares with (a field, else hardware then EP metadata;
        metadata keys are matched without regard to case); None when the entry has no such key."""
        if key in FIELD_KEYS:
            return str(getattr(self, key))
        for meta in (self.metadata, self.ep_metadata):
            for name, value in meta.items():
                if name.lower() == key.lower():
                    return str(value)
        return None


def _text_map(value: Any, where: str) -> dict[str, str]:
    """A mapping of strings to strings from a JSON object; ValueError naming ``where``."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{where}: expected an object of strings, e.g. {{\"pci_bus_id\": \"0000:19:00.0\"}}")
    return dict(value)


def from_json(item: Any, where: str = "device") -> EpDevice:
    """An ``EpDevice`` from its ``to_json`` form (``index`` is recomputed by ``from_json_list``);
    ValueError naming the field and what is allowed."""
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: expected an object with ep, type, vendor, vendor_id, device_id")
    for name in ("ep", "vendor"):
        if not isinstance(item.get(name), str) or (name == "ep" and not item[name]):
            raise ValueError(f"{where}: {name} must be a string" + (" (the EP's name)" if name == "ep" else ""))
    if item.get("type") not in HARDWARE_TYPES:
        raise ValueError(f"{where}: type {item.get('type')!r} is not one of {', '.join(HARDWARE_TYPES)}")
    for name in NUMBER_KEYS:
        number = item.get(name)
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= 0xFFFFFFFF:
            raise ValueError(f"{where}: {name} must be a whole number from 0 to 0xFFFFFFFF (PCI ids, e.g. 4318)")
    return EpDevice(ep=item["ep"], type=item["type"], vendor=item["vendor"], vendor_id=item["vendor_id"],
                    device_id=item["device_id"], ep_vendor=str(item.get("ep_vendor") or ""),
                    ep_metadata=_text_map(item.get("ep_metadata") or {}, f"{where}.ep_metadata"),
                    ep_options=_text_map(item.get("ep_options") or {}, f"{where}.ep_options"),
                    metadata=_text_map(item.get("metadata") or {}, f"{where}.metadata"))


def indexed(devices: Iterable[EpDevice]) -> list[EpDevice]:
    """``devices`` in order, each with its ``index`` among the devices of its EP."""
    seen: dict[str, int] = {}
    out = []
    for device in devices:
        out.append(replace(device, index=seen.get(device.ep, 0)))
        seen[device.ep] = seen.get(device.ep, 0) + 1
    return out


def from_json_list(items: Any, where: str = "devices") -> list[EpDevice]:
    """The devices of a recorded list (``ep-testbed devices --json``'s ``devices``); ValueError
    naming the entry and field."""
    if not isinstance(items, list):
        raise ValueError(f"{where}: expected a list of devices")
    return indexed(from_json(item, f"{where}[{n}]") for n, item in enumerate(items))


def from_ort(entry: Any) -> EpDevice:
    """An ``EpDevice`` from one ``onnxruntime.OrtEpDevice`` (index 0; ``indexed`` numbers them)."""
    hardware = entry.device
    kind = getattr(hardware.type, "name", str(hardware.type)).rsplit(".", 1)[-1]
    return EpDevice(ep=str(entry.ep_name), type=kind, vendor=str(hardware.vendor or ""),
                    vendor_id=int(hardware.vendor_id), device_id=int(hardware.device_id),
                    ep_vendor=str(entry.ep_vendor or ""),
                    ep_metadata={str(k): str(v) for k, v in dict(entry.ep_metadata).items()},
                    ep_options={str(k): str(v) for k, v in dict(entry.ep_options).items()},
                    metadata={str(k): str(v) for k, v in dict(hardware.metadata).items()})


def device_api(ort: Any) -> bool:
    """Whether this ONNX Runtime's Python API lists devices (``get_ep_devices``: 1.23 and later)."""
    return callable(getattr(ort, "get_ep_devices", None))


def read_pairs() -> list[tuple[EpDevice, Any]]:
    """``(EpDevice, ORT's own OrtEpDevice)`` for every entry this process's ONNX Runtime lists
    (the second is what ``SessionOptions.add_provider_for_devices`` takes); empty when its Python
    API has no device list."""
    import onnxruntime as ort  # loaded on first use: the CLI, reports and diffs start without it

    if not device_api(ort):
        return []
    try:
        entries = list(ort.get_ep_devices())
        return list(zip(indexed(from_ort(d) for d in entries), entries))
    except Exception as exc:  # ONNX Runtime's own call failing: its install, not the caller's input
        text = " ".join(str(exc).split())[:300]
        raise OrtBroken(f"onnxruntime.get_ep_devices() raised {type(exc).__name__}: {text}, so no device can be "
                        f"listed or chosen.\nNote: if a plugin library was registered, it may be the cause "
                        f"(run without it); else {reinstall_hint()}") from None


def read_devices() -> list[EpDevice]:
    """Every (EP, device) pair this process's ONNX Runtime lists, numbered per EP (``read_pairs``)."""
    return [device for device, _ in read_pairs()]


def of_ep(devices: Iterable[EpDevice], provider: str) -> list[EpDevice]:
    """The entries of ``provider``, in ORT's order."""
    return [d for d in devices if d.ep == provider]


def listing(devices: Iterable[EpDevice]) -> str:
    """``0: GPU NVIDIA [10DE:2330] ...; 1: ...`` (``describe`` of each), or ``none``."""
    return "; ".join(d.describe() for d in devices) or "none"


def parse_selector(text: str) -> int | list[tuple[str, str]]:
    """``"1"`` -> 1; ``"type=GPU,vendor_id=0x10de"`` -> ``[("type", "GPU"), ("vendor_id", "0x10de")]``;
    ``SelectorError`` saying the form for anything else."""
    spec = str(text).strip()
    if spec.isdigit():
        return int(spec)
    items = []
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise SelectorError(f"--ep-device {safe(text, 80)}: expected an index (0, 1, ...) or KEY=VALUE items "
                                "separated by commas, e.g. type=GPU, vendor_id=0x10de, ov_device=NPU")
        items.append((key.strip(), value.strip()))
    return items


def _same(key: str, wanted: str, have: str) -> bool:
    """Whether a device's ``have`` satisfies a selector's ``wanted`` (numbers for the PCI ids,
    case-insensitive text otherwise)."""
    if key in NUMBER_KEYS:
        try:
            return int(wanted, 0) == int(have)
        except ValueError:
            return False
    return wanted.lower() == have.lower()


def matches(device: EpDevice, items: list[tuple[str, str]]) -> bool:
    """Whether every ``key=value`` item holds for ``device``."""
    return all((have := device.value(key)) is not None and _same(key, value, have) for key, value in items)


def select(devices: Iterable[EpDevice], provider: str, selector: str) -> EpDevice:
    """The one device of ``provider`` that ``selector`` (``--ep-device``) names; ``SelectorError``
    naming the candidates when it names none or several, or a key no device has."""
    candidates = of_ep(devices, provider)
    where = f"--ep-device {safe(selector, 80)}"
    if not candidates:
        raise SelectorError(f"{where}: ONNX Runtime lists no device for {provider} on this machine, so there is "
                            "nothing to choose; `ep-testbed devices` shows what it lists")
    parsed = parse_selector(selector)
    if isinstance(parsed, int):
        if parsed >= len(candidates):
            raise SelectorError(f"{where}: {provider} has {len(candidates)} device(s), indexes 0 to "
                                f"{len(candidates) - 1}: {listing(candidates)}")
        return candidates[parsed]
    known = set(FIELD_KEYS) | {k.lower() for d in candidates for k in (*d.metadata, *d.ep_metadata)}
    unknown = [k for k, _ in parsed if k not in FIELD_KEYS and k.lower() not in known]
    if unknown:
        raise SelectorError(f"{where}: no device of {provider} has a key {safe(unknown[0], 60)!r}; keys: "
                            f"{', '.join(sorted(known))}; devices: {listing(candidates)}")
    found = [d for d in candidates if matches(d, parsed)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise SelectorError(f"{where}: no device of {provider} matches; its devices: {listing(candidates)}")
    raise SelectorError(f"{where}: {len(found)} devices of {provider} match ({listing(found)}); add a key that "
                        "tells them apart (e.g. pci_bus_id=...) or pass an index")


__all__ = ["EpDevice", "FIELD_KEYS", "HARDWARE_TYPES", "SelectorError", "device_api", "from_json", "from_json_list",
           "from_ort", "indexed", "listing", "matches", "of_ep", "parse_selector", "read_devices", "read_pairs",
           "select"]
