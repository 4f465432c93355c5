"""``ep-testbed report`` and ``ep-testbed diff`` (registered by harness.cli's plugin loop).

    ep-testbed report RUN_DIR [--max-pictures N] [--max-details N]
        re-renders report.html, junit.xml and summary.json from RUN_DIR/results.jsonl; exit 0,
        or 2 when RUN_DIR has no readable results.
    ep-testbed diff RUN_A RUN_B [--out DIR] [--growth-factor F]
        compares baseline RUN_A with RUN_B, writes diff.html and diff.txt (default into RUN_B),
        prints diff.txt; exit 1 on a regression (a case newly failing or its error grown more
        than F times), 0 otherwise, 2 on unreadable input.  A CI gate against a stored baseline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_report(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="re-render report.html, junit.xml, summary.json of a run",
                              description="Re-render report.html, junit.xml and summary.json from "
                                          "RUN_DIR/results.jsonl (nothing is run).")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--max-pictures", type=int, default=60,
                   help="case sections with heatmaps and a repro bundle, most severe first (default 60)")
    p.add_argument("--max-details", type=int, default=500, help="case sections in all (default 500)")
    p.set_defaults(func=report_command)


def report_command(args: argparse.Namespace) -> int:
    from . import render_junit, render_run, render_summary_json
    from .results import ResultsError

    try:
        paths = [render_run(args.run_dir, max_pictures=args.max_pictures, max_details=args.max_details),
                 render_junit(args.run_dir), render_summary_json(args.run_dir)]
    except ResultsError as exc:
        print(f"ep-testbed report: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"wrote {path}")
    return 0


def add_diff(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("diff", help="what changed between two runs; exit 1 on a regression",
                              description="Compare baseline RUN_A with RUN_B: newly failing, fixed, error "
                                          "grown, cases added or gone. Writes diff.html and diff.txt; exits 1 "
                                          "when a case newly fails or its error grew beyond --growth-factor.")
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="the baseline run folder")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="the new run folder")
    p.add_argument("--out", type=Path, help="where to write diff.html and diff.txt (default: RUN_B)")
    p.add_argument("--growth-factor", type=float, default=2.0,
                   help="error growth counted as a regression, as a factor >= 1 (default 2)")
    p.set_defaults(func=diff_command)


def diff_command(args: argparse.Namespace) -> int:
    from .diff import DIFF_TEXT, diff_runs
    from .results import ResultsError

    try:
        result = diff_runs(args.run_a, args.run_b, args.out or args.run_b, growth_factor=args.growth_factor)
    except (ResultsError, ValueError) as exc:
        print(f"ep-testbed diff: {exc}", file=sys.stderr)
        return 2
    assert result.text_path is not None
    sys.stdout.write(result.text_path.read_text(encoding="utf-8"))
    print(f"wrote {result.html_path} and {result.text_path.parent / DIFF_TEXT}")
    return 1 if result.regressed else 0
