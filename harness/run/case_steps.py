"""The steps of one case that do not depend on how its session was shared: what a worker is
configured with, preparing a case (map, inputs, flags, expected outputs), judging what the EP
gave back, and the words of every outcome a session can end in.

``harness.run.case_run`` runs cases through these steps, alone or several to a session; what a
step decides goes into the case's result line (``harness.core.results``). Outcomes, in the order
they are checked:

- ``error``: the mapper, the reference or the harness raised (the message says which);
- ``inexpressible``: the mapper flagged a field ONNX cannot express; nothing runs;
- ``not-on-ep``: ONNX Runtime refused the session because a node would fall back to the CPU
  EP (fallback is disabled for every EP but CPU), or the node -> provider record shows an op
  node elsewhere; a session with fallback allowed then names where it went (``refusal_outcome``);
- ``fail``: the EP raised while building or running the session, or an output is out of
  tolerance, of the wrong shape or dtype (``session_failure``, ``judge``);
- ``tie-only`` / ``pass``.

A case whose outputs fail the comparison is attributed (``harness.run.attribution``, the line's
``attribution``) and its message gets the tensor-type note (``_tensor_type_hint``), unless
``CaseConfig.diagnose`` is off: judging a packed session's outputs, whose failures are judged
again alone, wants the verdict only. Before the EP runs, every ``diverges``
flag whose ONNX meaning the mapper computes gets ``"shows"`` (``mark_shows``), which
expectations' ``shows_when`` reads: computed only for a case one of whose candidate entries has
``shows_when.flags`` (a meaning is a run of ORT's kernel in NumPy, a tenth of a fuzz case's time).

The expected outputs come with the reference's allowance under ``CaseConfig.precision_model``
(``reference.execute_with_bounds``): the comparison accepts an element within the rounding
bound, or a knife-edge alternative, and the line says so (``bound``, ``knife_edges``, the
message). A float16 case that fails under the ``fp32`` model is compared again under
``tensor-type``, and the message says when float16 arithmetic explains the failure.
"""

from __future__ import annotations

import functools
import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ...reference import DEFAULT_MODEL, Expected, execute_with_bounds, spec_for
from ..core.compare import Allowance, Comparison, allowance_record, compare_outputs, knife_edge_note
from ..core.error_stats import error_statistics
from ..core.expectations import Expectation, verdict
from ..core.results import ERROR_KEYS, CaseLine, case_record
from ..core.signature import input_extremes
from ..core.tolerances import Tolerances
from ..eps import placement as placement_mod
from ..eps.ep_run import STAGES, Diagnosis, EpRun, SessionError, first_line
from ..eps.providers import EpSpec, SessionSettings
from .attribution import Known, attribute_failure

DEFAULT_MAPPER = "ep_testbed.graphs:to_onnx"


@dataclass(frozen=True)
class CaseConfig:
    """Everything a worker needs besides the case; sent once when the worker starts."""

    ep: EpSpec
    session: SessionSettings = field(default_factory=SessionSettings)
    tolerances: Tolerances = field(default_factory=Tolerances.defaults)
    run_dir: str | None = None        # artifacts go to run_dir/cases/...; None: no artifacts
    mapper: str = DEFAULT_MAPPER      # "module:function" with graphs.to_onnx's contract
    precision_model: str = DEFAULT_MODEL  # reference.MODELS: the rounding a correct kernel may show
    max_elements: int | None = None   # the reference's element cap in workers (--limit elements); None: default
    diagnose: bool = True             # a failure's attribution (harness.run.attribution) and tensor-type note


@dataclass(frozen=True)
class ArtifactPolicy:
    """When the worker writes a case folder: always (``force``), for failures, for a case one of
    the EP's expectations will explain (``expected``: the case's ``Expectations.candidates``; its
    folder goes into the bug report or the fix), or for a passing case at least as bad as the
    current N-th worst (``threshold``, None: never). ``expected`` also names the readings the worker
    tries on a failure (``harness.run.readings``): the evidence a ``known`` needs."""

    force: bool = False
    threshold: float | None = None
    expected: tuple[Expectation, ...] = ()


def load_mapper(spec: str) -> Callable[..., Any]:
    """The mapper a ``"module:function"`` string names (``graphs.to_onnx``'s contract)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "to_onnx")


def severity(line: CaseLine) -> float:
    """How close a compared case came to failing: the share of its tolerance used (0 if none)."""
    value = line.get("tolerance_used")
    return float(value) if value is not None else 0.0


def new_line(case: Any, ep: EpSpec) -> CaseLine:
    """A result line for ``case`` with nothing decided yet: every key of
    ``harness.core.results.CASE_KEYS``, those not given here ``None`` (outcome, placement_source,
    tolerance_used, expected_outcome, artifacts)."""
    tags = dict(getattr(case, "tags", {}) or {})
    return case_record(
        id=case.id, op=case.op, dtype=tags.get("dtype"), tags=tags, ep=ep.provider, placement={},
        errors=dict.fromkeys(ERROR_KEYS), worst=[], mismatches=0, ties=0, flags=[], message="", duration_s=0.0,
        nonfinite_mismatches=0, index_mismatches=0)


def wants_artifacts(line: CaseLine, policy: ArtifactPolicy) -> bool:
    """Whether this case's folder is written under ``policy`` (failures always)."""
    if policy.force or line["outcome"] in ("fail", "error"):
        return True
    if policy.expected and verdict(policy.expected, line).outcome != line["outcome"]:
        return True  # known, fixed, a refusal or an emulation gap: settled the same way in the main process
    if line["outcome"] in ("pass", "tie-only") and policy.threshold is not None:
        value = severity(line)
        return value > 0 and value >= policy.threshold
    return False


@dataclass
class Prepared:
    """A case ready to run: its mapping, inputs, feeds, expected outputs and node names."""

    mapping: Any
    inputs: dict[str, np.ndarray]
    feeds: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    node_names: list[str]
    op_nodes: list[str]
    reference: Expected | None = None  # the expected outputs with their bounds and knife edges
    note: str = ""                      # what the run changed about the model (a carrier), said last

    @property
    def elements(self) -> int:
        """Elements fed and expected: what the case adds to a packed session."""
        return sum(int(np.asarray(a).size) for a in (*self.feeds.values(), *self.expected.values()))


def raised(what: str, exc: Exception, case: Any) -> str:
    """``<what> raised <type>: <exc>``; for a ``MemoryError`` what the case needed and what to do
    (the run goes on: the case is ``error``, never the run's end)."""
    if not isinstance(exc, MemoryError):
        return f"{what} raised {type(exc).__name__}: {exc}"
    need = (getattr(case, "tags", None) or {}).get("memory_mb")
    stated = f"; the case states a need of {need} MiB" if need else ""
    return (f"{what} ran out of memory ({exc or 'MemoryError'}){stated}. Note: rerun it alone with --jobs 1, or on "
            "a machine with more memory (a higher ulimit -v)")


def prepare(case: Any, mapper: Callable[..., Any], line: CaseLine, state: dict[str, Any],
            model: str = DEFAULT_MODEL) -> Prepared | None:
    """Map the desc, draw the inputs, collect the flags and compute the expected outputs with
    their allowance under precision ``model``; None (with ``line`` decided: ``error`` or
    ``inexpressible``) when the case cannot run. ``state`` collects what a case folder holds."""
    try:
        mapping = mapper(case.desc, opset=getattr(case, "opset", None))
    except Exception as exc:
        line.update({"outcome": "error", "message": f"mapper raised {type(exc).__name__}: {exc}"})
        return None
    line["flags"] = [flag.to_json() for flag in mapping.flags]
    try:
        inputs = case.inputs()
    except Exception as exc:
        line.update({"outcome": "error", "message": raised("the case's inputs", exc, case)})
        return None
    line["input_extremes"] = input_extremes(inputs)
    # Flags that only this case's input values raise (a NaN, a float32 bin end, an int64 beyond
    # what the composition carries exactly); they count like the desc's own flags.
    flags = list(mapping.flags) + list(getattr(mapping, "input_flags", lambda _: [])(inputs))
    line["flags"] = [flag.to_json() for flag in flags]
    inexpressible = [f for f in flags if f.kind == "inexpressible"]
    if not mapping.expressible or inexpressible:
        reasons = [f"{f.field}={f.value}: {f.reason}" for f in inexpressible]
        line.update({"outcome": "inexpressible",
                     "message": "; ".join(reasons) or "the mapper marked the desc inexpressible"})
        return None
    state["model"] = mapping.model
    started = time.perf_counter()
    try:
        reference = execute_with_bounds(case.desc, inputs, model)
    except Exception as exc:
        line.update({"outcome": "error", "message": raised("reference", exc, case)})
        return None
    finally:
        state["reference_s"] = time.perf_counter() - started  # the line's timings show it (part of prepare_s)
    state["expected"] = reference.outputs
    allowance = Allowance.of(reference)
    state["allowance"] = allowance.to_arrays() if allowance is not None else None
    feeds = mapping.feeds(inputs)
    state["feeds"] = feeds
    node_names = [n.name for n in mapping.model.graph.node]
    op_nodes = list(getattr(mapping, "op_nodes", None) or node_names)
    return Prepared(mapping, inputs, feeds, reference.outputs, node_names, op_nodes, reference)


def mark_shows(case: Any, prepared: Prepared, config: CaseConfig, line: CaseLine) -> None:
    """Give each ``diverges`` flag whose ONNX meaning the mapper computes (``Mapping.meanings``)
    ``"shows"``: whether these inputs can show the divergence at all, i.e. whether that meaning
    fails the case's comparison with the expected outputs. An expectation's ``shows_when`` reads
    it (``harness.core.expectations``); a meaning that cannot be computed leaves the flag as is."""
    try:
        meanings: dict[str, Any] = getattr(prepared.mapping, "meanings", lambda tensors: {})(prepared.inputs)
    except Exception:  # the meaning is a help to expectations, never part of the verdict
        return
    for name, outputs in meanings.items():
        shows = not compare(case, prepared.expected, outputs, config, prepared.inputs, prepared.reference).passed
        for flag in line["flags"] or []:
            if flag.get("field") == name and flag.get("kind") == "diverges":
                flag["shows"] = shows


def carrier_of(prepared: Prepared) -> Any:
    """The case's mapping with an exact carrier node after each operator output
    (``Mapping.with_carrier``), for an EP that declines an operator node only as the one node of a
    model; None when there is no carrier to add."""
    return getattr(prepared.mapping, "with_carrier", lambda: None)()


def carry(prepared: Prepared, mapping: Any, ep: str) -> None:
    """``prepared`` now runs ``mapping``, the carried model; the message says so (after the
    comparison's summary)."""
    prepared.mapping, prepared.node_names = mapping, [n.name for n in mapping.model.graph.node]
    prepared.note = (f"; Note: {ep} refused the operator node(s) as the only node(s) of a model; "
                     "they ran with an exact carrier node after them (Mul by 1)")


def accept(case: Any, prepared: Prepared, run: EpRun, config: CaseConfig, line: CaseLine,
           state: dict[str, Any]) -> None:
    """Decide ``line`` from a session that ran: where its nodes ran (an op node not proven on the
    EP is ``not-on-ep``), then the comparison (``judge``), then a note on helper nodes elsewhere."""
    ep = config.ep.provider
    line["placement"], line["placement_source"] = run.placement, run.placement_source
    off = placement_mod.off_ep(run.placement, prepared.op_nodes, ep)
    if off:
        line.update({"outcome": "not-on-ep", "message": f"op node(s) not proven on {ep}: "
                     + ", ".join(f"{n} -> {run.placement.get(n, 'unknown')}" for n in off)})
        return
    state["model"] = prepared.mapping.model  # the model that ran (with carriers, if the EP needed them)
    judged = judge(case, prepared, run.outputs, config, line, state)
    message = line["message"] = (line["message"] or "") + prepared.note
    if not judged:
        return
    placement = run.placement
    helpers = [n for n in prepared.node_names if n not in prepared.op_nodes]
    helpers_off = placement_mod.off_ep(placement, helpers, ep)
    if helpers_off:
        line["message"] = message + "; helper node(s) elsewhere: " + ", ".join(
            f"{n} -> {placement.get(n)}" for n in helpers_off)


def session_failure(line: CaseLine, exc: SessionError, ep: str) -> None:
    """Decide ``line`` for a strict session that failed other than by refusing a CPU fallback: the
    EP's own process died or hung (``crash``/``timeout``; this worker did not), an emulated device's
    Direct3D 12 layer failed, e.g. refusing the EP's shader or a buffer (``emulation-gap``), or the
    EP could not build or run it (``fail``)."""
    if exc.stage in ("crash", "timeout"):
        line.update({"outcome": exc.stage, "message": str(exc)})
    elif exc.emulation:
        line.update({"outcome": "emulation-gap", "message": f"{ep} {STAGES[exc.stage]} on an emulated device whose "
                     f"Direct3D 12 layer failed (not a result of the EP): {exc.emulation[0]}; "
                     f"ONNX Runtime: {first_line(exc.cause)}"})
    elif exc.stage == "build":
        line.update({"outcome": "fail", "message": f"{ep} could not build the session: {first_line(exc.cause)}"})
    else:
        line.update({"outcome": "fail", "message": f"{ep} raised while running: {first_line(exc.cause)}"})


def refusal_outcome(prepared: Prepared, ep: str, line: CaseLine, refusal: BaseException,
                    diagnosis: Diagnosis) -> None:
    """The strict session was refused and ``diagnosis`` (a session with fallback allowed) names
    where the nodes went. The case is ``not-on-ep`` either way (its strict session does not exist);
    the message says whether the op node itself or only a helper node (Cast, Reshape...) was
    declined."""
    node_names, op_nodes = prepared.node_names, prepared.op_nodes
    if diagnosis.error is not None:
        line.update({"outcome": "not-on-ep", "message": f"{ep} refused the session with CPU fallback disabled "
                     f"({first_line(refusal)}); the diagnostic session failed too: {diagnosis.error}"})
        return
    placement = diagnosis.placement
    line["placement"], line["placement_source"] = placement, diagnosis.placement_source
    off = placement_mod.off_ep(placement, op_nodes, ep)
    where = ", ".join(f"{n} -> {placement.get(n, 'unknown')}" for n in (off or node_names))
    if off:
        line.update({"outcome": "not-on-ep", "message": f"{ep} does not take the op node(s): {where} "
                     "(session with CPU fallback disabled was refused)"})
    else:
        line.update({"outcome": "not-on-ep", "message": f"{ep} takes the op node(s) but declines helper node(s): "
                     f"{', '.join(f'{n} -> {placement.get(n)}' for n in node_names if placement.get(n) != ep)}"})


def judge(case: Any, prepared: Prepared, outputs: list[np.ndarray], config: CaseConfig, line: CaseLine,
          state: dict[str, Any]) -> bool:
    """Read the EP's outputs back through the mapping and compare them with the expected ones
    under the operator's record (index outputs, index rule): ``fail``, ``tie-only`` or
    ``pass``. False when the outputs could not be read back (``fail``, nothing compared)."""
    try:
        actual = prepared.mapping.outputs(outputs)
    except Exception as exc:  # e.g. an output of the wrong shape or count
        line.update({"outcome": "fail", "message": f"{config.ep.provider}'s outputs could not be read back: "
                     f"{first_line(exc)}"})
        return False
    state["actual"] = actual
    comparison = compare(case, prepared.expected, actual, config, prepared.inputs, prepared.reference,
                         keep_differences=True)
    line.update({"errors": comparison.errors(), "worst": comparison.worst, "mismatches": comparison.mismatches,
                 "ties": comparison.ties, "tolerance_used": comparison.tolerance_used})
    allowance = allowance_record(prepared.reference, comparison)
    line.update({"bound": allowance["bound"], "knife_edges": allowance["knife_edges"]})
    message = comparison.summary() + knife_edge_note(prepared.reference, comparison)
    line.update({"nonfinite_mismatches": comparison.nonfinite_mismatches,
                 "index_mismatches": comparison.index_mismatches,
                 "error_stats": error_statistics(prepared.expected, actual, config.tolerances,
                                                 spec_for(case.desc).index_outputs, comparison.differences)})
    comparison.differences.clear()  # output-sized arrays, not needed past here
    if not comparison.passed:
        if config.diagnose:
            message += _tensor_type_hint(case, prepared, actual, config)
        line.update({"outcome": "fail", "message": message})
        if comparison.mismatches and config.diagnose:
            line["attribution"] = _attribution(case, prepared, config, line.get("flags") or [], outputs)
    elif comparison.ties:
        line.update({"outcome": "tie-only", "message": message})
    else:
        line.update({"outcome": "pass", "message": message})
    return True


def compare(case: Any, expected: dict[str, np.ndarray], actual: Mapping[str, np.ndarray], config: CaseConfig,
            inputs: dict[str, np.ndarray], reference: Expected | None, keep_differences: bool = False) -> Comparison:
    """The one comparison under the operator's record (index outputs, index rule) and the
    reference's allowance (none under the ``exact`` model); ``keep_differences`` as for
    ``compare_outputs``."""
    spec = spec_for(case.desc)
    in_window = functools.partial(spec.index_rule, case.desc) if spec.index_rule else None
    return compare_outputs(expected, actual, config.tolerances, inputs, in_window=in_window,
                           index_outputs=spec.index_outputs, allowance=Allowance.of(reference),
                           keep_differences=keep_differences)


def _attribution(case: Any, prepared: Prepared, config: CaseConfig, line_flags: list[dict[str, Any]],
                 outputs: list[np.ndarray]) -> dict[str, Any]:
    """The ``attribution`` record of a case whose outputs failed (``harness.run.attribution``);
    a record of cause ``unknown`` if attributing raised (the verdict stands either way). The
    probe, when the model has intermediate tensors, is a session of this case's model alone."""
    def compare_case(actual: Mapping[str, np.ndarray]) -> Comparison:
        """The case's own comparison of ``actual`` (DML outputs) with the expected ones."""
        return compare(case, prepared.expected, actual, config, prepared.inputs, prepared.reference)

    try:
        named = dict(zip([o.name for o in prepared.mapping.model.graph.output], outputs))  # the session's order
        known = Known(case.desc, prepared.inputs, prepared.reference) if prepared.reference is not None else None
        return attribute_failure(prepared.mapping, prepared.feeds, line_flags, config, compare_case, named, known)
    except Exception as exc:
        return {"cause": "unknown", "reason": f"attributing the failure raised {type(exc).__name__}: "
                f"{first_line(exc)}", "nodes": [], "helper": None, "change": None}


def _tensor_type_hint(case: Any, prepared: Prepared, actual: dict[str, np.ndarray], config: CaseConfig) -> str:
    """For a float16 case failing under the fp32 model: whether computing in float16 explains it."""
    float16 = any(np.asarray(v).dtype == np.float16 for v in prepared.expected.values())
    if config.precision_model != "fp32" or not float16 or prepared.reference is None:
        return ""
    try:
        other = execute_with_bounds(case.desc, prepared.inputs, "tensor-type")
    except Exception:  # the hint is a nicety; the case's verdict stands
        return ""
    if not compare(case, prepared.expected, actual, config, prepared.inputs, other).passed:
        return ""
    return ("; Note: every element lies within the tensor-type rounding bound: the EP looks like it computes "
            "coordinates, weights or sums in float16, not float32 (--precision-model tensor-type accepts that)")
