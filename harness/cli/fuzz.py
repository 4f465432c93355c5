"""``ep-testbed fuzz``: time-boxed fuzzing of an execution provider, every failure shrunk.

``ep-testbed fuzz --ep X --budget SECONDS --out DIR`` draws cases over each operator's whole
field space (``graphs/cases/<op>.py``: ``fuzz_strategy``), runs them exactly as ``run`` does
(worker processes, placement proof, tolerances, expectations) into ``DIR/results.jsonl``, then
shrinks the first failure of each kind to a minimal case (``DIR/shrinks.jsonl``; the report
shows both side by side) and, with ``--corpus-out``, writes the minimal cases as corpus folders
that ``ep-testbed run --corpus`` runs next to the catalog. ``--replay ID`` (repeatable) reruns
fuzzed cases from their ids alone, and shrinks them when they fail. ``harness.fuzz`` holds the
engine.

Exit codes: 0 no failure (``known`` ones allowed), 1 some case failed, crashed, timed out,
errored or is ``fixed``, 2 bad usage, 130 interrupted (finished cases kept).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.core.untrusted_files import limits
from ep_testbed.harness.eps.providers import SessionSettings
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.pool import WorkerStartError
from ep_testbed.harness.run.runner import RunError
from ep_testbed.harness.run.summary import exit_code, failing_outcomes
from ep_testbed.reference.registry import names

from .common import UsageError, print_outcomes, render_report, usage_error
from .options import (
    OptionError,
    add_batch_option,
    add_ep_options,
    add_expectation_options,
    add_tolerance_options,
    count,
    parse_batch,
    parse_ep_args,
    parse_expectations,
    parse_precision,
    parse_tolerances,
    seconds,
    seed,
)

HYPOTHESIS_HINT = "Note: ep-testbed fuzz draws its cases with Hypothesis: pip install 'ep-testbed[fuzz]'"


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``fuzz`` with its groups: what to fuzz, the EP, shrinking, how to run, tolerances."""
    p = subparsers.add_parser(
        "fuzz", help="fuzz an execution provider for a time budget and shrink every failure",
        description="Draw cases over every field of each operator (all data types, 4-D/5-D, padding and "
                    "window relations, region placements, extreme scales and values), run them like `run` does "
                    "(worker processes, placement proof, tolerances, expectations) into OUT/results.jsonl, then "
                    "shrink each kind of failure to a minimal case (OUT/shrinks.jsonl, side by side in "
                    "OUT/report.html). A case id such as max_pooling2/fuzz-s0-b3-017 regenerates its case: --replay.",
        epilog="exit codes: 0 no failure, 1 failures (fail/crash/timeout/error/fixed), 2 usage, 130 interrupted")
    add_ep_options(p.add_argument_group("execution provider").add_argument)
    what = p.add_argument_group("what to fuzz")
    what.add_argument("--budget", type=seconds, default=60.0, metavar="SECONDS",
                      help="seconds of drawing and running cases (default 60); shrinking follows")
    what.add_argument("--ops", help=f"comma-separated operators: {', '.join(names())} (default: all)")
    what.add_argument("--seed", type=seed, default=0, help="run seed: the same seed draws the same cases (default 0)")
    what.add_argument("--size", choices=("default", "large"), default="default",
                      help="size distribution: default (at most 4096 elements a tensor) or large (GPU dispatch "
                           "sizes, up to 2^21)")
    what.add_argument("--replay", action="append", default=[], metavar="CASE_ID",
                      help="run only this fuzzed case, redrawn from its id (and shrink it if it fails); repeatable")
    _add_shrinking(p.add_argument_group("shrinking and the corpus"))
    _add_execution(p.add_argument_group("how to run"))
    add_tolerance_options(p.add_argument_group("tolerances").add_argument)
    add_expectation_options(p.add_argument_group("expectations (known divergences)").add_argument)
    p.set_defaults(func=fuzz_command)


def _add_shrinking(group: argparse._ArgumentGroup) -> None:
    """``--shrink``, ``--shrink-known``, ``--shrink-time``, ``--max-shrinks``, ``--corpus-out``."""
    group.add_argument("--shrink", choices=("first", "all", "none"), default="first",
                       help="which failures to shrink: the first of each kind (default), all, none")
    group.add_argument("--shrink-known", action="store_true", help="also shrink failures an expectation knows")
    group.add_argument("--shrink-time", type=seconds, default=30.0, metavar="SECONDS",
                       help="seconds per shrink (default 30)")
    group.add_argument("--max-shrinks", type=count, default=20, metavar="N", help="shrink at most N failures (default 20)")
    group.add_argument("--corpus-out", metavar="DIR", help="write every minimal case as a corpus folder here")


def _add_execution(group: argparse._ArgumentGroup) -> None:
    """``--out``, ``--jobs``, ``--timeout``, ``--overwrite``, progress."""
    group.add_argument("--out", help="run folder (default: runs/fuzz-<ep>-s<seed>)")
    group.add_argument("--jobs", type=count, default=os.cpu_count() or 1, help="worker processes (default: cores)")
    group.add_argument("--timeout", type=seconds, default=30.0, help="seconds per case before its worker is killed "
                                                                  "(default 30; a batch of cases: seconds without "
                                                                  "an answer, then it is halved)")
    add_batch_option(group.add_argument)
    group.add_argument("--overwrite", action="store_true", help="replace existing results in --out")
    group.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="live progress even when stderr is not a terminal")
    group.add_argument("--no-progress", dest="progress", action="store_false", help="no live progress")


def fuzz_command(args: argparse.Namespace) -> int:
    """Fuzz ``--ep`` (or replay ``--replay`` cases); return the exit code (module docstring)."""
    try:
        ep = parse_ep_args(args)
        tolerances = parse_tolerances(args.tolerances, args.tol)
        precision = parse_precision(args.precision_model, args.strict_tolerance)
        expectations = parse_expectations(args.expectations, args.no_expectations, ep.alias, ep)
        ops = _ops(args.ops)
        _check_numbers(args)
        _require_hypothesis()
    except (OptionError, UsageError) as exc:
        return usage_error(str(exc))
    cores = os.cpu_count() or 1
    settings = SessionSettings(graph_opt=args.graph_opt, intra_op_threads=max(1, cores // args.jobs))
    config = CaseConfig(ep=ep, session=settings, tolerances=tolerances, precision_model=precision,
                        max_elements=limits().elements)
    out = args.out or os.path.join("runs", f"fuzz-{ep.alias}-s{args.seed}")
    return _fuzz(args, config, expectations, ops, out)


def _fuzz(args: argparse.Namespace, config: CaseConfig, expectations: Any, ops: list[str], out: str) -> int:
    """The fuzz run itself, its summary and report."""
    from ep_testbed.harness.fuzz.draw import parse_id
    from ep_testbed.harness.fuzz.draw import replay as redraw
    from ep_testbed.harness.fuzz.engine import FuzzOptions, FuzzUsageError, fuzz

    try:
        replay = [redraw(case_id).id for case_id in args.replay]  # refuses a bad id before anything runs
    except ValueError as exc:
        return usage_error(f"--replay: {exc}")
    run_seed = parse_id(replay[0]).seed if replay else args.seed
    options = FuzzOptions(out_dir=out, ops=ops, budget_s=args.budget, seed=run_seed, size=args.size, jobs=args.jobs,
                          timeout=args.timeout, shrink=args.shrink, shrink_known=args.shrink_known,
                          shrink_time_s=args.shrink_time, max_shrinks=args.max_shrinks, corpus_out=args.corpus_out,
                          overwrite=args.overwrite, progress=args.progress, command=args.command_line, replay=replay,
                          batch=parse_batch(args.batch, config.ep))
    what = f"replaying {len(replay)} case(s)" if replay else f"fuzzing {', '.join(ops)} for {args.budget:g} s"
    sharing = f", up to {options.batch} cases a session" if options.batch > 1 else ""
    print(f"ep-testbed: {what} on {config.ep.provider} ({args.jobs} workers{sharing}) -> {out}", file=sys.stderr)
    try:
        result = fuzz(config, options, expectations)
    except (RunError, WorkerStartError, FuzzUsageError) as exc:
        return usage_error(str(exc))
    _, lines, _ = read_run(out)
    failing = failing_outcomes(False, False)
    print_outcomes(lines, failing)
    print(f"\n{result.ran} fuzzed cases in {result.generation_s:.1f} s ({result.cases_per_second:.1f} cases/s); "
          f"{len(result.findings)} failing in {len(result.signatures)} kind(s)")
    for record in result.shrinks:
        print(f"shrunk {record['original']} ({record['original_elements']} elements) -> {record['minimal']} "
              f"({record['minimal_elements']} elements, {record['reduction']}x smaller) in {record['seconds']:.1f} s"
              + ("" if record["same_failure"] else " [the minimal case's own run did not fail the same way]")
              + (f"; corpus: {record['corpus']}" if record["corpus"] else ""))
    print(f"results: {os.path.join(out, 'results.jsonl')}")
    if result.interrupted:
        print("interrupted: finished cases are in results.jsonl", file=sys.stderr)
    render_report(out)
    return exit_code(result.counts, failing, result.interrupted)


def _ops(text: str | None) -> list[str]:
    """``--ops a,b`` as a list (every operator when absent); ``UsageError`` naming the known ones."""
    ops = [o.strip() for o in text.split(",") if o.strip()] if text else list(names())
    bad = [o for o in ops if o not in names()]
    if bad or not ops:
        raise UsageError(f"--ops {bad[0] if bad else text!r}: not an operator; choose from {', '.join(names())}")
    return ops


def _check_numbers(args: argparse.Namespace) -> None:
    """``UsageError`` for a budget, time, count or job number out of range."""
    checks = [("--budget", args.budget, args.budget > 0, "must be > 0 seconds"),
              ("--shrink-time", args.shrink_time, args.shrink_time > 0, "must be > 0 seconds"),
              ("--timeout", args.timeout, args.timeout > 0, "must be > 0 seconds"),
              ("--jobs", args.jobs, args.jobs >= 1, "must be >= 1 (fuzzing always isolates cases in workers)"),
              ("--max-shrinks", args.max_shrinks, args.max_shrinks >= 0, "must be >= 0"),
              ("--seed", args.seed, args.seed >= 0, "must be >= 0")]
    for flag, value, ok, allowed in checks:
        if not ok:
            raise UsageError(f"{flag} {value}: {allowed}")


def _require_hypothesis() -> None:
    """``UsageError`` with the install hint when Hypothesis is missing."""
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise UsageError(f"Hypothesis is not installed. {HYPOTHESIS_HINT}") from None
