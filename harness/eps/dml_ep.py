"""What ONNX Runtime's DirectML EP will do with a model, predicted from its public source.

Nothing here was observed on DirectML (these machines have no Windows GPU): every prediction
names the source line it rests on, and ``harness/expectations/dml.json`` turns the predictions
into expectations that the first real run confirms (``known``) or refutes (``fixed``).

Source: microsoft/onnxruntime, ``onnxruntime/core/providers/dml/DmlExecutionProvider/src/``
at commit c4780e65b (1.25 development, 2026-02-19; nothing under ``providers/dml`` changed
after 2025-09-05, so it matches the 1.24.x release that the newest onnxruntime-directml
wheel is). Line numbers below refer to that commit; ``SRC`` is its URL prefix.

- Which nodes the EP takes (``declined``): ``Operators/OperatorRegistration.cpp`` registers a
  kernel per ``REG_INFO(v, Op)`` row for the since-version opset ``v`` resolves ``Op`` to
  (``OnnxOperatorSet<v>::sc_sinceVer_<Op>``, L712-726) with an open end, and ORT's kernel lookup
  takes an open-ended kernel only for exactly its start version
  (``onnxruntime/core/framework/kernel_registry.cc`` VerifyVersion, L120-143): an opset whose
  since-version has no row (MaxPool-22, RoiAlign-22...) has no DML kernel. Each type
  constraint allows the types of its ``SupportedTensorDataTypes`` mask (L228-281). The rows of
  an operator's own op types are its mapper module's ``DML_EP`` (``graphs.dml_ep_facts``,
  ``operator_facts``); the rows of the helper op types mappers add are here
  (``HELPER_REGISTRATIONS``).
- Which tensor types the GPU takes (``device-dependent``): ``ExecutionProvider.cpp``
  DoesNodeContainSupportedDataTypes (L740-850) also declines a node whose tensor type the
  device does not report through DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT (GetSupportedDeviceDataTypeMask,
  DmlCommon.cpp). Which types a GPU reports is not public; float64 and the 64-bit integers
  (MaxPool's Indices, RoiAlign's batch indices) are the ones GPUs may lack, and float16 the one a
  device without 16-bit shader operations lacks (seen: DirectML 1.15.4 on the emulated llvmpipe
  device of ``--ep dml-wine`` answers FLOAT16, INT16 and UINT16 unsupported), so a node holding
  them is named (it decides no outcome: a device without them turns such cases into not-on-ep).
- Where a node the EP takes computes something else (``diverges``): the DML EP's reading of the
  op node (``graphs.from_onnx.predicted_divergences``: the desc the EP builds against the
  spec's, each mapper module citing its operator file).

``predict_model(model, op_nodes)`` answers for a model, ``predict_case(case)`` for a catalog
case (mapped with ``graphs.to_onnx``); ``implied_outcome`` says what a run would report. Each
prediction is a dict: ``node``, ``op_type``, ``field``, ``kind``, ``value``, ``reason``,
``source``.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

import onnx
from onnx import TensorProto as T

from ...graphs import to_onnx
from ...graphs.dml_ep_facts import (
    ALL_SCALARS,
    FLOAT16TO32,
    INTS8TO64,
    REGISTRATION,
    SRC,
    DmlEpOp,
    Registration,
)
from ...graphs.from_onnx import attributed_op_types, predicted_divergences
from ...graphs.ops import mapper_of
from ...reference.registry import specs
from ..core.expectations import apply

#: Tensor types whose support is the GPU's answer and may be missing (module docstring).
DEVICE_DEPENDENT = frozenset({T.DOUBLE, T.INT64, T.UINT64, T.FLOAT16})

#: The rows for the helper op types a mapper's models may add around its op nodes
#: (OperatorRegistration.cpp); each operator's own op types are in its mapper module's ``DML_EP``.
HELPER_REGISTRATIONS: dict[str, Registration] = {
    "Cast": Registration((7, 9, 13, 19, 21), {"T1": ALL_SCALARS, "T2": ALL_SCALARS}, "L1090-1094, L603"),
    "Reshape": Registration((7, 13, 14, 19, 21), {"T": ALL_SCALARS}, "L871-875"),
    "Add": Registration((7, 13, 14), {"T": FLOAT16TO32 | INTS8TO64}, "L900-902, L588"),
    "Mul": Registration((7, 13, 14), {"T": FLOAT16TO32 | INTS8TO64}, "L906-908, L588"),
    "MatMul": Registration((7, 9, 13), {"T": FLOAT16TO32}, "L1087-1089"),
    "ConstantOfShape": Registration((9, 21), {"T1": frozenset({T.INT64}), "T2": ALL_SCALARS}, "L825-826, L616",
                                    cpu_constraints=("T1",)),
}


def operator_facts() -> dict[str, DmlEpOp]:
    """ONNX op type -> the DML EP's facts, from every registered operator's mapper module (``DML_EP``)."""
    facts: dict[str, DmlEpOp] = {}
    for spec in specs():
        facts.update(mapper_of(spec).DML_EP)
    return facts


def registrations(op_type: str) -> list[Registration]:
    """Every row the EP has for ``op_type`` (empty: the predictor knows nothing of it)."""
    own = operator_facts().get(op_type)
    if own is not None:
        return list(own.rows)
    return [HELPER_REGISTRATIONS[op_type]] if op_type in HELPER_REGISTRATIONS else []


def _prediction(node: onnx.NodeProto, field: str, kind: str, value: Any, reason: str, source: str) -> dict:
    """One prediction (module docstring)."""
    return {"node": node.name, "op_type": node.op_type, "field": field, "kind": kind, "value": value,
            "reason": reason, "source": source}

def _anchor(lines: str) -> str:
    """``"L757-760, L600"`` -> ``"#L757-L760"`` (GitHub's anchor for the first range; "" for no lines)."""
    first = lines.split(",")[0].strip()
    if not first:
        return ""
    start, _, end = first.partition("-")
    return f"#{start}" + (f"-L{end}" if end else "")


def _type_name(code: int) -> str:
    """``1`` -> ``"FLOAT"`` (onnx.TensorProto's name)."""
    return T.DataType.Name(code)


def _bound_types(node: onnx.NodeProto, schema: Any, types_of: dict[str, int]) -> dict[str, set[int]]:
    """Type constraint name -> the element types the node binds to it (inputs and outputs whose
    formal parameter is typed by that constraint; absent optional ones and unknown types skipped)."""
    bound: dict[str, set[int]] = {}
    for formals, actuals in ((schema.inputs, node.input), (schema.outputs, node.output)):
        for formal, name in zip(formals, actuals):
            if name and name in types_of:
                bound.setdefault(formal.type_str, set()).add(types_of[name])
    return bound


def registration_predictions(node: onnx.NodeProto, opset: int, types_of: dict[str, int]) -> list[dict]:
    """``declined`` when the EP has no row for the node's since-version or a type constraint holds a
    type outside its row's mask; ``device-dependent`` for a float64 tensor on the GPU. Empty for
    an op type the predictor has no rows for (it predicts nothing there)."""
    rows = registrations(node.op_type)
    if not rows:
        return []
    schema = onnx.defs.get_schema(node.op_type, opset, "")
    since = schema.since_version
    row = next((r for r in rows if since in r.since_versions(node.op_type)), None)
    if row is None:
        versions = sorted(set().union(*(r.since_versions(node.op_type) for r in rows)))
        return [_prediction(node, node.op_type, "declined", f"{node.op_type}-{since}",
                            f"the DML EP registers {node.op_type} for since-versions {versions} only; opset {opset} "
                            f"resolves it to {since}, which has no DML kernel", REGISTRATION + _anchor(rows[0].lines))]
    found = []
    for constraint, types in sorted(_bound_types(node, schema, types_of).items()):
        allowed = row.types.get(constraint)
        if allowed is None:
            continue
        names = sorted(_type_name(t) for t in types)
        if types - allowed:
            found.append(_prediction(
                node, constraint, "declined", names,
                f"the DML EP registers {node.op_type}-{since} with {constraint} in "
                f"{sorted(_type_name(t) for t in allowed)} only", REGISTRATION + _anchor(row.lines)))
        elif constraint not in row.cpu_constraints and types & DEVICE_DEPENDENT:
            found.append(_prediction(
                node, constraint, "device-dependent", names,
                f"registered, but the node runs on the GPU only if the device reports support for "
                f"{', '.join(_type_name(t) for t in sorted(types & DEVICE_DEPENDENT))} "
                "(DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT); otherwise the EP declines it",
                SRC + "ExecutionProvider.cpp#L740-L850"))
    return found


def divergence_predictions(node: onnx.NodeProto, opset: int, shapes: dict[str, list[int]],
                           types_of: dict[str, int]) -> list[dict]:
    """``diverges`` for each field where the DML EP's desc for ``node`` differs from the spec's
    (``graphs.from_onnx.predicted_divergences``); ``declined`` when its reading refuses the node
    (e.g. a support query such as QueryMaxPool). Empty when the node cannot be read back."""

    try:
        flags = predicted_divergences(node, [shapes[i] for i in node.input], [types_of[i] for i in node.input],
                                      opset=opset)
    except (KeyError, ValueError):  # unknown shapes, or no desc in the spec reading: nothing predicted
        return []
    own = operator_facts().get(node.op_type)
    source = SRC + (own.operator_file if own is not None else "")
    return [_prediction(node, f.field, "declined" if f.field == node.op_type else "diverges", f.value, f.reason,
                        source) for f in flags]


def _value_facts(model: onnx.ModelProto) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Static shapes and element types of every value of ``model`` (ONNX shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes, types = {}, {}
    graph = inferred.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor = value.type.tensor_type
        types[value.name] = tensor.elem_type
        if tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim):
            shapes[value.name] = [d.dim_value for d in tensor.shape.dim]
    for init in graph.initializer:
        types[init.name] = init.data_type
        shapes[init.name] = list(init.dims)
    return shapes, types


def predict_model(model: onnx.ModelProto, op_nodes: Optional[Iterable[str]] = None) -> list[dict]:
    """Every prediction for ``model``: registration for each node, divergences for the op nodes
    (``op_nodes``: node names; None: every node an operator of the registry reads back)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return []
    shapes, types = _value_facts(model)
    attributed = attributed_op_types()
    ops = set(op_nodes) if op_nodes is not None else {n.name for n in model.graph.node if n.op_type in attributed}
    found = []
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        taken = registration_predictions(node, opset, types)
        found += taken
        if node.name in ops and not any(p["kind"] == "declined" for p in taken):
            found += divergence_predictions(node, opset, shapes, types)
    return found


def predict_case(case: Any) -> list[dict]:
    """``predict_model`` for a catalog case's model (``graphs.to_onnx(case.desc, case.opset)``);
    empty when the case has no model (inexpressible) or cannot be mapped."""

    try:
        mapping = to_onnx(case.desc, opset=getattr(case, "opset", None))
    except Exception:  # the run itself reports a mapper error; nothing to predict
        return []
    if mapping.model is None:
        return []
    return predict_model(mapping.model, mapping.op_nodes)


def implied_outcome(predictions: Iterable[dict]) -> Optional[str]:
    """The raw outcome the predictions imply: ``not-on-ep`` when a node is declined (fallback is
    disabled, so the session is refused), ``fail`` when a node diverges, else None (no prediction)."""
    kinds = {p["kind"] for p in predictions}
    if "declined" in kinds:
        return "not-on-ep"
    if "diverges" in kinds:
        return "fail"
    return None


def first_run_outlook(cases: Iterable[Any], expectations: Any) -> list[dict]:
    """Per case what a first DML run would report where the source predicts something: ``id``,
    ``predicted`` (``implied_outcome``), ``reported`` (after ``expectations``, an
    ``harness.core.expectations.Expectations``), ``entry`` (the matching pattern or None) and the
    predictions. Cases with no prediction are left out: nothing is known of them until a run."""

    rows = []
    for case in cases:
        predictions = predict_case(case)
        predicted = implied_outcome(predictions)
        if predicted is None:
            continue
        entry = expectations.match(case.id, getattr(case, "tags", None), None, predictions)
        rows.append({"id": case.id, "predicted": predicted, "reported": apply(predicted, entry),
                     "entry": entry.id if entry else None, "predictions": predictions})
    return rows
