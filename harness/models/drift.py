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
for attributed index outputs; never a second rule). Intermediate tensors are exposed as graph
outputs on both EPs, as Polygraphy's ``--onnx-outputs`` does
(https://github.com/NVIDIA/TensorRT/blob/main/tools/Polygraphy/polygraphy/tools/args/model.py),
and compared node by node, in topological order, up to the first node that leaves the
tolerance and no further.

They are marked in windows of consecutive nodes, in order: the first ``FIRST_WINDOW`` nodes,
then each window twice as long as the one before, and none holding more than the budget
(``DriftPolicy.max_elements``, default the ``elements`` cap; a node whose outputs alone exceed it
is a window of its own) by ONNX shape inference's estimate (a tensor whose size inference cannot
tell, a data-dependent shape, counts as the largest one it can). Each run is a copy of the
model cut after its window (``prefix_probe``: the nodes the marked tensors depend on, nothing
downstream), so it costs the part of the model before them; the search stops in the window that
holds the first divergent node. Drift that starts early (a GPU EP's first Conv) is found at the
cost of running the first nodes, drift that starts late at about twice the cost of running the
model up to it, and marked tensors never hold more than a window at once. Every node before
the answer is compared, so the answer is the node marking everything at once would name:
windows change the number of runs, never the answer (with graph optimizations on, a copy cut
elsewhere may be fused elsewhere; the record's ``note`` says so). A model whose first window
holds every node is marked all at once (``mark-all``).

Comparing every marked tensor in full costs more than running the model at the scale of a
detector (two thousand nodes, tensors of millions of elements), so each tensor is first screened
(``plainly_within``: every element within the rule's ``atol + rtol*|e|``, computed in float64
chunk by chunk exactly as the comparison computes it, or equal for integers): a tensor the
screen passes is one the comparison passes, so only the tensors it cannot pass go through the
comparison in full (with the statistics of the first divergent node). The answer and its
figures are those of comparing everything in full.

The policy decides what (b) does to the verdict: ``report`` (the default) names where drift
starts and does not fail; ``fail`` fails the run when an output differs from the reference EP's;
a tolerance spec (``fp32:atol=1e-3,rtol=1e-2``) fails it only when an output differs beyond
that budget. A regression against a baseline saved on the same EP and device fails whatever the
policy (``baseline``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from ...graphs import attributed_op_types
from ..core.error_stats import error_statistics
from ..core.tolerances import Tolerances
from ..core.untrusted_files import limits
from .inputs import inferred_shapes, known_size, skeleton
from .outputs import compare_named, tie_contexts

#: ``--drift-tol`` words; anything else is a tolerance item (``DTYPE:atol=..,rtol=..,ulp=..``).
DRIFT_MODES = ("report", "fail")
#: Nodes that compute nothing from the inputs: never the start of drift, never marked.
CONSTANT_OPS = ("Constant",)
#: Output rows of the first divergent node kept in the result, at most.
ROWS_KEPT = 8
#: Nodes in the search's first window; each next window holds twice as many (module docstring).
FIRST_WINDOW = 8
#: Elements ``plainly_within`` widens to float64 at a time: a chunk stays in the cache.
SCREEN_CHUNK = 1 << 16
#: Element kinds whose equality means the comparison passes them (bool, integers).
EXACT_KINDS = "biu"

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
    screened: int = 0
    divergent: int = 0
    largest_run: int = 0
    parts: list[int] = field(default_factory=list)


def candidates(model: onnx.ModelProto, feeds: Mapping[str, Any],
               types: Mapping[str, onnx.TypeProto] | None = None) -> list[_Candidate]:
    """Every node of the main graph, in graph (topological) order, whose outputs can drift: all
    but constants, with the outputs that are tensors and not graph inputs or initializers
    (``types``: ``value_types(model)``, computed when not given)."""
    known = set(feeds) | {t.name for t in model.graph.initializer} | {i.name for i in model.graph.input}
    types = value_types(model) if types is None else types
    non_tensor = {name for name, t in types.items() if t.WhichOneof("value") not in (None, "tensor_type")}
    found = []
    for position, node in enumerate(model.graph.node):
        if node.op_type in CONSTANT_OPS and node.domain in ("", "ai.onnx"):
            continue
        outputs = [o for o in node.output if o and o not in known and o not in non_tensor]
        if outputs:
            found.append(_Candidate(position, node, outputs))
    return found


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Value name -> its declared or inferred type, from one ONNX type inference of the model
    without its large weights (``inputs.skeleton``: no copy of a big model). Values whose type
    is not a tensor (sequences, optionals, maps) are ones ONNX Runtime cannot return as the
    plain outputs the comparison reads; a tensor's element type names a marked output's type."""
    values = list(model.graph.value_info) + list(model.graph.output)
    try:
        values += list(onnx.shape_inference.infer_shapes(skeleton(model), strict_mode=False).graph.value_info)
    except Exception:  # inference is only a filter and a nicety here; an output it cannot type is tried as a tensor
        pass
    return {v.name: v.type for v in values}


def prefix_probe(model: onnx.ModelProto, names: Sequence[str],
                 types: Mapping[str, onnx.TypeProto] | None = None) -> onnx.ModelProto:
    """A model that computes ``names`` and nothing else: the nodes they depend on (in graph
    order, with the outer values their subgraphs read), every graph input (so the same feeds
    fit), the initializers those nodes read, and ``names`` as its only outputs, typed from
    ``types`` where known. A run of it costs the part of the model before the marked values,
    and keeps no model output alive."""
    graph = model.graph
    producer = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    keep: set[int] = set()
    pending = [producer[n] for n in names if n in producer]
    while pending:
        i = pending.pop()
        if i not in keep:
            keep.add(i)
            pending += [producer[v] for v in _reads(graph.node[i]) if v in producer]
    nodes = [graph.node[i] for i in sorted(keep)]
    read = {v for node in nodes for v in _reads(node)}
    probe = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name,
                            producer_version=model.producer_version, domain=model.domain,
                            model_version=model.model_version)
    probe.opset_import.extend(model.opset_import)
    probe.functions.extend(model.functions)
    probe.metadata_props.extend(model.metadata_props)
    out = probe.graph
    out.name = graph.name
    out.input.extend(graph.input)
    out.initializer.extend(t for t in graph.initializer if t.name in read)
    out.sparse_initializer.extend(t for t in graph.sparse_initializer if t.values.name in read)
    out.node.extend(nodes)
    for name in dict.fromkeys(names):
        kind = (types or {}).get(name)
        elem = kind.tensor_type.elem_type if kind is not None and kind.WhichOneof("value") == "tensor_type" else 0
        out.output.append(helper.make_tensor_value_info(name, elem, None) if elem
                          else helper.make_empty_tensor_value_info(name))
    return probe


def _reads(node: onnx.NodeProto) -> list[str]:
    """The values ``node`` reads: its inputs and what its subgraphs (If, Loop, Scan bodies) read
    from the graphs around them."""
    reads = [v for v in node.input if v]
    for attribute in node.attribute:
        for body in ([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else
                     list(attribute.graphs) if attribute.type == onnx.AttributeProto.GRAPHS else []):
            reads += sorted(_outer_reads(body))
    return reads


def _outer_reads(graph: onnx.GraphProto) -> set[str]:
    """The values ``graph`` (a subgraph) reads that it does not define itself."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer} | \
        {t.values.name for t in graph.sparse_initializer} | {o for node in graph.node for o in node.output}
    return {v for node in graph.node for v in _reads(node)} - defined


def plainly_within(expected: Any, actual: Any, tolerances: Tolerances) -> bool:
    """Whether ``actual`` passes ``tolerances`` against ``expected`` on the face of it: the same
    dtype and shape and, for floats, every pair finite with |a - e| <= atol + rtol*|e| computed
    in float64 exactly as ``harness.core.compare`` computes the rule's first clause (chunk by
    chunk, so no whole-tensor float64 copy), for bool and integers every element equal. True
    means the one comparison passes the pair; False only that it must be compared in full."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype != a.dtype:
        return False
    if e.dtype.kind in EXACT_KINDS:
        return bool(np.array_equal(e, a))
    if e.dtype.kind != "f":
        return False
    tol = tolerances.for_dtype(e.dtype.name.upper())
    e, a = e.ravel(), a.ravel()
    for start in range(0, e.size, SCREEN_CHUNK):
        e64 = e[start:start + SCREEN_CHUNK].astype(np.float64)
        a64 = a[start:start + SCREEN_CHUNK].astype(np.float64)
        if not (np.isfinite(e64).all() and np.isfinite(a64).all()):
            return False
        if not (np.abs(a64 - e64) <= tol.atol + tol.rtol * np.abs(e64)).all():
            return False
    return True


def estimate(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], found: list[_Candidate]) -> int:
    """Set each candidate's ``elements`` from ONNX shape inference with the inputs' shapes, and
    return how many outputs inference could not size (each counted as the largest it could)."""
    shapes = inferred_shapes(model, {k: tuple(np.shape(v)) for k, v in feeds.items()}, declared=False)
    sizes: dict[str, int | None] = {}
    for c in found:
        for name in c.outputs:
            sizes[name] = known_size(shapes.get(name))
    largest = max([s for s in sizes.values() if s is not None] + [int(np.size(v)) for v in feeds.values()] + [1])
    for c in found:
        c.elements = sum(largest if (size := sizes[name]) is None else size for name in c.outputs)
    return sum(1 for s in sizes.values() if s is None)


def search_drift(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], run_pair: RunPair,
                 tolerances: Tolerances, budget: int, constants: Mapping[str, np.ndarray] | None = None,
                 first_window: int = FIRST_WINDOW) -> dict[str, Any]:
    """The first node (topological order) one of whose outputs leaves ``tolerances`` between the
    reference EP and the EP under test (module docstring), as the ``drift.search`` record:
    ``strategy`` (``mark-all``: one run marked every node; ``windows``: several, in order),
    ``budget_elements``, ``estimated_elements``, ``unsized_outputs``, ``runs`` (probe runs per
    EP), ``parts`` (nodes marked in each run), ``candidate_nodes``, ``compared_nodes`` (looked at,
    in order, up to the first divergent one), ``screened_nodes`` (of those, the ones the screen
    passed without the full comparison), ``divergent_nodes`` (1 when one was found, else 0),
    ``largest_run_elements`` (marked elements one run returned, measured), ``first`` (None when
    no node left the tolerance) and ``seconds``. ``run_pair`` runs a probe copy (``prefix_probe``:
    what the marked values need) on both EPs; ``first_window``: nodes in the first window."""
    started = time.perf_counter()
    types = value_types(model)
    found = candidates(model, feeds, types)
    unsized = estimate(model, feeds, found)
    state, first = _Search(), None
    for window in windows(found, budget, first_window):
        first = _check_part(model, feeds, window, run_pair, tolerances, constants or {}, state, types)
        if first is not None:
            break
    return {"strategy": "mark-all" if state.parts == [len(found)] else "windows",
            "budget_elements": budget, "estimated_elements": sum(c.elements for c in found), "unsized_outputs": unsized,
            "runs": state.runs, "parts": state.parts, "candidate_nodes": len(found),
            "compared_nodes": state.compared, "screened_nodes": state.screened, "divergent_nodes": state.divergent,
            "largest_run_elements": state.largest_run, "first": first,
            "seconds": round(time.perf_counter() - started, 3)}


def windows(found: list[_Candidate], budget: int, first: int = FIRST_WINDOW) -> Iterator[list[_Candidate]]:
    """Consecutive windows of ``found``, in order: ``first`` nodes, then each twice as many as the
    one before, each cut before the node that would take its estimated elements past ``budget``
    (a node at least: one larger than the budget is a window alone; a cut window's successor
    does not grow)."""
    start, size = 0, max(1, first)
    while start < len(found):
        window: list[_Candidate] = []
        held = 0
        for c in found[start:start + size]:
            if window and held + c.elements > budget:
                break
            window.append(c)
            held += c.elements
        yield window
        start += len(window)
        size = 2 * size if len(window) == size else size


def _check_part(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], part: list[_Candidate],
                run_pair: RunPair, tolerances: Tolerances, constants: Mapping[str, np.ndarray],
                state: _Search, types: Mapping[str, onnx.TypeProto]) -> dict[str, Any] | None:
    """Mark the outputs of ``part``'s nodes (``prefix_probe``: a copy cut after them), run both
    EPs, go through the nodes in order, each screened (``plainly_within``) and, when the screen cannot pass it,
    compared in full; the ``first`` record of the first node that leaves the tolerance (the
    search stops there), or None. Counts in ``state``."""
    probe = prefix_probe(model, [name for c in part for name in c.outputs], types)
    ref_values, ep_values = run_pair(probe)
    state.runs += 1
    state.parts.append(len(part))
    state.largest_run = max(state.largest_run, sum(int(np.size(ref_values[n])) for c in part for n in c.outputs
                                                   if n in ref_values))
    ties = tie_contexts(probe, {**constants, **feeds, **ref_values})
    for c in part:
        names = [n for n in c.outputs if n in ref_values]
        if not names:
            continue
        state.compared += 1
        if all(n in ep_values and plainly_within(ref_values[n], ep_values[n], tolerances) for n in names):
            state.screened += 1
            continue
        rows = compare_named({n: ref_values[n] for n in names}, ep_values, tolerances,
                             {n: ties[n] for n in names if n in ties})
        if any(r["outcome"] == "fail" for r in rows):
            state.divergent += 1
            return _first_record(c, rows, ref_values, ep_values, tolerances, {n for n in names if n in ties})
    return None


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
           "estimate", "parse_drift_policy", "plainly_within", "prefix_probe", "search_drift", "value_types", "windows"]
