"""The option groups every front end shares, each with the one function that reads it.

``ep-testbed run``, ``ep-testbed model run`` / ``model demo`` and the pytest plugin
(``pytest tests/conformance``) take the same flags for the same things:

- the EP group: ``--ep``, ``--ep-option KEY=VALUE`` (repeatable), ``--ep-library PATH``,
  ``--ep-device SELECTOR``, ``--graph-opt`` -> ``parse_ep`` gives the ``EpSpec``
  (``harness.eps.adapters.resolve``: a built-in EP by name, a plugin EP by library or by
  ``plugin:PACKAGE``, its ORT device chosen);
- the tolerance group: ``--tolerances FILE`` then ``--tol DTYPE:atol=..,rtol=..,ulp=..``
  (repeatable) -> ``parse_tolerances`` gives the ``Tolerances`` (``load_tolerances``);
  ``--precision-model NAME`` / ``--strict-tolerance`` -> ``parse_precision`` gives the name of
  the reference's precision model (its rounding bounds and knife-edge alternatives widen the rule
  element by element; ``--strict-tolerance`` is the ``exact`` model: the rule alone);
- the expectations group: ``--expectations FILE`` / ``--no-expectations`` ->
  ``parse_expectations`` gives the ``Expectations`` of the EP.

- the limits group: ``--limit NAME=VALUE`` (repeatable) -> ``parse_limits`` gives the
  ``untrusted_files.Limits`` every file read (and the reference's element cap) obeys; every
  ``ep-testbed`` command takes it.

Each ``add_*`` function takes the registering callable, so one definition serves argparse
(``parser.add_argument``) and pytest (``group.addoption``), which accept the same keywords.
Every ``parse_*`` function raises ``OptionError`` whose message names the flag, the value,
what is allowed and what to do next; front ends print it and exit with their usage code.

Numbers with a range are read by the argparse ``type=`` functions below (``seconds``,
``count``, ``seed``): a NaN, infinite, negative or absurd value is refused at parse time,
with the flag named (argparse's exit 2, pytest's usage error).

This module sits outside the ``cli`` package so that the pytest plugin and the model CLI can
use it without importing (or cycling back through) the command line.
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Callable, Sequence

from ep_testbed.harness.core import expectations as expectations_mod
from ep_testbed.harness.core.expectations import Expectations
from ep_testbed.harness.core.tolerances import Tolerances
from ep_testbed.harness.core.untrusted_files import LIMIT_NAMES, FileRefused, Limits, read_json
from ep_testbed.harness.eps.adapters import emulated, ep_package, resolve, runtime_version
from ep_testbed.harness.eps.providers import EpNotAvailable, EpSpec, parse_provider_options
from ep_testbed.reference.precision import DEFAULT_MODEL, MODELS, STRICT_MODEL

#: ``parser.add_argument`` or pytest's ``group.addoption``.
AddOption = Callable[..., Any]

TOL_METAVAR = "DTYPE:atol=X,rtol=Y,ulp=N"


class OptionError(ValueError):
    """A shared option's value is unusable; the message says which flag, why and what to do."""


def add_ep_options(add: AddOption, *, graph_opt: bool = True, ep_default: str | None = "cpu") -> None:
    """Register ``--ep`` (default ``ep_default``), ``--ep-option``, ``--ep-library``, ``--ep-device``
    and (unless ``graph_opt`` is False) ``--graph-opt``."""
    add("--ep", default=ep_default,
        help="execution provider: cpu, dml, openvino, cuda, webgpu (aliases), a full provider name, or "
             "plugin:PACKAGE[:EP_NAME] for a plugin EP package such as plugin:onnxruntime-ep-webgpu "
             f"(default: {ep_default or 'every EP'})")
    add("--ep-option", action="append", default=[], metavar="KEY=VALUE",
        help="provider option, repeatable (e.g. device_id=1)")
    add("--ep-library", default=None, metavar="PATH",
        help="a plugin EP's shared library: registered with ONNX Runtime, then --ep names the EP it provides")
    add("--ep-device", default=None, metavar="SELECTOR",
        help="which of the EP's ONNX Runtime devices to run on: an index, or KEY=VALUE items such as type=GPU, "
             "vendor_id=0x10de, pci_bus_id=..., ov_device=NPU (`ep-testbed devices` lists them); default: a plugin "
             "EP's only device, a built-in EP's own choice")
    if graph_opt:
        add("--graph-opt", action="store_true",
            help="enable ONNX Runtime graph optimizations (default off, so no fusion hides the node)")


def add_tolerance_options(add: AddOption) -> None:
    """Register ``--tol`` (repeatable) and ``--tolerances``; ``parse_tolerances`` reads them."""
    add("--tol", action="append", default=[], metavar=TOL_METAVAR,
        help="override a dtype's tolerance, e.g. fp16:atol=1e-2,ulp=4 (repeatable; applied after --tolerances)")
    add("--tolerances", default=None, metavar="JSON",
        help='tolerance table file, e.g. {"FLOAT16": {"atol": 0.01, "rtol": 0.001, "ulp": 4}} '
             "(applied over the defaults, before --tol)")
    add("--precision-model", default=None, metavar="MODEL",
        help="how the reference bounds a correct kernel's rounding, element by element: "
             + "; ".join(f"{m.name}: {m.summary}" for m in MODELS.values()) + f" (default {DEFAULT_MODEL})")
    add("--strict-tolerance", action="store_true",
        help=f"the tolerance rule alone: no rounding bound, no knife-edge alternative (--precision-model "
             f"{STRICT_MODEL})")


def add_expectation_options(add: AddOption) -> None:
    """Register ``--expectations`` and ``--no-expectations``; ``parse_expectations`` reads them."""
    add("--expectations", default=None, metavar="JSON",
        help="expectations file (default: harness/expectations/<ep alias>.json)")
    add("--no-expectations", action="store_true", help="ignore known divergences")


def add_limit_options(add: AddOption) -> None:
    """Register ``--limit NAME=VALUE`` (repeatable); ``parse_limits`` reads it."""
    add("--limit", action="append", default=[], metavar="NAME=VALUE",
        help="raise (or lower) a cap on what is read or allocated, e.g. elements=2**30 or npz-bytes=8GiB; "
             f"names: {', '.join(LIMIT_NAMES)} (defaults: harness/README.md, 'Caps')")


def parse_limits(items: Sequence[str] = ()) -> Limits:
    """The default ``Limits`` with each ``--limit`` item applied; ``OptionError`` naming a bad one."""
    try:
        return Limits().with_items(list(items))
    except ValueError as exc:
        raise OptionError(str(exc)) from None


#: The longest ``--timeout`` accepted: a week (longer is a typo, and overflows some clocks' waits).
MAX_SECONDS = 7 * 24 * 3600.0
#: The largest seed accepted (NumPy seeds are unsigned; JSON and other tools keep 64 bits).
MAX_SEED = 2**63 - 1


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds in ``(0, MAX_SECONDS]``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number of seconds > 0 and <= {MAX_SECONDS:g} "
                                         "(a week)")
    return value


def count(text: str) -> int:
    """argparse type: a whole number >= 0 (at most 2**31 - 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 0 to {2**31 - 1}")
    return value


def seed(text: str) -> int:
    """argparse type: a seed, a whole number in ``[0, MAX_SEED]``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r}: a seed is a whole number from 0 to {MAX_SEED}")
    return value


def parse_ep(name: str, ep_options: Sequence[str] = (), library: str | None = None,
             device: str | None = None) -> EpSpec:
    """The ``EpSpec`` of ``--ep name`` with its ``--ep-option`` items, ``--ep-library`` and
    ``--ep-device``, the EP made usable in this process; ``OptionError`` (one line) names what is
    installed when the provider is missing, the malformed ``KEY=VALUE`` item, an ONNX Runtime
    too old for plugin EPs, a package that is not a plugin or needs a newer ONNX Runtime, a
    library ONNX Runtime refuses, an EP with no device, or a selector and the candidates."""
    try:
        return resolve(name, parse_provider_options(list(ep_options)), library=library, device=device)
    except (EpNotAvailable, ValueError) as exc:
        raise OptionError(str(exc)) from None


def parse_ep_args(args: Any) -> EpSpec:
    """``parse_ep`` of a parsed namespace (or pytest config reader) holding the EP group."""
    return parse_ep(args.ep, args.ep_option, getattr(args, "ep_library", None), getattr(args, "ep_device", None))


def load_tolerances(path: str | None, overrides: list[str] | None = None) -> Tolerances:
    """Defaults, then a JSON file (``--tolerances``, read through ``untrusted_files``), then
    ``--tol`` overrides, in that order. ``FileRefused`` naming the file and entry for a file that
    is not a tolerance table; ValueError for a bad ``--tol`` item. (Here rather than beside the
    rule in ``harness.core.tolerances``, which imports nothing but NumPy: a repro bundle ships it.)"""
    tolerances = Tolerances.defaults()
    if path:
        data = read_json(path, "tolerance table")
        try:
            tolerances = Tolerances.from_json(data)
        except ValueError as exc:
            raise FileRefused(path, f"not a tolerance table: {exc}", hint='write it like {"FLOAT16": {"atol": 0.01, '
                              '"rtol": 0.001, "ulp": 4}}') from None
    for spec in overrides or []:
        tolerances = tolerances.override(spec)
    return tolerances


def parse_tolerances(path: str | None, overrides: Sequence[str] = ()) -> Tolerances:
    """The defaults, then the ``--tolerances`` file, then each ``--tol`` in order.

    ``OptionError`` for an unreadable file, a file that is not a tolerance table, or a
    malformed ``--tol`` (its message shows the expected form).
    """
    try:
        return load_tolerances(path, list(overrides))
    except FileRefused as exc:
        raise OptionError(f"--tolerances {exc}") from None
    except ValueError as exc:  # a --tol item: the message already names it and the form
        raise OptionError(str(exc)) from None


def parse_precision(model: str | None, strict: bool = False) -> str:
    """The precision model's name: ``--precision-model`` (default ``fp32``), or ``exact`` with
    ``--strict-tolerance``. ``OptionError`` for an unknown name, or for both flags naming
    different models."""
    if model is not None and model not in MODELS:
        raise OptionError(f"--precision-model {model!r}: not a precision model; choose one of {', '.join(MODELS)}")
    if strict and model not in (None, STRICT_MODEL):
        raise OptionError(f"--strict-tolerance means --precision-model {STRICT_MODEL}, which contradicts "
                          f"--precision-model {model}; pass one of them")
    return STRICT_MODEL if strict else (model or DEFAULT_MODEL)


def parse_expectations(path: str | None, disabled: bool, ep_alias: str, ep: EpSpec | None = None) -> Expectations:
    """No expectations with ``--no-expectations``, else the entries of the ``--expectations`` file
    that apply to the EP, else the EP's bundled ones (its own file and the shared causes that
    apply to it: ``expectations.for_ep``); entries scoped to an EP package (``ep_package``) hold
    only for the package that provides ``ep`` (a plugin package, else the onnxruntime wheel), those
    scoped to an emulated device only on one, and ``onnxruntime`` ranges are read for the ONNX
    Runtime that builds ``ep``'s sessions. ``OptionError`` for an unusable file."""
    if disabled:
        return Expectations()
    package = ep_package(ep) if ep is not None else None
    scope = {"ep_package": package, "emulated": emulated(ep) if ep is not None else False,
             "ort_version": runtime_version(ep) if ep is not None else None}
    try:
        provider = ep.provider if ep is not None else None
        if path:
            return expectations_mod.load(path, provider=provider, alias=ep_alias, **scope)
        return expectations_mod.for_ep(ep_alias, provider=provider, **scope)
    except FileRefused as exc:
        raise OptionError(f"--expectations {exc}") from None
    except ValueError as exc:  # the loader names the entry and field
        raise OptionError(str(exc)) from None
