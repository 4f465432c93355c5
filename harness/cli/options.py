"""The option groups every front end shares, each flag defined once, and the one function that
turns parsed options into a run's configuration.

``ep-testbed run``, ``ep-testbed fuzz``, ``ep-testbed model run`` / ``model demo`` and the pytest
plugin (``pytest tests/conformance``) take the same flags for the same things:

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
  ``parse_expectations`` gives the ``Expectations`` of the EP;
- the batch option: ``--batch K`` (``batch_size``) -> ``parse_batch`` gives how many cases share a
  session (``harness.eps.packing.default_batch`` for the EP when it is not given);
- the run group: ``--ops``, ``--seed``, ``--jobs``, ``--timeout``, ``--out``, ``--overwrite``,
  ``--resume`` (``add_ops`` ... ``add_resume``; a command takes those that mean something to it,
  with its own default and help where they differ: ``fuzz``'s ``--timeout`` defaults to 30 s,
  the pytest plugin spells ``--timeout`` and ``--seed`` ``--case-timeout`` and ``--catalog-seed``);
- the limits group: ``--limit NAME=VALUE`` (repeatable) -> ``parse_limits`` gives the
  ``untrusted_files.Limits`` every file read (and the reference's element cap) obeys; every
  ``ep-testbed`` command takes it.

``run_config(args)`` is the one path from parsed options to a run's configuration
(``RunConfig``: the EP, tolerances, precision model, expectations with the ``--corpus`` cases'
own entries applied once, operators, seed, workers, time limit, output folder); ``run``,
``fuzz``, ``model run`` / ``model demo`` and the pytest plugin all call it, and
``RunConfig.case_config`` gives what every worker gets. ``--also-on`` (the second EP and its
expectations) and ``--batch`` are read there too. A front end declares the groups it adds
(``declare_groups``, from ``OPTION_GROUPS``); ``run_config`` reads exactly those and refuses, as a
``FrontEndError`` (a bug of the front end, not the user's), a group declared but never added,
added but not declared, or one a run cannot do without (the EP and tolerance groups) left out; an
undeclared group stands for its stated ``absent`` values, never for a guess.

Each ``add_*`` function takes the registering callable, so one definition serves argparse
(``parser.add_argument``) and pytest (``group.addoption``), which accept the same keywords.
Every ``parse_*`` function raises ``OptionError`` whose message names the flag, the value,
what is allowed and what to do next; front ends print it and exit with their usage code.

Numbers with a range are read by the argparse ``type=`` functions below (``seconds``,
``count``, ``seed``): a NaN, infinite, negative or absurd value is refused at parse time,
with the flag named (argparse's exit 2, pytest's usage error).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ...reference.precision import DEFAULT_MODEL, MODELS, STRICT_MODEL
from ...reference.registry import names, spec_of_type
from ...reference.workers import usable_cpus
from ..core import expectations as expectations_mod
from ..core.expectations import Expectations
from ..core.rerun import TIME_FIELD
from ..core.tolerances import Tolerances
from ..core.untrusted_files import LIMIT_NAMES, FileRefused, Limits, limits, read_json
from ..eps import registry
from ..eps.adapters import emulated, ep_package, resolve, runtime_version
from ..eps.packing import default_batch, default_jobs
from ..eps.providers import EpNotAvailable, EpSpec, SessionSettings, parse_provider_options
from ..fuzz.corpus import CorpusError, load_corpus, with_corpus
from ..run.case_run import DEFAULT_MAPPER, CaseConfig

#: ``parser.add_argument`` or pytest's ``group.addoption``.
AddOption = Callable[..., Any]

TOL_METAVAR = "DTYPE:atol=X,rtol=Y,ulp=N"


class OptionError(ValueError):
    """A shared option's value is unusable; the message says which flag, why and what to do."""


def add_ep_options(add: AddOption, *, graph_opt: bool = True, ep_default: str | None = registry.DEFAULT_EP) -> None:
    """Register ``--ep`` (default ``ep_default``), ``--ep-option``, ``--ep-library``, ``--ep-device``
    and (unless ``graph_opt`` is False) ``--graph-opt``."""
    add("--ep", default=ep_default,
        help="execution provider: cpu, dml, openvino, cuda, webgpu (aliases), dml-wine (the real DirectML EP "
             "under Wine on an emulated device: bash tools/dml-wine.sh sets it up), a full provider name, or "
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


def add_also_on(add: AddOption) -> None:
    """Register ``--also-on EP|none`` (``run`` and ``fuzz``); ``parse_also_on`` reads it."""
    add("--also-on", metavar="EP|none",
        help="re-check each failing case on this second EP and label it 'shared with <EP>' (it fails there the "
             "same way) or 'only on <the EP under test>' (default: cpu whenever the CPU EP is available and --ep "
             "is another; none: no re-check)")


def parse_also_on(value: str | None, ep: EpSpec) -> EpSpec | None:
    """The EP failures are re-checked on (``--also-on``, ``harness.run.recheck``): none for
    ``none``; by default the CPU EP when it is available and ``ep`` is another; ``OptionError``
    for an EP that is not installed or for the EP under test itself."""
    if value is not None and value.strip().lower() == "none":
        return None
    if value is None:
        if ep.is_cpu:
            return None
        try:
            return parse_ep(registry.DEFAULT_EP)
        except OptionError:  # an ONNX Runtime build without the CPU EP: nothing to compare with
            return None
    other = parse_ep(value)
    if other.provider == ep.provider:
        raise OptionError(f"--also-on {value}: that is the EP under test; name another EP, or none")
    return other


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


#: The most cases one session may pack (``--batch``): more only makes a crash costlier to find.
MAX_BATCH = 1024


def positive_count(text: str) -> int:
    """argparse type: a whole number >= 1 (at most 2**31 - 1)."""
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to {2**31 - 1}")
    return value


def batch_size(text: str) -> int:
    """argparse type: how many cases may share a session, a whole number in ``[1, MAX_BATCH]``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_BATCH:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 (a session per case) to {MAX_BATCH}")
    return value


def add_batch_option(add: AddOption) -> None:
    """Register ``--batch K``; ``parse_batch`` reads it."""
    add("--batch", type=batch_size, default=None, metavar="K",
        help="run up to K cases in one session, each its own subgraph of one model (placement, judging and "
             "results stay per case; a batch that fails, crashes or hangs is halved down to single cases); "
             "default: the EP's measured default (1 where batching does not pay or was never measured)")


def parse_batch(value: int | None, ep: EpSpec) -> int:
    """``--batch`` as given, else the EP's default (``packing.default_batch``)."""
    return value if value is not None else default_batch(ep)


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
    on_emulated = emulated(ep) if ep is not None else False
    ort_version = runtime_version(ep) if ep is not None else None
    # from the EP records: the classes of EPs this one belongs to, and every EP's predictor
    classes, predictors = registry.of_spec(ep).classes if ep is not None else (), registry.predictors()
    try:
        provider = ep.provider if ep is not None else None
        if path:
            return expectations_mod.load(path, provider=provider, alias=ep_alias, ep_package=package,
                                         emulated=on_emulated, ort_version=ort_version, classes=classes,
                                         predictors=predictors)
        return expectations_mod.for_ep(ep_alias, provider=provider, ep_package=package, emulated=on_emulated,
                                       ort_version=ort_version, classes=classes, predictors=predictors)
    except FileRefused as exc:
        raise OptionError(f"--expectations {exc}") from None
    except ValueError as exc:  # the loader names the entry and field
        raise OptionError(str(exc)) from None


# --- the run group: which operators, which seed, how many workers, how long, where ----------

def add_ops(add: AddOption) -> Any:
    """Register ``--ops a,b`` (default: every operator); ``parse_ops`` reads it."""
    return add("--ops", default=None, metavar="OP[,OP...]",
               help=f"comma-separated operators: {', '.join(names())} (default: all)")


def add_seed(add: AddOption, what: str, flag: str = "--seed") -> Any:
    """Register ``--seed`` (or the front end's spelling of it), ``what`` naming what it seeds."""
    return add(flag, type=seed, default=0, help=f"{what} (default 0)")


def add_jobs(add: AddOption, *, in_process: bool) -> Any:
    """Register ``--jobs N`` (default None: ``run_config`` takes the EP's measured default,
    ``packing.default_jobs``, else the number of cores); ``in_process``: 0 runs the cases in
    this process (``run``), else at least one worker is required (``run_config`` checks it)."""
    zero = "; 0 = in this process, no crash isolation" if in_process else ""
    return add("--jobs", type=count, default=None,
               help=f"worker processes (default: the EP's measured default where there is one, e.g. 4 for CUDA, "
                    f"whose workers share one GPU; else the number of cores{zero})")


#: What ``--timeout`` limits for the commands that run cases in workers (``run``, ``fuzz``, the plugin).
CASE_TIMEOUT = ("seconds per case before its worker is killed (a batch of cases: seconds without an answer, "
                "then it is halved)")


def add_timeout(add: AddOption, default: float | None, what: str, flag: str = "--timeout") -> Any:
    """Register ``--timeout SECONDS`` (or the front end's spelling), ``what`` saying what it limits."""
    limit = "no limit" if default is None else f"{default:g}"
    return add(flag, type=seconds, default=default, metavar="SECONDS", help=f"{what} (default {limit})")


def add_case_workers(add: AddOption, out_default: str, timeout: float, *, in_process: bool) -> Any:
    """The run folder and the workers of a command that runs cases (``run``, ``fuzz``): ``--out``
    (``{time}`` in it made a fresh folder), ``--jobs``, ``--timeout`` (``timeout`` seconds by
    default), ``--overwrite`` and ``--batch``; returns the ``--timeout`` action."""
    add_out(add, out_default, f"{TIME_FIELD} in it becomes the UTC time, with -2, -3... added if that folder exists "
            "(a fresh folder per run)")
    add_jobs(add, in_process=in_process)
    action = add_timeout(add, timeout, CASE_TIMEOUT)
    add_overwrite(add)
    add_batch_option(add)
    return action


def add_out(add: AddOption, default_text: str | None, note: str = "", *, what: str = "output folder",
            metavar: str = "DIR", **extra: Any) -> Any:
    """Register ``--out``: ``what`` it names (a folder unless said otherwise), ``default_text``
    where output goes without it (None: the flag is required), ``note`` what else the command
    makes of the value; ``extra`` (``type=Path``) goes to the registering callable."""
    default = f" (default: {default_text})" if default_text else ""
    return add("--out", default=None, required=default_text is None, metavar=metavar,
               help=f"{what}{default}" + (f"; {note}" if note else ""), **extra)


def add_overwrite(add: AddOption, what: str = "the results --out already holds") -> Any:
    """Register ``--overwrite``: replace ``what`` (without it, a folder that holds results is refused)."""
    return add("--overwrite", action="store_true", help=f"replace {what} (default: refuse, never overwrite silently)")


def add_resume(add: AddOption) -> Any:
    """Register ``--resume``: continue the run in ``--out``, skipping the cases it finished."""
    return add("--resume", action="store_true", help="continue the run in --out, skipping finished ids")


def parse_ops(text: str | None) -> list[str] | None:
    """``--ops a,b`` as a list in the order given (None: every operator); ``OptionError`` naming
    the known operators for an unknown name or a value that names none."""
    if text is None:
        return None
    ops = [o.strip() for o in text.split(",") if o.strip()]
    known = sorted(names())
    bad = [o for o in ops if o not in known]
    if bad:
        raise OptionError(f"--ops {bad[0]!r}: not an operator; choose from {', '.join(known)}")
    if not ops:
        raise OptionError(f"--ops {text!r} names no operator; choose from {', '.join(known)} "
                          "(or leave --ops out: every operator)")
    return ops


# --- from parsed options to a run's configuration ------------------------------------------

#: A front end's namespace attribute naming the option groups it declares (``declare_groups``).
GROUPS_ATTRIBUTE = "option_groups"


class FrontEndError(TypeError):
    """A front end and its declared option groups disagree (a group declared but not added, added
    but not declared, or one ``run_config`` cannot do without left out): a bug in the front end,
    never the user's, so it is not an ``OptionError``."""


@dataclass(frozen=True)
class OptionGroup:
    """One group of shared options as ``run_config`` reads it: the namespace attributes its
    ``add_*`` function sets (``dests``) and, for a front end that does not take the group, the
    values that stand for it (``absent``; None: ``run_config`` cannot do without the group)."""

    name: str
    dests: tuple[str, ...]
    absent: dict[str, Any] | None = None


#: Every option group ``run_config`` reads, once. A front end declares the ones it adds
#: (``declare_groups``); ``run_config`` reads those strictly and takes ``absent`` for the others.
OPTION_GROUPS: dict[str, OptionGroup] = {g.name: g for g in (
    OptionGroup("ep", ("ep", "ep_option", "ep_library", "ep_device")),
    OptionGroup("graph-opt", ("graph_opt",), {"graph_opt": False}),
    OptionGroup("dml-graph-fusion", ("dml_graph_fusion",), {"dml_graph_fusion": False}),
    OptionGroup("tolerances", ("tol", "tolerances", "precision_model", "strict_tolerance")),
    OptionGroup("expectations", ("expectations", "no_expectations"), {"expectations": None, "no_expectations": True}),
    OptionGroup("also-on", ("also_on",), {"also_on": "none"}),
    OptionGroup("batch", ("batch",), {"batch": None}),
    OptionGroup("ops", ("ops",), {"ops": None}),
    OptionGroup("corpus", ("corpus",), {"corpus": []}),
    OptionGroup("seed", ("seed",), {"seed": 0}),
    OptionGroup("jobs", ("jobs",), {"jobs": 1}),
    OptionGroup("timeout", ("timeout",), {"timeout": None}),
    OptionGroup("out", ("out",), {"out": None}),
    OptionGroup("overwrite", ("overwrite",), {"overwrite": False}),
    OptionGroup("resume", ("resume",), {"resume": False}),
)}


def declare_groups(target: argparse.ArgumentParser | argparse.Namespace, *names: str) -> None:
    """Say which ``OPTION_GROUPS`` a front end adds, on its parser (every namespace it parses
    carries them) or on a namespace it builds itself (the pytest plugin): ``GROUPS_ATTRIBUTE``,
    from which ``run_config`` reads exactly those. ``FrontEndError`` for a name that is not a group."""
    groups = frozenset(_known_groups(names))
    if isinstance(target, argparse.ArgumentParser):
        target.set_defaults(**{GROUPS_ATTRIBUTE: groups})
    else:
        setattr(target, GROUPS_ATTRIBUTE, groups)


def _known_groups(names: Sequence[str]) -> list[str]:
    """``names``, each an ``OPTION_GROUPS`` key; ``FrontEndError`` naming the first that is not."""
    unknown = [n for n in names if n not in OPTION_GROUPS]
    if unknown:
        raise FrontEndError(f"option group(s) {unknown} unknown; the groups: {', '.join(OPTION_GROUPS)}")
    return list(names)


def group_values(args: Any) -> dict[str, Any]:
    """Every ``OPTION_GROUPS`` destination's value: from ``args`` for the groups it declares, the
    group's ``absent`` values for the others. ``FrontEndError`` when ``args`` declares no groups,
    lacks a destination of a group it declares, holds one of a group it does not declare, or
    leaves out a group ``run_config`` cannot do without."""
    declared = getattr(args, GROUPS_ATTRIBUTE, None)
    if declared is None:
        raise FrontEndError(f"the parsed options declare no option groups ({GROUPS_ATTRIBUTE}); a front end calls "
                            "harness.cli.options.declare_groups with the groups it adds")
    declared = set(_known_groups(sorted(declared)))
    values: dict[str, Any] = {}
    for group in OPTION_GROUPS.values():
        present = [dest for dest in group.dests if hasattr(args, dest)]
        if group.name in declared:
            missing = [dest for dest in group.dests if dest not in present]
            if missing:
                raise FrontEndError(f"option group {group.name} is declared but {missing} were never added")
            values.update({dest: getattr(args, dest) for dest in group.dests})
        elif group.absent is None:
            raise FrontEndError(f"option group {group.name} is not declared, and a run cannot do without it")
        elif present:
            raise FrontEndError(f"{present} of option group {group.name} were added but the group is not declared")
        else:
            values.update(group.absent)
    return values


@dataclass(frozen=True)
class RunConfig:
    """What a front end's options say, read and checked once (``run_config``).

    A group the front end does not take stands for its ``OptionGroup.absent`` values: no
    ``--jobs`` is one worker, no ``--timeout`` no limit, no expectations group no expectations,
    no ``--corpus`` no corpus, no ``--also-on`` no re-check, no ``--batch`` the EP's default.
    """

    ep: EpSpec
    tolerances: Tolerances
    precision_model: str
    expectations: Expectations
    graph_opt: bool = False
    dml_graph_fusion: bool = False
    ops: list[str] | None = None          # None: every operator
    corpus: tuple[Any, ...] = ()          # CorpusEntry of every --corpus folder, for ``ops``
    seed: int = 0
    jobs: int = 1
    timeout: float | None = None
    out: str | None = None
    overwrite: bool = False
    resume: bool = False
    batch: int = 1                        # cases a session runs (``parse_batch``)
    also_on: EpSpec | None = None         # the EP failures are re-checked on (``parse_also_on``)
    also_on_expectations: Expectations | None = None

    @property
    def operators(self) -> list[str]:
        """``ops``, or every registered operator when ``--ops`` was left out."""
        return list(self.ops) if self.ops is not None else list(names())

    def session(self, jobs: int | None = None) -> SessionSettings:
        """Session settings for ``jobs`` concurrent workers (default ``self.jobs``): the cores
        shared among them, so that workers do not oversubscribe the machine (0: ORT's default)."""
        jobs = self.jobs if jobs is None else jobs
        threads = max(1, usable_cpus() // jobs) if jobs > 1 else 0
        return SessionSettings(graph_opt=self.graph_opt, intra_op_threads=threads,
                               dml_graph_fusion=self.dml_graph_fusion)

    def case_config(self, mapper: str = DEFAULT_MAPPER, jobs: int | None = None) -> CaseConfig:
        """What every worker gets; the element cap in force (``--limit elements``) goes with it."""
        return CaseConfig(ep=self.ep, session=self.session(jobs), tolerances=self.tolerances, mapper=mapper,
                          precision_model=self.precision_model, max_elements=limits().elements)


def run_config(args: Any, *, workers_only: bool = False) -> RunConfig:
    """The ``RunConfig`` of parsed options ``args`` (an argparse namespace, or one the pytest
    plugin builds), read group by group (``group_values``: ``FrontEndError`` where the front end
    and its declared groups disagree).

    The ``--corpus`` folders' own expectations are applied here, once, in front of the EP's, and
    in front of the ``--also-on`` EP's. ``workers_only``: ``--jobs 0`` (in this process) is
    refused. ``OptionError`` for any unusable value, naming the flag.
    """
    get = group_values(args)
    ep = parse_ep(get["ep"], get["ep_option"] or [], get["ep_library"], get["ep_device"])
    tolerances = parse_tolerances(get["tolerances"], get["tol"] or [])
    precision = parse_precision(get["precision_model"], bool(get["strict_tolerance"]))
    ops = parse_ops(get["ops"])
    jobs = get["jobs"]
    if jobs is None:  # the flag was not given
        jobs = default_jobs(ep, usable_cpus())
    if workers_only and jobs < 1:
        raise OptionError(f"--jobs {jobs}: must be >= 1 (fuzzing always isolates cases in workers)")
    corpus = tuple(_corpus(get["corpus"] or [], ops))
    no_expectations = bool(get["no_expectations"])
    expectations = corpus_expectations(get["expectations"], no_expectations, ep, corpus)
    also_on = parse_also_on(get["also_on"], ep)
    also_on_expectations = None if also_on is None else corpus_expectations(None, no_expectations, also_on, corpus)
    return RunConfig(ep=ep, tolerances=tolerances, precision_model=precision, expectations=expectations,
                     graph_opt=bool(get["graph_opt"]), dml_graph_fusion=bool(get["dml_graph_fusion"]),
                     ops=ops, corpus=corpus, seed=get["seed"], jobs=jobs, timeout=get["timeout"],
                     out=get["out"], overwrite=bool(get["overwrite"]), resume=bool(get["resume"]),
                     batch=parse_batch(get["batch"], ep), also_on=also_on, also_on_expectations=also_on_expectations)


def corpus_expectations(path: str | None, disabled: bool, ep: EpSpec, corpus: Sequence[Any]) -> Expectations:
    """``parse_expectations`` for ``ep``, with the corpus cases' own entries for it in front
    (applied here once: a run header names them once)."""
    expectations = parse_expectations(path, disabled, ep.alias, ep)
    return expectations if disabled else with_corpus(expectations, list(corpus), ep.alias)


def _corpus(folders: Sequence[str], ops: list[str] | None) -> list[Any]:
    """The corpus entries of every ``--corpus`` folder for ``ops``; ``OptionError`` naming the
    file and field of the first unreadable one."""
    entries = []
    try:
        for folder in folders:
            entries += load_corpus(folder)
    except CorpusError as exc:
        raise OptionError(str(exc)) from None
    return [e for e in entries if ops is None or getattr(spec_of_type(e.case.op), "name", None) in ops]
