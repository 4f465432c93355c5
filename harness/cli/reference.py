"""``ep-testbed reference --desc desc.json``: the NumPy reference alone, on one desc.

Reads a desc in DirectML's spelling, validates it against its doc page, runs the reference on
seeded random inputs (or ``--inputs`` NPZ keyed by DML member names), prints each output's
shape, dtype and range and writes them to ``--out`` (NPZ). Exit 0, or 2 for a file that is not a
JSON desc, an unreadable inputs file, or a desc the page refuses (``main`` prints ``DescError``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import numpy as np

from ...graphs.cases.common import tensors_bytes
from ...reference import DescError, desc_from_dml, execute, validate
from ...reference.inputs import random_inputs
from ..core import exit_codes
from ..core.memory import check_fits, headroom, mib, shortage_message
from ..core.terminal import safe
from ..core.untrusted_files import FileRefused, read_arrays, read_json, write_arrays
from .common import usage_error
from .options import add_out, add_seed


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``reference --desc FILE [--inputs NPZ] [--seed N] [--feature-level V] [--out NPZ]``."""
    p = subparsers.add_parser("reference", help="compute a desc with the NumPy reference",
                              description="Read a desc (DML spelling, JSON), validate it against its doc page, "
                                          "run the reference on seeded random inputs (or --inputs NPZ keyed by DML "
                                          "member names) and write the outputs to --out (NPZ).",
                              epilog="exit codes: 0 computed, 2 not a JSON desc, unreadable inputs, invalid desc, or arrays that outgrow "
                                 "this machine's memory")
    p.add_argument("--desc", required=True, type=Path, help="desc JSON file in DirectML's spelling")
    p.add_argument("--inputs", type=Path, help="NPZ with InputTensor, ROITensor, ... (default: seeded random)")
    add_seed(p.add_argument, "seed of the random inputs")
    p.add_argument("--feature-level", default="5.0", help="DirectML feature level to validate against (default 5.0)")
    add_out(p.add_argument, "print only", what="write the outputs to this NPZ file", metavar="NPZ", type=Path)
    p.set_defaults(func=reference_command)


def reference_command(args: argparse.Namespace) -> int:
    """Run the reference on ``args.desc``; print each output; write ``args.out``; 0, or 2 (with
    the flag and file named) for a file that is not a desc or not an NPZ, or for a desc whose
    arrays outgrow this machine's memory (checked before anything is allocated, where its
    inputs and outputs alone do not fit; a ``MemoryError`` during the work says the same). A
    desc or arrays the page refuses (``DescError``) reach ``main``, which prints them and exits 2."""
    if args.out:
        if not str(args.out).endswith(".npz"):  # numpy.savez's naming, kept now that it is given a file
            args.out = Path(f"{args.out}.npz")
        problem = _out_problem(args.out)
        if problem:  # said before computing, not after
            return usage_error(f"--out {safe(args.out)}: {problem}")
    try:
        data = read_json(args.desc, "JSON desc")
    except FileRefused as exc:
        return usage_error(f"--desc {exc}")
    desc = desc_from_dml(data)
    validate(desc, args.feature_level)  # the desc first: a DescError after this is about the arrays
    what = f"the reference on --desc {args.desc}" + (f" with --inputs {args.inputs}" if args.inputs else "")
    least, have = tensors_bytes(desc, (*desc.INPUTS, *desc.OUTPUTS)), headroom()
    shortage = check_fits(f"{what} (its input and output arrays alone)", least)
    if shortage:
        return usage_error(shortage)
    try:
        outputs = _compute(args, desc)
    except MemoryError:  # the estimate above is a floor: the work arrays did not fit
        return usage_error(shortage_message(f"{what} (at least {mib(least)} for its arrays)", None, have))
    except FileRefused as exc:
        return usage_error(f"--inputs {exc}")
    except DescError as exc:
        if not args.inputs:
            raise
        return usage_error(f"--inputs {args.inputs}: the arrays do not fit the desc: {exc}\nNote: --inputs takes "
                           "the DML inputs by member name, as the desc types and sizes them (a gen folder's "
                           "inputs.npz); a run's case-folder inputs.npz and a gen folder's feeds.npz hold the ONNX "
                           "model's feeds, which the host has converted (types widened, shapes and ROIs rewritten)")
    for name, array in outputs.items():
        print(f"{name}: shape {list(array.shape)} dtype {array.dtype} min {array.min()} max {array.max()}")
    if args.out:
        write_arrays(args.out, outputs)  # whole or not at all, never through a link
        print(f"wrote {safe(args.out)}")
    return exit_codes.OK


def _compute(args: argparse.Namespace, desc: Any) -> dict[str, np.ndarray]:
    """The reference's outputs for ``desc`` on ``--inputs`` (or seeded random inputs)."""
    tensors = read_arrays(args.inputs, "inputs NPZ") if args.inputs else random_inputs(desc, seed=args.seed)
    return execute(desc, tensors, feature_level=args.feature_level)


def _out_problem(out: Path) -> str | None:
    """Why the NPZ file ``out`` cannot be written (a folder or device by that name, a folder
    that does not exist), or None."""
    if os.path.lexists(out) and not os.path.isfile(out):
        return "exists and is not a regular file.\nNote: name an NPZ file to write (it is replaced whole)"
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        return f"its folder {safe(parent)} does not exist.\nNote: create it first, or name a file in a folder that exists"
    return None
