"""``ep-testbed map desc.json [--opset N]``: the ONNX node(s), attributes and every field's flag of a desc.

Exit 0, or 2 for a desc the page refuses or an opset that cannot express it (``main`` prints
``DescError``; this handler prints ``OpsetError``).
"""

from __future__ import annotations

import argparse
import sys

from ep_testbed.graphs import OpsetError, cli_map


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``map DESC [--opset N]``."""
    p = subparsers.add_parser("map", help="print how a DML desc (JSON, DML spelling) maps to ONNX, with every flag",
                              description="Print the ONNX node(s) and attributes a DML desc maps to, and the flag "
                                          "(exact, composed, diverges, inexpressible) of every field value.",
                              epilog="exit codes: 0 printed, 2 invalid desc or an opset that cannot express it")
    p.add_argument("desc", help="a desc.json in DirectML's spelling (as `ep-testbed gen` writes)")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset to build (default: the mapper's, 16)")
    p.set_defaults(func=map_command)


def map_command(args: argparse.Namespace) -> int:
    """Print ``cli_map``'s text for ``args.desc``; 2 with the mapper's message when the opset cannot build it."""
    try:
        sys.stdout.write(cli_map(args.desc, args.opset))
    except OpsetError as exc:
        print(f"ep-testbed map: {exc}", file=sys.stderr)
        return 2
    return 0
