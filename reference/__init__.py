"""A NumPy reference of four DirectML operators, field by field as their doc pages say.

``desc_from_dml`` reads a desc in DirectML's spelling, ``validate`` checks it against its
page, ``execute`` computes it. Nothing here imports onnx or onnxruntime.
"""

from .descs import (
    DESC_TYPES,
    OP_NAMES,
    Desc,
    MaxPooling2Desc,
    RoiAlign1Desc,
    RoiAlignDesc,
    RoiPoolingDesc,
    Size2D,
    TensorDesc,
)
from .dml_dict import desc_from_dml, desc_to_dml
from .errors import DescError
from .execute import execute
from .validation import NEWEST_FEATURE_LEVEL, validate

__all__ = [
    "DESC_TYPES", "OP_NAMES", "Desc", "DescError", "MaxPooling2Desc", "NEWEST_FEATURE_LEVEL",
    "RoiAlign1Desc", "RoiAlignDesc", "RoiPoolingDesc", "Size2D", "TensorDesc", "desc_from_dml",
    "desc_to_dml", "execute", "validate",
]
