"""Where a model's outputs start to drift from the reference EP's: owns the drift policy
(``--drift-tol``) and the search for the first divergent node.

A model run judges two different things (``run.run_model``):

(a) the operators under test, each attributed node judged on the inputs the EP fed it
    (``attribution``): that is the verdict on the EP's kernels for those operators;
(b) the model's output drift against the reference EP: any node of any op type (a Conv that the
    EP sums in another order, a GEMM in reduced precision) can move the outputs, and on a GPU EP
    against the CPU EP they almost always move.

For (b), ``search_drift`` finds the first node, in topological order, one of whose outputs
leaves the run's tolerance (the harness's one comparison, ``outputs.compare_named``, tie-aware
for attributed index outputs; never a second rule). Every intermediate tensor is exposed as a
graph output on both EPs, as Polygraphy's ``--onnx-outputs mark all`` does
(https://github.com/NVIDIA/TensorRT/blob/main/tools/Polygraphy/polygraphy/tools/args/model.py),
and compared node by node. Marked tensors stay alive until the run ends, so when their size,
estimated by ONNX shape inference, exceeds the budget (``DriftPolicy.max_elements``; default
the ``elements`` cap), the nodes are split in halves by size and each half is marked alone, in
order, narrowing down until a part fits, as Polygraphy's ``debug reduce`` bisects a model
(https://github.com/NVIDIA/TensorRT/blob/main/tools/Polygraphy/polygraphy/tools/debug/subtool/reduce.py).
The parts are visited in topological order and the search stops in the first part holding a
divergent node, so the answer is the node mark-all would name: bisection changes the number of
runs, never the answer. A tensor whose size inference cannot tell (a data-dependent shape)
counts as the largest one it can.

The policy decides what (b) does to the verdict: ``report`` (the default) names where drift
starts and does not fail; ``fail`` fails the run when an output differs from the reference EP's;
a tolerance spec (``fp32:atol=1e-3,rtol=1e-2``) fails it only when an output differs beyond
that budget. A regression against a baseline saved on the same EP and device fails whatever the
policy (``baseline``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx

from ep_testbed.graphs import attributed_op_types
from ep_testbed.harness.core.error_stats import error_statistics
from ep_testbed.harness.core.tolerances import Tolerances
from ep_testbed.harness.core.untrusted_files import limits

from .attribution import probe_model
from .inputs import inferred_shapes, skeleton
from .outputs import compare_named, tie_contexts

#: ``--drift-tol`` words; anything else is a tolerance item (``DTYPE:atol=..,rtol=..,ulp=..``).
DRIFT_MODES = ("report", "fail")
#: Nodes that compute nothing from the inputs: never the start of drift, never marked.
CONSTANT_OPS = ("Constant",)
#: Output rows of the first divergent node kept in the result, at most.
ROWS_KEPT = 8

#: ``(ref values, EP values)`` of one run of a probe copy on both EPs: the caller's session layer.
RunPair = Callable[[onnx.ModelProto], tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]]


@dataclass(frozen=True)
class DriftPolicy:
    """What output drift against the reference EP does to a model run's verdict, and how much may
    be marked at once while searching where it starts.

    ``mode``: ``report`` (name it, do not fail), ``fail`` (an output that differs fails the run)
    or ``budget`` (an output that differs beyond ``tolerances`` fails it); ``items``: the
    ``--drift-tol`` items as given; ``max_elements``: the elements the marked intermediates of one
    run may hold together (None: the ``elements`` cap in force)."""

    mode: str = "report"
    tolerances: Tolerances | None = None
    items: tuple[str, ...] = ()
    max_elements: int | None = None

    def budget_elements(self) -> int:
        """The marking budget in elements (the ``elements`` cap when none was given)."""
        return self.max_elements if self.max_elements is not None else limits().elements

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "items": list(self.items), "max_elements": self.budget_elements(),
                "tolerances": None if self.tolerances is None else self.tolerances.to_json()}


def parse_drift_policy(items: Sequence[str], base: Tolerances, max_elements: int | None = None) -> DriftPolicy:
    """The policy of ``--drift-tol`` items: none or ``report`` -> report; ``fail`` -> fail;
    tolerance items (``--tol``'s form, applied over ``base``, the run's tolerances) -> budget.
    ValueError naming the flag, the value and what is allowed."""
    items = tuple(str(i) for i in items)
    words = [i for i in items if i.strip().lower() in DRIFT_MODES]
    if words and len(items) > 1:
        raise ValueError(f"--drift-tol {' --drift-tol '.join(items)}: {words[0]!r} stands alone; give report, fail, or one or "
                         "more DTYPE:atol=X,rtol=Y,ulp=N items (a drift budget)")
    if max_elements is not None and max_elements < 1:
        raise ValueError(f"--drift-max-elements {max_elements}: give a whole number of elements >= 1")
    if not items or words:
        return DriftPolicy(words[0].strip().lower() if words else "report", None, items, max_elements)
    tolerances = base
    for item in items:
        try:
            tolerances = tolerances.override(item)
        except ValueError as exc:
            raise ValueError(str(exc).replace("--tol ", "--drift-tol ", 1) + "; or give report or fail") from None
    return DriftPolicy("budget", tolerances, items, max_elements)


@dataclass
class _Candidate:
    """A node whose outputs the search compares: position in the graph, node, output names, size."""

    position: int
    node: onnx.NodeProto
    outputs: list[str]
    elements: int = 0


@dataclass
class _Search:
    """What the search has done so far (counts for the result)."""

    runs: int = 0
    compared: int = 0
    divergent: int = 0
    largest_run: int = 0
    parts: list[int] = field(default_factory=list)


def candidates(model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[_Candidate]:
    """Every node of the main graph, in graph (topological) order, whose outputs can drift: all
    but constants, with the outputs that are tensors and not graph inputs or initializers."""
    known = set(feeds) | {t.name for t in model.graph.initializer} | {i.name for i in model.graph.input}
    non_tensor = _non_tensor_values(model)
    found = []
    for position, node in enumerate(model.graph.node):
        if node.op_type in CONSTANT_OPS and node.domain in ("", "ai.onnx"):
            continue
        outputs = [o for o in node.output if o and o not in known and o not in non_tensor]
        if outputs:
            found.append(_Candidate(position, node, outputs))
    return found


def _non_tensor_values(model: onnx.ModelProto) -> set[str]:
    """Values whose declared or inferred type is not a tensor (sequences, optionals, maps): ONNX
    Runtime cannot return them as the plain outputs the comparison reads."""
    values = list(model.graph.value_info) + list(model.graph.output)
    try:  # on the model without its large weights (``inputs.skeleton``): no copy of a big model
        values += list(onnx.shape_inference.infer_shapes(skeleton(model), strict_mode=False).graph.value_info)
    except Exception:  # inference is only a filter here; an output it cannot type is tried as a tensor
        pass
    return {v.name for v in values if v.type.WhichOneof("value") not in (None, "tensor_type")}


def estimate(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], found: list[_Candidate]) -> int:
    """Set each candidate's ``elements`` from ONNX shape inference with the inputs' shapes, and
    return how many outputs inference could not size (each counted as the largest it could)."""
    shapes = inferred_shapes(model, {k: tuple(np.shape(v)) for k, v in feeds.items()}, declared=False)
    sizes: dict[str, int | None] = {}
    for c in found:
        for name in c.outputs:
            dims = shapes.get(name)
            ok = dims is not None and all(isinstance(d, int) and d >= 0 for d in dims)
            sizes[name] = math.prod(dims) if ok else None
    largest = max([s for s in sizes.values() if s is not None] + [int(np.size(v)) for v in feeds.values()] + [1])
    for c in found:
        c.elements = sum(largest if sizes[name] is None else sizes[name] for name in c.outputs)
    return sum(1 for s in sizes.values() if s is None)


def search_drift(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], run_pair: RunPair,
                 tolerances: Tolerances, budget: int, constants: Mapping[str, np.ndarray] | None = None
                 ) -> dict[str, Any]:
    """The first node (topological order) one of whose outputs leaves ``tolerances`` between the
    reference EP and the EP under test (module docstring), as the ``drift.search`` record:
    ``strategy`` (``mark-all`` or ``bisect``), ``budget_elements``, ``estimated_elements``,
    ``unsized_outputs``, ``runs`` (probe runs per EP), ``parts`` (nodes marked in each run),
    ``candidate_nodes``, ``compared_nodes``, ``divergent_nodes`` (among those compared),
    ``largest_run_elements`` (marked elements one run returned, measured), ``first`` (None when
    no node left the tolerance) and ``seconds``. ``run_pair`` runs a probe copy on both EPs."""
    started = time.perf_counter()
    found = candidates(model, feeds)
    unsized = estimate(model, feeds, found)
    total = sum(c.elements for c in found)
    state, first = _Search(), None
    pending = [found] if found else []
    while pending and first is None:
        part = pending.pop(0)
        if len(part) > 1 and sum(c.elements for c in part) > budget:
            pending[:0] = list(_halves(part))  # narrow down: the earlier half is marked first
            continue
        first = _check_part(model, feeds, part, run_pair, tolerances, constants or {}, state)
    return {"strategy": "mark-all" if state.runs <= 1 and total <= budget else "bisect",
            "budget_elements": budget, "estimated_elements": total, "unsized_outputs": unsized,
            "runs": state.runs, "parts": state.parts, "candidate_nodes": len(found),
            "compared_nodes": state.compared, "divergent_nodes": state.divergent,
            "largest_run_elements": state.largest_run, "first": first,
            "seconds": round(time.perf_counter() - started, 3)}


def _halves(part: list[_Candidate]) -> tuple[list[_Candidate], list[_Candidate]]:
    """``part`` split where its estimated elements reach half (each half holds a node at least)."""
    half, running = sum(c.elements for c in part) / 2, 0
    for i, c in enumerate(part):
        running += c.elements
        if running >= half:
            cut = min(max(i + 1, 1), len(part) - 1)
            return part[:cut], part[cut:]
    return part[:-1], part[-1:]


def _check_part(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], part: list[_Candidate],
                run_pair: RunPair, tolerances: Tolerances, constants: Mapping[str, np.ndarray],
                state: _Search) -> dict[str, Any] | None:
    """Mark the outputs of ``part``'s nodes, run both EPs, compare node by node in order; the
    ``first`` record of the first node that leaves the tolerance, or None. Counts in ``state``."""
    probe = probe_model(model, [name for c in part for name in c.outputs])
    ref_values, ep_values = run_pair(probe)
    state.runs += 1
    state.parts.append(len(part))
    state.largest_run = max(state.largest_run, sum(int(np.size(ref_values[n])) for c in part for n in c.outputs
                                                   if n in ref_values))
    ties = tie_contexts(probe, {**constants, **feeds, **ref_values})
    first = None
    for c in part:
        names = [n for n in c.outputs if n in ref_values]
        if not names:
            continue
        rows = compare_named({n: ref_values[n] for n in names}, ep_values, tolerances,
                             {n: ties[n] for n in names if n in ties})
        state.compared += 1
        if any(r["outcome"] == "fail" for r in rows):
            state.divergent += 1
            if first is None:
                first = _first_record(c, rows, ref_values, ep_values, tolerances, {n for n in names if n in ties})
    return first


def _first_record(c: _Candidate, rows: list[dict[str, Any]], ref_values: Mapping[str, np.ndarray],
                  ep_values: Mapping[str, np.ndarray], tolerances: Tolerances, index_outputs: set[str]
                  ) -> dict[str, Any]:
    """The ``drift.first`` record of a divergent node: name, op type, position, whether it is an
    operator under test, its outputs' comparison rows and error statistics, and a one-line
    ``outside`` figure (``72/196608``, or what made the comparison impossible)."""
    names = [r["name"] for r in rows]
    stats = error_statistics({n: ref_values[n] for n in names}, {n: ep_values[n] for n in names if n in ep_values},
                             tolerances, index_outputs)
    outside = sum(s.get("outside", s.get("differing", 0)) for s in stats.values())
    elements = sum(s["elements"] for s in stats.values())
    problems = [f"{r['name']}: {r['message']}" for r in rows if r["outcome"] == "fail" and r["name"] not in stats]
    node = c.node
    return {"node": node.name or f"{node.op_type}_{c.position}", "op_type": node.op_type, "position": c.position,
            "under_test": node.op_type in attributed_op_types() and node.domain in ("", "ai.onnx"),
            "outside": outside, "elements": elements, "problems": problems,
            "outputs": [{k: r.get(k) for k in ("name", "dtype", "shape", "outcome", "mismatches", "ties",
                                                "compared", "errors", "message", "worst")} for r in rows[:ROWS_KEPT]],
            "error_stats": stats}


def drift_figure(first: Mapping[str, Any]) -> str:
    """``"72/196608 outside tolerance"`` for a divergent node (or the shape/dtype problem that
    made its outputs incomparable)."""
    if first.get("problems") and not first.get("outside"):
        return "; ".join(first["problems"])
    return f"{first.get('outside', 0)}/{first.get('elements', 0)} outside tolerance"


def drift_statement(drift: Mapping[str, Any] | None, reference: str) -> str:
    """One clause on output drift for the verdict line: where it starts, or that there is none."""
    if not drift:
        return ""
    if not drift.get("outputs_differ"):
        return f"outputs match {reference}"
    search = drift.get("search") or {}
    first = search.get("first")
    if first:
        return f"output drift starts at {first['op_type']} '{first['node']}' ({drift_figure(first)})"
    if drift.get("error"):
        return f"outputs differ from {reference}; where the drift starts is unknown ({drift['error']})"
    if search:
        return (f"outputs differ from {reference}, but no intermediate tensor left the tolerance in the runs with "
                "every intermediate marked")
    return f"outputs differ from {reference}"


def budget_rows(reference_outputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray],
                policy: DriftPolicy, ties: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The model outputs compared under the drift budget's tolerances (``budget`` mode only)."""
    if policy.mode != "budget" or policy.tolerances is None:
        return []
    return compare_named(reference_outputs, outputs, policy.tolerances, ties)


__all__ = ["DRIFT_MODES", "DriftPolicy", "RunPair", "budget_rows", "candidates", "drift_figure", "drift_statement",
           "estimate", "parse_drift_policy", "search_drift"]
