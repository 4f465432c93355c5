"""The ways of holding an EP: one adapter class per way, so the session layer need not know which.

- ``BuiltInAdapter`` (``holder="built-in"``): an EP compiled into the installed ONNX Runtime
  wheel, found by name in ``get_available_providers()``. Sessions list it in ``providers=``; with
  ``--ep-device`` they attach that device of ORT's device list instead.
- ``PluginAdapter`` (``holder="plugin"``): a plugin library (``--ep NAME --ep-library PATH``, or
  ``--ep plugin:PACKAGE[:EP_NAME]`` whose package gives the library path and EP names),
  registered in each process that builds a session, attached through the device it lists
  (``--ep-device``, or its only device).
- An EP held its own way names its adapter class in its record (``harness.eps.registry``):
  ``WineDmlAdapter`` (``holder="dml-wine"``, ``harness.eps.dml_wine.adapter``) holds ONNX
  Runtime's real DirectML EP in a Windows host process under Wine and builds and runs the
  sessions itself (``holds_sessions``).

The interface the session layer, the device identity and the preflight use (``harness.eps.session``,
``harness.eps.gpu``, ``harness.eps.preflight``) is these methods of ``EpAdapter``; a new way of
holding an EP is a class with them, named by an EP record:

- ``prepare()``: make the EP usable in this process (idempotent); ``EpNotAvailable`` if it cannot;
- ``attach(session_options)``: put the EP on the session options and return the ``providers=``
  argument of ``InferenceSession`` (None when the EP was attached through a device);
- ``device()``: the ORT device the EP runs on (``harness.eps.devices.EpDevice``), None when ORT
  has no device list or the EP picks its own; ``EpNotAvailable`` when a device is needed and the
  choice fails;
- ``describe()``: how the EP is held, for the run header (``ep_held_by``);
- ``identity(ort)``: the device record this way of holding reads where ONNX Runtime's device list
  cannot tell (the record's ``identity`` reader: DXGI for DirectML, OpenVINO's device,
  nvidia-smi), ``source`` none when nothing does; ``harness.eps.gpu.identity`` adds ORT's view;
- ``preflight(result, read)``: the EP's own checks before any case (the record's ``preflight``
  hook: DirectML's adapters; DirectML under Wine: its host and canary), each a finding on
  ``result``; sets ``result.gpu`` (``read()`` gives the run header's device record); False after
  a fatal finding;
- ``found()``: the preflight's line saying the EP is there (None: it has its own checks);
- ``close()``: end what the adapter holds in this process (an EP process; nothing otherwise).

An adapter whose EP lives outside this process's ONNX Runtime sets ``holds_sessions`` and
provides ``run_session(model, feeds, settings, ...)`` (returning ``ep_run.EpRun`` or raising
``ep_run.SessionError`` as the in-process session layer does) and ``package()`` (the distribution
and version the EP comes from); one whose EP's devices only its own process sees provides
``hosted_devices()`` and ``hosted_words(devices)`` (``ep-testbed devices``). An adapter class
that an EP's record names makes that EP's spec from the ``--ep`` flags (``spec_for``).
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from ..core.installed import ort_flavour, ort_version
from . import devices as devices_mod
from . import plugins
from .devices import EpDevice, SelectorError
from .spec import EpNotAvailable, EpSpec, providers_arg


class EpAdapter:
    """How one ``EpSpec``'s EP is held (module docstring); subclasses set ``holder``."""

    holder: ClassVar[str] = ""
    #: Whether the EP runs on an emulated device (expectations scoped to one hold, ``emulated_device``).
    emulated: ClassVar[bool] = False
    #: Whether the EP's sessions are built elsewhere than in this process's ONNX Runtime (``run_session``).
    holds_sessions: ClassVar[bool] = False

    def __init__(self, spec: EpSpec, record: Any = None):
        """``spec``: the EP this adapter makes usable; ``record``: its ``registry.EpRecord`` (None:
        an EP no record describes, with every default)."""
        self.spec = spec
        self.record = record
        self._chosen: tuple[EpDevice, Any] | None = None

    def run_session(self, model: Any, feeds: Any, settings: Any, *, allow_fallback: bool = False,
                    profile: bool = True, quiet: bool = False, initializers: Any = None) -> Any:
        """Build and run one session where the EP lives: what an adapter that ``holds_sessions``
        does (the DirectML host's); the others' sessions are built in this process
        (``eps.session``), so theirs is never called."""
        raise NotImplementedError(f"{type(self).__name__} holds no sessions: eps.session builds them in this process")

    @classmethod
    def spec_for(cls, record: Any, options: dict[str, str], *, library: str | None = None,
                 device: str | None = None) -> EpSpec:
        """The spec of ``--ep <record's name>`` for an EP this class holds its own way: no
        ``--ep-library`` or ``--ep-device`` (``EpNotAvailable`` naming both)."""
        if library or device is not None:
            raise EpNotAvailable(f"--ep {record.name} is held by its own adapter: it takes neither --ep-library nor "
                                 "--ep-device")
        return EpSpec(record.provider, record.alias, dict(options), holder=cls.holder)

    def prepare(self) -> None:
        """Make the EP usable in this process (idempotent)."""

    def device(self) -> EpDevice | None:
        """The ORT device the EP runs on (``--ep-device``'s choice), or None."""
        chosen = self._choice()
        return chosen[0] if chosen else None

    def attach(self, session_options: Any) -> list[Any] | None:
        """Put the EP on ``session_options``; the ``providers=`` argument for ``InferenceSession``."""
        chosen = self._choice()
        if chosen is None:
            return providers_arg(self.spec)
        session_options.add_provider_for_devices([chosen[1]], dict(self.spec.options))
        return None

    def describe(self) -> dict[str, Any]:
        """How the EP is held, as the run header records it."""
        return {"holder": self.holder}

    def identity(self, ort: dict[str, str]) -> dict[str, Any]:
        """The device record the EP's record reads (its ``identity`` reader, given ``ort``, the ONNX
        Runtime that runs it); ``source`` none without one."""
        reader = getattr(self.record, "identity", None)
        if reader is None:
            return {"source": "none", "adapter": None, "onnxruntime": ort}
        return reader(self.spec, ort)

    def preflight(self, result: Any, read: Callable[[], dict[str, Any]]) -> bool:
        """The EP's own checks (its record's ``preflight`` hook) on ``result``, which then holds the
        device record (``read()``); False when one was fatal."""
        hook = getattr(self.record, "preflight", None)
        if hook is not None:
            return bool(hook(result, self.spec, read))
        result.gpu = read()
        return True

    def found(self) -> str | None:
        """The preflight's line saying that the EP is there."""
        return f"{self.spec.provider} is available"

    def close(self) -> None:
        """End what this adapter holds in this process (nothing here)."""

    def _choice(self) -> tuple[EpDevice, Any] | None:
        """``(device, ORT's device)`` chosen by the spec's selector (cached), or None without one."""
        if self._chosen is None and self.spec.device is not None:
            self.prepare()
            pairs = devices_mod.read_pairs()
            try:
                chosen = devices_mod.select([d for d, _ in pairs], self.spec.provider, self.spec.device)
            except SelectorError as exc:
                raise EpNotAvailable(str(exc)) from None
            self._chosen = next((d, raw) for d, raw in pairs if d == chosen)
        return self._chosen


class BuiltInAdapter(EpAdapter):
    """An EP compiled into the installed ONNX Runtime, found by name."""

    holder = "built-in"

    def describe(self) -> dict[str, Any]:
        """The wheel that holds the EP."""
        return {"holder": self.holder, "distribution": ort_flavour(), "version": ort_version()}


class PluginAdapter(EpAdapter):
    """A plugin EP library, registered with ONNX Runtime in each process, attached through its device."""

    holder = "plugin"

    def prepare(self) -> None:
        """Register the library in this process (once)."""
        plugins.register(str(self.spec.library), self._what())

    def _what(self) -> str:
        """How the user named the EP, for messages."""
        return f"--ep plugin:{self.spec.package}" if self.spec.package else f"--ep-library {self.spec.library}"

    def _choice(self) -> tuple[EpDevice, Any]:
        """The selector's device, else the EP's only device; ``EpNotAvailable`` for none or several."""
        if self.spec.device is not None:
            return super()._choice()  # type: ignore[return-value]
        if self._chosen is None:
            self.prepare()
            pairs = devices_mod.read_pairs()
            mine = [(d, raw) for d, raw in pairs if d.ep == self.spec.provider]
            if len(mine) != 1:
                raise EpNotAvailable(self._no_single_device([d for d, _ in mine], [d for d, _ in pairs]))
            self._chosen = mine[0]
        return self._chosen

    def _no_single_device(self, mine: list[EpDevice], every: list[EpDevice]) -> str:
        """The one-line refusal when the EP lists no device, or several and no ``--ep-device``."""
        ep = self.spec.provider
        if mine:
            return (f"{self._what()}: ONNX Runtime lists {len(mine)} devices for {ep} ({devices_mod.listing(mine)}); "
                    "pass --ep-device INDEX or KEY=VALUE to choose one")
        others = sorted({d.ep for d in every})
        return (f"{self._what()}: the plugin registered, but ONNX Runtime lists no device for {ep} on this "
                f"machine{self._no_device_hint()}; it lists devices for: {', '.join(others) or 'no EP'}. Fix: run on "
                f"hardware the plugin supports (`ep-testbed devices` shows what ONNX Runtime sees)")

    def _no_device_hint(self) -> str:
        """Why the plugin's package may list no device (``plugins.KNOWN_PACKAGES``), in brackets, or ""."""
        rule = plugins.KNOWN_PACKAGES.get(self.spec.package or "")
        return f" ({rule.no_device})" if rule and rule.no_device else ""

    def describe(self) -> dict[str, Any]:
        """The library, the package it came from and its version."""
        data: dict[str, Any] = {"holder": self.holder, "library": self.spec.library}
        if self.spec.package:
            data.update(package=self.spec.package, version=self.spec.package_version)
        return data

    def found(self) -> str:
        """The plugin, its package and library, registered with this ONNX Runtime."""
        ep = self.spec
        source = f"{ep.package} {ep.package_version}, " if ep.package else ""
        return (f"{ep.provider} is a plugin EP ({source}library {ep.library}), registered with "
                f"{ort_flavour()} {ort_version()}")


__all__ = ["BuiltInAdapter", "EpAdapter", "PluginAdapter"]
