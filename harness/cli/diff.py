"""``ep-testbed diff RUN_A RUN_B``: what changed between a baseline run and a new one; a CI gate.

Writes diff.html and diff.txt (default into RUN_B) and prints diff.txt. Exit 1 on a regression:
a case newly failing, a tested case no longer tested (pass -> not-on-ep / inexpressible), a case
of A missing from B, a B that did not finish, or a B with no case (``--allow-not-tested``,
``--allow-missing``, ``--allow-interrupted``, ``--allow-empty`` accept each of the last four);
error growth beyond ``--growth-factor`` within an unchanged outcome is a warning (``--fail-on-growth``
makes it a regression). 0 otherwise, 2 on unreadable input or a bad factor, or for a run on an
emulated device (``--ep dml-wine``) compared with one on hardware (``--allow-mixed`` compares them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...reports import ResultsError, diff_runs
from ...reports.diff import DIFF_TEXT, GatePolicy
from ..core import exit_codes
from ..core.atomic_files import write_remedy
from ..core.terminal import safe
from .options import add_out

#: The flags that relax (or tighten) the gate, each a field of ``reports.diff.GatePolicy``.
POLICY_FLAGS = {
    "allow_not_tested": "accept tested cases that became not-on-ep or inexpressible in RUN_B",
    "allow_missing": "accept cases of RUN_A that RUN_B lacks (RUN_B is a filtered or sharded run)",
    "allow_interrupted": "accept a RUN_B that did not finish (no end line, or it says interrupted)",
    "allow_empty": "accept a RUN_B with no case",
    "fail_on_growth": "make error growth beyond --growth-factor a regression, not only a warning",
}


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``diff RUN_A RUN_B [--out DIR] [--growth-factor F]`` and the gate's policy flags."""
    p = subparsers.add_parser("diff", help="what changed between two runs; exit 1 on a regression",
                              description="Compare baseline RUN_A with RUN_B: newly failing, coverage lost, cases "
                                          "gone, error grown, fixed, added. Writes diff.html and diff.txt; exits 1 "
                                          "on a regression (a case newly failing or no longer tested, a case gone, "
                                          "a RUN_B that did not finish or has no case).",
                              epilog="exit codes: 0 no regression (warnings may be printed), 1 regression, "
                                     "2 unreadable input")
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="the baseline run folder")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="the new run folder")
    add_out(p.add_argument, "RUN_B", what="where to write diff.html and diff.txt", type=Path)
    p.add_argument("--growth-factor", type=float, default=2.0,
                   help="error growth worth a warning, as a factor >= 1 (default 2)")
    p.add_argument("--allow-mixed", action="store_true",
                   help="compare a run on an emulated device (--ep dml-wine) with one on hardware (refused by "
                        "default: neither is the other's baseline)")
    gate = p.add_argument_group("the gate (default: strictest)")
    for dest, text in POLICY_FLAGS.items():
        gate.add_argument("--" + dest.replace("_", "-"), dest=dest, action="store_true", help=text)
    p.set_defaults(func=diff_command)


def diff_command(args: argparse.Namespace) -> int:
    """Diff the two runs, print diff.txt and where both files went; 1 on a regression, 2 on bad input."""
    policy = GatePolicy(**{dest: bool(getattr(args, dest, False)) for dest in POLICY_FLAGS})
    try:
        result = diff_runs(args.run_a, args.run_b, args.out or args.run_b, growth_factor=args.growth_factor,
                           policy=policy, allow_mixed=args.allow_mixed)
    except (ResultsError, ValueError) as exc:
        print(f"ep-testbed diff: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    except OSError as exc:  # a full disk: diff.html and diff.txt are each whole or absent (core.atomic_files)
        print(f"ep-testbed diff: writing into {safe(args.out or args.run_b)} failed ({exc.strerror or exc}); no diff file "
              f"is left half-written and both runs are untouched.\nNote: {write_remedy(exc)} (or choose another --out), then "
              "run the diff again", file=sys.stderr)
        return exit_codes.USAGE
    assert result.text_path is not None  # diff_runs was given an out_dir, so it wrote the text file
    sys.stdout.write(result.text_path.read_text(encoding="utf-8"))
    print(f"wrote {safe(result.html_path)} and {safe(result.text_path.parent / DIFF_TEXT)}")
    return exit_codes.FAILED if result.regressed else exit_codes.OK
