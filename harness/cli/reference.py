"""``ep-testbed reference --desc desc.json``: the NumPy reference alone, on one desc.

Reads a desc in DirectML's spelling, validates it against its doc page, runs the reference on
seeded random inputs (or ``--inputs`` NPZ keyed by DML member names), prints each output's
shape, dtype and range and writes them to ``--out`` (NPZ). Exit 0, or 2 for a file that is not a
JSON desc, an unreadable inputs file, or a desc the page refuses (``main`` prints ``DescError``).
"""

from __future__ import annotations

import argparse
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from ep_testbed.reference import desc_from_dml, execute
from ep_testbed.reference.inputs import random_inputs

from .common import UsageError, usage_error


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``reference --desc FILE [--inputs NPZ] [--seed N] [--feature-level V] [--out NPZ]``."""
    p = subparsers.add_parser("reference", help="compute a desc with the NumPy reference",
                              description="Read a desc (DML spelling, JSON), validate it against its doc page, "
                                          "run the reference on seeded random inputs (or --inputs NPZ keyed by DML "
                                          "member names) and write the outputs to --out (NPZ).",
                              epilog="exit codes: 0 computed, 2 not a JSON desc, unreadable inputs or invalid desc")
    p.add_argument("--desc", required=True, type=Path, help="desc JSON file in DirectML's spelling")
    p.add_argument("--inputs", type=Path, help="NPZ with InputTensor, ROITensor, ... (default: seeded random)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--feature-level", default="5.0", help="DirectML feature level to validate against (default 5.0)")
    p.add_argument("--out", type=Path, help="write outputs here (NPZ)")
    p.set_defaults(func=reference_command)


def reference_command(args: argparse.Namespace) -> int:
    """Run the reference on ``args.desc``; print each output; write ``args.out``; 0, or 2 on bad files."""
    try:
        desc = desc_from_dml(_read_desc(args.desc))
        tensors = _read_inputs(args.inputs) if args.inputs else random_inputs(desc, seed=args.seed)
    except UsageError as exc:
        return usage_error(str(exc))
    outputs = execute(desc, tensors, feature_level=args.feature_level)
    for name, array in outputs.items():
        print(f"{name}: shape {list(array.shape)} dtype {array.dtype} min {array.min()} max {array.max()}")
    if args.out:
        np.savez(args.out, **outputs)
        print(f"wrote {args.out}")
    return 0


def _read_desc(path: Path) -> Any:
    """The decoded JSON of ``--desc``; ``UsageError`` naming the file when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--desc {path}: cannot read it ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a JSON desc ({exc}); see examples/roi_align1.json") from None


def _read_inputs(path: Path) -> dict[str, np.ndarray]:
    """The arrays of ``--inputs`` by name; ``UsageError`` naming the file when it is not an NPZ."""
    hint = "write one with numpy.savez(path, InputTensor=..., ROITensor=...)"
    try:
        data = np.load(path, allow_pickle=False)
    except OSError as exc:
        raise UsageError(f"--inputs {path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, zipfile.BadZipFile) as exc:
        raise UsageError(f"--inputs {path}: not an NPZ of named arrays ({exc}); {hint}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):  # a bare .npy holds one unnamed array
        raise UsageError(f"--inputs {path}: one unnamed array, not an NPZ of named arrays; {hint}")
    with data:
        return {k: data[k] for k in data.files}
