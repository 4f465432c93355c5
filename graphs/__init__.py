"""DML desc <-> ONNX: the mapper, its flags, and the case catalog.

``to_onnx(desc)`` builds the ONNX model of a DirectML desc and flags every field value as
exact, composed, diverges or inexpressible; ``from_onnx(node, ...)`` reads an ONNX node back
into the desc ONNX's spec means (mode "spec") or the one ORT's DirectML EP builds ("dml-ep").
each operator's mapper module lives in ``graphs/ops/`` and its case generators in
``graphs/cases/`` (the operator registry names both); ``graphs.catalog.build_catalog`` lists
the named, seeded cases; ``cli_map`` / ``write_cases``
are the library side of ``ep-testbed map`` / ``ep-testbed gen``. Nothing here compares outputs.
"""

from .cli import cli_map, safe_id, write_cases
from .common import OpsetError
from .flags import KINDS, Flag
from .from_onnx import (
           attributed_op_types,
           from_onnx,
           import_node,
           predicted_divergences,
)
from .input_flags import input_flags
from .mapping import Mapping
from .runtime import DEFAULT_OPSET, max_ir_version, max_opset
from .to_onnx import to_onnx

__all__ = ["DEFAULT_OPSET", "attributed_op_types", "Flag", "KINDS", "Mapping", "OpsetError", "cli_map", "from_onnx", "import_node",
           "input_flags", "max_ir_version", "max_opset", "predicted_divergences", "safe_id", "to_onnx",
           "write_cases"]
