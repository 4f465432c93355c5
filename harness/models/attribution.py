"""Per-node attribution: owns which nodes of a model are judged on their own, the probe copy that
exposes their inputs and outputs, the row of each node and the first divergent one.

Attributed nodes are those of an ONNX op type some operator record reads back
(``graphs.attributed_op_types()``, from the records' ``onnx_ops``), in the default
domain of the main graph. ``probe_model`` adds every input and output of those nodes to a copy's
graph outputs, so that one run of the copy captures them. ``attribute_nodes`` then judges each
node, in graph (topological) order, on the inputs the EP under test actually fed it
(``judge.judge_node``: the DirectML reference, the comparison, what explains a difference).
Because every node is judged on its own EP-produced inputs, upstream error does not leak into it:
the first node that diverges without an explanation (``first_divergent``) is the node that broke
the model. Nodes of those op types inside a Loop / If / Scan body (``subgraph_nodes``) cannot be
captured; each gets a ``not-attributed`` row that says where it is, so no node drops out of the
counts (``attribution_counts``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Mapping, cast

import numpy as np
import onnx
from onnx import helper

from ...graphs import attributed_op_types
from ...reference import DEFAULT_MODEL
from ..core.compare import compare_outputs
from ..core.expectations import for_ep
from ..core.model_statuses import DIVERGING, NOT_JUDGED
from ..core.tolerances import Tolerances
from ..eps.providers import alias_of
from ..eps.registry import classes_of
from .inputs import skeleton
from .judge import judge_node
from .outputs import no_errors
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
        inferred = onnx.shape_inference.infer_shapes(skeleton(model), strict_mode=False)  # weights left out
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
                    config: Any, arrays_out: dict[str, dict[str, np.ndarray]] | None = None,
                    input_values: Mapping[str, np.ndarray] | None = None) -> list[dict[str, Any]]:
    """Per-node attribution rows for every attributed node, in graph (topological) order, and
    one ``not-attributed`` row for each node of an attributed op type inside a subgraph (after
    the node whose body holds it).

    ``ep_values`` / ``ref_values``: every captured tensor by name, from the EP under test and
    the reference EP. ``config`` gives ``reading`` (``"spec"`` or ``"dml-ep"``) and
    ``tolerances`` (a ``ModelRunConfig``). ``arrays_out`` (if given) receives, per node that
    does not match, its reference and EP value outputs (``{"expected": .., "actual": ..}``) for
    pictures. ``input_values`` (default ``ep_values``): where the nodes' inputs are read from,
    when they are not the EP's own (nodes judged alone). Row ``status``: one of
    ``statuses.NODE_STATUSES`` (``judge`` says how each is decided; ``error`` also when a tensor
    of the node was not captured)."""
    constants = model_constants(model, getattr(config, "initializers", None))
    opset = model_opset(model)
    rows = []
    known: dict[str, Any] = {}

    def readings_on(provider: str) -> Callable[[str], tuple[str, ...]]:
        """The readings the bundled expectations of the EP a node ran on name for an operator."""
        def names(op: str) -> tuple[str, ...]:
            if provider not in known:
                try:
                    known[provider] = for_ep(alias_of(provider), provider=provider, classes=classes_of(provider))
                except Exception:  # no usable expectations for that EP: nothing to explain with
                    known[provider] = None
            return known[provider].readings_for(op) if known[provider] is not None else ()
        return names

    for position, node in attributed_nodes(model):
        row = _new_row(node, position, placement)
        rows.append(row)
        arrays = node_arrays(model, node, feeds, ep_values if input_values is None else input_values, constants)
        row["inputs"] = [{"name": n, "shape": None if a is None else list(a.shape),
                          "dtype": None if a is None else a.dtype.name} for n, a in zip(node.input, arrays)]
        row["outputs"] = [{"name": n, "shape": list(np.shape(ep_values[n])) if n in ep_values else None}
                          for n in node.output if n]
        missing_in = any(a is None for name, a in zip(node.input, arrays) if name)
        if missing_in or any(n not in ep_values for n in node.output if n):
            row.update(status="error", message="an input or output of the node was not captured from the EP")
            continue
        provider = placement.get(node.name) or getattr(getattr(config, "ep", None), "provider", "")
        present = cast("list[np.ndarray]", arrays)  # None only at an unnamed (absent) optional input
        pair = judge_node(row, node, present, ep_values, config.reading, config.tolerances, opset,
                          getattr(config, "precision_model", DEFAULT_MODEL), readings_on(str(provider)))
        if arrays_out is not None and pair is not None:
            arrays_out[row["node"]] = pair
        if ref_values is not None and row["status"] not in NOT_JUDGED:
            row["vs_reference_ep"] = _vs_reference_ep(node, ep_values, ref_values, config.tolerances)
    rows += [_inner_row(position, node, where, placement) for position, node, where in subgraph_nodes(model)]
    rows.sort(key=lambda r: (r["position"], r.get("inside") is not None))
    return rows


def subgraph_nodes(model: onnx.ModelProto) -> list[tuple[int, onnx.NodeProto, str]]:
    """``(position of the top-level node whose body holds it, node, where)`` of every node of an
    attributed op type inside a Loop / If / Scan body (any depth), in graph order; ``where``
    names the path, e.g. ``"body of Loop 'loop1'"``."""
    ops = attributed_op_types()
    found = []
    for position, top in enumerate(model.graph.node):
        stack = [(top, "")]
        while stack:  # an explicit stack: untrusted models may nest bodies deeply
            holder, outer = stack.pop()
            for attr in holder.attribute:
                bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
                for body in bodies:
                    where = f"{attr.name} of {holder.op_type} {holder.name!r}{outer}"
                    for node in body.node:
                        if node.op_type in ops and node.domain in ("", "ai.onnx"):
                            found.append((position, node, where))
                        stack.append((node, f" in the {where}"))
    return found


def _inner_row(position: int, node: onnx.NodeProto, where: str, placement: Mapping[str, str]) -> dict[str, Any]:
    """The ``not-attributed`` row of a node inside a subgraph."""
    row = _new_row(node, position, placement)
    row.update(node=node.name or f"{node.op_type} in the {where}", inside=where, status="not-attributed",
               message=f"inside the {where}: a probe copy exposes only the main graph's tensors, and a body's "
                       "tensors change from one iteration or branch to the next, so this node is not judged on its "
                       "own; what it computes shows only in the model's outputs")
    return row


def _new_row(node: onnx.NodeProto, position: int, placement: Mapping[str, str]) -> dict[str, Any]:
    """An attribution row with nothing judged yet (the keys ``model_result.json`` records)."""
    return {
        "node": node.name or f"{node.op_type}_{position}", "op_type": node.op_type, "position": position,
        "provider": placement.get(node.name, "unproven"),
        "attributes": {a.name: _attr_text(helper.get_attribute_value(a)) for a in node.attribute},
        "inputs": [], "outputs": [], "desc_type": None, "flags": [], "status": None, "errors": no_errors(),
        "mismatches": None, "ties": 0, "worst": [], "message": "", "vs_reference_ep": None,
        "reason": "", "empty": None, "explained": None, "unexplained": None, "inside": None, "readings": None,
    }


def node_arrays(model: onnx.ModelProto, node: onnx.NodeProto, feeds: Mapping[str, np.ndarray],
                values: Mapping[str, np.ndarray], constants: Mapping[str, np.ndarray] | None = None
                ) -> list[np.ndarray | None]:
    """The node's inputs, in node input order, as a feed, a captured tensor (``values``) or an
    initializer (``constants``, default: those stored in the model; an external tensor is never
    read here); None where one is none of these (or the input is unnamed)."""
    known = model_constants(model) if constants is None else constants
    found = []
    for name in node.input:
        value = feeds[name] if name in feeds else values.get(name)
        if value is None:
            value = known.get(name)
        found.append(None if value is None or not name else np.asarray(value))
    return found


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
    """The first attribution row (topological order) whose node diverges from the reference
    without a flag explaining it (``statuses.DIVERGING``)."""
    return next((r for r in rows if r["status"] in DIVERGING), None)


def divergent_summary(row: dict[str, Any]) -> dict[str, Any]:
    """The ``attribution.first_divergent`` record of ``model_result.json`` for an attribution row."""
    worst = row["worst"][0] if row["worst"] else None
    return {"node": row["node"], "op_type": row["op_type"], "position": row["position"], "provider": row["provider"],
            "errors": row["errors"], "mismatches": row["mismatches"], "worst": worst, "message": row["message"],
            "status": row["status"], "reason": row.get("reason", ""), "unexplained": row.get("unexplained")}


def attribution_counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"judged", "not_judged", "by_status", "by_op"}``: how many nodes were judged on their own,
    how many not (and why, by status), per op type top-level and inside subgraphs."""
    by_status = Counter(r["status"] for r in rows)
    by_op: dict[str, dict[str, int]] = {}
    for r in rows:
        counts = by_op.setdefault(r["op_type"], {"top_level": 0, "in_subgraphs": 0, "judged": 0})
        counts["in_subgraphs" if r.get("inside") else "top_level"] += 1
        counts["judged"] += r["status"] not in NOT_JUDGED
    judged = sum(n for s, n in by_status.items() if s not in NOT_JUDGED)
    return {"judged": judged, "not_judged": len(rows) - judged, "by_status": dict(by_status), "by_op": by_op}


def _attr_text(value: Any) -> Any:
    """An attribute value as JSON holds it (bytes decoded; graphs and tensors by type name)."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_attr_text(v) for v in value]
    if isinstance(value, (int, float, str)):
        return value
    return type(value).__name__


__all__ = ["attribute_nodes", "attributed_nodes", "attribution_counts", "captured_values", "divergent_summary",
           "first_divergent", "node_arrays", "probe_model", "subgraph_nodes"]
