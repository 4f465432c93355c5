"""The library side of ``ep-testbed map`` and ``ep-testbed gen`` (the CLI lives in harness)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Union

import numpy as np
from ep_testbed.harness.results import (
    safe_id,  # the folder name `ep-testbed run` gives a case too
)
from ep_testbed.harness.untrusted_files import open_output, output_folder, read_json
from ep_testbed.reference import desc_from_dml, desc_to_dml, execute

from .catalog import build_catalog
from .to_onnx import to_onnx


def cli_map(desc_json_path: Union[str, Path], opset: Optional[int] = None) -> str:
    """The text ``ep-testbed map desc.json`` prints: the ONNX nodes with their attributes and
    every field's flag. Raises ``reference.DescError`` / ``graphs.OpsetError`` for bad input,
    ``harness.untrusted_files.FileRefused`` for a file that is not a JSON desc (the CLI prints
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


def write_cases(op: str, out_dir: Union[str, Path], seed: int = 0) -> list[Path]:
    """Write every catalog case of ``op`` (an operator's registry name) under ``out_dir/<safe id>/``
    (``harness.results.safe_id``: the name ``ep-testbed run`` gives the case's folder too):
    ``desc.json`` (DML spelling), ``flags.json``, ``inputs.npz`` (ONNX input names; DML member
    names when the desc is inexpressible), ``expected.npz`` (DML output names, from the
    reference) and ``model.onnx`` (when expressible). Also ``out_dir/cases.json``, the index.
    Returns the case folders."""
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
        with open_output(folder / "inputs.npz") as f:
            np.savez(f, **(mapping.feeds(tensors) if mapping.model is not None else tensors))
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf edge cases are deliberate
            expected = execute(case.desc, tensors)
        with open_output(folder / "expected.npz") as f:
            np.savez(f, **expected)
        folders.append(folder)
        index.append({"id": case.id, "folder": folder.name, "kind": mapping.kind, "tags": case.tags})
    with open_output(out / "cases.json", "w") as f:
        json.dump({"op": op, "seed": seed, "cases": index}, f, indent=2)
    return folders
