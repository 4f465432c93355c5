"""A NumPy reference of DirectML operators, field by field as their doc pages say.

``desc_from_dml`` reads a desc in DirectML's spelling, ``validate`` checks it against its
page, ``execute`` computes it; ``registry`` lists the operators (one record each). Nothing
here imports onnx or onnxruntime.
"""

from .descs import Desc, Size2D, TensorDesc
from .dml_dict import desc_from_dml, desc_to_dml
from .errors import DescError
from .execute import execute, execute_with_bounds
from .max_pooling2 import MaxPooling2Desc
from .precision import DEFAULT_MODEL, MODELS, Expected, KnifeEdge, PrecisionModel, precision_model
from .registry import OpSpec, register, spec_for, spec_named, specs
from .roi_align import RoiAlign1Desc, RoiAlignDesc
from .roi_pooling import RoiPoolingDesc
from .validation import NEWEST_FEATURE_LEVEL, validate

__all__ = [
    "DEFAULT_MODEL", "Desc", "DescError", "Expected", "KnifeEdge", "MODELS", "MaxPooling2Desc", "NEWEST_FEATURE_LEVEL",
    "OpSpec", "PrecisionModel", "RoiAlign1Desc", "RoiAlignDesc", "RoiPoolingDesc", "Size2D", "TensorDesc",
    "desc_from_dml", "desc_to_dml", "execute", "execute_with_bounds", "precision_model", "register", "spec_for",
    "spec_named", "specs", "validate",
]
