"""``ep-testbed devices``: ONNX Runtime's device list, per EP, and what ``--ep-device`` would choose.

Prints every entry of ``onnxruntime.get_ep_devices()`` (``harness.eps.devices``): the EP, its index
among that EP's devices (what ``--ep-device N`` means), the hardware type, vendor, PCI vendor and
device ids, and the metadata that identifies it (PCI bus, DXGI adapter number, LUID, ``ov_device``,
driver). Plugin EPs list devices only once registered, so:

- with ``--ep plugin:PACKAGE`` or ``--ep NAME --ep-library PATH`` that plugin is registered, and
  only its EP's devices are shown (with ``--ep-device``, the one chosen is marked);
- with no ``--ep``, every installed plugin package (``onnxruntime-ep-*``) is registered first, and
  each one that cannot be (ONNX Runtime too old, library refused) or lists no device is named;
- ``--from FILE`` reads a recorded list instead (this command's ``--json`` output from another
  machine), to try a selector against it.

ONNX Runtime lists no device for some built-in EPs; an EP's record says where their devices are
listed instead (``unlisted_devices``: for the CUDA-family EPs, onnxruntime-gpu's CUDA and TensorRT
EPs, the GPUs ``nvidia-smi`` lists, ``harness.eps.nvidia``; ``--ep-option device_id=N`` picks one,
counted as CUDA counts them): where such an EP is available and unlisted, they are shown under it.

An EP whose sessions live in another process lists that process's devices too, as its adapter
words them (``hosted_devices``, ``hosted_words``): ``--ep dml-wine`` shows the adapters its Wine
host's DXGI lists (this process's ONNX Runtime cannot see them), each marked as the emulated
device it is (``hosted``).

``--json`` prints one JSON document (``onnxruntime``, ``plugins``, ``devices``, ``chosen``, and
``nvidia_smi`` / ``hosted`` when read): the form recorded device lists take. Exit codes: 0 listed, 2 bad usage, an EP or plugin refused, a
selector that names no device or several (the message lists the candidates), an unreadable file.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core import exit_codes
from ..core.installed import ort_flavour, ort_version
from ..core.terminal import safe
from ..core.untrusted_files import FileRefused, read_json
from ..eps import devices as devices_mod
from ..eps import plugins, registry
from ..eps.adapters import PLUGIN_PREFIX, PluginAdapter, adapter_for
from ..eps.devices import EpDevice, SelectorError
from ..eps.providers import EpNotAvailable
from ..eps.session import SessionError
from .common import usage_error
from .options import OptionError, add_ep_options, parse_ep_args


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``devices`` with the EP group (``--ep`` optional), ``--from`` and ``--json``."""
    p = subparsers.add_parser("devices", help="list ONNX Runtime's devices per execution provider",
                              description="ONNX Runtime's device list (get_ep_devices): per EP, each device's index, "
                                          "hardware type, vendor, PCI ids and identifying metadata; registers plugin "
                                          "EPs first; marks what --ep-device chooses.",
                              epilog="exit codes: 0 listed, 2 usage, a refused EP or plugin, or a selector that names "
                                     "no device or several (the candidates are listed)")
    add_ep_options(p.add_argument, graph_opt=False, ep_default=None)
    p.add_argument("--from", dest="from_file", metavar="JSON",
                   help="a recorded device list (`ep-testbed devices --json` from another machine) instead of this "
                        "machine's")
    p.add_argument("--json", action="store_true", help="print one JSON document (the form recorded lists take)")
    p.set_defaults(func=devices_command)


def _register_installed() -> list[dict[str, Any]]:
    """Register every installed plugin package; per package what happened (status, note)."""
    found = []
    for name in plugins.installed_packages():
        entry: dict[str, Any] = {"package": name}
        try:
            package = plugins.load_package(name, f"{PLUGIN_PREFIX}{name}")
            plugins.check_runtime(f"{PLUGIN_PREFIX}{name}")
            plugins.register(package.library, f"{PLUGIN_PREFIX}{name}")
            entry.update(version=package.version, library=package.library, ep_names=list(package.ep_names),
                         status="registered")
        except EpNotAvailable as exc:
            entry.update(status="refused", note=str(exc))
        found.append(entry)
    return found


def _live(args: argparse.Namespace) -> tuple[list[EpDevice], list[dict[str, Any]], str | None, EpDevice | None]:
    """``(devices, plugins, provider, chosen)`` read from this machine (``OptionError`` for a refused EP)."""
    if args.ep is None:
        if args.ep_device or args.ep_library:
            raise OptionError("--ep-device and --ep-library need --ep (the EP whose devices they concern)")
        registered = _register_installed()  # before reading: a plugin lists its devices once registered
        return devices_mod.read_devices(), registered, None, None
    ep = parse_ep_args(args)
    held = adapter_for(ep).describe()
    entry = [dict(held, ep_names=[ep.provider], status="registered")] if ep.holder == PluginAdapter.holder else []
    chosen = adapter_for(ep).device() if ep.device is not None else None
    return devices_mod.read_devices(), entry, ep.provider, chosen


def _recorded(args: argparse.Namespace) -> tuple[list[EpDevice], list[dict[str, Any]], str | None, EpDevice | None]:
    """``(devices, plugins, provider, chosen)`` from ``--from FILE`` (``FileRefused`` for a bad file)."""
    if args.ep_library or (args.ep or "").startswith(PLUGIN_PREFIX):
        raise OptionError("--from lists recorded devices: name the EP by its provider name or alias (e.g. --ep "
                          "WebGpuExecutionProvider), not by a library or package to load")
    data = read_json(args.from_file, "device list")
    try:
        recorded = devices_mod.from_json_list(data.get("devices") if isinstance(data, dict) else data)
    except ValueError as exc:
        raise FileRefused(args.from_file, f"not a device list: {exc}",
                          hint="record one with `ep-testbed devices --json > devices.json`") from None
    provider = registry.aliases().get(args.ep.strip().lower(), args.ep.strip()) if args.ep else None
    chosen = devices_mod.select(recorded, provider, args.ep_device) if provider and args.ep_device else None
    return recorded, [], provider, chosen


def hosted(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str]] | None:
    """The devices of an EP whose sessions live in another process, as that process lists them
    (its adapter's ``hosted_devices``: DirectML under Wine, the Wine host's DXGI adapters,
    emulated) and the lines that list them (``hosted_words``), or None for any other EP
    (``SessionError`` when that process cannot start)."""
    if args.from_file or args.ep is None:
        return None
    adapter = adapter_for(parse_ep_args(args))
    listing, words = getattr(adapter, "hosted_devices", None), getattr(adapter, "hosted_words", None)
    if listing is None or words is None:
        return None
    found = listing()
    return found, words(found)


def devices_command(args: argparse.Namespace) -> int:
    """List the devices (module docstring); 0, or 2 with one line."""
    try:
        listed, found, provider, chosen = (_recorded if args.from_file else _live)(args)
        elsewhere = hosted(args)
    except (OptionError, SelectorError, EpNotAvailable) as exc:
        return usage_error(str(exc))
    except SessionError as exc:  # the host process holding the EP did not start
        return usage_error(f"{provider}: {exc}")
    if provider is not None:
        listed = devices_mod.of_ep(listed, provider)
    unlisted = {} if args.from_file else unlisted_devices(listed, provider)
    if args.json:
        print(json.dumps({"onnxruntime": None if args.from_file else {"distribution": ort_flavour(),
                                                                       "version": ort_version()},
                          "plugins": found, "devices": [d.to_json() for d in listed],
                          "chosen": chosen.to_json() if chosen else None,
                          **{listing.key: gpus for listing, gpus in unlisted.items()},
                          **({"hosted": elsewhere[0]} if elsewhere is not None else {})}, indent=1))
        return exit_codes.OK
    _print_listing(listed, found, chosen, args.from_file)
    for line in elsewhere[1] if elsewhere is not None else []:
        print(line)
    for listing, gpus in unlisted.items():
        _print_unlisted(listing, gpus)
    return exit_codes.OK


def _print_unlisted(listing: registry.DeviceListing, found: dict[str, Any]) -> None:
    """Per EP, the devices ``listing``'s tool lists where ONNX Runtime lists none (or why it could not tell)."""
    for name, entries in found.items():
        print(f"{name}: ONNX Runtime lists no device; {listing.tool} lists (--ep-option device_id=N picks one):")
        print("\n".join(f"  {safe(listing.line(g))}" for g in entries) if isinstance(entries, list)
              else f"  {safe(entries)}")


def unlisted_devices(listed: list[EpDevice], provider: str | None) -> dict[registry.DeviceListing, dict[str, Any]]:
    """Per listing (an EP record's ``unlisted_devices``: nvidia-smi for the CUDA-family EPs), per
    available EP whose record names it and that ORT lists no device for (only ``provider`` when
    given): the devices it lists, or why it could not tell."""
    import onnxruntime  # loaded on first use, as the rest of the CLI does

    available = onnxruntime.get_available_providers()
    wanted: dict[registry.DeviceListing, list[str]] = {}
    for record in registry.records():
        p = record.provider
        if record.unlisted_devices and p in available and provider in (None, p) and not any(d.ep == p for d in listed):
            wanted.setdefault(record.unlisted_devices, []).append(p)
    found: dict[registry.DeviceListing, dict[str, Any]] = {}
    for listing, providers in wanted.items():
        try:
            devices: Any = listing.read()
        except listing.error as exc:
            devices = str(exc)
        found[listing] = dict.fromkeys(dict.fromkeys(providers), devices)
    return found


def cuda_gpus(listed: list[EpDevice], provider: str | None) -> dict[str, Any]:
    """Per available EP that ORT lists no device for and whose record says where its devices are
    listed instead (the CUDA family: nvidia-smi; only ``provider`` when given): those devices, or
    why they could not be read (``unlisted_devices``, every listing together)."""
    return {p: devices for found in unlisted_devices(listed, provider).values() for p, devices in found.items()}


def _print_listing(listed: list[EpDevice], found: list[dict[str, Any]], chosen: EpDevice | None,
                   source: str | None) -> None:
    """The human-readable listing: per EP its devices, then what happened to each plugin package."""
    where = f"recorded in {safe(source)}" if source else f"{ort_flavour()} {ort_version()}"
    print(f"ONNX Runtime devices ({where}): {len(listed)}")
    for ep in dict.fromkeys(d.ep for d in listed):
        mine = [d for d in listed if d.ep == ep]
        print(f"{safe(ep)} ({safe(mine[0].ep_vendor or '?')})")
        for device in mine:
            print(f"  {device.describe()}" + ("  <- --ep-device chooses this" if device == chosen else ""))
    for entry in found:
        names = set(entry.get("ep_names") or [])
        if entry.get("status") != "registered":
            print(f"plugin {safe(entry.get('package'))}: not registered: {safe(entry.get('note'))}")
        elif not any(d.ep in names for d in listed):
            print(f"plugin {safe(entry.get('package') or entry.get('library'))}: registered; ONNX Runtime lists no "
                  f"device for {', '.join(sorted(names))} on this machine")
