"""A NumPy reference of DirectML operators, field by field as their doc pages say.

``desc_from_dml`` reads a desc in DirectML's spelling, ``validate`` checks it against its
page, ``execute`` computes it; ``registry`` lists the operators (one record each), and every
registered operator's desc class is an attribute of this package under its class name
(``from ep_testbed.reference import RoiAlign1Desc``), found through the registry rather than
listed here. Nothing here imports onnx or onnxruntime.
"""

if __name__ == "reference":  # imported by its folder name from the repository root, not as installed
    raise ImportError("ep-testbed's modules are imported as ep_testbed.reference (e.g. `from ep_testbed.reference import execute`): "
                      "`import reference` would load a second copy whose classes differ from the installed ones. "
                      "Install the project (`python -m pip install -e .`) and import ep_testbed.reference.")

from .descs import Desc, Size2D, TensorDesc
from .dml_dict import desc_from_dml, desc_to_dml
from .errors import DescError
from .execute import execute, execute_reading, execute_with_bounds, readings_of, select_regions
from .precision import DEFAULT_MODEL, MODELS, Expected, KnifeEdge, PrecisionModel, precision_model
from .readings import Reading, ReadingError
from .registry import OpSpec, register, spec_for, spec_named, specs
from .validation import NEWEST_FEATURE_LEVEL, validate

__all__ = [
    "DEFAULT_MODEL", "Desc", "DescError", "Expected", "KnifeEdge", "MODELS", "NEWEST_FEATURE_LEVEL", "OpSpec",
    "PrecisionModel", "Reading", "ReadingError", "Size2D", "TensorDesc", "desc_from_dml", "desc_to_dml", "execute",
    "execute_reading", "execute_with_bounds", "readings_of", "select_regions",
    "precision_model", "register", "spec_for", "spec_named", "specs", "validate",
] + [spec.desc.__name__ for spec in specs()]


def __getattr__(name: str) -> type:
    """A registered operator's desc class by its class name (``RoiAlign1Desc``, ...): the registry
    lists the operators, this package does not; AttributeError for any other name."""
    for spec in specs():
        if spec.desc.__name__ == name:
            return spec.desc
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
