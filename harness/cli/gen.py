"""``ep-testbed gen --op NAME --out DIR [--seed N]``: write one operator's catalog cases as files.

Each case folder holds desc.json, inputs.npz and expected.npz (the desc, its inputs by DML member
name and the reference's outputs: ``ep-testbed reference --desc desc.json --inputs inputs.npz``
computes expected.npz again), and model.onnx with feeds.npz (the ONNX model and the arrays it is
fed, by ONNX input name: ready for ``InferenceSession.run``), plus flags.json (``write_cases``);
``DIR/cases.json`` indexes them. A ``DIR`` that already holds files is
refused unless ``--overwrite`` (``run_folder.refuse_overwrite``): exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Union

import numpy as np

from ...graphs import to_onnx
from ...graphs.catalog import build_catalog
from ...reference import desc_to_dml, execute
from ...reference.registry import names
from ..core import exit_codes
from ..core.results import safe_id
from ..core.terminal import safe
from ..core.untrusted_files import open_output, output_folder, write_arrays
from ..run.run_folder import FolderBusy, refuse_overwrite
from .common import usage_error
from .options import add_out, add_overwrite, add_seed

#: A gen folder's model inputs by ONNX input name (``inputs.npz`` holds the DML inputs).
FEEDS_FILE = "feeds.npz"


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``gen --op NAME --out DIR [--seed N]`` (operator choices from the registry)."""
    p = subparsers.add_parser("gen", help="write catalog cases (desc.json, inputs.npz, expected.npz, model.onnx, "
                                           "feeds.npz)",
                              description="Write every catalog case of one operator into its own folder, as files "
                                          "standard tools open, plus an index (cases.json): desc.json, inputs.npz "
                                          "(by DML member name: what `ep-testbed reference --inputs` reads) and "
                                          "expected.npz (the reference's outputs); model.onnx and feeds.npz (its "
                                          "inputs by ONNX input name, as the run feeds it: the host has already "
                                          "reshaped, widened or rewritten some of them).",
                              epilog="exit codes: 0 written, 2 bad usage or --out holds files (see --overwrite)")
    p.add_argument("--op", required=True, choices=names(), help="operator")
    add_out(p.add_argument, None, what="output folder (one subfolder per case, plus cases.json)")
    add_seed(p.add_argument, "catalog seed (random cases and inputs)")
    add_overwrite(p.add_argument, "what --out already holds")
    p.set_defaults(func=gen_command)


def gen_command(args: argparse.Namespace) -> int:
    """Write the cases of ``args.op`` under ``args.out``; print how many and where the index is; 0,
    or 2 when ``--out`` holds files and ``--overwrite`` is not given."""
    try:
        refuse_overwrite(args.out, args.overwrite)
    except FolderBusy as exc:
        return usage_error(str(exc))
    folders = write_cases(args.op, args.out, args.seed)
    print(f"wrote {len(folders)} {args.op} cases under {safe(args.out)} (index: {safe(Path(args.out) / 'cases.json')})")
    return exit_codes.OK


def write_cases(op: str, out_dir: Union[str, Path], seed: int = 0) -> list[Path]:
    """Write every catalog case of ``op`` (an operator's registry name) under ``out_dir/<safe id>/``
    (``harness.core.results.safe_id``: the name ``ep-testbed run`` gives the case's folder too):
    ``desc.json`` (DML spelling), ``flags.json``, ``inputs.npz`` (DML member names: what
    ``ep-testbed reference --inputs`` reads), ``expected.npz`` (DML output names, from the
    reference on those inputs), and when the desc is expressible ``model.onnx`` and ``feeds.npz``
    (the model's inputs by ONNX input name: the DML inputs as the host converts them, the ROI
    rewrite, reshapes and type widening of DESIGN.md's table done). Also ``out_dir/cases.json``,
    the index. Returns the case folders."""
    out = output_folder(out_dir)  # files go in through untrusted_files: never through a planted link
    folders, index = [], []
    for case in build_catalog([op], seed):
        folder = output_folder(out, safe_id(case.id))
        mapping = to_onnx(case.desc, case.opset)
        tensors = case.inputs()
        with open_output(folder / "desc.json", "w") as f:
            json.dump(desc_to_dml(case.desc), f, indent=2)
        with open_output(folder / "flags.json", "w") as f:
            json.dump({"id": case.id, "kind": mapping.kind, "tags": case.tags,
                       "flags": [fl.to_json() for fl in mapping.flags],
                       "input_flags": [fl.to_json() for fl in mapping.input_flags(tensors)]}, f, indent=2)
        if mapping.model is not None:
            with open_output(folder / "model.onnx") as f:
                f.write(mapping.model.SerializeToString())
            write_arrays(folder / FEEDS_FILE, mapping.feeds(tensors))
        write_arrays(folder / "inputs.npz", tensors)
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf edge cases are deliberate
            expected = execute(case.desc, tensors)
        write_arrays(folder / "expected.npz", expected)
        folders.append(folder)
        index.append({"id": case.id, "folder": folder.name, "kind": mapping.kind, "tags": case.tags})
    with open_output(out / "cases.json", "w") as f:
        json.dump({"op": op, "seed": seed, "cases": index}, f, indent=2)
    return folders
