"""Read one case's artifact folder (``RUN_DIR/cases/<safe-id>/``) for the report.

The harness writes ``model.onnx``, ``inputs.npz`` (ONNX input names), ``desc.json`` (DML spelling),
``expected.npz`` and ``actual.npz`` (DML output names).  This module only *reads* them, through
``harness.core.untrusted_files`` (regular files inside the case folder only, sizes capped, no pickles):
the model is parsed to show its nodes, never run.  Every reader returns ``None`` (or an empty
value) for a missing or unreadable file and records why in ``CaseArtifacts.problems``, so one
damaged folder costs one case's pictures, not the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..harness.core.untrusted_files import ARRAY_KINDS, FileRefused, inside, read_arrays, read_bytes, read_json
from ..reference.registry import specs


@dataclass
class OnnxNode:
    name: str
    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attributes: list[tuple[str, str]]


@dataclass
class OnnxValue:
    name: str
    elem_type: str
    shape: str


@dataclass
class ModelSummary:
    ir_version: int
    opsets: list[tuple[str, int]]
    nodes: list[OnnxNode]
    inputs: list[OnnxValue]
    outputs: list[OnnxValue]


@dataclass
class CaseArtifacts:
    folder: Path
    desc: dict[str, Any] | None = None
    model: ModelSummary | None = None
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    actual: dict[str, np.ndarray] = field(default_factory=dict)
    #: The reference's bounds and knife-edge ranges (``harness.core.compare.Allowance.to_arrays``).
    allowance: dict[str, np.ndarray] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def resolve_folder(run_dir: Path, artifacts: str | None) -> Path | None:
    """The case folder, refusing paths that escape the run folder, lexically or through a
    symbolic link (a results line is data): None for those and for no folder at all."""
    if not artifacts:
        return None
    try:
        return inside(run_dir, artifacts, "artifacts path")
    except FileRefused:
        return None


def load_artifacts(folder: Path, arrays: bool = True) -> CaseArtifacts:
    """Everything readable in ``folder``; missing or refused pieces are listed in ``problems``
    (a file is read only if it is a regular file inside the folder, within the size caps).
    ``arrays`` False: the desc and the model only, for a page section that draws no arrays (the
    ``.npz`` files are most of the reading)."""
    art = CaseArtifacts(folder=folder)
    if not folder.is_dir():
        art.problems.append(f"artifact folder {folder.name} is missing")
        return art
    readers = {"desc.json": lambda p: read_json(p, "desc"), "model.onnx": summarize_model}
    if arrays:
        readers.update({f"{name}.npz": lambda p: read_arrays(p, "arrays file") for name in ("inputs", "expected", "actual")})
        readers["allowance.npz"] = lambda p: read_arrays(p, "allowance file", ARRAY_KINDS + "U")  # its rule is text
    for file_name, reader in readers.items():
        if not (folder / file_name).exists() and not (folder / file_name).is_symlink():
            continue
        try:
            value = reader(inside(folder, file_name, "case file"))
        except MemoryError:
            raise
        except Exception as exc:  # one damaged file costs that file (onnx and numpy raise many types)
            art.problems.append(f"{file_name} unreadable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        attribute = {"desc.json": "desc", "model.onnx": "model"}.get(file_name, file_name.removesuffix(".npz"))
        setattr(art, attribute, value if attribute != "desc" or isinstance(value, dict) else None)
    return art


def _attribute_text(value: Any, op_type: str = "", name: str = "") -> str:
    import onnx  # loaded only when a case folder holds a model: most report pages need none

    if op_type == "Cast" and name == "to" and isinstance(value, int):
        try:
            return f"{value} ({onnx.TensorProto.DataType.Name(value)})"
        except ValueError:
            return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, onnx.TensorProto):
        return f"tensor {onnx.TensorProto.DataType.Name(value.data_type)} {list(value.dims)}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_attribute_text(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _value_info(v: Any) -> OnnxValue:
    import onnx  # loaded only when a case folder holds a model: most report pages need none

    t = v.type.tensor_type
    dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in t.shape.dim]
    return OnnxValue(v.name, onnx.TensorProto.DataType.Name(t.elem_type), "[" + ", ".join(dims) + "]")


def summarize_model(path: Path) -> ModelSummary:
    """Nodes, attributes, graph inputs/outputs and opsets of ``path`` (read, never executed)."""
    import onnx  # loaded only when a case folder holds a model: most report pages need none
    from onnx import helper

    model = onnx.ModelProto()
    model.ParseFromString(read_bytes(path, "ONNX model", limit_name="model_bytes"))
    nodes = [
        OnnxNode(
            name=n.name, op_type=n.op_type, domain=n.domain or "ai.onnx",
            inputs=list(n.input), outputs=list(n.output),
            attributes=[(a.name, _attribute_text(helper.get_attribute_value(a), n.op_type, a.name))
                        for a in n.attribute],
        )
        for n in model.graph.node
    ]
    return ModelSummary(
        ir_version=int(model.ir_version),
        opsets=[(o.domain or "ai.onnx", int(o.version)) for o in model.opset_import],
        nodes=nodes,
        inputs=[_value_info(v) for v in model.graph.input],
        outputs=[_value_info(v) for v in model.graph.output],
    )


@dataclass
class IndexMismatch:
    position: tuple[int, ...]
    expected_index: int
    actual_index: int
    expected_coords: tuple[int, ...] | None
    actual_coords: tuple[int, ...] | None
    expected_value: float | None
    value_at_actual: float | None
    tie: bool


def index_output(art: CaseArtifacts) -> tuple[str, str] | None:
    """``(index output, the value output it locates)`` of the first index output a registered
    operator declares (``OpSpec.index_outputs``) that the case's expected outputs hold, or None."""
    for spec in specs():
        for index, (values, _) in spec.index_outputs.items():
            if index in art.expected:
                return index, values
    return None


def index_mismatches(art: CaseArtifacts, limit: int = 50) -> tuple[list[IndexMismatch], list[IndexMismatch], int]:
    """Index output differences (``index_output``) split into (real mismatches, ties, total differing).

    A differing index is shown as a tie when the input element it points at equals the expected
    maximum (both NaN counts as equal).  The harness's count (which also checks the window) is the
    verdict; this split only lets a reader see which positions are which.  Needs the one input of
    the model in inputs.npz; without it every difference is listed as a mismatch with no values.
    """
    index, values = index_output(art) or ("", "")
    e_idx = art.expected.get(index)
    a_idx = art.actual.get(index)
    if e_idx is None or a_idx is None or e_idx.shape != a_idx.shape:
        return [], [], 0
    x = next(iter(art.inputs.values())) if len(art.inputs) == 1 else None
    maxima = art.expected.get(values)
    diff_pos = np.argwhere(e_idx.astype(np.int64) != a_idx.astype(np.int64))
    mismatches: list[IndexMismatch] = []
    ties: list[IndexMismatch] = []
    for pos in diff_pos:
        p = tuple(int(v) for v in pos)
        ei, ai = int(e_idx[p]), int(a_idx[p])
        coords = lambda i: tuple(int(c) for c in np.unravel_index(i, x.shape)) if x is not None and 0 <= i < x.size else None  # noqa: E731
        expected_value = float(maxima[p]) if maxima is not None and maxima.shape == e_idx.shape else None
        at_actual = float(x.reshape(-1)[ai]) if x is not None and 0 <= ai < x.size else None
        tie = (expected_value is not None and at_actual is not None
               and (expected_value == at_actual or (np.isnan(expected_value) and np.isnan(at_actual))))
        item = IndexMismatch(p, ei, ai, coords(ei), coords(ai), expected_value, at_actual, bool(tie))
        target = ties if tie else mismatches
        if len(target) < limit:
            target.append(item)
    return mismatches, ties, int(len(diff_pos))


#: Codes of ``index_categories``.
INDEX_SAME, INDEX_TIE, INDEX_MISMATCH = 0, 1, 2


def index_categories(art: CaseArtifacts) -> np.ndarray | None:
    """Per element of the index output (``index_output``): INDEX_SAME, INDEX_TIE or INDEX_MISMATCH
    (same rule as ``index_mismatches``); None when the case has no comparable index output."""
    index, values = index_output(art) or ("", "")
    e_idx = art.expected.get(index)
    a_idx = art.actual.get(index)
    if e_idx is None or a_idx is None or e_idx.shape != a_idx.shape:
        return None
    e, a = e_idx.astype(np.int64), a_idx.astype(np.int64)
    codes = np.where(e != a, INDEX_MISMATCH, INDEX_SAME).astype(np.uint8)
    x = next(iter(art.inputs.values())) if len(art.inputs) == 1 else None
    maxima = art.expected.get(values)
    if x is not None and maxima is not None and maxima.shape == e.shape:
        flat = x.reshape(-1)
        inside = (a >= 0) & (a < flat.size)
        found = flat[np.where(inside, a, 0)]
        same = found == maxima
        if flat.dtype.kind == "f":
            same |= np.isnan(found) & np.isnan(maxima)
        codes[(codes == INDEX_MISMATCH) & inside & same] = INDEX_TIE
    return codes
