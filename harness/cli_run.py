"""``ep-testbed run`` and ``ep-testbed merge``: the harness's subcommands.

Exit codes: 0 every case passed (or is ``known``; ``not-on-ep``/``inexpressible`` unless the
``--fail-on-*`` flags say otherwise), 1 some case failed, crashed, timed out, errored or is
``fixed``, 2 bad usage or a run that cannot start, 4 no case selected, 130 interrupted (every
finished case is in results.jsonl; ``--resume`` continues).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shlex
import signal
import sys
from typing import Any

from .summary import EXIT_NO_CASES, EXIT_USAGE

DEFAULT_CATALOG = "ep_testbed.graphs.catalog:build_catalog"


def add_run(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="run the case catalog on an execution provider",
        description="Run catalog cases on one ONNX Runtime execution provider, each in a worker process; prove "
                    "where every op node ran; compare with the reference; stream results to OUT/results.jsonl.",
        epilog="exit codes: 0 ok, 1 failures (fail/crash/timeout/error/fixed), 2 usage, 4 no case selected, "
               "130 interrupted (finished cases kept; rerun with --resume)")
    sel = p.add_argument_group("what to run")
    sel.add_argument("--ep", default="cpu",
                     help="execution provider: cpu, dml, openvino, cuda (aliases) or a full provider name "
                          "(default: cpu)")
    sel.add_argument("--ep-option", action="append", metavar="KEY=VALUE", default=[],
                     help="provider option, repeatable (e.g. device_id=1)")
    sel.add_argument("--ops", help="comma-separated operators: roi_pooling, max_pooling2, roi_align, roi_align1 "
                                   "(default: all)")
    sel.add_argument("-k", dest="include", action="append", default=[], metavar="PATTERN",
                     help="only case ids containing PATTERN (or matching it, if it has * ? [); repeatable, "
                          "comma-separated alternatives")
    sel.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help="drop matching case ids")
    sel.add_argument("--seed", type=int, default=0, help="catalog seed (default 0)")
    sel.add_argument("--shard", metavar="K/N", help="run only the K-th of N deterministic, balanced shards (K from 1)")
    sel.add_argument("--list", action="store_true", help="print the selected case ids and exit")
    run = p.add_argument_group("how to run")
    run.add_argument("--out", help="run folder (default: runs/<ep>-<UTC time>)")
    run.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                     help="worker processes (default: the number of cores; 0 = in this process, no crash isolation)")
    run.add_argument("--timeout", type=float, default=120.0, help="seconds per case before its worker is killed "
                                                                   "(default 120)")
    run.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished ids")
    run.add_argument("--overwrite", action="store_true", help="replace existing results in --out")
    run.add_argument("--graph-opt", action="store_true",
                     help="enable ONNX Runtime graph optimizations (default off, so no fusion hides the node)")
    run.add_argument("--tol", action="append", default=[], metavar="DTYPE:atol=X,rtol=Y,ulp=N",
                     help="override a dtype's tolerance, e.g. fp16:atol=1e-2,ulp=4 (repeatable)")
    run.add_argument("--tolerances", metavar="JSON", help="tolerance table file (applied before --tol)")
    run.add_argument("--expectations", metavar="JSON",
                     help="expectations file (default: harness/expectations/<ep alias>.json)")
    run.add_argument("--no-expectations", action="store_true", help="ignore known divergences")
    run.add_argument("--keep-worst", type=int, default=5, metavar="N",
                     help="also write case folders for the N worst passing cases (default 5)")
    run.add_argument("--fail-on-not-on-ep", action="store_true", help="count not-on-ep cases as failures")
    run.add_argument("--fail-on-inexpressible", action="store_true", help="count inexpressible cases as failures")
    run.add_argument("--progress", dest="progress", action="store_true", default=None,
                     help="live progress even when stderr is not a terminal")
    run.add_argument("--no-progress", dest="progress", action="store_false")
    adv = p.add_argument_group("advanced")
    adv.add_argument("--catalog", default=DEFAULT_CATALOG, metavar="MODULE:FUNCTION",
                     help=f"case source with build_catalog's signature (default {DEFAULT_CATALOG})")
    adv.add_argument("--mapper", default=None, metavar="MODULE:FUNCTION",
                     help="desc -> ONNX mapper with graphs.to_onnx's contract (default graphs:to_onnx)")
    p.set_defaults(func=run_command)


def add_merge(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("merge", help="join shard runs into one run",
                              description="Join the results of runs (e.g. the shards of --shard K/N) into one run "
                                          "folder that reports exactly as an unsharded run.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders to merge")
    p.add_argument("--out", required=True, help="new run folder")
    p.add_argument("--allow-partial", action="store_true", help="merge even if some shard of K/N is missing")
    p.add_argument("--fail-on-not-on-ep", action="store_true")
    p.add_argument("--fail-on-inexpressible", action="store_true")
    p.set_defaults(func=merge_command)


def _error(message: str) -> int:
    print(f"ep-testbed: {message}", file=sys.stderr)
    return EXIT_USAGE


def load_cases(spec: str, ops: list[str] | None, seed: int) -> list[Any]:
    import importlib

    module_name, _, function = spec.partition(":")
    try:
        build = getattr(importlib.import_module(module_name), function or "build_catalog")
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(f"the case catalog {spec} is not available: {exc}") from exc
    return list(build(ops, seed=seed))


def run_command(args: argparse.Namespace) -> int:
    from ep_testbed.reference.registry import names

    from . import expectations as expectations_mod
    from .case_run import DEFAULT_MAPPER, CaseConfig, load_mapper
    from .providers import EpNotAvailable, SessionSettings, parse_provider_options, resolve_ep
    from .pool import WorkerStartError
    from .runner import RunError, RunOptions, run_cases
    from .selection import parse_shard, select, shard
    from .summary import exit_code, failing_outcomes, problems, table
    from .tolerances import load_tolerances

    try:
        ep = resolve_ep(args.ep, parse_provider_options(args.ep_option))
        tolerances = load_tolerances(args.tolerances, args.tol)
        shard_spec = parse_shard(args.shard) if args.shard else None
    except (EpNotAvailable, ValueError, OSError) as exc:
        return _error(str(exc))
    if args.jobs < 0:
        return _error(f"--jobs {args.jobs}: must be >= 0")
    if args.timeout <= 0:
        return _error(f"--timeout {args.timeout}: must be > 0")
    ops = [o.strip() for o in args.ops.split(",") if o.strip()] if args.ops else None
    known_ops = sorted(names())
    bad = [o for o in ops or [] if o not in known_ops]
    if bad:
        return _error(f"--ops {bad[0]!r}: not an operator; choose from {', '.join(known_ops)}")

    try:
        cases = load_cases(args.catalog, ops, args.seed)
    except RuntimeError as exc:
        return _error(str(exc))
    cases = select(cases, args.include, args.exclude)
    if shard_spec:
        cases = shard(cases, *shard_spec)
    if args.list:
        for case in cases:
            print(case.id)
        return 0
    if not cases:
        print("ep-testbed: no case matches the selection", file=sys.stderr)
        return EXIT_NO_CASES

    if args.no_expectations:
        expectations = expectations_mod.Expectations()
    else:
        try:
            expectations = (expectations_mod.load(args.expectations) if args.expectations
                            else expectations_mod.for_ep(ep.alias))
        except (OSError, ValueError) as exc:
            return _error(str(exc))

    jobs = min(args.jobs, len(cases))
    cores = os.cpu_count() or 1
    settings = SessionSettings(graph_opt=args.graph_opt,
                               intra_op_threads=max(1, cores // jobs) if jobs > 1 else 0)
    config = CaseConfig(ep=ep, session=settings, tolerances=tolerances, mapper=args.mapper or DEFAULT_MAPPER)
    try:
        load_mapper(config.mapper)
    except (ImportError, AttributeError) as exc:
        return _error(f"--mapper {config.mapper}: cannot load it ({exc})")
    out = args.out or os.path.join("runs", f"{ep.alias}-{_dt.datetime.now(_dt.timezone.utc):%Y%m%d-%H%M%S}")
    command = "ep-testbed " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "ep-testbed run"
    extra = {"selection": {"ops": ops, "include": args.include, "exclude": args.exclude,
                           "catalog": args.catalog}, "jobs": jobs, "timeout_s": args.timeout,
             "expectations": expectations.source}
    if shard_spec:
        extra["shard"] = f"{shard_spec[0]}/{shard_spec[1]}"
    options = RunOptions(out_dir=out, jobs=jobs, timeout=args.timeout, resume=args.resume, overwrite=args.overwrite,
                         keep_worst=args.keep_worst, progress=args.progress, seed=args.seed, command=command,
                         header_extra=extra)
    print(f"ep-testbed: {len(cases)} cases on {ep.provider} ({jobs} workers) -> {out}", file=sys.stderr)
    previous = signal.signal(signal.SIGTERM, _terminate)  # a cancelled CI job stops like Ctrl-C
    try:
        result = run_cases(cases, config, options, expectations)
    except (RunError, WorkerStartError) as exc:
        return _error(str(exc))
    finally:
        signal.signal(signal.SIGTERM, previous)

    failing = failing_outcomes(args.fail_on_not_on_ep, args.fail_on_inexpressible)
    print(table(result.lines))
    listing = problems(result.lines, failing)
    if listing:
        print("\nfailures:\n" + listing)
    print(f"\n{result.ran} cases run in {result.elapsed_s:.1f} s ({result.cases_per_second:.1f} cases/s); "
          f"results: {os.path.join(out, 'results.jsonl')}")
    if result.interrupted:
        print(f"interrupted: {len(result.lines)} of {len(cases)} cases finished; continue with --resume --out {out}",
              file=sys.stderr)
    _render_report(out)
    return exit_code(result.counts, failing, result.interrupted)


def merge_command(args: argparse.Namespace) -> int:
    from .merge import MergeError, merge_runs
    from .results import count_outcomes
    from .summary import exit_code, failing_outcomes, problems, table

    command = "ep-testbed " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "ep-testbed merge"
    try:
        _, lines = merge_runs(args.runs, args.out, args.allow_partial, command)
    except MergeError as exc:
        return _error(str(exc))
    failing = failing_outcomes(args.fail_on_not_on_ep, args.fail_on_inexpressible)
    print(table(lines))
    listing = problems(lines, failing)
    if listing:
        print("\nfailures:\n" + listing)
    print(f"\nmerged {len(args.runs)} runs, {len(lines)} cases -> {os.path.join(args.out, 'results.jsonl')}")
    _render_report(args.out)
    return exit_code(count_outcomes(lines), failing)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _render_report(run_dir: str) -> None:
    """Write report.html, junit.xml and summary.json into the run folder (``reports.render_all``)."""
    from ep_testbed.reports import render_all

    try:
        for kind, path in render_all(run_dir).items():
            print(f"{kind}: {path}")
    except Exception as exc:  # a report bug must not turn a finished run into a failure
        print(f"ep-testbed: rendering the report failed: {type(exc).__name__}: {exc}", file=sys.stderr)
