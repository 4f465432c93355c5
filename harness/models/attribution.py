"""Per-node attribution: owns which nodes of a model are judged on their own, the probe copy that
exposes their inputs and outputs, and the verdict on each node.

Attributed nodes are those of an ONNX op type some operator record reads back
(``graphs.attributed_op_types()``: ``RoiAlign``, ``MaxRoiPool``, ``MaxPool``), in the default
domain. ``probe_model`` adds every input and output of those nodes to a copy's graph outputs,
so that one run of the copy captures them. ``attribute_nodes`` then reads each node, in graph
(topological) order, as a DML desc (``graphs.import_node``) from the inputs the EP under test
actually fed it, computes the desc with ``reference.execute``, and compares the result with
what the EP produced for that node (``harness.compare.compare_outputs``, with the operator
record's index outputs and rule: ``outputs.index_rule_for``). Because every node is judged on
its own EP-produced inputs, upstream error does not leak into it: the first node that diverges
(``first_divergent``) is the node that broke the model.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import onnx
from ep_testbed.graphs import attributed_op_types, import_node
from ep_testbed.reference import execute, spec_for
from onnx import helper

from ..compare import compare_outputs
from ..tolerances import Tolerances
from .outputs import index_rule_for, no_errors
from .untrusted import constants as model_constants
from .untrusted import model_opset


def attributed_nodes(model: onnx.ModelProto) -> list[tuple[int, onnx.NodeProto]]:
    """``(position, node)`` of every node attribution judges, in graph order."""
    ops = attributed_op_types()
    return [(i, n) for i, n in enumerate(model.graph.node) if n.op_type in ops and n.domain in ("", "ai.onnx")]


def captured_values(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[str]:
    """The tensors a probe copy must expose: every input and output of an attributed node that
    is not already a graph input or an initializer."""
    known = set(feeds) | {t.name for t in model.graph.initializer}
    names = [v for _, n in attributed_nodes(model) for v in list(n.input) + list(n.output) if v]
    return [v for v in dict.fromkeys(names) if v not in known]


def probe_model(model: onnx.ModelProto, values: list[str]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph outputs also include ``values`` (intermediate tensors)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    types = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        for v in list(inferred.graph.value_info):
            types[v.name] = v.type.tensor_type.elem_type
    except Exception:  # shape inference is a nicety here; ONNX Runtime infers output types itself
        pass
    for name in values:
        if name and name not in present:
            if types.get(name):
                probe.graph.output.append(helper.make_tensor_value_info(name, types[name], None))
            else:
                probe.graph.output.append(helper.make_empty_tensor_value_info(name))
            present.add(name)
    return probe


def attribute_nodes(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep_values: Mapping[str, np.ndarray],
                    ref_values: Mapping[str, np.ndarray] | None, placement: Mapping[str, str],
                    config: Any, arrays_out: dict[str, dict[str, np.ndarray]] | None = None
                    ) -> list[dict[str, Any]]:
    """Per-node attribution rows for every attributed node, in graph (topological) order.

    ``ep_values`` / ``ref_values``: every captured tensor by name, from the EP under test and
    the reference EP. ``config`` gives ``reading`` (``"spec"`` or ``"dml-ep"``) and
    ``tolerances`` (a ``ModelRunConfig``). ``arrays_out`` (if given) receives, per diverging
    node, its reference and EP value outputs (``{"expected": .., "actual": ..}``) for pictures.
    Row ``status``: ``match``, ``tie-only``, ``diverges``, ``not-attributable`` (no DML desc for
    the node in this reading) or ``error`` (the reference raised, or a tensor of the node was
    not captured)."""
    constants = model_constants(model, getattr(config, "initializers", None))
    opset = model_opset(model)
    rows = []
    for position, node in attributed_nodes(model):
        row = _new_row(node, position, placement)
        rows.append(row)
        arrays = [_value(name, feeds, constants, ep_values) for name in node.input]
        row["inputs"] = [{"name": n, "shape": None if a is None else list(a.shape),
                          "dtype": None if a is None else a.dtype.name} for n, a in zip(node.input, arrays)]
        row["outputs"] = [{"name": n, "shape": list(np.shape(ep_values[n])) if n in ep_values else None}
                          for n in node.output if n]
        missing_in = any(a is None for name, a in zip(node.input, arrays) if name)
        if missing_in or any(n not in ep_values for n in node.output if n):
            row.update(status="error", message="an input or output of the node was not captured from the EP")
            continue
        pair = _judge_node(row, node, arrays, ep_values, config.reading, config.tolerances, opset)
        if arrays_out is not None and pair is not None:
            arrays_out[row["node"]] = pair
        if ref_values is not None and row["status"] not in ("not-attributable", "error"):
            row["vs_reference_ep"] = _vs_reference_ep(node, ep_values, ref_values, config.tolerances)
    return rows


def _new_row(node: onnx.NodeProto, position: int, placement: Mapping[str, str]) -> dict[str, Any]:
    """An attribution row with nothing judged yet (the keys ``model_result.json`` records)."""
    return {
        "node": node.name or f"{node.op_type}_{position}", "op_type": node.op_type, "position": position,
        "provider": placement.get(node.name, "unproven"),
        "attributes": {a.name: _attr_text(helper.get_attribute_value(a)) for a in node.attribute},
        "inputs": [], "outputs": [], "desc_type": None, "flags": [], "status": None, "errors": no_errors(),
        "mismatches": None, "ties": 0, "worst": [], "message": "", "vs_reference_ep": None,
    }


def _value(name: str, feeds: Mapping[str, np.ndarray], constants: Mapping[str, np.ndarray],
           ep_values: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """A node input as the EP under test saw it: a feed, an initializer or a captured tensor."""
    value = feeds.get(name) if name in feeds else constants.get(name, ep_values.get(name))
    return None if value is None else np.asarray(value)


def _judge_node(row: dict[str, Any], node: onnx.NodeProto, arrays: list[np.ndarray],
                ep_values: Mapping[str, np.ndarray], reading: str, tolerances: Tolerances,
                opset: int | None) -> dict[str, np.ndarray] | None:
    """Read the node as a desc, compute it on ``arrays`` and compare with the EP's outputs,
    filling ``row``; returns the diverging node's value outputs (``{"expected", "actual"}``), else None."""
    try:
        imported = import_node(node, [a.shape for a in arrays], [a.dtype for a in arrays], reading, opset)
    except ValueError as exc:
        row.update(status="not-attributable", message=f"no DML desc in the {reading!r} reading: {exc}")
        return None
    row["desc_type"] = imported.desc.TYPE
    row["flags"] = [f.to_json() for f in imported.flags if f.kind != "exact"]
    try:
        expected_list = imported.outputs(execute(imported.desc, imported.inputs(arrays)))
    except Exception as exc:
        row.update(status="error", message=f"reference raised {type(exc).__name__}: {exc}")
        return None
    # The node's outputs sit at the positions of the desc's DML output members.
    dml_outputs = imported.desc.OUTPUTS
    expected, actual = {}, {}
    for i, out_name in enumerate(node.output[:len(expected_list)]):
        if out_name:
            expected[dml_outputs[i]] = np.asarray(expected_list[i])
            actual[dml_outputs[i]] = ep_values[out_name]
    index_map, in_window = index_rule_for(imported, arrays)
    cmp = compare_outputs(expected, actual, tolerances, imported.inputs(arrays), in_window=in_window,
                          index_outputs=index_map)
    rename = {dml_outputs[i]: n for i, n in enumerate(node.output) if n}
    row.update(status="diverges" if not cmp.passed else ("tie-only" if cmp.ties else "match"),
               errors=cmp.errors(), mismatches=cmp.mismatches, ties=cmp.ties, compared=cmp.compared,
               worst=[dict(w, output=rename.get(w["output"], w["output"])) for w in cmp.worst],
               message=_rename(cmp.summary(), rename))
    if cmp.passed:
        return None
    value = _value_output(imported.desc, expected)
    return None if value is None else {"expected": expected[value], "actual": actual[value]}


def _value_output(desc: Any, present: Mapping[str, np.ndarray]) -> str | None:
    """The first DML output of ``desc`` that holds values (not an index output of its record)."""
    index = spec_for(desc).index_outputs
    return next((m for m in desc.OUTPUTS if m in present and m not in index), None)


def _vs_reference_ep(node: onnx.NodeProto, ep_values: Mapping[str, np.ndarray], ref_values: Mapping[str, np.ndarray],
                     tolerances: Tolerances) -> dict[str, Any] | None:
    """The node's EP outputs against the reference EP's (``errors``, ``mismatches``), or None
    when the reference EP's were not all captured."""
    ours = {n: ep_values[n] for n in node.output if n and n in ep_values}
    theirs = {n: ref_values[n] for n in node.output if n and n in ref_values}
    if not ours or theirs.keys() != ours.keys():
        return None
    vs = compare_outputs(theirs, ours, tolerances)
    return {"errors": vs.errors(), "mismatches": vs.mismatches}


def first_divergent(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first attribution row (topological order) whose node diverges from the reference."""
    return next((r for r in rows if r["status"] == "diverges"), None)


def divergent_summary(row: dict[str, Any]) -> dict[str, Any]:
    """The ``attribution.first_divergent`` record of ``model_result.json`` for an attribution row."""
    worst = row["worst"][0] if row["worst"] else None
    return {"node": row["node"], "op_type": row["op_type"], "position": row["position"], "provider": row["provider"],
            "errors": row["errors"], "mismatches": row["mismatches"], "worst": worst, "message": row["message"]}


def _rename(text: str, rename: Mapping[str, str]) -> str:
    """``text`` with DML output member names replaced by the node's ONNX output names."""
    for dml, onnx_name in rename.items():
        text = text.replace(dml, onnx_name)
    return text


def _attr_text(value: Any) -> Any:
    """An attribute value as JSON holds it (bytes decoded; graphs and tensors by type name)."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_attr_text(v) for v in value]
    if isinstance(value, (int, float, str)):
        return value
    return type(value).__name__


__all__ = ["attribute_nodes", "attributed_nodes", "captured_values", "divergent_summary", "first_divergent",
           "probe_model"]
