"""DML desc <-> ONNX: the mapper, its flags, and the case catalog.

``to_onnx(desc)`` builds the ONNX model of a DirectML desc and flags every field value as
exact, composed, diverges or inexpressible; ``from_onnx(node, ...)`` reads an ONNX node back
into the desc ONNX's spec means (mode "spec") or the one ORT's DirectML EP builds ("dml-ep").
``graphs.catalog.build_catalog`` lists the named, seeded cases. Nothing here compares outputs.
"""

from .common import OpsetError
from .flags import KINDS, Flag
from .mapping import Mapping
from .to_onnx import to_onnx

__all__ = ["Flag", "KINDS", "Mapping", "OpsetError", "to_onnx"]
