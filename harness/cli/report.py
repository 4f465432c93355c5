"""``ep-testbed report RUN_DIR``: re-render report.html, junit.xml and summary.json from results.jsonl.

Exit 0, or 2 when RUN_DIR has no readable results. Nothing is run. Lines of results.jsonl that
are not records of the schema (a torn last line, damage) are skipped and each is named on
stderr; the report shows what could be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ...reports import (
    ResultsError,
    load_run_summary,
    render_junit,
    render_run,
    render_summary_json,
)
from ...reports.results import read_stable, repeated_note, skipped_line
from ..core import exit_codes
from ..core.atomic_files import write_remedy
from ..core.memory import shortage_message
from ..core.terminal import safe, safe_message
from .options import count


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``report RUN_DIR [--max-pictures N] [--max-details N]``."""
    p = subparsers.add_parser("report", help="re-render report.html, junit.xml, summary.json of a run",
                              description="Re-render report.html, junit.xml and summary.json from "
                                          "RUN_DIR/results.jsonl (nothing is run).",
                              epilog="exit codes: 0 written, 2 RUN_DIR has no readable results")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--max-pictures", type=count, default=60,
                   help="case sections with heatmaps and a repro bundle, most severe first (default 60)")
    p.add_argument("--max-details", type=count, default=500, help="case sections in all (default 500)")
    p.set_defaults(func=report_command)


def report_command(args: argparse.Namespace) -> int:
    """Write the three report files into ``args.run_dir``; print their paths; 0, or 2 on unreadable
    results or a report that outgrows this machine's memory."""
    def read_and_render() -> list[Any]:
        run = load_run_summary(args.run_dir)  # each case line kept small: the file may outgrow memory
        paths = [render_run(args.run_dir, max_pictures=args.max_pictures, max_details=args.max_details, run=run),
                 render_junit(args.run_dir, run=run), render_summary_json(args.run_dir, run=run)]
        for bad in run.unreadable:
            print(f"ep-testbed report: note: {safe(args.run_dir / 'results.jsonl')} line {bad.number} skipped, "
                  f"{skipped_line(bad)}", file=sys.stderr)
        if (repeated := repeated_note(run)) is not None:
            print(f"ep-testbed report: note: {repeated}", file=sys.stderr)
        return paths

    try:
        # both passes over results.jsonl read one file: one that changed in between is read again
        paths = read_stable(read_and_render)
    except ResultsError as exc:
        print(f"ep-testbed report: {safe_message(exc)}", file=sys.stderr)
        return exit_codes.USAGE
    except MemoryError:
        pass  # out of the handler first, so what rendering held is freed before the message
    except OSError as exc:  # a full disk, a read-only folder: each file is whole or absent (core.atomic_files)
        print(f"ep-testbed report: writing into {safe(args.run_dir)} failed ({safe(exc.strerror or exc)}); "
              f"results.jsonl is untouched and no report file is left half-written.\nNote: {write_remedy(exc)}, then run "
              f"ep-testbed report {safe(args.run_dir)} again", file=sys.stderr)
        return exit_codes.USAGE
    else:
        for path in paths:
            print(f"wrote {safe(path)}")
        return exit_codes.OK
    message = shortage_message(f"rendering the report of {safe(args.run_dir)}", None)
    print(f"ep-testbed report: {safe_message(message)}", file=sys.stderr)
    return exit_codes.USAGE
