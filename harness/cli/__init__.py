"""The ``ep-testbed`` command line: one module per subcommand, listed once, in ``SUBCOMMANDS``.

Each subcommand module exposes ``add(subparsers)``, which registers its parser with ``func=``
set to its handler (``handler(args) -> exit code``); ``SUBCOMMANDS`` below is the only list of
them, in the order ``ep-testbed --help`` shows. Options several front ends share (the EP, the
tolerances, the expectations) are defined once in ``harness.options``, which the pytest plugin
and the model CLI use too. Every subcommand module is imported with this package (no lazy
loading: the whole import costs a few tenths of a second, and one explicit list beats a second
mechanism to keep in step).

``main(argv)`` parses with ``parse_args`` (which also stores the shell-quoted command line on the
namespace as ``args.command_line``: the rerun command recorded in results headers) and runs the
handler; a ``DescError`` (a desc the
DML page refuses) or an unreadable file becomes exit code 2 with one message. Bad usage that
argparse catches exits 2 with argparse's message. Python-API seams that are not flags (another
case catalog or mapper for ``run``) are keyword arguments of the handler itself: see
``cli.run.run_command``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from ep_testbed.reference import DescError

from . import diff, fuzz, gen, merge, model, reference, report, run
from . import map as map_
from .common import PROG, command_line, usage_error

#: Every subcommand module, in help order.
SUBCOMMANDS = (run, fuzz, merge, report, diff, map_, gen, reference, model)


def build_parser() -> argparse.ArgumentParser:
    """The ``ep-testbed`` parser with every module of ``SUBCOMMANDS`` registered, in order."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Tells whether an ONNX Runtime execution provider computes DirectML's ROI pooling, "
                               "ROI align and max pooling as DirectML specifies them.",
        epilog=f"`{PROG} COMMAND --help` describes a command, its options and (where they matter) its exit codes")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add(sub)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and store the rerun command in ``args.command_line``.

    Exits 2 with argparse's message on bad usage, like ``main``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.command_line = command_line(argv)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ep-testbed <argv>``; return its exit code (each subcommand's help lists its codes)."""
    args = parse_args(argv)
    try:
        return args.func(args)
    except DescError as exc:
        return usage_error(f"invalid desc: {exc}")
    except (OSError, json.JSONDecodeError) as exc:
        return usage_error(str(exc))
