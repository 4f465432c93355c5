"""The ``ep-testbed`` command line.

Subcommands are added by the modules that own them; each one is a function
``add_<name>(subparsers)`` that registers its parser with ``func=`` set. Here: ``reference``,
``run`` and ``merge``; every ``add_*`` function of ``graphs.cli`` and ``reports.cli`` (when those
modules exist) is registered too, so their owners need not edit this file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np


def add_reference(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("reference", help="compute a desc with the NumPy reference",
                              description="Read a desc (DML spelling, JSON), validate it against its doc page, "
                                          "run the reference on seeded random inputs (or --inputs NPZ keyed by DML "
                                          "member names) and write the outputs to --out (NPZ).")
    p.add_argument("--desc", required=True, type=Path, help="desc JSON file in DirectML's spelling")
    p.add_argument("--inputs", type=Path, help="NPZ with InputTensor, ROITensor, ... (default: seeded random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--feature-level", default="5.0")
    p.add_argument("--out", type=Path, help="write outputs here (NPZ)")
    p.set_defaults(func=_run_reference)


def _run_reference(args: argparse.Namespace) -> int:
    from ep_testbed.reference import desc_from_dml, execute
    from ep_testbed.reference.inputs import random_inputs

    try:
        document = json.loads(args.desc.read_text())
    except json.JSONDecodeError as e:
        print(f"ep-testbed: {args.desc} is not a JSON desc ({e}); see examples/roi_align1.json", file=sys.stderr)
        return 2
    desc = desc_from_dml(document)
    if args.inputs:
        with np.load(args.inputs, allow_pickle=False) as data:
            tensors = {k: data[k] for k in data.files}
    else:
        tensors = random_inputs(desc, seed=args.seed)
    outputs = execute(desc, tensors, feature_level=args.feature_level)
    for name, array in outputs.items():
        print(f"{name}: shape {list(array.shape)} dtype {array.dtype} min {array.min()} max {array.max()}")
    if args.out:
        np.savez(args.out, **outputs)
        print(f"wrote {args.out}")
    return 0


def add_run(subparsers: argparse._SubParsersAction) -> None:
    from .cli_run import add_run as add

    add(subparsers)


def add_merge(subparsers: argparse._SubParsersAction) -> None:
    from .cli_run import add_merge as add

    add(subparsers)


#: Modules of other folders whose ``add_*`` functions register more subcommands, if present.
PLUGIN_MODULES = ("ep_testbed.graphs.cli", "ep_testbed.reports.cli", "ep_testbed.harness.model_cli")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(prog="ep-testbed", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_reference(sub)
    add_run(sub)
    add_merge(sub)
    for name in PLUGIN_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        for attr in sorted(dir(module)):
            if attr.startswith("add_") and callable(getattr(module, attr)):
                getattr(module, attr)(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ep_testbed.reference import DescError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except DescError as e:
        print(f"ep-testbed: invalid desc: {e}", file=sys.stderr)
        return 2
    except (OSError, json.JSONDecodeError) as e:
        print(f"ep-testbed: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
