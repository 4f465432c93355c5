"""Which execution provider a run targets, by name, and the options it takes.

``resolve_ep("dml")`` turns a command-line alias or a full provider name into an ``EpSpec``,
checked against ``onnxruntime.get_available_providers()``: the aliases and what to install when an
EP is missing are its record's (``harness.eps.registry``). ``check_provider_options`` checks the
``--ep-option`` values the EP's documentation bounds. The spec, the session settings and
``session_options`` are ``harness.eps.spec``'s, re-exported here.
"""

from __future__ import annotations

import sys

from ..core.installed import ort_flavour, ort_version
from . import registry
from .registry import DML_WINE_HINT, alias_of
from .spec import (
    DML_DISABLE_GRAPH_FUSION,
    EpNotAvailable,
    EpSpec,
    SessionSettings,
    config_entries,
    parse_provider_options,
    providers_arg,
    session_options,
)

#: Command-line alias -> ONNX Runtime provider name, of the testbed's own EPs (their records'
#: ``aliases``; ``registry.aliases()`` holds those registered since). Any other full provider
#: name is accepted as is.
ALIASES: dict[str, str] = registry.aliases()


class ProviderMissing(EpNotAvailable):
    """A built-in EP this ONNX Runtime does not have (``provider``: the name it was looked up by)."""

    def __init__(self, message: str, provider: str):
        """``message``: the one-line refusal; ``provider``: the missing provider's name."""
        super().__init__(message)
        self.provider = provider


def install_hint(provider: str) -> str:
    """What ``--ep``'s refusal of a missing ``provider`` adds: its record's ``install_hint`` (with
    its wheel) and, off the EP's platform, what its users are told there; "" without a record."""
    record = registry.of_provider(provider)
    if record is None or not record.install_hint:
        return ""
    hint = record.install_hint.format(wheel=record.wheels[0] if record.wheels else "")
    return hint + (record.elsewhere if record.platform not in (None, sys.platform) else "")


def resolve_ep(name: str, options: dict[str, str] | None = None,
               available: list[str] | None = None) -> EpSpec:
    """The ``EpSpec`` for ``name`` (an ``--ep`` alias or a full provider name).

    Raises ``ProviderMissing`` (an ``EpNotAvailable``) naming the installed providers (and the
    wheel that would bring the requested one) when this ONNX Runtime does not have it.
    """
    if available is None:
        import onnxruntime  # loaded on first use: the CLI, reports and diffs start without it

        available = list(onnxruntime.get_available_providers())
    key = name.strip()
    known = registry.aliases()
    provider = known.get(key.lower(), key)
    if provider not in available:
        by_lower = {p.lower(): p for p in available}
        provider = by_lower.get(provider.lower(), provider)
    if provider not in available:
        raise ProviderMissing(
            f"--ep {name}: {provider} is not available in this ONNX Runtime "
            f"({ort_flavour()} {ort_version()}){install_hint(provider)}. Installed providers: {', '.join(available)}. "
            f"Aliases: {', '.join(f'{a}={p}' for a, p in known.items())}.", provider)
    return EpSpec(provider=provider, alias=alias_of(provider), options=dict(options or {}))


#: EPs whose ``device_id`` provider option is a device index: a whole number >= 0, those whose
#: record says so (``device_id_index``: ONNX Runtime's documented options, e.g.
#: https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html "device_id: The
#: device ID", and TensorRT's, ROCm's and MIGraphX's pages alike). The CPU EP is one because it
#: takes no provider options at all (ONNX Runtime drops them: ``InferenceSession.get_provider_options()``
#: reports none back), so a ``device_id`` there is at best ignored, and a negative one is a typo
#: worth refusing. DirectML's is checked against the DXGI adapters themselves, naming them
#: (``dxgi.select_adapter``); OpenVINO's (deprecated) ``device_id`` is a device name string and
#: plugin EPs define their own, so neither is one.
INDEX_DEVICE_ID = tuple(r.provider for r in registry.records() if r.device_id_index)
#: The largest device index accepted (ONNX Runtime reads it into a C ``int``).
MAX_DEVICE_ID = 2**31 - 1


def check_provider_options(provider: str, options: dict[str, str]) -> None:
    """ValueError naming the option, what ``provider`` allows and what to do, for a value ONNX
    Runtime would refuse or misread, where its documentation says what is allowed (``device_id``
    of an EP whose record says it is an index); other keys are passed on for ONNX Runtime to judge."""
    value = options.get("device_id")
    record = registry.of_provider(provider)
    if value is None or record is None or not record.device_id_index:
        return
    if not (value.isascii() and value.isdigit() and len(value) <= 10 and int(value) <= MAX_DEVICE_ID):
        raise ValueError(f"--ep-option device_id={value[:40]!r}: {provider} takes a device index, a whole number from 0 "
                         f"to {MAX_DEVICE_ID}.\nNote: `ep-testbed devices --ep {alias_of(provider)}` (or `ep-testbed "
                         "doctor`) lists the devices with their index")


__all__ = ["ALIASES", "DML_DISABLE_GRAPH_FUSION", "DML_WINE_HINT", "EpNotAvailable", "EpSpec", "INDEX_DEVICE_ID",
           "MAX_DEVICE_ID", "ProviderMissing", "SessionSettings", "alias_of", "check_provider_options", "config_entries",
           "install_hint", "parse_provider_options", "providers_arg", "resolve_ep", "session_options"]
