"""Pieces every operator's mapper module shares: opset checks, tensor flags, reading nodes back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np
import onnx
from onnx import helper

from ..reference.descs import TensorDesc
from ..reference.dtypes import dml_data_type, numpy_dtype
from ..reference.registry import specs
from .flags import Flag
from .ops import mapper_of
from .runtime import DEFAULT_OPSET, MIN_OPSET, max_opset


class OpsetError(ValueError):
    """An explicit opset this mapper cannot honour for a desc; the message says why."""

    def __init__(self, opset: int, reason: str):
        self.opset = opset
        self.reason = reason
        super().__init__(f"opset {opset}: {reason}")


def choose_opset(opset: Optional[int]) -> int:
    """``opset`` if the installed onnx and onnxruntime both support it, else OpsetError."""
    if opset is None:
        return DEFAULT_OPSET
    if isinstance(opset, bool) or not isinstance(opset, int):
        raise OpsetError(opset, "an opset is a whole number")
    newest = max_opset()
    oldest, why = oldest_opset()
    if opset < oldest:
        raise OpsetError(opset, f"this mapper builds opset {oldest} to {newest}" + (f" ({why})" if why else ""))
    if opset > newest:
        raise OpsetError(opset, f"the installed onnx {onnx.__version__} / onnxruntime support opsets up to {newest}")
    return opset


def oldest_opset() -> tuple[int, str]:
    """The oldest opset the mapper builds, and why: the newest ``OLDEST_OPSET`` a registered
    operator's mapper module states (an optional hook), or ``runtime.MIN_OPSET``."""
    found = (MIN_OPSET, "")
    for spec in specs():
        stated = getattr(mapper_of(spec), "OLDEST_OPSET", None)
        if stated is not None and stated[0] >= found[0]:
            found = (int(stated[0]), str(stated[1]))
    return found


def packed_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def strides_flag(member: str, tensor: TensorDesc) -> Flag:
    """Packed (or absent) Strides are what ONNX tensors are; anything else is a memory layout
    ONNX Runtime never hands an EP."""
    if tensor.strides is None:
        return Flag(f"{member}.Strides", None, "exact", "absent: a packed tensor, as every ONNX tensor is")
    if tuple(tensor.strides) == packed_strides(tensor.sizes):
        return Flag(f"{member}.Strides", list(tensor.strides), "exact", "the packed row-major strides of Sizes, "
                    "as every ONNX tensor is laid out")
    return Flag(f"{member}.Strides", list(tensor.strides), "inexpressible",
                "ONNX tensors are always packed, so ONNX Runtime never hands an EP a tensor with these strides")


def dtype_of(tensor: TensorDesc) -> np.dtype:
    return numpy_dtype(tensor.data_type)


# --- reading an ONNX node back as a desc (each op module's ``import_node``) ----------------

#: The two readings of a node: what the ONNX spec means, and what ORT's DirectML EP builds.
MODES = ("spec", "dml-ep")
UINT32_MAX = 2**32 - 1


class OnnxImportError(ValueError):
    """An ONNX node that has no DML desc in the requested reading; the message says why."""


@dataclass(frozen=True)
class Alternative:
    """What a node means, for some of its input data, where that differs from its desc: on the
    output rows ``rows`` (positions along axis 0 of every output: ROIs), the node computes what
    the same desc computes on the node input arrays ``inputs``. ``flag`` says what differs and why."""

    flag: Flag
    rows: np.ndarray
    inputs: list


@dataclass
class Imported:
    """A node read as a desc, plus what it takes to run the desc on the node's own data.

    ``inputs(onnx_arrays)`` turns the node's input arrays (in node input order) into the DML
    tensors ``reference.execute`` takes; ``outputs(dml_outputs)`` turns its results back into
    the node's output arrays (in node output order). ``flags`` say where the desc's meaning
    differs from the node's. ``alternatives(onnx_arrays)`` lists, for flags whose effect depends
    on the data, the rows of these arrays where the node means something else and what
    (``Alternative``); ``data_flags`` names those flags' fields: outside the rows
    ``alternatives`` returns, they change nothing."""

    desc: Any
    flags: list[Flag] = field(default_factory=list)
    inputs: Callable[[Sequence[np.ndarray]], dict] = lambda arrays: {}
    outputs: Callable[[dict], list] = lambda out: []
    alternatives: Callable[[Sequence[np.ndarray]], list] = lambda arrays: []
    data_flags: tuple = ()


def np_dtype(t: Any) -> np.dtype:
    """A NumPy dtype from a NumPy dtype or an ``onnx.TensorProto`` type code."""
    if isinstance(t, int) and not isinstance(t, bool):
        return np.dtype(helper.tensor_dtype_to_np_dtype(t))
    return np.dtype(t)


def node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (strings decoded)."""
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def float_data_type(t: np.dtype, what: str, mode: str) -> str:
    """FLOAT32 / FLOAT16 for a float input of a node, else OnnxImportError naming it."""
    if t not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise OnnxImportError(f"{what} of type {t}: DML's desc takes FLOAT32 or FLOAT16"
                              + (" (the DML EP registers float and float16 only)" if mode == "dml-ep" else ""))
    return dml_data_type(t)


def scalar_tensor(value: float, dtype: np.dtype) -> onnx.TensorProto:
    """A one-element tensor attribute value (ConstantOfShape's ``value``)."""
    return onnx.numpy_helper.from_array(np.array([value], dtype=dtype), "value")
