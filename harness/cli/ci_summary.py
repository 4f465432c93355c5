"""``ep-testbed ci-summary RUN_DIR``: a run as a CI job shows it, printed (nothing is written).

``--format markdown`` (the default) prints the job summary (``reports.github.job_summary``: the
verdict, pass/fail/known/not-on-ep/inexpressible per operator, the top failures and their rerun
lines) for ``>> "$GITHUB_STEP_SUMMARY"``; ``--format annotations`` prints GitHub workflow commands
(``reports.github.annotations``: an ``::error`` per failing case up to ``--max-annotations``, then
warnings and a notice), which the runner turns into check annotations. Two calls, because the
runner reads workflow commands from the step's output while the summary goes to a file.
Exit codes: 0 printed (whatever the run's outcomes: the run and the diff gate decide), 2 RUN_DIR
has no readable results.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...reports import ResultsError, github
from ...reports.github import ANNOTATIONS, TOP, job_summary
from ..core import exit_codes
from .common import usage_error
from .options import count

FORMATS = ("markdown", "annotations")


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``ci-summary RUN_DIR [--format markdown|annotations] [--top N] [--max-annotations N] [--title T]``."""
    p = subparsers.add_parser("ci-summary", help="print a run as a CI job summary (Markdown) or GitHub annotations",
                              description="Print the run in RUN_DIR as Markdown for $GITHUB_STEP_SUMMARY, or as GitHub "
                                          "workflow commands (one ::error annotation per failing case). Writes "
                                          "nothing; the workflow redirects the output.",
                              epilog="exit codes: 0 printed, 2 RUN_DIR has no readable results")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--format", choices=FORMATS, default="markdown",
                   help="markdown: the job summary (default); annotations: GitHub workflow commands")
    p.add_argument("--top", type=count, default=TOP, help=f"failing cases listed in the summary (default {TOP})")
    p.add_argument("--max-annotations", type=count, default=ANNOTATIONS,
                   help=f"failing cases annotated, the rest counted in one warning (default {ANNOTATIONS}: GitHub "
                        "shows 10 error annotations per step)")
    p.add_argument("--title", default=None, help="the summary's heading (default: ep-testbed on <EP>)")
    p.set_defaults(func=ci_summary_command)


def ci_summary_command(args: argparse.Namespace) -> int:
    """Print the summary or the annotations of ``args.run_dir``; 0, or 2 on unreadable results."""
    try:
        if args.format == "markdown":
            text = job_summary(args.run_dir, title=args.title, top=args.top)
        else:
            lines = github.annotations(args.run_dir, limit=args.max_annotations)
            text = "".join(line + "\n" for line in lines)
    except ResultsError as exc:
        return usage_error(f"ci-summary: {exc}")
    sys.stdout.write(text)
    return exit_codes.OK
