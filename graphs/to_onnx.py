"""``to_onnx(desc, opset=None) -> Mapping``: the entry point of the mapper."""

from __future__ import annotations

from typing import Optional

from ..reference import Desc, validate
from .common import choose_opset
from .mapping import Mapping
from .ops import mapper_for


def to_onnx(desc: Desc, opset: Optional[int] = None) -> Mapping:
    """The ONNX model of a desc, with one flag per field value.

    The desc is validated against its page first (``reference.DescError`` names the field).
    ``opset`` None picks the default (16); an explicit opset is honoured or refused with
    ``graphs.OpsetError`` saying why. The model's IR version is the newest the installed
    onnxruntime loads, and it passes ``onnx.checker`` (full check).
    """
    validate(desc)
    return mapper_for(desc).to_onnx(desc, choose_opset(opset))
