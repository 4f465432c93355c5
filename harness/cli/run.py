"""``ep-testbed run``: the case catalog on one execution provider, one worker process per case slot.

Exit codes: 0 every case passed (or is ``known``; ``not-on-ep``/``inexpressible`` unless the
``--fail-on-*`` flags say otherwise), 1 some case failed, crashed, timed out, errored or is
``fixed``, 2 bad usage or a run that cannot start (including a failed preflight: the checks of
``ep-testbed doctor``, made before any case runs), 4 no case selected, 130 / 143 interrupted by
SIGINT / SIGTERM (every finished case is in results.jsonl; ``--resume`` continues), 70 an internal
error (``core.exit_codes``).

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

from ...graphs.catalog import TIERS
from ...reference.precision import precision_model
from ..core import exit_codes, walltime
from ..core.atomic_files import write_remedy
from ..core.expectations import Expectations
from ..core.memory import address_space_limit, available_memory, cgroup_memory, machine_memory
from ..core.rerun import TIME_FIELD, file_identity, outcome_argv
from ..core.terminal import safe, safe_message
from ..core.untrusted_files import limits, using_limits
from ..eps import preflight
from ..eps.adapters import ep_flag, ep_words
from ..run.case_run import DEFAULT_MAPPER, CaseConfig, load_mapper
from ..run.pool import DeviceLostError, WorkerStartError
from ..run.runner import RunError, RunOptions, RunResult, run_cases, start_workers
from ..run.selection import parse_shard, select, shard
from ..run.summary import exit_code, failing_outcomes, timings_table
from .common import UsageError, prepare_reports, print_outcomes, render_report, usage_error
from .options import (
    OptionError,
    RunConfig,
    add_also_on,
    add_case_workers,
    add_ep_options,
    add_expectation_options,
    add_ops,
    add_resume,
    add_seed,
    add_tolerance_options,
    count,
    declare_groups,
    run_config,
)

DEFAULT_CATALOG = "ep_testbed.graphs.catalog:build_catalog"


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``run`` with its groups: what to run, the EP, tolerances, how to run."""
    p = subparsers.add_parser(
        "run", help="run the case catalog on an execution provider",
        description="Run catalog cases on one ONNX Runtime execution provider, each in a worker process; prove "
                    "where every op node ran; compare with the reference; stream results to OUT/results.jsonl.",
        epilog="exit codes: 0 ok, 1 failures (fail/crash/timeout/error/fixed), 2 usage, 4 no case selected, "
               "70 internal error, 130/143 interrupted by SIGINT/SIGTERM (finished cases kept; rerun with --resume)")
    outcome: list[argparse.Action] = []  # the options a report's rerun line repeats (harness.core.rerun)
    ep_args = p.add_argument_group("execution provider")
    ep_group = _recording(ep_args.add_argument, outcome)
    add_ep_options(ep_group)
    ep_group("--dml-graph-fusion", action="store_true",
             help="DirectML: keep ORT's DML graph fusion on (default off, so the profiling trace names every node; "
                  "with fusion, placement rests on the graph assignment info)")
    add_also_on(ep_args.add_argument)
    outcome += _add_selection(p.add_argument_group("what to run"))
    outcome.append(_add_execution(p.add_argument_group("how to run")))
    add_tolerance_options(_recording(p.add_argument_group("tolerances").add_argument, outcome))
    add_expectation_options(_recording(p.add_argument_group("expectations (known divergences)").add_argument, outcome))
    p.set_defaults(func=run_command, outcome_actions=tuple(outcome))
    declare_groups(p, "ep", "graph-opt", "dml-graph-fusion", "also-on", "ops", "seed", "corpus", "out", "jobs",
                   "timeout", "overwrite", "batch", "resume", "tolerances", "expectations")


def _recording(add: Any, into: list[argparse.Action]) -> Any:
    """``add`` (a group's ``add_argument``) that also appends each action it creates to ``into``."""
    def add_and_record(*names: str, **kwargs: Any) -> argparse.Action:
        """``add(*names, **kwargs)``, remembering the action."""
        action = add(*names, **kwargs)
        into.append(action)
        return action
    return add_and_record


def _add_selection(group: argparse._ArgumentGroup) -> list[argparse.Action]:
    """``--ops``, ``-k``, ``--exclude``, ``--seed``, ``--tier``, ``--corpus``, ``--shard``,
    ``--list``; returns ``--seed``, ``--tier`` and ``--corpus`` (they change which cases exist
    and their inputs, so a rerun line repeats them)."""
    add_ops(group.add_argument)
    group.add_argument("-k", dest="include", action="append", default=[], metavar="PATTERN",
                       help="only case ids containing PATTERN (or matching it, if it has * ? [); repeatable, "
                            "comma-separated alternatives")
    group.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help="drop matching case ids")
    seed_action = add_seed(group.add_argument, "catalog seed")
    tier = group.add_argument("--tier", choices=TIERS, default="default",
                              help="smoke: a few cases per operator (seconds); default: the catalog; stress: detection- "
                                   "and classifier-sized and GPU-boundary cases (each states its memory need and time; "
                                   "what does not fit this machine is skipped with the reason; the run prints where "
                                   "each case's time went); stress-cpu: the stress cases a CPU machine runs in "
                                   "seconds each")
    corpus = group.add_argument("--corpus", action="append", default=[], metavar="DIR",
                                help="also run the case folders in DIR (written by `ep-testbed fuzz --corpus-out`), "
                                     "with their expectations; repeatable")
    group.add_argument("--shard", metavar="K/N",
                       help="run only the K-th of N deterministic, balanced shards (K from 1)")
    group.add_argument("--list", action="store_true", help="print the selected case ids and exit")
    return [seed_action, tier, corpus]


def _add_execution(group: argparse._ArgumentGroup) -> argparse.Action:
    """Where results go, workers, time limits, resume, artifacts, exit-code policy, progress;
    returns ``--timeout`` (a case past it is a ``timeout``, so a rerun line repeats it)."""
    timeout = add_case_workers(group.add_argument, "runs/<ep>-<UTC time>", 120.0, in_process=True)
    add_resume(group.add_argument)
    group.add_argument("--keep-worst", type=count, default=None, metavar="N",
                       help="also write case folders for the N worst passing cases (default 5; 0 with --tier stress, "
                            "whose folders hold hundreds of MB each)")
    group.add_argument("--fail-on-not-on-ep", action="store_true", help="count not-on-ep cases as failures")
    group.add_argument("--fail-on-inexpressible", action="store_true",
                       help="count inexpressible cases as failures")
    group.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="live progress even when stderr is not a terminal")
    group.add_argument("--no-progress", dest="progress", action="store_false", help="no live progress")
    return timeout


#: The element cap of ``--tier stress`` unless ``--limit elements=`` says otherwise: its cases are
#: generated here, not read from a file, and up to 2**32 - 1 elements large (UINT32 indices at
#: their largest offsets); memory is guarded by the tier's per-case memory need instead.
STRESS_ELEMENTS = 2**33


def run_command(args: argparse.Namespace, *, catalog: str = DEFAULT_CATALOG, mapper: str = DEFAULT_MAPPER,
                worker_paths: Sequence[str] = ()) -> int:
    """Run the selected cases of ``catalog`` through ``mapper`` on ``--ep``; return the exit code
    (module docstring). ``catalog``/``mapper`` are ``"module:function"`` names; ``worker_paths``
    are added to the workers' PYTHONPATH so that they can import the mapper."""
    given = [item.partition("=")[0].strip().replace("-", "_") for item in getattr(args, "limit", None) or []]
    if getattr(args, "tier", "default").startswith("stress") and "elements" not in given:
        with using_limits(replace(limits(), elements=max(limits().elements, STRESS_ELEMENTS))):
            return _run_command(args, catalog, mapper, worker_paths)
    return _run_command(args, catalog, mapper, worker_paths)


def _run_command(args: argparse.Namespace, catalog: str, mapper: str, worker_paths: Sequence[str]) -> int:
    """``run_command`` under the element cap in force."""
    try:
        settings = run_config(args)
        cases = _selected_cases(args, settings, catalog)
        walltime.mark("catalog")
        if args.list:
            for case in cases:
                print(case.id)
            return exit_codes.OK
        if not cases:
            print("ep-testbed: no case matches the selection", file=sys.stderr)
            return exit_codes.NO_CASES
        jobs = min(settings.jobs, len(cases))
        cases, skipped = _fitting(cases, jobs)
        config = _case_config(settings, mapper, jobs)
        options = _run_options(args, settings, jobs, catalog, worker_paths)
        options.also_on, options.also_on_expectations = settings.also_on, settings.also_on_expectations
        options.header_extra["also_on"] = options.also_on.provider if options.also_on else None
        options.batch = settings.batch
        options.header_extra.update(batch=options.batch)
        options.header_extra.update(skipped=skipped, precision_model=precision_model(settings.precision_model).to_json(),
                                    rerun_args=outcome_argv(getattr(args, "outcome_actions", ()), args,
                                                            settings.tolerances),
                                    tolerances_file=file_identity(args.tolerances))
    except (OptionError, UsageError) as exc:
        return usage_error(str(exc))
    if not cases:
        print("ep-testbed: no selected case fits this machine's memory", file=sys.stderr)
        return exit_codes.NO_CASES
    options.pool = start_workers(config, options, len(cases))  # they start their EP during the preflight
    try:
        return _preflight_and_run(args, settings, cases, config, options)
    finally:  # the run stops them itself; a run refused before it starts must stop them too
        if options.pool is not None:
            options.pool.close()


def _preflight_and_run(args: argparse.Namespace, settings: RunConfig, cases: list[Any], config: CaseConfig,
                       options: RunOptions) -> int:
    """``_run_command`` from the preflight on: its notes, the run, the report; the exit code."""
    ready = preflight.check(settings.ep, settings.ep.options, config.session)  # the EP run_config resolved
    for finding in ready.findings:  # what ONNX Runtime said of the EP's options, one clean line each
        if finding.level == "note":
            print(f"ep-testbed: note: {safe_message(finding.text)}", file=sys.stderr)
    if ready.fatal is not None:
        return usage_error(f"preflight: {ready.fatal.text}")
    walltime.mark("preflight")
    jobs = options.jobs
    options.announce = lambda todo, selected: print(
        f"ep-testbed: {todo} cases" + (f" (of {selected}; the rest finished before)" if todo < selected else "")
        + f" on {ep_words(settings.ep)} ({jobs} workers"
        + (f", up to {options.batch} cases a session" if options.batch > 1 else "") + f") -> {safe(options.out_dir)}",
        file=sys.stderr)
    prepare_reports()
    try:
        result = _run_until_stopped(cases, config, options, settings.expectations)
    except (RunError, WorkerStartError) as exc:
        return usage_error(str(exc))
    except DeviceLostError as exc:  # the run cannot finish: exit 2, results kept, the report of what ran
        render_report(options.out_dir)
        return usage_error(f"{exc}; resume with --resume once the device is back: the same command with "
                           f"--resume --out {safe(options.out_dir)}")
    except OSError as exc:  # the disk filled up, or the folder went away, mid-run
        return usage_error(f"writing into {safe(options.out_dir)} failed ({exc.strerror or exc}); every case finished "
                           f"before is kept in its results.jsonl.\nNote: {write_remedy(exc)}, then continue with --resume "
                           f"--out {safe(options.out_dir)}")
    return _finish(args, result, len(cases), options.out_dir)


def _selected_cases(args: argparse.Namespace, settings: RunConfig, catalog: str) -> list[Any]:
    """The cases of ``--ops``, ``--tier``, ``--corpus``, ``-k``, ``--exclude``, ``--shard`` in
    catalog (or shard) order, corpus cases after the catalog's; ``UsageError`` for a bad
    ``--shard`` or a missing catalog."""
    try:
        shard_spec = parse_shard(args.shard) if args.shard else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    catalog_cases = load_cases(catalog, settings.ops, settings.seed, args.tier)
    refuse_clashes(catalog_cases, settings.corpus)
    cases = select(catalog_cases + [e.case for e in settings.corpus], args.include, args.exclude)
    return shard(cases, *shard_spec) if shard_spec else cases


def refuse_clashes(catalog_cases: list[Any], corpus: Sequence[Any]) -> None:
    """``UsageError`` naming both when a corpus case has a catalog case's id: one id is one line
    of results.jsonl, and two cases under it would overwrite each other's result (and folder).
    Corpus ids keep their own form, ``<op>/corpus-<ep alias>-<hash>``, which no catalog id takes;
    a clash means a hand-edited ``case.json``."""
    catalog_ids, seen = {case.id for case in catalog_cases}, dict[str, str]()
    for entry in corpus:
        case_id = entry.case.id
        if case_id in catalog_ids:
            raise UsageError(f"--corpus: the case in {entry.path} has the id {case_id!r}, which the catalog case "
                             f"{case_id!r} has too; one id is one result.\nNote: give the corpus case its own id in "
                             "its case.json (corpus ids read <op>/corpus-<ep alias>-<hash>), or leave that folder "
                             "out of --corpus")
        if case_id in seen:
            raise UsageError(f"--corpus: the cases in {seen[case_id]} and {entry.path} have one id, {case_id!r}; "
                             "one id is one result.\nNote: pass one of the two folders")
        seen[case_id] = entry.path


#: Address space a worker maps before its case allocates anything (Python, NumPy, ONNX, ONNX
#: Runtime and a session: about 300 MiB measured on Linux, plus thread stacks per core): what an
#: address-space limit (``ulimit -v``) leaves a case is that limit less this.
WORKER_ADDRESS_SPACE = 512 * 2**20
#: Memory a worker holds before its case allocates anything (about 85 MiB measured on the CPU EP,
#: a forked worker; more on a GPU EP): what it takes from the memory a cgroup leaves the run.
WORKER_RESIDENT = 128 * 2**20


def _fitting(cases: list[Any], jobs: int) -> tuple[list[Any], list[dict[str, Any]]]:
    """The cases whose ``memory_mb`` tag (stress and corpus cases state one) fits this machine
    with ``jobs`` workers at once, and the others as ``{"id", "memory_mb", "reason"}`` (printed)."""
    budget_mb, why = memory_budget(jobs)
    if budget_mb is None:
        return cases, []
    kept, skipped = [], []
    for case in cases:
        need = int((getattr(case, "tags", None) or {}).get("memory_mb") or 0)
        if need <= budget_mb:
            kept.append(case)
            continue
        reason = f"needs {need} MiB; {why}"
        skipped.append({"id": case.id, "memory_mb": need, "reason": reason})
        print(f"ep-testbed: skipped {case.id}: {reason}", file=sys.stderr)
    return kept, skipped


def memory_budget(jobs: int) -> tuple[int | None, str]:
    """MiB one case may use with ``jobs`` workers at once, and how that figure came about: 80%
    of the available memory shared by the workers, and no more than an address-space limit
    (inherited by every worker) leaves one worker (``WORKER_ADDRESS_SPACE``); None when neither is known."""
    available, ceiling, cgroup = available_memory(), address_space_limit(), cgroup_memory()
    budgets: list[tuple[int, str]] = []
    if available is not None:
        # the workers themselves (and their forker) take their share before any case does
        left = max(0, available - max(1, jobs) * WORKER_RESIDENT - WORKER_RESIDENT // 2)
        share = int(left * 0.8 / max(1, jobs)) // 2**20
        # Which limit binds is decided against the machine's own figure: the cgroup's use, read
        # twice, moves between the readings, and a comparison with ``available`` (one of them)
        # could name the machine when the cgroup's limit is what decided.
        machine = machine_memory()
        where = (f"the memory cgroup's limit of {cgroup[0] // 2**20} MiB ({cgroup[1] // 2**20} MiB in use)"
                 if cgroup is not None and (machine is None or cgroup[0] - cgroup[1] <= machine) else "this machine")
        budgets.append((share, f"{available // 2**20} MiB available under {where}, 80% of what {jobs} worker(s) "
                               f"leave shared by them leaves {share} MiB"
                               + (" (Note: --jobs 1 gives one case all of it)" if jobs > 1 else "")))
    if ceiling is not None:
        left = max(0, ceiling - WORKER_ADDRESS_SPACE) // 2**20
        budgets.append((left, f"the address-space limit (ulimit -v) of {ceiling // 2**20} MiB leaves a worker "
                              f"{left} MiB"))
    return min(budgets) if budgets else (None, "")


def load_cases(spec: str, ops: list[str] | None, seed: int, tier: str = "default") -> list[Any]:
    """The cases of the catalog function named ``"module:function"`` (build_catalog's signature;
    ``tier`` is passed only when it is not ``default``, so catalogs without tiers still load);
    ``UsageError`` when it cannot be imported, raises, has no tiers, or returns something that is
    not a list of cases (objects with an ``id`` string, a ``desc`` and ``inputs()``)."""
    module_name, _, function = spec.partition(":")
    try:
        build = getattr(importlib.import_module(module_name), function or "build_catalog")
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"the case catalog {spec} is not available: {exc}") from exc
    try:
        cases = list(build(ops, seed=seed) if tier == "default" else build(ops, seed=seed, tier=tier))
    except TypeError as exc:
        if tier != "default":
            raise UsageError(f"the case catalog {spec} has no tiers ({exc}); --tier needs graphs.catalog's") from None
        raise UsageError(f"the case catalog {spec} raised TypeError: {exc}") from None
    except Exception as exc:  # a catalog is code we did not write: any failure is its message
        raise UsageError(f"the case catalog {spec} raised {type(exc).__name__}: {exc}") from None
    bad = next((c for c in cases if not (isinstance(getattr(c, "id", None), str) and hasattr(c, "desc")
                                         and callable(getattr(c, "inputs", None)))), None)
    if bad is not None:
        raise UsageError(f"the case catalog {spec} returned {type(bad).__name__} items, not cases (objects with an "
                         "id, a desc and inputs(), as graphs.catalog.Case)")
    return cases


def _case_config(settings: RunConfig, mapper: str, jobs: int) -> CaseConfig:
    """What every worker gets; the mapper is imported here once so a bad name fails before workers start."""
    try:
        load_mapper(mapper)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"the mapper {mapper} cannot be loaded ({exc})") from exc
    return settings.case_config(mapper, jobs)


def _run_options(args: argparse.Namespace, settings: RunConfig, jobs: int, catalog: str,
                 worker_paths: Sequence[str]) -> RunOptions:
    """The runner's options; the selection and limits also go into the results header."""
    # the default is a fresh folder per run, as ``{time}`` makes one (two runs in one second included)
    out = fresh_out(settings.out or os.path.join("runs", f"{ep_flag(settings.ep)}-{TIME_FIELD}"))
    expectations = settings.expectations
    extra: dict[str, Any] = {
        "selection": {"ops": settings.ops, "include": args.include, "exclude": args.exclude, "catalog": catalog,
                      "tier": args.tier, "corpus": [os.path.abspath(c) for c in args.corpus]},
        "jobs": jobs, "timeout_s": settings.timeout, "expectations": expectations.source,
        "expectations_sha256": expectations.digest}
    if args.shard:
        extra["shard"] = "{}/{}".format(*parse_shard(args.shard))
    return RunOptions(out_dir=out, jobs=jobs, timeout=settings.timeout or 120.0, resume=settings.resume,
                      overwrite=settings.overwrite, keep_worst=_keep_worst(args), progress=args.progress,
                      seed=settings.seed, command=args.command_line, header_extra=extra,
                      extra_paths=tuple(worker_paths))


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


def _keep_worst(args: argparse.Namespace) -> int:
    """``--keep-worst``, or its default: 5, and 0 for the stress tier (its case folders are large)."""
    if args.keep_worst is not None:
        return args.keep_worst
    return 0 if args.tier.startswith("stress") else 5


def _run_until_stopped(cases: list[Any], config: CaseConfig, options: RunOptions,
                       expectations: Expectations) -> RunResult:
    """``run_cases``, with SIGTERM (a cancelled CI job) stopping it like Ctrl-C: finished cases
    kept, exit 143 (``core.exit_codes.Terminated``)."""
    previous = exit_codes.install_sigterm()
    try:
        return run_cases(cases, config, options, expectations)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _finish(args: argparse.Namespace, result: RunResult, selected: int, out: str) -> int:
    """Print (for the stress tier, first where each case's time went: ``summary.timings_table``)
    the outcome table, failures and the resume hint; render the report; last, the
    closing line: the cases run now per second of the command's wall time, and where that time
    went (``core.walltime``); the exit code."""
    for note in result.notes:
        print(f"ep-testbed: note: {safe_message(note)}", file=sys.stderr)
    failing = failing_outcomes(args.fail_on_not_on_ep, args.fail_on_inexpressible)
    if getattr(args, "tier", "default").startswith("stress"):  # large cases: where each one's time went
        print(timings_table(result.lines) + "\n")
    print_outcomes(result.lines, failing, result.header)
    print(f"\nresults: {safe(os.path.join(out, 'results.jsonl'))}")
    if result.interrupted:
        print(f"interrupted: {len(result.lines)} of {selected} cases finished; continue with --resume --out {safe(out)}",
              file=sys.stderr)
    code = exit_codes.with_artifacts(exit_code(result.counts, failing, result.interrupted), render_report(out))
    print(walltime.closing_line(result.ran, "cases", rates={"cases": result.ran}))
    return code
