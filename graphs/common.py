"""Pieces every operator mapping shares: opset checks, tensor flags, ports."""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx

from ep_testbed.reference.descs import TensorDesc
from ep_testbed.reference.dtypes import numpy_dtype

from .flags import Flag
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
    if opset < MIN_OPSET:
        raise OpsetError(opset, f"this mapper builds opset {MIN_OPSET} to {newest} (MaxPool's Indices output "
                                "appears in opset 8)")
    if opset > newest:
        raise OpsetError(opset, f"the installed onnx {onnx.__version__} / onnxruntime support opsets up to {newest}")
    return opset


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
