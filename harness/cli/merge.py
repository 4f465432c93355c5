"""``ep-testbed merge RUN... --out DIR``: shard runs joined into one run that reports like an unsharded one.

Exit codes as ``run``'s for the merged results; 2 when the runs cannot be merged (overlapping
ids, a missing shard without ``--allow-partial``, runs of different GPU identity, driver or ONNX
Runtime version without ``--allow-mixed``, unreadable results, an ``--out`` that holds results
without ``--overwrite``).
"""

from __future__ import annotations

import argparse
import os

from ..core import exit_codes
from ..core.atomic_files import write_remedy
from ..core.results import count_outcomes
from ..core.terminal import safe
from ..run.merge import MergeError, merge_runs
from ..run.summary import exit_code, failing_outcomes
from .common import print_outcomes, render_report, usage_error
from .options import add_out, add_overwrite


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``merge``: run folders, ``--out``, ``--allow-partial`` and the exit-code policy flags."""
    p = subparsers.add_parser("merge", help="join shard runs into one run",
                              description="Join the results of runs (e.g. the shards of --shard K/N) into one run "
                                          "folder that reports exactly as an unsharded run.",
                              epilog="exit codes: as `ep-testbed run` for the merged cases; 2 when the runs "
                                     "cannot be merged")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders to merge")
    add_out(p.add_argument, None, what="the new run folder")
    add_overwrite(p.add_argument, "what an earlier merge (or one killed halfway) wrote into --out")
    p.add_argument("--allow-partial", action="store_true", help="merge even if some shard of K/N is missing")
    p.add_argument("--allow-mixed", action="store_true",
                   help="merge runs made on different GPUs, drivers, DirectML or ONNX Runtime versions (refused by "
                        "default; the merged header lists each run's identity)")
    p.add_argument("--fail-on-not-on-ep", action="store_true", help="count not-on-ep cases as failures")
    p.add_argument("--fail-on-inexpressible", action="store_true", help="count inexpressible cases as failures")
    p.set_defaults(func=merge_command)


def merge_command(args: argparse.Namespace) -> int:
    """Merge ``args.runs`` into ``args.out``, print the table, render the report; the exit code."""
    try:
        _, lines = merge_runs(args.runs, args.out, args.allow_partial, args.command_line, args.allow_mixed,
                              overwrite=args.overwrite)
    except MergeError as exc:
        return usage_error(str(exc))
    except OSError as exc:  # a full disk: results.jsonl is whole or absent (core.atomic_files)
        return usage_error(f"merge: writing into {safe(args.out)} failed ({exc.strerror or exc}); the runs given are "
                           f"untouched and no results.jsonl was left half-written.\nNote: {write_remedy(exc)}, then "
                           "merge again")
    failing = failing_outcomes(args.fail_on_not_on_ep, args.fail_on_inexpressible)
    print_outcomes(lines, failing)
    print(f"\nmerged {len(args.runs)} runs, {len(lines)} cases -> {safe(os.path.join(args.out, 'results.jsonl'))}")
    counts = count_outcomes(lines)
    del lines  # the report reads the merged file again: leave it the memory
    return exit_codes.with_artifacts(exit_code(counts, failing), render_report(args.out))
