"""``ep-testbed run``: the case catalog on one execution provider, one worker process per case slot.

Exit codes: 0 every case passed (or is ``known``; ``not-on-ep``/``inexpressible`` unless the
``--fail-on-*`` flags say otherwise), 1 some case failed, crashed, timed out, errored or is
``fixed``, 2 bad usage or a run that cannot start (including a failed preflight: the checks of
``ep-testbed doctor``, made before any case runs), 4 no case selected, 130 interrupted (every
finished case is in results.jsonl; ``--resume`` continues).

Where the cases and the ONNX models come from is a Python-API seam, not a flag:
``run_command(args, catalog="module:function", mapper="module:function", worker_paths=(...))``
runs another case source (with ``graphs.catalog.build_catalog``'s signature) through another
mapper (with ``graphs.to_onnx``'s contract). Workers import the mapper by that name, so its
folder goes into ``worker_paths`` (added to the workers' PYTHONPATH). The tests use it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import os
import signal
import sys
from dataclasses import replace
from typing import Any, Sequence

from ep_testbed.reference.precision import precision_model
from ep_testbed.reference.registry import names

from ..case_run import DEFAULT_MAPPER, CaseConfig, load_mapper
from ..expectations import Expectations
from ..options import (
    OptionError,
    add_ep_options,
    add_expectation_options,
    add_tolerance_options,
    count,
    parse_ep,
    parse_expectations,
    parse_precision,
    parse_tolerances,
    seconds,
    seed,
)
from .. import preflight
from ..pool import WorkerStartError
from ..providers import EpSpec, SessionSettings
from ..rerun import TIME_FIELD, file_identity, outcome_argv
from ..runner import RunError, RunOptions, RunResult, run_cases
from ..selection import parse_shard, select, shard
from ..summary import EXIT_NO_CASES, exit_code, failing_outcomes
from ..tolerances import Tolerances
from ..terminal import safe_message
from .common import UsageError, print_outcomes, render_report, usage_error

DEFAULT_CATALOG = "ep_testbed.graphs.catalog:build_catalog"


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``run`` with its groups: what to run, the EP, tolerances, how to run."""
    p = subparsers.add_parser(
        "run", help="run the case catalog on an execution provider",
        description="Run catalog cases on one ONNX Runtime execution provider, each in a worker process; prove "
                    "where every op node ran; compare with the reference; stream results to OUT/results.jsonl.",
        epilog="exit codes: 0 ok, 1 failures (fail/crash/timeout/error/fixed), 2 usage, 4 no case selected, "
               "130 interrupted (finished cases kept; rerun with --resume)")
    outcome: list[argparse.Action] = []  # the options a report's rerun line repeats (harness.rerun)
    ep_group = _recording(p.add_argument_group("execution provider").add_argument, outcome)
    add_ep_options(ep_group)
    ep_group("--dml-graph-fusion", action="store_true",
             help="DirectML: keep ORT's DML graph fusion on (default off, so the profiling trace names every node; "
                  "with fusion, placement rests on the graph assignment info)")
    outcome.append(_add_selection(p.add_argument_group("what to run")))
    outcome.append(_add_execution(p.add_argument_group("how to run")))
    add_tolerance_options(_recording(p.add_argument_group("tolerances").add_argument, outcome))
    add_expectation_options(_recording(p.add_argument_group("expectations (known divergences)").add_argument, outcome))
    p.set_defaults(func=run_command, outcome_actions=tuple(outcome))


def _recording(add: Any, into: list[argparse.Action]) -> Any:
    """``add`` (a group's ``add_argument``) that also appends each action it creates to ``into``."""
    def add_and_record(*names: str, **kwargs: Any) -> argparse.Action:
        """``add(*names, **kwargs)``, remembering the action."""
        action = add(*names, **kwargs)
        into.append(action)
        return action
    return add_and_record


def _add_selection(group: argparse._ArgumentGroup) -> argparse.Action:
    """``--ops``, ``-k``, ``--exclude``, ``--seed``, ``--shard``, ``--list``; returns ``--seed``
    (it changes a case's inputs, so a rerun line repeats it)."""
    group.add_argument("--ops", help=f"comma-separated operators: {', '.join(names())} (default: all)")
    group.add_argument("-k", dest="include", action="append", default=[], metavar="PATTERN",
                       help="only case ids containing PATTERN (or matching it, if it has * ? [); repeatable, "
                            "comma-separated alternatives")
    group.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help="drop matching case ids")
    seed_action = group.add_argument("--seed", type=seed, default=0, help="catalog seed (default 0)")
    group.add_argument("--shard", metavar="K/N",
                       help="run only the K-th of N deterministic, balanced shards (K from 1)")
    group.add_argument("--list", action="store_true", help="print the selected case ids and exit")
    return seed_action


def _add_execution(group: argparse._ArgumentGroup) -> argparse.Action:
    """Where results go, workers, time limits, resume, artifacts, exit-code policy, progress;
    returns ``--timeout`` (a case past it is a ``timeout``, so a rerun line repeats it)."""
    group.add_argument("--out", help=f"run folder (default: runs/<ep>-<UTC time>); {TIME_FIELD} in it becomes the "
                                     "UTC time, with -2, -3... added if that folder exists (a fresh folder per run)")
    group.add_argument("--jobs", type=count, default=os.cpu_count() or 1,
                       help="worker processes (default: the number of cores; 0 = in this process, no crash "
                            "isolation)")
    timeout = group.add_argument("--timeout", type=seconds, default=120.0,
                       help="seconds per case before its worker is killed (default 120)")
    group.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished ids")
    group.add_argument("--overwrite", action="store_true", help="replace existing results in --out")
    group.add_argument("--keep-worst", type=count, default=5, metavar="N",
                       help="also write case folders for the N worst passing cases (default 5)")
    group.add_argument("--fail-on-not-on-ep", action="store_true", help="count not-on-ep cases as failures")
    group.add_argument("--fail-on-inexpressible", action="store_true",
                       help="count inexpressible cases as failures")
    group.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="live progress even when stderr is not a terminal")
    group.add_argument("--no-progress", dest="progress", action="store_false", help="no live progress")
    return timeout


def run_command(args: argparse.Namespace, *, catalog: str = DEFAULT_CATALOG, mapper: str = DEFAULT_MAPPER,
                worker_paths: Sequence[str] = ()) -> int:
    """Run the selected cases of ``catalog`` through ``mapper`` on ``--ep``; return the exit code
    (module docstring). ``catalog``/``mapper`` are ``"module:function"`` names; ``worker_paths``
    are added to the workers' PYTHONPATH so that they can import the mapper."""
    try:
        ep = parse_ep(args.ep, args.ep_option)
        tolerances = parse_tolerances(args.tolerances, args.tol)
        precision = parse_precision(args.precision_model, args.strict_tolerance)
        cases = _selected_cases(args, catalog)
        if args.list:
            for case in cases:
                print(case.id)
            return 0
        if not cases:
            print("ep-testbed: no case matches the selection", file=sys.stderr)
            return EXIT_NO_CASES
        expectations = parse_expectations(args.expectations, args.no_expectations, ep.alias)
        jobs = min(args.jobs, len(cases))
        config = replace(_case_config(args, ep, tolerances, mapper, jobs), precision_model=precision)
        options = _run_options(args, ep, jobs, catalog, expectations, worker_paths)
        options.header_extra["precision_model"] = precision_model(precision).to_json()
        options.header_extra.update(rerun_args=outcome_argv(getattr(args, "outcome_actions", ()), args, tolerances),
                                    tolerances_file=file_identity(args.tolerances))
    except (OptionError, UsageError) as exc:
        return usage_error(str(exc))
    ready = preflight.check(args.ep, ep.options, config.session)
    if ready.fatal is not None:
        return usage_error(f"preflight: {ready.fatal.text}")
    options.announce = lambda todo, selected: print(
        f"ep-testbed: {todo} cases" + (f" (of {selected}; the rest finished before)" if todo < selected else "")
        + f" on {ep.provider} ({jobs} workers) -> {options.out_dir}", file=sys.stderr)
    try:
        result = _run_until_stopped(cases, config, options, expectations)
    except (RunError, WorkerStartError) as exc:
        return usage_error(str(exc))
    except OSError as exc:  # the disk filled up, or the folder went away, mid-run
        return usage_error(f"writing into {options.out_dir} failed ({exc.strerror or exc}); every case finished "
                           f"before is kept in its results.jsonl.\nNote: make room, then continue with --resume "
                           f"--out {options.out_dir}")
    return _finish(args, result, len(cases), options.out_dir)


def _selected_cases(args: argparse.Namespace, catalog: str) -> list[Any]:
    """The cases of ``--ops``, ``-k``, ``--exclude``, ``--shard`` in catalog (or shard) order;
    ``UsageError`` for a bad ``--shard``/``--jobs``/``--timeout``/``--ops`` or a missing catalog."""
    try:
        shard_spec = parse_shard(args.shard) if args.shard else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.jobs < 0:
        raise UsageError(f"--jobs {args.jobs}: must be >= 0 (0 runs the cases in this process)")
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout}: must be > 0 seconds")
    ops = _ops(args.ops)
    cases = select(load_cases(catalog, ops, args.seed), args.include, args.exclude)
    return shard(cases, *shard_spec) if shard_spec else cases


def _ops(text: str | None) -> list[str] | None:
    """``--ops a,b`` as a list (None: all operators); ``UsageError`` naming the known operators."""
    ops = [o.strip() for o in text.split(",") if o.strip()] if text else None
    known = sorted(names())
    bad = [o for o in ops or [] if o not in known]
    if bad:
        raise UsageError(f"--ops {bad[0]!r}: not an operator; choose from {', '.join(known)}")
    return ops


def load_cases(spec: str, ops: list[str] | None, seed: int) -> list[Any]:
    """The cases of the catalog function named ``"module:function"`` (build_catalog's signature);
    ``UsageError`` when it cannot be imported, raises, or returns something that is not a list
    of cases (objects with an ``id`` string, a ``desc`` and ``inputs()``)."""
    module_name, _, function = spec.partition(":")
    try:
        build = getattr(importlib.import_module(module_name), function or "build_catalog")
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"the case catalog {spec} is not available: {exc}") from exc
    try:
        cases = list(build(ops, seed=seed))
    except Exception as exc:  # a catalog is code we did not write: any failure is its message
        raise UsageError(f"the case catalog {spec} raised {type(exc).__name__}: {exc}") from None
    bad = next((c for c in cases if not (isinstance(getattr(c, "id", None), str) and hasattr(c, "desc")
                                         and callable(getattr(c, "inputs", None)))), None)
    if bad is not None:
        raise UsageError(f"the case catalog {spec} returned {type(bad).__name__} items, not cases (objects with an "
                         "id, a desc and inputs(), as graphs.catalog.Case)")
    return cases


def _case_config(args: argparse.Namespace, ep: EpSpec, tolerances: Tolerances, mapper: str, jobs: int) -> CaseConfig:
    """What every worker gets; the mapper is imported here once so a bad name fails before workers start."""
    try:
        load_mapper(mapper)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"the mapper {mapper} cannot be loaded ({exc})") from exc
    cores = os.cpu_count() or 1
    settings = SessionSettings(graph_opt=args.graph_opt, intra_op_threads=max(1, cores // jobs) if jobs > 1 else 0,
                               dml_graph_fusion=args.dml_graph_fusion)
    return CaseConfig(ep=ep, session=settings, tolerances=tolerances, mapper=mapper)


def _run_options(args: argparse.Namespace, ep: EpSpec, jobs: int, catalog: str, expectations: Expectations,
                 worker_paths: Sequence[str]) -> RunOptions:
    """The runner's options; the selection and limits also go into the results header."""
    out = fresh_out(args.out) if args.out else os.path.join("runs", f"{ep.alias}-{_utc_stamp()}")
    extra: dict[str, Any] = {
        "selection": {"ops": _ops(args.ops), "include": args.include, "exclude": args.exclude, "catalog": catalog},
        "jobs": jobs, "timeout_s": args.timeout, "expectations": expectations.source,
        "expectations_sha256": expectations.digest}
    if args.shard:
        extra["shard"] = "{}/{}".format(*parse_shard(args.shard))
    return RunOptions(out_dir=out, jobs=jobs, timeout=args.timeout, resume=args.resume, overwrite=args.overwrite,
                      keep_worst=args.keep_worst, progress=args.progress, seed=args.seed,
                      command=args.command_line, header_extra=extra, extra_paths=tuple(worker_paths))


def _utc_stamp() -> str:
    """The current UTC time as it goes into folder names, ``20261122-120000``."""
    return f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%d-%H%M%S}"


def fresh_out(out: str) -> str:
    """``--out`` with ``{time}`` replaced by the UTC time and, when that folder already exists
    (a second run in the same second), ``-2``, ``-3``... appended; any other ``--out`` as given."""
    if TIME_FIELD not in out:
        return out
    base = out.replace(TIME_FIELD, _utc_stamp())
    candidate, n = base, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _run_until_stopped(cases: list[Any], config: CaseConfig, options: RunOptions,
                       expectations: Expectations) -> RunResult:
    """``run_cases``, with SIGTERM (a cancelled CI job) stopping it like Ctrl-C: finished cases kept."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return run_cases(cases, config, options, expectations)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM handler: raise what Ctrl-C raises, so the runner's interrupt path writes the end line."""
    raise KeyboardInterrupt


def _finish(args: argparse.Namespace, result: RunResult, selected: int, out: str) -> int:
    """Print the outcome table, failures, speed and the resume hint; render the report; the exit code."""
    for note in result.notes:
        print(f"ep-testbed: note: {safe_message(note)}", file=sys.stderr)
    failing = failing_outcomes(args.fail_on_not_on_ep, args.fail_on_inexpressible)
    print_outcomes(result.lines, failing)
    print(f"\n{result.ran} cases run in {result.elapsed_s:.1f} s ({result.cases_per_second:.1f} cases/s); "
          f"results: {os.path.join(out, 'results.jsonl')}")
    if result.interrupted:
        print(f"interrupted: {len(result.lines)} of {selected} cases finished; continue with --resume --out {out}",
              file=sys.stderr)
    render_report(out)
    return exit_code(result.counts, failing, result.interrupted)
