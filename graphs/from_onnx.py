"""``from_onnx(node, input_shapes, input_types, mode)``: an ONNX node read back as a DML desc.

Two readings:

* ``"spec"``: what the ONNX spec (and ONNX Runtime's CPU kernel, where the spec is silent)
  means, as the nearest DML desc. Where no desc means the same, the desc is the nearest one and
  a ``diverges`` flag says what differs (``import_node`` returns the flags).
* ``"dml-ep"``: the desc ORT's DirectML EP actually builds, quirks included, as read from its
  source (``onnxruntime/core/providers/dml/DmlExecutionProvider/src/``; each operator's mapper
  module in ``graphs/ops/`` cites the files and what they do).

The operator is found through the registry (the records whose ``onnx_ops`` name the node's
op type). Where the two readings differ for a node, that is a predicted EP divergence
(``predicted_divergences``).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import onnx

from ..reference.descs import Size2D, TensorDesc, dml_fields
from ..reference.registry import specs, specs_for_onnx
from .common import MODES, Imported, OnnxImportError, np_dtype
from .flags import Flag
from .ops import mapper_of

__all__ = ["MODES", "Imported", "OnnxImportError", "attributed_op_types", "from_onnx", "import_node",
           "predicted_divergences"]


def attributed_op_types() -> tuple[str, ...]:
    """The ONNX op types some registered operator reads back (what model runs attribute)."""
    return tuple(dict.fromkeys(op for spec in specs() for op in spec.onnx_ops))


def from_onnx(node: onnx.NodeProto, input_shapes: Sequence[Sequence[int]], input_types: Sequence[Any],
              mode: str = "spec", opset: Optional[int] = None):
    """The DML desc an ONNX node of an attributed op type (``attributed_op_types()``) means.

    ``input_shapes`` / ``input_types`` (NumPy dtypes or ``onnx.TensorProto`` codes) follow the
    node's inputs. ``opset`` is the model's default-domain opset (None: the newest reading,
    e.g. RoiAlign-16). ``mode`` is ``"spec"`` or ``"dml-ep"`` (module docstring). Raises
    ``ValueError`` for a node with no desc in that reading (e.g. a node the DML EP refuses).
    """
    return import_node(node, input_shapes, input_types, mode, opset).desc


def import_node(node: onnx.NodeProto, input_shapes: Sequence[Sequence[int]], input_types: Sequence[Any],
                mode: str = "spec", opset: Optional[int] = None) -> Imported:
    """``from_onnx`` with the flags and the array adapters (see ``Imported``)."""
    if mode not in MODES:
        raise ValueError(f"mode = {mode!r}: one of {', '.join(MODES)}")
    shapes = [tuple(int(s) for s in shape) for shape in input_shapes]
    types = [np_dtype(t) for t in input_types]
    found = specs_for_onnx(node.op_type)
    if not found:
        raise OnnxImportError(f"op_type = {node.op_type!r}: one of {', '.join(attributed_op_types())}")
    return mapper_of(found[0]).import_node(node, shapes, types, mode, opset)


def predicted_divergences(node: onnx.NodeProto, input_shapes, input_types, opset: Optional[int] = None) -> list[Flag]:
    """Fields where the DML EP's desc differs from the spec's: a predicted EP divergence each
    (one flag per field: a field both readings and the EP's own flags name is listed once)."""
    spec = import_node(node, input_shapes, input_types, "spec", opset)
    try:
        ep = import_node(node, input_shapes, input_types, "dml-ep", opset)
    except ValueError as e:
        return [Flag(node.op_type, node.name, "diverges", f"the DML EP does not build this node: {e}")]
    if type(spec.desc) is not type(ep.desc):
        return [Flag("Type", ep.desc.TYPE, "diverges", f"spec means {spec.desc.TYPE}, the EP builds {ep.desc.TYPE}")]
    explained = _one_per_field([f for f in ep.flags if f.kind == "diverges"])
    flags = []
    for name, dml, _ in dml_fields(type(spec.desc)):
        a, b = getattr(spec.desc, name), getattr(ep.desc, name)
        if isinstance(a, TensorDesc) and isinstance(b, TensorDesc):
            # rank padding with leading 1s is the same tensor
            if a.data_type == b.data_type and _squeeze(a.sizes) == _squeeze(b.sizes):
                continue
        if a != b:
            # the EP's own flags may name the field or a member of it ("OutputTensor.Sizes")
            own = [f for f in explained if f.field == dml or f.field.startswith(dml + ".")]
            why = "; ".join(f.reason for f in own) or "the DML EP builds this value"
            explained = [f for f in explained if f not in own]
            flags.append(Flag(dml, _plain(b), "diverges", f"the ONNX spec means {_plain(a)}; {why}"))
    return flags + explained


def _one_per_field(flags: list[Flag]) -> list[Flag]:
    """Flags merged per field (first value kept, reasons joined): a mapper may flag a field once
    per spatial axis."""
    merged: dict[str, Flag] = {}
    for f in flags:
        if f.field in merged:
            first = merged[f.field]
            if f.reason not in first.reason:
                merged[f.field] = Flag(f.field, first.value, first.kind, f"{first.reason}; {f.reason}")
        else:
            merged[f.field] = f
    return list(merged.values())


def _squeeze(sizes):
    sizes = tuple(sizes)
    while len(sizes) > 1 and sizes[0] == 1:
        sizes = sizes[1:]
    return sizes


def _plain(v):
    if isinstance(v, TensorDesc):
        return {"DataType": v.data_type, "Sizes": list(v.sizes)}
    if isinstance(v, Size2D):
        return {"Height": v.height, "Width": v.width}
    if isinstance(v, tuple):
        return list(v)
    return v
