"""One mapper module per DirectML operator: ``to_onnx``, ``import_node``, ``input_flags`` and the
DirectML EP's registration facts together.

The operator registry (``ep_testbed.reference.registry``) names each operator's module;
``mapper_of`` loads it and checks it against the contract (``registry.MAPPER_HOOKS``, which lists
and explains every hook), once per process:

- ``to_onnx(desc, opset) -> Mapping``: the ONNX model of a validated desc and one flag per
  field value (``exact``, ``composed``, ``diverges``, ``inexpressible``);
- ``import_node(node, shapes, types, mode, opset) -> Imported``: an ONNX node read back as the
  desc the ONNX spec means (``mode="spec"``) or the one ORT's DirectML EP builds (``"dml-ep"``);
- ``input_flags(desc, tensors, opset) -> list[Flag]``: flags raised by a case's input values;
- ``DML_EP``: per ONNX op type its op nodes use, the DirectML EP's rows (``graphs.dml_ep_facts``);
- optionally ``ONNX_BACKEND_DIFFERENCES``: ONNX backend cases whose meaning differs, and why.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ...reference.registry import OpSpec, checked_module, spec_for


def mapper_of(spec: OpSpec) -> ModuleType:
    """The mapper module of an operator's record, checked against ``registry.MAPPER_HOOKS``
    (``registry.OperatorContractError`` naming the operator, module and missing hook)."""
    return checked_module(spec, "graphs", importlib.import_module(spec.graphs))


def mapper_for(desc: Any) -> ModuleType:
    """The mapper module of a desc's operator (DescError for an unregistered desc)."""
    return mapper_of(spec_for(desc))
