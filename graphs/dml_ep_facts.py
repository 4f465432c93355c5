"""What ORT's DirectML EP registers for an ONNX op type, as each mapper module states it (``DML_EP``).

A mapper module's ``DML_EP`` (a hook of the operator contract, ``reference.registry.MAPPER_HOOKS``)
maps each ONNX op type its op nodes use to a ``DmlEpOp``: the EP's ``REG_INFO`` rows for it and the
operator file its DML desc is built in. ``harness/eps/dml_ep.py`` predicts from them (and from its
own rows for the helper op types every mapper may add), so the facts about one operator live in
that operator's module.

Source: microsoft/onnxruntime, ``onnxruntime/core/providers/dml/DmlExecutionProvider/src/`` at
commit c4780e65b (``SRC``); ``Operators/OperatorRegistration.cpp`` registers a kernel per
``REG_INFO(v, Op)`` row, each type constraint allowing the types of its ``SupportedTensorDataTypes``
mask (L228-281).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import TensorProto as T

SRC = ("https://github.com/microsoft/onnxruntime/blob/c4780e65b57e8c7e3f8f184a80c25aabc5530b06/"
       "onnxruntime/core/providers/dml/DmlExecutionProvider/src/")
REGISTRATION = SRC + "Operators/OperatorRegistration.cpp"

# SupportedTensorDataTypes masks (OperatorRegistration.cpp L228-281)
FLOAT16TO32 = frozenset({T.FLOAT16, T.FLOAT})
INTS8BIT = frozenset({T.INT8, T.UINT8})
INTS8TO64 = frozenset({T.INT8, T.UINT8, T.INT16, T.UINT16, T.INT32, T.UINT32, T.INT64, T.UINT64})
ALL_SCALARS = INTS8TO64 | FLOAT16TO32 | {T.DOUBLE, T.BOOL}


@dataclass(frozen=True)
class Registration:
    """The DML EP's rows for one ONNX op: the opsets named in its ``REG_INFO`` rows, the types each
    type constraint allows, the constraints read on the CPU (exempt from the device check), and
    the source lines (``"L757-760, L600"``; "" where not pinned to a line)."""

    reg_opsets: tuple[int, ...]
    types: dict
    lines: str
    cpu_constraints: tuple[str, ...] = ()

    def since_versions(self, op_type: str) -> set[int]:
        """The ONNX since-versions the rows register (``OnnxOperatorSet<v>::sc_sinceVer_<Op>``)."""
        return {onnx.defs.get_schema(op_type, v, "").since_version for v in self.reg_opsets}


@dataclass(frozen=True)
class DmlEpOp:
    """The DML EP's facts for one ONNX op type: its registration rows (one or more, e.g. MaxPool's
    float-only opset-7 row and its opset-8 rows) and the operator file, relative to ``SRC``, where
    the EP builds the node's DML desc (cited by ``diverges`` predictions)."""

    rows: tuple[Registration, ...]
    operator_file: str
