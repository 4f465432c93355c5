"""``to_onnx(desc, opset=None) -> Mapping``: the entry point of the mapper."""

from __future__ import annotations

from typing import Optional

from ep_testbed.reference.descs import Desc, MaxPooling2Desc, RoiAlign1Desc, RoiAlignDesc, RoiPoolingDesc
from ep_testbed.reference.errors import DescError
from ep_testbed.reference.validation import validate

from .common import choose_opset
from .map_max_pooling2 import map_max_pooling2
from .map_roi_align import map_roi_align
from .map_roi_pooling import map_roi_pooling
from .mapping import Mapping


def to_onnx(desc: Desc, opset: Optional[int] = None) -> Mapping:
    """The ONNX model of a desc, with one flag per field value.

    The desc is validated against its page first (``reference.DescError`` names the field).
    ``opset`` None picks the default (16); an explicit opset is honoured or refused with
    ``graphs.OpsetError`` saying why. The model's IR version is the newest the installed
    onnxruntime loads, and it passes ``onnx.checker`` (full check).
    """
    validate(desc)
    chosen = choose_opset(opset)
    if isinstance(desc, RoiPoolingDesc):
        return map_roi_pooling(desc, chosen)
    if isinstance(desc, MaxPooling2Desc):
        return map_max_pooling2(desc, chosen)
    if isinstance(desc, (RoiAlignDesc, RoiAlign1Desc)):
        return map_roi_align(desc, chosen)
    raise DescError("Type", type(desc).__name__, "one of the four desc dataclasses")
