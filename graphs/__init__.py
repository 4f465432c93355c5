"""DML desc <-> ONNX: the mapper, its flags, and the case catalog.

``to_onnx(desc)`` builds the ONNX model of a DirectML desc and flags every field value as
exact, composed, diverges or inexpressible; ``from_onnx(node, ...)`` reads an ONNX node back
into the desc ONNX's spec means (mode "spec") or the one ORT's DirectML EP builds ("dml-ep").
Each operator's mapper module lives in ``graphs/ops/`` and its case generators in
``graphs/cases/`` (the operator registry names both); ``graphs.catalog.build_catalog`` lists
the named, seeded cases. Nothing here compares outputs or reads files a user names (the
command line, in ``ep_testbed.harness.cli``, does).
"""

if __name__ == "graphs":  # imported by its folder name from the repository root, not as installed
    raise ImportError("ep-testbed's modules are imported as ep_testbed.graphs (e.g. `from ep_testbed.graphs import to_onnx`): "
                      "`import graphs` would load a second copy whose classes differ from the installed ones. "
                      "Install the project (`python -m pip install -e .`) and import ep_testbed.graphs.")

from .common import OpsetError
from .flags import KINDS, Flag
from .from_onnx import attributed_op_types, from_onnx, import_node, predicted_divergences
from .input_flags import input_flags
from .mapping import Mapping
from .runtime import DEFAULT_OPSET, max_ir_version, max_opset
from .to_onnx import to_onnx

__all__ = ["DEFAULT_OPSET", "Flag", "KINDS", "Mapping", "OpsetError", "attributed_op_types", "from_onnx", "import_node",
           "input_flags", "max_ir_version", "max_opset", "predicted_divergences", "to_onnx"]
