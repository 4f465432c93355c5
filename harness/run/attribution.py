"""Per-case attribution: when a case fails, which part of its model decided the failure.

A case's model holds the operator's nodes (``Mapping.op_nodes``) and, for some mappings,
helper nodes around them. When the outputs fail the comparison, ``attribute_failure`` runs a
probe copy of the model on the EP under test in which every tensor is a graph output, so that
each node's inputs and outputs are read back as the EP produced them, and decides, in order:

1. ``operator``: an operator node diverges on the inputs it got. Each op node is read as the
   DML desc it means (``graphs.import_node``, the ONNX spec's reading) and the reference is
   rerun on the node's own EP inputs; its EP outputs are compared under the case's tolerances
   and the reference's bounds. One that fails the comparison decides the case.
2. ``helper`` (before the operator): every operator node agrees on its inputs, but a helper
   changed them. Each helper is recomputed on the host as its math means (``_exact``: float
   arithmetic in float64, a Cast between float types keeping the value, since a mapping casts
   to change a type, not a value); the operator node's inputs so recomputed are fed to the
   reference, and where that moves the node's reference outputs outside tolerance the helper
   on the input's path that strays furthest from its exact value is named, with the size of
   its change and of the change at the operator's input.
3. ``helper`` (after the operator): the helpers after the operator nodes, recomputed exactly
   from the operator nodes' EP outputs, would give outputs that pass: the helper that strays
   furthest is named.
4. ``flagged``: every operator node agrees on its inputs and every helper computed its exact
   value, and the mapper flagged a field ``diverges`` for this desc or these inputs: the ONNX
   graph means something else than the page here, as the flag says (named), whatever the EP.
5. ``composition``: the same without such a flag: the mapping does not carry the desc's meaning
   for these inputs (a mapper defect, never the EP's).

``unknown`` when the probe could not run or a node could not be read or recomputed (the
reason says which). The record is the case line's ``attribution`` (``harness.core.results``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...graphs import import_node
from ...reference import execute_with_bounds, spec_for
from ..core.compare import Allowance, Comparison, compare_outputs, ulp_distance
from ..eps import session as session_mod
from ..eps.session import first_line

#: The causes an attribution names (module docstring), in the order they are decided.
CAUSES = ("operator", "helper", "flagged", "composition", "unknown")

#: Float types a Cast between keeps the value (module docstring, step 2).
_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


def attribute_failure(mapping: Any, feeds: Mapping[str, np.ndarray], flags: Sequence[Mapping[str, Any]],
                      config: Any, compare_case: Callable[[Mapping[str, np.ndarray]], Comparison],
                      outputs: Mapping[str, np.ndarray] | None = None, known: "Known | None" = None) -> dict[str, Any]:
    """The ``attribution`` record of a failed case (module docstring). ``mapping``: the case's
    ``graphs.Mapping``; ``feeds``: its graph inputs; ``flags``: the case line's flags (the desc's
    and its inputs'); ``config``: the ``CaseConfig`` (EP, session settings, tolerances,
    precision model); ``compare_case(dml_outputs)``: the case's own comparison against the
    reference's outputs; ``outputs``: the case run's graph outputs by name, which make the probe
    needless when every tensor of the model is a graph input or output (one operator node);
    ``known``: the case's own desc, inputs and reference, which a node read as that very desc on
    those very inputs reuses rather than computing it again."""
    model = mapping.model
    try:
        values = _probe(model, feeds, config, outputs)
    except session_mod.SessionError as exc:
        return _record("unknown", f"the probe copy (every tensor an output) failed on {config.ep.provider}: "
                       f"{first_line(exc.cause)}")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    ops = [n for n in model.graph.node if n.name in mapping.op_nodes]
    checks = [_check_operator(node, values, opset, config, known) for node in ops]
    rows = [c.row for c in checks]
    unread = next((c for c in checks if c.row["agrees"] is None), None)
    if unread is not None:
        return _record("unknown", f"{_named(unread.node)} could not be judged on its own: {unread.row['message']}",
                       rows)
    diverging = next((c for c in checks if not c.row["agrees"]), None)
    if diverging is not None:
        meant = [f.field for f in diverging.imported.flags if f.kind == "diverges"]
        note = (f" (ONNX's meaning of the node differs from the page in {', '.join(dict.fromkeys(meant))}, as "
                "its flags say)") if meant else ""
        return _record("operator", f"the operator diverges on the inputs it got{note}: {_named(diverging.node)}, "
                       f"rerun in the reference on its own EP inputs, differs: {diverging.row['message']}", rows)
    try:
        exact = _exact_values(model, values, set(mapping.op_nodes))
    except Exception as exc:  # a helper the host evaluator cannot compute: say so, decide nothing
        return _record("unknown", f"a helper node could not be recomputed on the host ({type(exc).__name__}: "
                       f"{first_line(exc)})", rows)
    found = _changed_inputs(model, checks, values, exact, opset, config)
    if found is None:
        found = _changed_outputs(model, mapping, values, exact, compare_case)
    if found is not None:
        return _record("helper", found.pop("reason"), rows, **found)
    flagged = list(dict.fromkeys(str(f.get("field")) for f in flags if f.get("kind") == "diverges"))
    if flagged:
        return _record("flagged", "every operator node agrees with the reference on the inputs it got and every "
                       "helper node computed its exact value: the ONNX graph means something else than the page for "
                       f"this case, as the mapper's diverges flag(s) say ({', '.join(flagged)}), whatever the EP",
                       rows)
    return _record("composition", "every operator node agrees with the reference on the inputs it got and every "
                   "helper node computed its exact value, yet the outputs differ from the reference: the mapping "
                   "does not carry the desc's meaning for these inputs (a mapper defect, not the EP's)", rows)


def _record(cause: str, reason: str, nodes: Sequence[dict[str, Any]] = (), helper: str | None = None,
            change: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``attribution`` record: ``cause`` (``CAUSES``), ``reason`` (one sentence), ``nodes``
    (each operator node's check), ``helper`` (the helper named, or None) and ``change`` (the
    size of its change and where it reached the operator, or None)."""
    return {"cause": cause, "reason": reason, "nodes": list(nodes), "helper": helper, "change": change}


def _named(node: onnx.NodeProto) -> str:
    """``RoiAlign node 'RoiAlign'``."""
    return f"{node.op_type} node {node.name!r}"


def _probe(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], config: Any,
           outputs: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Every tensor of ``model`` as the EP under test computes it (a copy with every node output
    a graph output, run with the case's settings; or the case run's ``outputs`` when they are
    all the nodes write), plus the feeds and the initializers."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values.update({k: np.asarray(v) for k, v in feeds.items()})
    if outputs is not None and _outputs_of(model) <= set(outputs):
        values.update({k: np.asarray(v) for k, v in outputs.items()})
        return values
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in present:
                probe.graph.output.append(helper.make_empty_tensor_value_info(name))
                present.add(name)
    run = session_mod.run_on_ep(probe, feeds, config.ep, config.session, profile=False, quiet=True)
    values.update(run.named())
    return values


class _Check:
    """One operator node judged on its own EP inputs: the record ``row``, and what step 2 needs
    (the node read as a desc, its reference on the EP inputs, the comparison's settings)."""

    def __init__(self, node: onnx.NodeProto, row: dict[str, Any], imported: Any = None, reference: Any = None):
        self.node, self.row, self.imported, self.reference = node, row, imported, reference


@dataclass(frozen=True)
class Known:
    """A reference already computed: ``desc`` on ``inputs`` (DML input members) under the run's
    precision model."""

    desc: Any
    inputs: Mapping[str, np.ndarray]
    reference: Any

    def of(self, desc: Any, inputs: Mapping[str, np.ndarray]) -> Any:
        """The reference when ``desc`` and ``inputs`` are these, bit for bit; else None."""
        same = desc == self.desc and inputs.keys() == self.inputs.keys() and all(
            _identical(np.asarray(inputs[name]), np.asarray(self.inputs[name])) for name in inputs)
        return self.reference if same else None


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Same type, shape and bytes (so -0.0 and NaN payloads count, as the reference sees them)."""
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _check_operator(node: onnx.NodeProto, values: Mapping[str, np.ndarray], opset: int | None,
                    config: Any, known: Known | None = None) -> _Check:
    """Step 1 for ``node``: the reference rerun on the node's EP inputs against its EP outputs
    (``known``'s when the node reads as its desc on its inputs)."""
    row: dict[str, Any] = {"node": node.name, "op_type": node.op_type, "agrees": None, "mismatches": None, "message": ""}
    arrays = [values[name] for name in node.input]
    try:
        imported = import_node(node, [a.shape for a in arrays], [a.dtype for a in arrays], "spec", opset)
        inputs = imported.inputs(arrays)
        reference = known.of(imported.desc, inputs) if known is not None else None
        if reference is None:
            reference = execute_with_bounds(imported.desc, inputs, config.precision_model)
    except Exception as exc:  # the node has no DML reading, or the reference refuses its inputs
        row["message"] = f"{type(exc).__name__}: {first_line(exc)}"
        return _Check(node, row)
    actual = {m: values[node.output[i]] for i, m in enumerate(imported.desc.OUTPUTS)
              if i < len(node.output) and node.output[i]}
    cmp = _compare_node(imported, arrays, reference, actual, config)
    row.update(agrees=cmp.passed, mismatches=cmp.mismatches, message=cmp.summary())
    return _Check(node, row, imported, reference)


def _compare_node(imported: Any, arrays: Sequence[np.ndarray], reference: Any, actual: Mapping[str, np.ndarray],
                  config: Any) -> Comparison:
    """The node's outputs ``actual`` against ``reference`` (its desc computed on ``arrays``), as a
    case compares: the run's tolerances, the operator's index rule, the reference's allowance."""
    listed = imported.outputs(reference.outputs)
    expected = {m: np.asarray(listed[i]) for i, m in enumerate(imported.desc.OUTPUTS) if m in actual}
    spec = spec_for(imported.desc)
    in_window = functools.partial(spec.index_rule, imported.desc) if spec.index_rule else None
    return compare_outputs(expected, actual, config.tolerances, imported.inputs(arrays), in_window=in_window,
                           index_outputs=spec.index_outputs, allowance=Allowance.of(reference))


def _exact(node: onnx.NodeProto, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """What a helper node's math means for ``arrays`` (module docstring, step 2): floats in
    float64, a Cast between float types the value itself; ONNX's reference evaluator computes."""
    from onnx.reference import ReferenceEvaluator  # loaded only when a case with helpers fails

    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    to = next((a.i for a in node.attribute if a.name == "to"), None)
    if node.op_type == "Cast" and to in _FLOATS and wide[0].dtype == np.float64:
        return [wide[0]]
    feeds = {name: a for name, a in zip(node.input, wide) if name}
    out = ReferenceEvaluator(node).run(None, feeds)
    return [np.asarray(o).astype(np.float64) if np.asarray(o).dtype.kind == "f" else np.asarray(o) for o in out]


def _exact_values(model: onnx.ModelProto, values: Mapping[str, np.ndarray], ops: set[str]) -> dict[str, np.ndarray]:
    """Every tensor as it would be if each helper computed its exact value from the graph inputs
    and each operator node returned what the EP returned (steps 2 and 3)."""
    computed = _outputs_of(model)
    exact = {name: value for name, value in values.items() if name not in computed}
    for node in model.graph.node:
        outputs = [values[n] for n in node.output] if node.name in ops else _exact(node, [exact[n] for n in node.input])
        exact.update({name: out for name, out in zip(node.output, outputs) if name})
    return exact


def _outputs_of(model: onnx.ModelProto) -> frozenset[str]:
    """The names the nodes of ``model`` write (computed, never fed)."""
    return frozenset(n for node in model.graph.node for n in node.output if n)


def change_of(ep: np.ndarray, exact: np.ndarray) -> dict[str, Any]:
    """How far the EP's ``ep`` lies from ``exact``, both read as float64 (a narrowing Cast is
    measured against the value it narrows, not against that value rounded to its own type):
    elements that differ, of how many, the largest absolute and relative difference, and the
    largest distance from ``exact`` rounded to ``ep``'s type in units in the last place of that
    type (0 for arithmetic rounded correctly to its own type; None for non-float tensors)."""
    ep = np.asarray(ep)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        e64, x64 = ep.astype(np.float64), np.asarray(exact).astype(np.float64)
        same = (e64 == x64) | (np.isnan(e64) & np.isnan(x64))
        diff = np.where(same, 0.0, np.abs(e64 - x64))
        rel = np.where(same, 0.0, diff / np.abs(x64))
    record: dict[str, Any] = {"elements": int(same.size - np.count_nonzero(same)), "of": int(same.size),
                              "max_abs": _finite_max(diff), "max_rel": _finite_max(rel), "max_ulp": None}
    if ep.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            rounded = x64.astype(ep.dtype)
        finite = np.isfinite(ep) & np.isfinite(rounded)
        record["max_ulp"] = int(ulp_distance(ep[finite], rounded[finite]).max(initial=0))
    return record


def _finite_max(values: np.ndarray) -> float:
    """The largest value (inf when one is inf; NaN counts as inf: a NaN met a number)."""
    if not values.size:
        return 0.0
    return float(np.max(np.where(np.isnan(values), np.inf, values)))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal arrays, NaN equal to NaN."""
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def _producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    """Tensor name -> the node that writes it."""
    return {name: node for node in model.graph.node for name in node.output if name}


def _helpers_behind(model: onnx.ModelProto, tensor: str, ops: set[str]) -> list[onnx.NodeProto]:
    """The helper nodes ``tensor`` is computed through, back to graph inputs or operator nodes."""
    producers, found, stack = _producers(model), {}, [tensor]
    while stack:
        node = producers.get(stack.pop())
        if node is None or node.name in ops or node.name in found:
            continue
        found[node.name] = node
        stack.extend(n for n in node.input if n)
    return list(found.values())


def _stray(nodes: Sequence[onnx.NodeProto], values: Mapping[str, np.ndarray]
           ) -> tuple[onnx.NodeProto, dict[str, Any]] | None:
    """Of ``nodes``, the helper whose EP outputs lie furthest from its exact value computed on
    its own EP inputs (the helper that changed something), with that change; None if none strays."""
    worst = None
    for node in nodes:
        exact = _exact(node, [values[n] for n in node.input if n])
        for name, value in zip(node.output, exact):
            change = change_of(values[name], value)
            key = (change["max_rel"], change["max_abs"])
            if change["elements"] and (worst is None or key > worst[0]):
                worst = (key, node, dict(change, output=name))
    return None if worst is None else (worst[1], worst[2])


def _changed_inputs(model: onnx.ModelProto, checks: Sequence[_Check], values: Mapping[str, np.ndarray],
                    exact: Mapping[str, np.ndarray], opset: int | None, config: Any) -> dict[str, Any] | None:
    """Step 2: the first operator node whose inputs, recomputed exactly, move its reference
    outputs outside tolerance; the helper named and the sizes of the change (None: none does)."""
    ops = {c.node.name for c in checks}
    for check in checks:
        node, arrays = check.node, [values[n] for n in check.node.input]
        exact_in = [np.asarray(exact[n]).astype(a.dtype) for n, a in zip(node.input, arrays)]
        moved = [i for i, (a, b) in enumerate(zip(arrays, exact_in)) if not _same(a, b)]
        if not moved:
            continue
        try:
            meant = execute_with_bounds(check.imported.desc, check.imported.inputs(exact_in), config.precision_model)
        except Exception:  # the reference refuses the exact inputs: this node tells nothing
            continue
        listed = check.imported.outputs(check.reference.outputs)
        got = {m: np.asarray(listed[i]) for i, m in enumerate(check.imported.desc.OUTPUTS) if i < len(listed)}
        cmp = _compare_node(check.imported, exact_in, meant, got, config)
        if cmp.passed:
            continue
        tensor = node.input[moved[0]]
        stray = _stray(_helpers_behind(model, tensor, ops), values)
        if stray is None:
            continue
        culprit, change = stray
        at_input = change_of(arrays[moved[0]], exact[tensor])
        return {"helper": culprit.name, "change": {"helper": change, "operator": node.name, "input": tensor,
                                                   "at_input": at_input},
                "reason": f"the operator agrees with the reference on the inputs it got, but helper "
                          f"{_named(culprit)} changed them: its output lies {_size(change)} from its exact value, "
                          f"which moves input {tensor!r} of {_named(node)} by {_size(at_input)} and its reference "
                          f"outputs outside tolerance ({cmp.summary()})"}
    return None


def _changed_outputs(model: onnx.ModelProto, mapping: Any, values: Mapping[str, np.ndarray],
                     exact: Mapping[str, np.ndarray], compare_case: Callable[[Mapping[str, np.ndarray]], Comparison]
                     ) -> dict[str, Any] | None:
    """Step 3: the helpers after the operator nodes, recomputed exactly, give outputs that pass;
    the helper that strays furthest named (None: they would not pass, or none strays)."""
    outputs = {o.name: np.asarray(exact[o.name]).astype(values[o.name].dtype) for o in model.graph.output}
    try:
        if not compare_case(mapping.outputs(outputs)).passed:
            return None
    except Exception:  # the recomputed outputs do not read back: nothing to conclude
        return None
    ops = set(mapping.op_nodes)
    after = [n for o in model.graph.output for n in _helpers_behind(model, o.name, ops)]
    stray = _stray(list({n.name: n for n in after}.values()), values)
    if stray is None:
        return None
    culprit, change = stray
    return {"helper": culprit.name, "change": {"helper": change, "operator": None, "input": None, "at_input": None},
            "reason": f"the operator agrees with the reference on the inputs it got, but helper {_named(culprit)} "
                      f"changed its result: its output lies {_size(change)} from its exact value, and with the "
                      "helpers after the operator computed exactly the outputs pass"}


def _size(change: Mapping[str, Any]) -> str:
    """``"up to 0.0031 (relative 4.9e-4; 4096 ulp) at 12 of 16 elements"``."""
    ulp = f"; {change['max_ulp']} ulp" if change.get("max_ulp") else ""
    return (f"up to {change['max_abs']:.3g} (relative {change['max_rel']:.2g}{ulp}) at {change['elements']} of "
            f"{change['of']} elements")
