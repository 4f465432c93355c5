"""A model's outputs compared by name, and which of them are index outputs: owns ``compare_named``
and the tie rules of index outputs, both read from the operator records.

``compare_named(expected, actual, tolerances, tie_context)`` judges each named output with the
harness's one comparison (``harness.core.compare.compare_outputs``): one row per output, as
``model_result.json`` records it. An output that is an attributed node's index output (a
MaxPool's ``Indices``: the operator record's ``index_outputs``) is compared tie-aware, through
a ``TieContext``: an index that differs but points at an element of the input it indexes equal
to the expected value, inside that output's window (the record's ``index_rule``), is a tie.

The records speak of DML tensors; a node's ONNX arrays are only where DML's flat element
positions mean the ONNX ones. ``index_rule_for(imported, arrays)`` checks that through the
node's own adapters (``graphs.import_node``) and gives ``compare_outputs`` the record's index
outputs and rule, or nothing where the node reorders elements (then indices must be equal).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np
import onnx

from ...graphs import import_node
from ...reference import spec_for
from ...reference.descs import member_value
from ...reference.registry import OpSpec, specs_for_onnx
from ..core.compare import compare_outputs
from ..core.tolerances import Tolerances
from .untrusted import constants as model_constants
from .untrusted import model_opset

#: The keys ``compare_named`` hands ``compare_outputs`` for one index output, its values and its source.
_INDEX, _VALUES, _SOURCE = "indices", "values", "source"
#: The reading in which a graph output's windows are judged: both EPs compute the ONNX node.
TIE_READING = "spec"

InWindow = Callable[[np.ndarray, np.ndarray], np.ndarray]


class TieContext(NamedTuple):
    """What tells a tie for one index output: the value output it locates (expected side), the
    input it indexes, and the node's window rule (None: a tie is judged on the value alone)."""

    values: np.ndarray
    source: np.ndarray
    in_window: InWindow | None = None


def compare_named(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray], tolerances: Tolerances,
                  tie_context: Mapping[str, TieContext | tuple] | None = None) -> list[dict[str, Any]]:
    """One row per expected output (name, dtype, shape, outcome, errors, mismatches, ties,
    compared, worst, message), compared under the harness's rule.

    ``tie_context[name]`` (a ``TieContext`` or a ``(values, source[, in_window])`` tuple) marks
    ``name`` as an index output, compared tie-aware (module docstring)."""
    rows = []
    for name, exp in expected.items():
        row: dict[str, Any] = {"name": name, "dtype": np.asarray(exp).dtype.name, "shape": list(np.shape(exp))}
        rows.append(row)
        if name not in actual:
            row.update(outcome="fail", message="missing from the EP's outputs", errors=no_errors(),
                       mismatches=None, ties=0, worst=[])
            continue
        if tie_context and name in tie_context:
            cmp, worst, errors, message = _compare_index(name, exp, actual[name], tolerances,
                                                         TieContext(*tie_context[name]))
        else:
            cmp = compare_outputs({name: exp}, {name: actual[name]}, tolerances)
            worst, errors, message = cmp.worst, cmp.errors(), cmp.summary()
        outcome = "fail" if not cmp.passed else ("tie-only" if cmp.ties else "pass")
        row.update(outcome=outcome, errors=errors, mismatches=cmp.mismatches, ties=cmp.ties, compared=cmp.compared,
                   worst=worst, message=message)
    return rows


def _compare_index(name: str, expected: np.ndarray, actual: np.ndarray, tolerances: Tolerances,
                   tie: TieContext) -> tuple[Any, list[dict[str, Any]], dict[str, float | None], str]:
    """``(comparison, worst, errors, message)`` of one index output. The values go in identical
    on both sides, only so that ``compare_outputs`` can tell ties: they are not counted."""
    cmp = compare_outputs({_VALUES: tie.values, _INDEX: expected}, {_VALUES: tie.values, _INDEX: actual},
                          tolerances, {_SOURCE: tie.source}, in_window=tie.in_window,
                          index_outputs={_INDEX: (_VALUES, _SOURCE)})
    cmp.compared -= np.asarray(tie.values).size
    worst = [dict(w, output=name) for w in cmp.worst if w["output"] == _INDEX]
    if cmp.problems:  # a shape or dtype the indices cannot be compared in
        return cmp, worst, no_errors(), cmp.summary()
    message = (f"{cmp.mismatches} of {cmp.compared} indices differ beyond a tie"
               + (f", {cmp.ties} index ties" if cmp.ties else ""))
    return cmp, worst, no_errors(), message


def index_rule_for(imported: Any, arrays: Sequence[np.ndarray]) -> tuple[Mapping[str, tuple[str, str]],
                                                                       InWindow | None]:
    """``(index_outputs, in_window)`` for ``compare_outputs`` on a node read as ``imported``
    (``graphs.import_node``; ``arrays``: the node's inputs): the operator record's index outputs
    and its index rule bound to the desc, where the node's arrays keep DML's element order;
    ``({}, None)`` where they do not (a MaxPool with ``storage_order=1`` pools a transposed
    input), so that its indices are compared as plain integers."""
    spec = spec_for(imported.desc)
    if not spec.index_outputs or not keeps_element_order(imported, spec, arrays):
        return {}, None
    rule = functools.partial(spec.index_rule, imported.desc) if spec.index_rule else None
    return spec.index_outputs, rule


def keeps_element_order(imported: Any, spec: OpSpec, arrays: Sequence[np.ndarray]) -> bool:
    """Whether the node's adapters keep the flat element order of every tensor the record's
    index outputs name (the index, its values and its source): probed by passing each through
    them filled with its own flat positions."""
    try:
        dml_inputs = imported.inputs([np.arange(np.asarray(a).size).reshape(np.shape(a)) for a in arrays])
        sources = {source for _, source in spec.index_outputs.values()}
        if not all(_in_order(dml_inputs[s]) for s in sources):
            return False
        desc = imported.desc
        present = {m: member_value(desc, m) for m in desc.OUTPUTS}
        probe = {m: np.arange(math.prod(t.sizes)).reshape(t.sizes) for m, t in present.items() if t is not None}
        back = imported.outputs(probe)
    except (KeyError, ValueError, TypeError, IndexError):
        return False  # an adapter that cannot take the probe tells nothing: no ties
    named = dict(zip(desc.OUTPUTS, back))
    members = {m for index, (values, _) in spec.index_outputs.items() for m in (index, values)}
    return all(_in_order(named[m]) for m in members if m in named)


def _in_order(array: Any) -> bool:
    """True if ``array`` holds 0, 1, 2, ... in its flat order."""
    flat = np.asarray(array).ravel()
    return bool(np.array_equal(flat, np.arange(flat.size)))


def node_index_outputs(node: onnx.NodeProto, spec: OpSpec) -> list[tuple[str, str, str]]:
    """``(index, values, source)`` value names of ``node`` for each index output of its record
    that the node has: the records' DML members sit at the node's input/output positions."""
    found = []
    for index, (values, source) in spec.index_outputs.items():
        i, v = spec.desc.OUTPUTS.index(index), spec.desc.OUTPUTS.index(values)
        s = spec.desc.INPUTS.index(source)
        if max(i, v) < len(node.output) and s < len(node.input) and node.output[i] and node.output[v]:
            found.append((node.output[i], node.output[v], node.input[s]))
    return found


def tie_contexts(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> dict[str, TieContext]:
    """A ``TieContext`` for each graph output that is an attributed node's index output, from
    ``values`` (feeds and captured tensors of the side ``compare_named`` calls expected). The
    windows are the node's as the ONNX spec reads it; where the node cannot be read, a tie is
    judged on the value alone; where it reorders elements, there are no ties."""
    graph_outputs = {o.name for o in model.graph.output}
    known = model_constants(model) | dict(values)
    contexts = {}
    for node in model.graph.node:
        for spec in specs_for_onnx(node.op_type)[:1]:
            for index, value_name, source_name in node_index_outputs(node, spec):
                if index not in graph_outputs or value_name not in known or source_name not in known:
                    continue
                usable, in_window = _graph_rule(node, [known.get(name) for name in node.input if name],
                                                model_opset(model))
                if usable:
                    contexts[index] = TieContext(known[value_name], known[source_name], in_window)
    return contexts


def _graph_rule(node: onnx.NodeProto, arrays: list[np.ndarray | None],
                opset: int | None) -> tuple[bool, InWindow | None]:
    """``(ties usable, in_window)`` for a graph output's node (``arrays``: its named inputs): no
    rule (a tie judged on the value alone) when an input is unknown or the node has no desc in
    the spec reading."""
    if any(a is None for a in arrays):
        return True, None
    present = [np.asarray(a) for a in arrays]
    try:
        imported = import_node(node, [a.shape for a in present], [a.dtype for a in present], TIE_READING, opset)
    except ValueError:
        return True, None
    index_map, in_window = index_rule_for(imported, present)
    return bool(index_map), in_window


def no_errors() -> dict[str, float | None]:
    """The ``errors`` of a row where no value was compared."""
    return {"max_abs": None, "max_rel": None, "max_ulp": None}


__all__ = ["TieContext", "compare_named", "index_rule_for", "keeps_element_order", "no_errors",
           "node_index_outputs", "tie_contexts"]
