"""``ep-testbed diff RUN_A RUN_B``: what changed between a baseline run and a new one; a CI gate.

Writes diff.html and diff.txt (default into RUN_B) and prints diff.txt. Exit 1 on a regression
(a case newly failing, or its error grown more than ``--growth-factor`` times), 0 otherwise, 2 on
unreadable input or a bad factor.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ep_testbed.reports import ResultsError, diff_runs
from ep_testbed.reports.diff import DIFF_TEXT


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``diff RUN_A RUN_B [--out DIR] [--growth-factor F]``."""
    p = subparsers.add_parser("diff", help="what changed between two runs; exit 1 on a regression",
                              description="Compare baseline RUN_A with RUN_B: newly failing, fixed, error "
                                          "grown, cases added or gone. Writes diff.html and diff.txt; exits 1 "
                                          "when a case newly fails or its error grew beyond --growth-factor.",
                              epilog="exit codes: 0 no regression, 1 regression, 2 unreadable input")
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="the baseline run folder")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="the new run folder")
    p.add_argument("--out", type=Path, help="where to write diff.html and diff.txt (default: RUN_B)")
    p.add_argument("--growth-factor", type=float, default=2.0,
                   help="error growth counted as a regression, as a factor >= 1 (default 2)")
    p.set_defaults(func=diff_command)


def diff_command(args: argparse.Namespace) -> int:
    """Diff the two runs, print diff.txt and where both files went; 1 on a regression, 2 on bad input."""
    try:
        result = diff_runs(args.run_a, args.run_b, args.out or args.run_b, growth_factor=args.growth_factor)
    except (ResultsError, ValueError) as exc:
        print(f"ep-testbed diff: {exc}", file=sys.stderr)
        return 2
    assert result.text_path is not None  # diff_runs was given an out_dir, so it wrote the text file
    sys.stdout.write(result.text_path.read_text(encoding="utf-8"))
    print(f"wrote {result.html_path} and {result.text_path.parent / DIFF_TEXT}")
    return 1 if result.regressed else 0
