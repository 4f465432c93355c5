"""EP adapters: which one holds an EP in this process, and the ``--ep`` flags turned into a spec.

A run names its EP with ``--ep`` (and ``--ep-library``, ``--ep-device``); ``resolve`` turns that
into an ``EpSpec`` whose ``holder`` names the adapter class that makes the EP usable in a process
(``harness.eps.holders``: ``BuiltInAdapter``, ``PluginAdapter``, or the class an EP's record names,
such as ``WineDmlAdapter`` for ``--ep dml-wine``). The adapter interface (``prepare``, ``attach``,
``device``, ``describe``, ``identity``, ``preflight``, ``found``, ``close``) is described in
``harness.eps.holders``, whose classes are re-exported here; the EP's own facts are its record's
(``harness.eps.registry``), which its adapter is handed.

``adapter_for(spec)`` returns this process's adapter of a spec (one per spec and process, so a
plugin library is registered once per worker).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import replace

from ..core.installed import ort_flavour, ort_version
from . import devices as devices_mod
from . import plugins, registry
from .holders import BuiltInAdapter, EpAdapter, PluginAdapter
from .providers import EpNotAvailable, EpSpec, alias_of, check_provider_options, resolve_ep

#: The ``--ep`` prefix that names a plugin package.
PLUGIN_PREFIX = "plugin:"

#: ``EpSpec.holder`` -> its adapter class, of the testbed's own ways of holding an EP (an EP
#: registered since may name another: ``registry.adapter_class``).
_OWN: list[type[EpAdapter]] = [BuiltInAdapter, PluginAdapter, *(r.adapter for r in registry.records())]
ADAPTERS: dict[str, type[EpAdapter]] = {cls.holder: cls for cls in _OWN}
_INSTANCES: dict[str, EpAdapter] = {}


def early_providers(spec: EpSpec) -> list[tuple[str, dict[str, str]]] | None:
    """The ``providers=`` argument that starts ``spec``'s EP in a process that has loaded nothing
    of this project yet (a worker, while it imports the rest: ``harness.run.worker``): a built-in
    EP named with its options. None where there is nothing to start (the CPU EP) or starting it
    needs this project (a plugin's registration, a device selector, an EP held in another process)."""
    if spec.holder != BuiltInAdapter.holder or spec.is_cpu or spec.device:
        return None
    return [(spec.provider, dict(spec.options))]


def adapter_for(spec: EpSpec) -> EpAdapter:
    """This process's adapter for ``spec`` (one per spec: registrations and device choices are
    kept), handed the EP's record; an EP registered by a module this process has not loaded yet
    (``spec.adapter_module``) is loaded first."""
    key = json.dumps(spec.to_json(), sort_keys=True)
    if key not in _INSTANCES:
        cls = registry.adapter_class(spec.holder)
        if cls is None and spec.adapter_module:
            importlib.import_module(spec.adapter_module)  # registers the EP's record
            cls = registry.adapter_class(spec.holder)
        if cls is None:
            known = dict.fromkeys([BuiltInAdapter.holder, PluginAdapter.holder, *(r.holder for r in registry.records())])
            raise EpNotAvailable(f"{spec.provider}: no EP adapter holds {spec.holder!r} (known: {', '.join(known)})")
        _INSTANCES[key] = cls(spec, registry.of_spec(spec))
    return _INSTANCES[key]


def forget_adapters() -> None:
    """Close and forget this process's adapters that hold their sessions (``holds_sessions``: the
    DirectML host ends, and the next session starts a new one with a new device): what a run in
    this process does after the device was lost (``harness.eps.device_loss``). Sessions of
    ONNX Runtime in this process are never cached: the next one makes its device afresh, and a
    plugin EP's registration is kept."""
    held = {key: a for key, a in _INSTANCES.items() if a.holds_sessions}
    for key in held:
        del _INSTANCES[key]
    for adapter in held.values():
        try:
            adapter.close()
        except Exception:  # a host already gone with its device: nothing left to close
            pass


def _plugin_package(name: str, options: dict[str, str], device: str | None) -> EpSpec:
    """The spec of ``--ep plugin:PACKAGE[:EP_NAME]`` (the package checked, its EP name chosen)."""
    what = f"--ep {name}"
    package_spec, _, wanted = name[len(PLUGIN_PREFIX):].partition(":")
    package = plugins.load_package(package_spec, what)
    plugins.check_runtime(what)
    if wanted and wanted not in package.ep_names:
        raise EpNotAvailable(f"{what}: {package.distribution} provides {', '.join(package.ep_names)}, not {wanted}")
    if not wanted and len(package.ep_names) > 1:
        raise EpNotAvailable(f"{what}: {package.distribution} provides several EPs ({', '.join(package.ep_names)}); "
                             f"name one: --ep {PLUGIN_PREFIX}{package_spec}:{package.ep_names[0]}")
    provider = wanted or package.ep_names[0]
    return EpSpec(provider, alias_of(provider), options, holder=PluginAdapter.holder, library=package.library,
                  package=package.distribution, package_version=package.version, device=device)


def _check_device_api(what: str) -> None:
    """``EpNotAvailable`` when this ONNX Runtime's Python API has no device list to choose from."""
    import onnxruntime as ort  # loaded on first use: the CLI, reports and diffs start without it

    if not devices_mod.device_api(ort):
        raise EpNotAvailable(f"{what}: {ort_flavour()} {ort_version()} has no device list (get_ep_devices, ONNX "
                             "Runtime 1.23 and later); drop --ep-device, or pass the EP's own option (e.g. "
                             "--ep-option device_id=N)")


def resolve(name: str, options: dict[str, str] | None = None, *, library: str | None = None,
            device: str | None = None, available: list[str] | None = None) -> EpSpec:
    """The ``EpSpec`` of ``--ep name`` with ``--ep-option`` ``options``, ``--ep-library library`` and
    ``--ep-device device``, made usable in this process and its device chosen, so that every
    refusal (EP missing, ORT too old, wrong package, library refused, no device, bad selector)
    is an ``EpNotAvailable`` here, in one line, before any case runs."""
    options = dict(options or {})
    key = name.strip()
    record = registry.named(key)
    if record is not None and record.held_its_own_way:  # an EP its record's adapter holds its own way
        spec = record.adapter.spec_for(record, options, library=library, device=device)
        if record.name not in registry.BUILT_IN:  # a process that lacks the record loads it from here
            spec = replace(spec, adapter_module=record.adapter.__module__)
    elif key.startswith(PLUGIN_PREFIX):
        if library:
            raise EpNotAvailable(f"--ep {key} and --ep-library {library} both name a plugin library; give one")
        spec = _plugin_package(key, options, device)
    elif library:
        path = plugins.check_library_file(library, "--ep-library")
        plugins.check_runtime(f"--ep {key} --ep-library {library}")
        provider = registry.aliases().get(key.lower(), key)
        spec = EpSpec(provider, alias_of(provider), options, holder=PluginAdapter.holder, library=path, device=device)
    else:
        spec = resolve_ep(key, options, available)
        if device is not None:
            _check_device_api(f"--ep {key} --ep-device {device}")
            spec = EpSpec(spec.provider, spec.alias, spec.options, device=device)
    try:
        check_provider_options(spec.provider, spec.options)
    except ValueError as exc:
        raise EpNotAvailable(str(exc)) from None
    adapter = adapter_for(spec)
    adapter.prepare()
    if device is not None or spec.holder != BuiltInAdapter.holder:
        adapter.device()
    return spec


def emulated(spec: EpSpec) -> bool:
    """Whether the EP of ``spec`` runs on an emulated device (DirectML under Wine), so that
    expectations scoped to an emulated device hold and its causes are reported as such."""
    return bool(getattr(adapter_for(spec), "emulated", False))


def runtime_version(spec: EpSpec) -> str | None:
    """The ONNX Runtime version that builds the EP's sessions when it is not this process's (an
    adapter that holds its sessions elsewhere: the version its package brings), else None (the
    installed one); expectations' ``onnxruntime`` ranges are evaluated for it."""
    adapter = adapter_for(spec)
    if adapter.holds_sessions and hasattr(adapter, "package"):
        return adapter.package()[1]
    return None


def ep_flag(spec: EpSpec) -> str:
    """The ``--ep`` value that selects the EP of ``spec`` again, and names its default run folders:
    for an EP held its own way its record's name (``dml-wine`` for DirectML under Wine, whose
    provider and alias are DirectML's, ``dml``), else the alias."""
    record = registry.held_by(spec.holder)
    return record.name if record is not None else spec.alias


def ep_words(spec: EpSpec) -> str:
    """The EP as a command's first line names it: its provider, and what its record's ``label``
    says of it (DirectML under Wine: that it runs on an emulated device, so no line reads like a
    hardware run)."""
    label = registry.of_spec(spec).label
    return f"{spec.provider} ({label})" if label else spec.provider


def ep_package(spec: EpSpec) -> tuple[str, str]:
    """``(distribution, version)`` of what provides the EP: the plugin package, else the ONNX
    Runtime wheel (expectations may be scoped by it)."""
    if spec.package:
        return spec.package, str(spec.package_version)
    adapter = adapter_for(spec)
    if hasattr(adapter, "package"):  # an EP whose ONNX Runtime is not this process's
        return adapter.package()
    return ort_flavour(), ort_version()


__all__ = ["ADAPTERS", "BuiltInAdapter", "EpAdapter", "PLUGIN_PREFIX", "PluginAdapter", "adapter_for", "emulated",
           "ep_flag", "ep_package", "ep_words", "resolve", "runtime_version"]
