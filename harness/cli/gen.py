"""``ep-testbed gen --op NAME --out DIR [--seed N]``: write one operator's catalog cases as files.

Each case folder holds model.onnx, inputs.npz, desc.json, flags.json and expected.npz
(``graphs.write_cases``); ``DIR/cases.json`` indexes them. A ``DIR`` that already holds files is
refused unless ``--overwrite`` (``run_folder.refuse_overwrite``): exit 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ep_testbed.graphs import write_cases
from ep_testbed.reference.registry import names

from ..options import seed
from ..run_folder import FolderBusy, refuse_overwrite
from .common import usage_error


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``gen --op NAME --out DIR [--seed N]`` (operator choices from the registry)."""
    p = subparsers.add_parser("gen", help="write catalog cases (model.onnx, inputs.npz, desc.json, expected.npz)",
                              description="Write every catalog case of one operator into its own folder, as files "
                                          "standard tools open, plus an index (cases.json).",
                              epilog="exit codes: 0 written, 2 bad usage or --out holds files (see --overwrite)")
    p.add_argument("--op", required=True, choices=names(), help="operator")
    p.add_argument("--out", required=True, help="output folder (one subfolder per case, plus cases.json)")
    p.add_argument("--seed", type=seed, default=0, help="catalog seed (random cases and inputs)")
    p.add_argument("--overwrite", action="store_true", help="write even if --out already holds files")
    p.set_defaults(func=gen_command)


def gen_command(args: argparse.Namespace) -> int:
    """Write the cases of ``args.op`` under ``args.out``; print how many and where the index is; 0,
    or 2 when ``--out`` holds files and ``--overwrite`` is not given."""
    try:
        refuse_overwrite(args.out, args.overwrite)
    except FolderBusy as exc:
        return usage_error(str(exc))
    folders = write_cases(args.op, args.out, args.seed)
    print(f"wrote {len(folders)} {args.op} cases under {args.out} (index: {Path(args.out) / 'cases.json'})")
    return 0
