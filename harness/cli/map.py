"""``ep-testbed map desc.json [--opset N]``: the ONNX node(s), attributes and every field's flag of a desc.

Exit 0, or 2 for a desc the page refuses or an opset that cannot express it (``main`` prints
``DescError``; this handler prints ``OpsetError``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Union

from ...graphs import OpsetError, to_onnx
from ...reference import desc_from_dml
from ..core import exit_codes
from ..core.untrusted_files import read_json


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
        return exit_codes.USAGE
    return exit_codes.OK


def cli_map(desc_json_path: Union[str, Path], opset: Optional[int] = None) -> str:
    """The text ``ep-testbed map desc.json`` prints: the ONNX nodes with their attributes and
    every field's flag. Raises ``reference.DescError`` / ``graphs.OpsetError`` for bad input,
    ``untrusted_files.FileRefused`` for a file that is not a JSON desc (the CLI prints
    their message)."""
    desc = desc_from_dml(read_json(desc_json_path, "JSON desc"))
    mapping = to_onnx(desc, opset)
    info = mapping.describe()
    lines = [f"{desc.TYPE}: {info['kind']}" + ("" if mapping.expressible else " (no ONNX model)")]
    if mapping.model is not None:
        lines.append(f"ONNX model: opset {info['opset']}, IR version {info['ir_version']}, "
                     f"inputs {mapping.onnx_input_names}, outputs {mapping.onnx_output_names}")
        for node in info["nodes"]:
            attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(node["attributes"].items()))
            lines.append(f"  [{node['role']:6}] {node['name']}: {node['op_type']}({', '.join(node['inputs'])}) -> "
                         f"{', '.join(node['outputs'])}" + (f"  {{{attrs}}}" if attrs else ""))
    lines.append("Flags:")
    width = max(len(f.field) for f in mapping.flags)
    for f in mapping.flags:
        lines.append(f"  {f.kind:13} {f.field:{width}} = {json.dumps(f.to_json()['value'])}: {f.reason}")
    return "\n".join(lines) + "\n"
