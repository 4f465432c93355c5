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
errored or is ``fixed``, 2 bad usage, 130 / 143 interrupted by SIGINT / SIGTERM
(finished cases kept), 70 an internal error (``core.exit_codes``).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..core import exit_codes, walltime
from ..core.atomic_files import write_remedy
from ..core.rerun import file_identity, outcome_argv
from ..core.results import read_run
from ..core.terminal import safe
from ..eps.adapters import ep_flag, ep_words
from ..run.pool import WorkerStartError
from ..run.runner import RunError
from ..run.summary import exit_code, failing_outcomes
from .common import UsageError, prepare_reports, print_outcomes, render_report, usage_error
from .options import (
    OptionError,
    RunConfig,
    add_also_on,
    add_case_workers,
    add_ep_options,
    add_expectation_options,
    add_ops,
    add_seed,
    add_tolerance_options,
    count,
    declare_groups,
    positive_count,
    run_config,
    seconds,
)
from .run import _recording, fresh_out

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
        epilog="exit codes: 0 no failure, 1 failures (fail/crash/timeout/error/fixed), 2 usage, 70 internal error, "
               "130/143 interrupted by SIGINT/SIGTERM")
    outcome: list[argparse.Action] = []  # the options a report's rerun line repeats (harness.core.rerun)
    ep = p.add_argument_group("execution provider")
    add_ep_options(_recording(ep.add_argument, outcome))
    add_also_on(ep.add_argument)
    what = p.add_argument_group("what to fuzz")
    what.add_argument("--budget", type=seconds, default=60.0, metavar="SECONDS",
                      help="seconds the whole command may take, drawing and running cases and then shrinking what "
                           "failed (default 60; shrinking gets what drawing left, at least half once something "
                           "failed); a case in flight and the report finish after it")
    what.add_argument("--max-cases", type=positive_count, default=None, metavar="N",
                      help="stop drawing after N cases (the first N the seed draws; default: draw until the "
                           "budget's drawing share is spent); --budget still bounds the command")
    add_ops(what.add_argument)
    outcome.append(add_seed(what.add_argument, "run seed: the same seed draws the same cases"))
    what.add_argument("--size", choices=("default", "large"), default="default",
                      help="size distribution: default (at most 4096 elements a tensor) or large (GPU dispatch "
                           "sizes, up to 2^21)")
    what.add_argument("--replay", action="append", default=[], metavar="CASE_ID",
                      help="run only this fuzzed case, redrawn from its id (and shrink it if it fails); repeatable")
    _add_shrinking(p.add_argument_group("shrinking and the corpus"))
    outcome.append(_add_execution(p.add_argument_group("how to run")))
    add_tolerance_options(_recording(p.add_argument_group("tolerances").add_argument, outcome))
    add_expectation_options(_recording(p.add_argument_group("expectations (known divergences)").add_argument, outcome))
    p.set_defaults(func=fuzz_command, outcome_actions=tuple(outcome))
    declare_groups(p, "ep", "graph-opt", "also-on", "ops", "seed", "out", "jobs", "timeout", "overwrite", "batch",
                   "tolerances", "expectations")


def _add_shrinking(group: argparse._ArgumentGroup) -> None:
    """``--shrink``, ``--shrink-known``, ``--shrink-time``, ``--max-shrinks``, ``--corpus-out``."""
    group.add_argument("--shrink", choices=("first", "all", "none"), default="first",
                       help="which failures to shrink: the first of each kind (default), all, none")
    group.add_argument("--shrink-known", action="store_true", help="also shrink failures an expectation knows")
    group.add_argument("--shrink-time", type=seconds, default=30.0, metavar="SECONDS",
                       help="seconds per shrink (default 30)")
    group.add_argument("--max-shrinks", type=count, default=20, metavar="N", help="shrink at most N failures (default 20)")
    group.add_argument("--corpus-out", metavar="DIR", help="write every minimal case as a corpus folder here")


def _add_execution(group: argparse._ArgumentGroup) -> argparse.Action:
    """``--out``, ``--jobs``, ``--timeout``, ``--overwrite``, progress; returns ``--timeout`` (a
    case past it is a ``timeout``, so a rerun line repeats it)."""
    timeout = add_case_workers(group.add_argument, "runs/fuzz-<ep>-s<seed>", 30.0, in_process=False)
    group.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="live progress even when stderr is not a terminal")
    group.add_argument("--no-progress", dest="progress", action="store_false", help="no live progress")
    return timeout


def fuzz_command(args: argparse.Namespace) -> int:
    """Fuzz ``--ep`` (or replay ``--replay`` cases); return the exit code (module docstring)."""
    try:
        settings = run_config(args, workers_only=True)
        _require_hypothesis()
    except (OptionError, UsageError) as exc:
        return usage_error(str(exc))
    out = fresh_out(settings.out) if settings.out else os.path.join("runs", f"fuzz-{ep_flag(settings.ep)}-s{settings.seed}")
    return _fuzz(args, settings, out)


def _fuzz(args: argparse.Namespace, settings: RunConfig, out: str) -> int:
    """The fuzz run itself, its summary and report."""
    from ..fuzz.draw import parse_id
    from ..fuzz.draw import replay as redraw
    from ..fuzz.engine import FuzzOptions, FuzzUsageError, fuzz
    from ..fuzz.shrink import SMALL_ELEMENTS

    try:
        replay = [redraw(case_id).id for case_id in args.replay]  # refuses a bad id before anything runs
    except ValueError as exc:
        return usage_error(f"--replay: {exc}")
    run_seed = parse_id(replay[0]).seed if replay else settings.seed
    ops = settings.operators
    also_on, also_on_expectations = settings.also_on, settings.also_on_expectations
    options = FuzzOptions(out_dir=out, ops=ops, budget_s=args.budget, seed=run_seed, size=args.size,
                          jobs=settings.jobs, timeout=settings.timeout or 30.0, shrink=args.shrink,
                          shrink_known=args.shrink_known, shrink_time_s=args.shrink_time, max_shrinks=args.max_shrinks,
                          corpus_out=args.corpus_out, overwrite=settings.overwrite, progress=args.progress,
                          command=args.command_line, replay=replay, max_cases=args.max_cases,
                          batch=settings.batch,
                          also_on=also_on, also_on_expectations=also_on_expectations,
                          header_extra={"also_on": also_on.provider if also_on else None,
                                        "rerun_args": outcome_argv(getattr(args, "outcome_actions", ()), args,
                                                                   settings.tolerances),
                                        "tolerances_file": file_identity(getattr(args, "tolerances", None))})
    what = f"replaying {len(replay)} case(s)" if replay else f"fuzzing {', '.join(ops)} for {args.budget:g} s"
    if args.max_cases is not None and not replay:
        what += f" or {args.max_cases} case(s), whichever ends first"
    sharing = f", up to {options.batch} cases a session" if options.batch > 1 else ""
    print(f"ep-testbed: {what} on {ep_words(settings.ep)} ({settings.jobs} workers{sharing}) -> {safe(out)}",
          file=sys.stderr)
    walltime.mark("setup")
    prepare_reports()
    try:
        result = fuzz(settings.case_config(), options, settings.expectations)
    except (RunError, WorkerStartError, FuzzUsageError) as exc:
        return usage_error(str(exc))
    except OSError as exc:  # the disk filled up, or the folder went away, mid-run
        return usage_error(f"writing into {safe(out)} failed ({exc.strerror or exc}); every case finished before is kept "
                           f"in its results.jsonl.\nNote: {write_remedy(exc)}, then render what is there with: ep-testbed "
                           f"report {safe(out)}")
    header, lines, _ = read_run(out)
    failing = failing_outcomes(False, False)
    print_outcomes(lines, failing, header)
    print(f"\n{len(result.findings)} of {result.ran} fuzzed cases failing, in {len(result.signatures)} kind(s)")
    per_op = result.cases_by_op(() if replay else ops)  # a replay announces its cases, not operators
    print("cases per operator: " + (", ".join(f"{op} {n}" for op, n in per_op.items()) or "none"))
    for record in result.shrinks:
        print(f"shrunk {record['original']} ({record['original_elements']} elements) -> {record['minimal']} "
              f"({record['minimal_elements']} elements, {record['reduction']}x smaller) in {record['seconds']:.1f} s"
              + ("" if record["same_failure"] else " [the minimal case's own run did not fail the same way]")
              + (f"; corpus: {record['corpus']}" if record["corpus"] else ""))
        if record["minimal_elements"] > SMALL_ELEMENTS:  # say why it is not smaller (shrink.SMALL_ELEMENTS)
            print("  not smaller: " + "; ".join(record["notes"] or ["no reason recorded"]))
    if result.not_shrunk:
        print(f"not shrunk, the --budget of {args.budget:g} s was spent: {', '.join(result.not_shrunk)} "
              "(a larger --budget shrinks them; `ep-testbed fuzz --replay ID` shrinks one)")
    print(f"results: {safe(os.path.join(out, 'results.jsonl'))}")
    if result.interrupted and result.device_lost is None:
        print("interrupted: finished cases are in results.jsonl", file=sys.stderr)
    artifacts = render_report(out)
    print(walltime.closing_line(result.ran, "fuzzed cases", rates={"fuzzing": result.ran}))
    if result.device_lost is not None:  # the run could not go on: exit 2, whatever failed before
        return usage_error(f"{result.device_lost}; fuzz again once the device is back (`ep-testbed fuzz --replay ID` "
                           "reruns one case)")
    return exit_codes.with_artifacts(exit_code(result.counts, failing, result.interrupted), artifacts)


def _require_hypothesis() -> None:
    """``UsageError`` with the install hint when Hypothesis is missing."""
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise UsageError(f"Hypothesis is not installed. {HYPOTHESIS_HINT}") from None
