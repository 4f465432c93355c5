"""A NumPy reference of DirectML operators, field by field as their doc pages say.

``desc_from_dml`` reads a desc in DirectML's spelling, ``validate`` checks it against its
page, ``execute`` computes it; ``registry`` lists the operators (one record each). Nothing
here imports onnx or onnxruntime.
"""

if __name__ == "reference":  # imported by its folder name from the repository root, not as installed
    raise ImportError("ep-testbed's modules are imported as ep_testbed.reference (e.g. `from ep_testbed.reference import execute`): "
                      "`import reference` would load a second copy whose classes differ from the installed ones. "
                      "Install the project (`python -m pip install -e .`) and import ep_testbed.reference.")

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
