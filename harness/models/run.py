"""One whole model on the EP under test and on a reference EP: owns ``run_model``, the result of
``ep-testbed model run`` as a JSON-able dict (written to ``OUT/model_result.json``, rendered
by ``reports.model_report``):

1. **Outputs**: the model runs on the EP under test and on the reference EP (CPU by default),
   both through the harness's one session layer (``harness.eps.session.run_on_ep``: graph
   optimizations off unless ``--graph-opt``); each graph output is compared with the harness's
   one comparison (``outputs.compare_named`` over ``harness.core.compare.compare_outputs``). An
   index output (a MaxPool's ``Indices``: the operator record's ``index_outputs``) is compared
   tie-aware, against the input it indexes as the reference EP computed it.
2. **Placement**: node -> provider read back from the EP session (``harness.eps.placement``),
   counted by op type. Unlike a conformance case, a model run takes the production path by
   default: nodes the EP declines run on the CPU EP, and the counts say so;
   ``allow_fallback=False`` refuses that instead (and names the declined nodes).
3. **Per-node attribution** (``attribution``): a probe copy of the model exposes every input and
   output of each attributed node and runs on both EPs; each node is judged on its own EP
   inputs against the DirectML reference, and the first divergent node is named.
4. **Baseline** (``baseline``), when given, compares the EP's outputs with stored ones.

5. **Output drift** (``drift``): when an output differs from the reference EP's, the first
   node of any op type whose outputs leave the tolerance is found (every intermediate marked as
   an output on both EPs, or parts of them in turn when that would exceed the budget) and
   recorded under ``drift`` with its statistics, whether it is an operator under test, and the
   model outputs' statistics (what the drift becomes downstream).

The verdict (``verdict_reasons``) separates the operators under test from output drift. It is
``fail`` when an attributed node diverges from the DirectML reference where no flag explains it
(``statuses.DIVERGING``), the baseline (saved on the same EP) regressed, the EP could not run
the model, or output drift breaks the drift policy (``ModelRunConfig.drift``: ``report``, the
default, never fails on drift; ``fail`` fails on any output that differs from the reference EP's;
a drift budget fails on an output beyond it); else ``emulation-gap`` when the emulated device
could not run the whole model, ``not-on-ep`` when the EP declines nodes of it under
``--no-cpu-fallback`` (``verdict_of``: neither is the EP's result, as in ``ep-testbed run``, so
neither fails the run), else ``pass``. ``verdict_statement`` says it in one
line ("operators pass; output drift starts at Conv 'conv1' (72/196608 outside tolerance)"). A
node whose difference a flag explains (the ONNX node means something else for these inputs, and
the EP computes that) or predicts, and a node that could not be judged, do not fail a run: the
result names each with its reason.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from ...graphs import attributed_op_types
from ...graphs.from_onnx import MODES
from ..core.error_stats import error_statistics
from ..core.model_statuses import AGREES, DIVERGING, NOT_JUDGED
from ..core.tolerances import Tolerances
from ..eps import session as session_mod
from ..eps.gpu import runtime_info
from ..eps.providers import EpSpec, SessionSettings
from ..eps.session import EpRun, first_line
from .alone import node_feeds, one_node_model
from .attribution import (
    attribute_nodes,
    attributed_nodes,
    attribution_counts,
    captured_values,
    divergent_summary,
    first_divergent,
)
from .attribution import node_arrays as node_arrays_of
from .drift import DriftPolicy, budget_rows, drift_statement, prefix_probe, search_drift
from .outputs import compare_named, tie_contexts
from .untrusted import LoadedModel, ModelRefused, explain_session_error, model_opset
from .untrusted import constants as model_constants

#: How ``graphs.import_node`` reads attributed nodes: ``"spec"`` or ``"dml-ep"``.
READINGS = MODES
#: Declined nodes named in a refused ``--no-cpu-fallback`` run's message, at most.
DECLINED_SHOWN = 8


#: Characters of an ONNX Runtime error a message keeps: OpenVINO's run to a page, and the cause
#: comes last, so a longer one keeps its start and its end.
ERROR_TEXT_LIMIT = 6000


class SessionFailed(RuntimeError):
    """An EP could not build or run the model (not a refusal of the model itself); ``stage``:
    ``"build"``, ``"run"`` or ``"fallback-refused"``; ``emulation``: the emulated device's own
    log lines when it, not the EP, failed (``SessionError.emulation``; empty otherwise)."""

    def __init__(self, message: str, stage: str = "build", emulation: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.stage = stage
        self.emulation = list(emulation)


def whole_message(exc: BaseException) -> str:
    """``"TypeName: message"`` with every non-blank line kept (the cause of an OpenVINO failure is
    on its last lines), at most ``ERROR_TEXT_LIMIT`` characters (start and end kept)."""
    text = "\n".join(line.rstrip() for line in str(exc).strip().splitlines() if line.strip())
    if len(text) > ERROR_TEXT_LIMIT:
        head = ERROR_TEXT_LIMIT // 4
        tail = ERROR_TEXT_LIMIT - head
        text = f"{text[:head]}\n[... {len(text) - ERROR_TEXT_LIMIT} characters left out ...]\n{text[-tail:]}"
    return f"{type(exc).__name__}: {text}"


@dataclass(frozen=True)
class ModelRunConfig:
    """How ``run_model`` runs: the EP under test, the reference EP, session settings, tolerances."""

    ep: EpSpec
    reference: EpSpec
    settings: SessionSettings = field(default_factory=SessionSettings)
    tolerances: Tolerances = field(default_factory=Tolerances.defaults)
    allow_fallback: bool = True
    reading: str = "spec"  # from_onnx mode for attribution: "spec" or "dml-ep"
    precision_model: str = "fp32"  # the reference's precision model (reference.MODELS) for attribution
    #: (tolerances, where they come from) for the baseline check; None: ``tolerances``
    baseline_tolerances: tuple[Tolerances, str] | None = None
    #: Initializer arrays kept out of the model message (a model over 2 GiB: ``untrusted``),
    #: handed to every session; ``run_model`` sets them from the ``LoadedModel``.
    initializers: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: What output drift against the reference EP does to the verdict, and the search's budget.
    drift: DriftPolicy = field(default_factory=DriftPolicy)
    #: The reference EP's session settings (None: ``settings``, as the EP under test's).
    reference_settings: SessionSettings | None = None


class Laps:
    """Seconds per part of a model run (``model_result.json``'s ``timings``): each call
    ``laps(part)`` adds the time since the previous call (or since the start) to ``part``, so the
    parts add up to the time the run took."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self._mark = time.perf_counter()

    def __call__(self, part: str) -> None:
        now = time.perf_counter()
        self.parts[part] = self.parts.get(part, 0.0) + now - self._mark
        self._mark = now

    def to_json(self) -> dict[str, float]:
        return {part: round(seconds, 3) for part, seconds in self.parts.items()}


@dataclass
class Captured:
    """Every tensor attribution reads, from both EPs, and the EP's placement of the run they come from."""

    ep_values: dict[str, np.ndarray]
    ref_values: dict[str, np.ndarray]
    placement: dict[str, str]
    error: str | None = None  # why the probe copy did not run (its nodes are then not judged)
    #: The probe copy ran on the reference EP only: judge the nodes alone on the EP under test.
    alone: bool = False


def quiet_default_logger() -> None:
    """Keep EP warnings off the console: EPs log to ONNX Runtime's process-wide default logger,
    outside any session's log level (OpenVINO: "The input ... is not used due to OpenVINO
    optimization", once per unused input); errors still reach the caller as exceptions."""
    import onnxruntime as ort  # loaded on first use, like harness.eps.session

    ort.set_default_logger_severity(3)


def run_session(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec, config: ModelRunConfig,
                profile: bool, name: str = "model", reference: bool = False) -> EpRun:
    """Run ``model`` once on ``ep`` through ``harness.eps.session.run_on_ep`` (the model run's
    settings, the reference EP's when ``reference``: CPU fallback as ``config.allow_fallback``
    says, ONNX Runtime's log quiet) and, when ``profile``, read placement back. Raises
    ``ModelRefused`` when ONNX Runtime refuses the model itself (no kernel for an op, an IR
    version too new), else ``SessionFailed``."""
    settings = config.reference_settings if reference and config.reference_settings is not None else config.settings
    try:
        return session_mod.run_on_ep(model, feeds, ep, settings, profile=profile, quiet=True,
                                     allow_fallback=config.allow_fallback or ep.is_cpu,
                                     initializers=config.initializers)
    except session_mod.SessionError as exc:
        raise _failure(exc, model, feeds, ep, config, name) from None


def _failure(exc: session_mod.SessionError, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec,
             config: ModelRunConfig, name: str) -> Exception:
    """The ``ModelRefused`` or ``SessionFailed`` a session error means for a model run."""
    import onnxruntime as ort  # only on this failure path: naming the providers a refusal was checked against

    if exc.emulation:  # vkd3d refused one of DirectML's shaders: the emulated device failed, not the EP
        what = "run" if exc.stage == "run" else "build a session for"
        return SessionFailed(f"{ep.provider} could not {what} {name} on an emulated device whose Direct3D 12 "
                             f"layer failed (an emulation gap, not a result of the EP): {exc.emulation[0]}; "
                             f"ONNX Runtime: {whole_message(exc.cause)}", exc.stage, exc.emulation)
    if exc.stage == "run":
        return SessionFailed(f"{ep.provider} raised while running {name}: {whole_message(exc.cause)}", "run")
    refused = explain_session_error(exc.cause, list(ort.get_available_providers()), name)
    if refused is not None:
        return refused
    if exc.refused_fallback:
        return SessionFailed(f"{ep.provider} does not take every node and CPU fallback is disabled "
                             f"(--no-cpu-fallback): {first_line(exc.cause).rstrip('.')}."
                             f"{_declined(model, feeds, ep, config)}", "fallback-refused")
    return SessionFailed(f"{ep.provider} could not build a session for {name}: {whole_message(exc.cause)}")


def _declined(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec, config: ModelRunConfig) -> str:
    """The nodes ``ep`` declines, as a message tail, from a session with fallback allowed
    (``harness.eps.session.diagnose_refusal``)."""
    diagnosis = session_mod.diagnose_refusal(model, feeds, ep, config.settings, quiet=True,
                                             initializers=config.initializers)
    if diagnosis.error is not None:
        return f" A session with CPU fallback allowed, built to name the declined nodes, failed too: {diagnosis.error}"
    off = [n for n in model.graph.node if diagnosis.placement.get(n.name) != ep.provider]
    named = ", ".join(f"{n.name} ({n.op_type}) -> {diagnosis.placement.get(n.name, 'unproven')}"
                      for n in off[:DECLINED_SHOWN])
    more = f" and {len(off) - DECLINED_SHOWN} more" if len(off) > DECLINED_SHOWN else ""
    return (f" Declined: {named}{more}. Note: without --no-cpu-fallback these nodes run on the CPU EP "
            "and the placement counts say so.") if off else ""


def placement_counts(nodes: Any, placement: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """op type -> provider -> node count over ``nodes`` (a model: its graph's nodes; ``unproven``
    where no provider was read back)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for node in (nodes.graph.node if isinstance(nodes, onnx.ModelProto) else nodes):
        counts[node.op_type][placement.get(node.name, "unproven")] += 1
    return {op: dict(c) for op, c in sorted(counts.items())}


def capture(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep_run: EpRun, ref_run: EpRun,
            config: ModelRunConfig, name: str, run_as: onnx.ModelProto | None = None) -> Captured:
    """Run the probe copy on both EPs and collect every tensor an attributed node reads or
    writes; a probe copy that fails keeps the model's own outputs and placement and says why in
    ``Captured.error``. The probe copy is the model cut after its last attributed node, with those
    tensors as its outputs (``drift.prefix_probe``: the model's own outputs are the plain run's,
    and nothing downstream of the nodes runs again)."""
    captured = captured_values(model, feeds)
    result = Captured(ep_run.named(), ref_run.named(), dict(ep_run.placement))
    if not attributed_nodes(model):
        return result
    probe = prefix_probe(model, captured)
    config = _holding(config, probe)
    try:
        ref_probe = run_session(probe, feeds, config.reference, config, profile=False, name=f"{name} (probe copy)",
                                reference=True)
    except SessionFailed as exc:  # the model itself ran: keep its outputs and placement, say why no attribution
        result.error = f"the probe copy (intermediates exposed as outputs) did not run: {exc}"
        return result
    result.ref_values.update({k: v for k, v in ref_probe.named().items() if k in captured})
    try:
        ep_probe = run_session(probe if run_as is None else prefix_probe(run_as, captured), feeds, config.ep,
                               config, profile=True, name=f"{name} (probe copy)")
    except SessionFailed as exc:  # judge each node alone on the EP, fed the reference EP's tensors
        result.error = f"the probe copy (intermediates exposed as outputs) did not run on the EP: {exc}"
        result.alone = True
        return result
    result.ep_values.update({k: v for k, v in ep_probe.named().items() if k in captured})
    result.placement = {**result.placement, **ep_probe.placement}
    return result


def _holding(config: ModelRunConfig, probe: onnx.ModelProto) -> ModelRunConfig:
    """``config`` handing a probe copy's sessions only the injected weights it holds (a copy cut
    short reads fewer of them: a model over 2 GiB)."""
    held = {t.name for t in probe.graph.initializer}
    return replace(config, initializers={k: v for k, v in config.initializers.items() if k in held})


def run_model(loaded: LoadedModel, feeds: Mapping[str, np.ndarray], config: ModelRunConfig,
              baseline: Any = None, *, run_as: onnx.ModelProto | None = None,
              ep_failure: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the model (module docstring) and return the result dict; raises ``ModelRefused`` when
    the model is refused, ``SessionFailed`` when the reference EP cannot run it. The arrays behind
    the result (outputs of both EPs, judged nodes' pairs) come under the key ``_arrays``, for the
    caller to store.

    When the EP under test cannot build or run the whole model, or ``ep_failure``
    (``{"stage", "message"}``) says it crashed doing so in an earlier process, the result says so
    under ``ep_failure``, compares no output, and judges each attributed node alone on the EP
    (``alone``), fed what the reference EP fed it.

    ``run_as`` exists for testing attribution; it is no user option. It is a variant of the
    model, with the same node names, that the EP under test runs instead, while attribution
    reads the nodes of ``loaded.model``: it simulates an EP that computes something other than
    what a node means (e.g. a perturbed attribute), so a test can plant a divergence.

    ``timings`` says where ``duration_s`` went, in seconds: ``ep_run`` (the model on the EP under
    test), ``reference_run`` (on the reference EP), ``capture`` (the probe copies of attribution
    on both EPs), ``judge`` (each attributed node judged: the reference, the comparison, what
    explains a difference; alone on the EP, its one-node sessions too), ``compare`` (outputs,
    baseline, verdict) and ``drift`` (where output drift starts: its marked runs and comparisons)."""
    if config.reading not in READINGS:
        raise ValueError(f"reading = {config.reading!r}: one of {', '.join(READINGS)}")
    started = time.perf_counter()
    laps = Laps()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    config = replace(config, initializers=loaded.initializers)  # weights kept out of a model over 2 GiB
    ep_run = None
    if ep_failure is None:
        try:
            ep_run = run_session(run_as if run_as is not None else loaded.model, feeds, config.ep, config,
                                 profile=True, name=loaded.path.name)
        except SessionFailed as exc:
            ep_failure = {"stage": exc.stage, "message": str(exc)}
            if exc.emulation:
                ep_failure = {**ep_failure, "emulation": exc.emulation}
    laps("ep_run")
    if ep_run is None:
        result = _run_alone(loaded, feeds, config, dict(ep_failure or {}), laps)
    else:
        result = _run_whole(loaded, feeds, config, ep_run, baseline, run_as, laps)
    result["started"] = started_at
    result["verdict_reasons"] = verdict_reasons(result)
    result["verdict"] = verdict_of(result)
    result["verdict_statement"] = verdict_statement(result)
    laps("compare")
    result["duration_s"] = round(time.perf_counter() - started, 4)
    result["timings"] = laps.to_json()
    return result


def _run_whole(loaded: LoadedModel, feeds: Mapping[str, np.ndarray], config: ModelRunConfig, ep_run: EpRun,
               baseline: Any, run_as: onnx.ModelProto | None, laps: Laps) -> dict[str, Any]:
    """The result of a model that ran on the EP under test: outputs compared, nodes judged on the
    EP's own intermediates (alone where only the probe copy failed on the EP), the baseline."""
    model, name = loaded.model, loaded.path.name
    ref_run = run_session(model, feeds, config.reference, config, profile=False, name=name, reference=True)
    laps("reference_run")
    captured = capture(model, feeds, ep_run, ref_run, config, name, run_as)
    laps("capture")
    ties = tie_contexts(model, {**config.initializers, **feeds, **captured.ref_values})
    outputs = compare_named(ref_run.named(), ep_run.named(), config.tolerances, ties)
    laps("compare")
    node_arrays: dict[str, dict[str, np.ndarray]] = {}
    if captured.alone:  # the EP ran the model but not its probe copy: judge the nodes one by one
        rows, placement = _judge_alone(model, feeds, config, captured.ref_values, node_arrays)
        captured.placement = {**captured.placement, **placement}
    else:
        rows = attribute_nodes(model, feeds, captured.ep_values, captured.ref_values, captured.placement, config,
                               node_arrays)
    laps("judge")
    if captured.error:
        for row in rows:
            if row["status"] == "error" and not row.get("alone"):
                row["message"] = captured.error
    result = _result(loaded, config, outputs, rows, captured.error,
                     _placement(model.graph.node, ep_run.placement, ep_run.placement_source, config))
    if baseline is not None:
        result["baseline"] = baseline.compare(ep_run.named(), *(config.baseline_tolerances or (config.tolerances,)))
        gpu = result.get("gpu")
        result["baseline"]["device_note"] = baseline.device_note(gpu.get("summary") if isinstance(gpu, dict) else None)
    laps("compare")
    result["drift"] = drift_record(model, feeds, config, ref_run.named(), ep_run.named(), outputs, ties, rows, name,
                                   run_as)
    laps("drift")
    result["_arrays"] = {"outputs": ep_run.named(), "reference_outputs": ref_run.named(), "nodes": node_arrays}
    return result


def drift_record(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], config: ModelRunConfig,
                 reference_outputs: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray],
                 output_rows: list[dict[str, Any]], ties: Mapping[str, Any], rows: list[dict[str, Any]], name: str,
                 run_as: onnx.ModelProto | None = None) -> dict[str, Any]:
    """The ``drift`` record of ``model_result.json``: the policy, whether an output differs from
    the reference EP's, the model outputs' error statistics (what the drift becomes downstream),
    the outputs under a drift budget, and, when an output differs, where the drift starts
    (``drift.search_drift``; the first node's attribution status added when it is an operator
    under test). A probe copy that fails on either EP leaves ``search`` None and says why in ``error``."""
    differ = any(o["outcome"] == "fail" for o in output_rows)
    record: dict[str, Any] = {
        "policy": config.drift.to_json(), "outputs_differ": differ, "search": None, "error": None,
        "downstream": error_statistics(reference_outputs, outputs, config.tolerances, set(ties)),
        "budget_outputs": budget_rows(reference_outputs, outputs, config.drift, ties),
        "note": ("graph optimizations are on: marking intermediates as outputs, and cutting the model after them, "
                 "can keep ONNX Runtime from fusing nodes or fuse others, so a marked run may compute what the plain "
                 "run fused differently"
                 if config.settings.graph_opt or (config.reference_settings or config.settings).graph_opt else None)}
    if differ:
        def run_pair(probe: onnx.ModelProto) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
            probe_config = _holding(config, probe)
            ref = run_session(probe, feeds, config.reference, probe_config, profile=False,
                              name=f"{name} (intermediates marked)", reference=True)
            marked = [o.name for o in probe.graph.output]
            ep = run_session(probe if run_as is None else prefix_probe(run_as, marked), feeds,
                             config.ep, probe_config, profile=False, name=f"{name} (intermediates marked)")
            return ref.named(), ep.named()

        try:
            record["search"] = search_drift(model, feeds, run_pair, config.tolerances, config.drift.budget_elements(),
                                            {**model_constants(model, config.initializers)})
        except (SessionFailed, ModelRefused) as exc:
            record["error"] = f"a copy with intermediates marked as outputs did not run: {exc}"
        first = (record["search"] or {}).get("first")
        if first and first["under_test"]:
            row = next((r for r in rows if r["node"] == first["node"] and r.get("inside") is None), None)
            first["attribution_status"] = None if row is None else row["status"]
    record["statement"] = drift_statement(record, config.reference.provider)
    return record


def _run_alone(loaded: LoadedModel, feeds: Mapping[str, np.ndarray], config: ModelRunConfig,
               failure: dict[str, str], laps: Laps) -> dict[str, Any]:
    """The result of a model the EP under test could not take whole: the reference EP runs it and
    its probe copy, and each attributed node is judged alone on the EP (``alone``)."""
    model, name = loaded.model, loaded.path.name
    ref_run = run_session(model, feeds, config.reference, config, profile=False, name=name, reference=True)
    laps("reference_run")
    values, probe_error = dict(ref_run.named()), None
    if attributed_nodes(model):
        captured = captured_values(model, feeds)
        try:
            cut = prefix_probe(model, captured)
            probe = run_session(cut, feeds, config.reference, _holding(config, cut), profile=False,
                                name=f"{name} (probe copy)", reference=True)
            values.update({k: v for k, v in probe.named().items() if k in captured})
        except SessionFailed as exc:
            probe_error = f"the probe copy (intermediates exposed as outputs) did not run on the reference EP: {exc}"
    laps("capture")
    node_arrays: dict[str, dict[str, np.ndarray]] = {}
    rows, placement = _judge_alone(model, feeds, config, values, node_arrays)
    laps("judge")
    alone_nodes = [n for _, n in attributed_nodes(model)]
    result = _result(loaded, config, [], rows, probe_error,
                     _placement(alone_nodes, placement, "one-node sessions", config))
    result["ep_failure"] = {**failure, "nodes_alone": len(alone_nodes)}
    result["_arrays"] = {"outputs": {}, "reference_outputs": ref_run.named(), "nodes": node_arrays}
    return result


def _judge_alone(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], config: ModelRunConfig,
                 values: Mapping[str, np.ndarray], node_arrays: dict[str, dict[str, np.ndarray]]
                 ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every attributed node alone on the EP under test (``alone.one_node_model``), fed ``values``
    (what the reference EP fed it), judged; ``(rows, node -> provider)``. A node whose one-node
    session fails is an ``error`` row with the EP's whole message."""
    ep_values, placement, failed = {}, {}, {}
    constants = model_constants(model, config.initializers)
    for position, node in attributed_nodes(model):
        arrays = node_arrays_of(model, node, feeds, values, constants)
        if any(a is None for name, a in zip(node.input, arrays) if name):
            continue  # not captured: attribute_nodes says so
        try:
            run = run_session(one_node_model(model, node, arrays), node_feeds(node, arrays), config.ep, config,
                              profile=True, name=f"node {node.name!r} alone")
        except (SessionFailed, ModelRefused) as exc:
            failed[position] = f"alone on {config.ep.provider}, this node failed too: {exc}"
            continue
        ep_values.update(run.named())
        placement[node.name] = run.placement.get(node.name, "unproven")
    rows = attribute_nodes(model, feeds, ep_values, values, placement, config, node_arrays, input_values=values)
    for row in rows:
        if row.get("inside") is None:
            row["alone"] = True
            if row["position"] in failed:
                row.update(status="error", message=failed[row["position"]])
            elif row["status"] not in ("error",):
                row["message"] = f"judged alone (a one-node model on the EP, fed the reference EP's inputs): " \
                                 f"{row['message']}"
    return rows, placement


def verdict_of(result: Mapping[str, Any]) -> str:
    """The run's verdict (``model_statuses.MODEL_VERDICTS``): ``fail`` when ``verdict_reasons``
    names a cause; else ``emulation-gap`` when the emulated device could not run the whole model,
    ``not-on-ep`` when the EP declines nodes of it under ``--no-cpu-fallback`` (neither is a
    result of the EP, as in ``ep-testbed run``: exit 0), else ``pass``."""
    if result.get("verdict_reasons"):
        return "fail"
    failure = result.get("ep_failure") or {}
    if failure.get("emulation"):
        return "emulation-gap"
    if failure.get("stage") == "fallback-refused":
        return "not-on-ep"
    return "pass"


def not_tested_failure(failure: Mapping[str, Any] | None) -> bool:
    """Whether the EP's failure on the whole model says nothing about the EP: the emulated
    device failed (``emulation``), or the EP declined nodes with CPU fallback refused."""
    return failure is not None and bool(failure.get("emulation") or failure.get("stage") == "fallback-refused")


def verdict_reasons(result: Mapping[str, Any]) -> list[str]:
    """Why a model run fails, one line per cause (empty: it passes): the EP failed, crashed or
    raised on the whole model, an output differs from the reference EP's, the baseline regressed,
    or a node diverges from the DirectML reference with no flag explaining it. Nodes explained or
    predicted by a flag, nodes not judged, and a whole model the EP did not get to run for a
    reason that is not the EP's (``not_tested_failure``: the verdict says which) do not fail a
    run; the summary lists them."""
    reasons = []
    failure = result.get("ep_failure")
    if failure and not not_tested_failure(failure):
        stage = {"crash": "crashed on", "run": "failed running on"}.get(failure.get("stage"), "could not be built on")
        reasons.append(f"the model {stage} {result['ep']['provider']}, so no output was compared; its "
                       f"{failure.get('nodes_alone', 0)} attributed nodes were judged alone")
    reasons += _drift_reasons(result)
    baseline = result.get("baseline")
    if baseline and baseline["outcome"] == "regression":
        reasons.append(f"baseline regression: {', '.join(baseline['regressed'])}")
    reasons += [f"node {r['node']} ({r['op_type']}) diverges from the DirectML reference: "
                f"{(r.get('unexplained') or {}).get('message') or r['message']}"
                for r in result["attribution"]["nodes"] if r["status"] in DIVERGING]
    return reasons


def _drift_reasons(result: Mapping[str, Any]) -> list[str]:
    """The verdict's reasons from output drift, as the run's drift policy says: none under
    ``report``; each output that differs from the reference EP's under ``fail`` (and for a result
    without a policy, as written before drift had one); each output beyond the budget under a
    drift budget."""
    drift = result.get("drift") or {}
    mode = (drift.get("policy") or {}).get("mode", "fail")
    reference = result["reference_ep"]["provider"]
    where = f" ({drift['statement']})" if drift.get("statement") and (drift.get("search") or {}).get("first") else ""
    if mode == "fail":
        return [f"output {o['name']} differs from {reference} and --drift-tol fail is set: {o['message']}{where}"
                if drift else f"output {o['name']} differs from {reference}: {o['message']}"
                for o in result["outputs"] if o["outcome"] == "fail"]
    if mode == "budget":
        return [f"output {o['name']} drifts from {reference} beyond the --drift-tol budget: {o['message']}{where}"
                for o in drift.get("budget_outputs") or [] if o["outcome"] == "fail"]
    return []


def verdict_statement(result: Mapping[str, Any]) -> str:
    """The verdict in one line, operators first, then output drift: e.g. ``operators pass; output
    drift starts at Conv 'conv1' (72/196608 outside tolerance)``, or ``operators fail (...)``."""
    failure = result.get("ep_failure")
    if failure:
        why = (" (an emulation gap: the emulated device refused one of the EP's shaders, not a result of the EP)"
               if failure.get("emulation") else
               " (the EP declines nodes of it and --no-cpu-fallback is set: not-on-ep, not a failure of the EP)"
               if failure.get("stage") == "fallback-refused" else "")
        return (f"the model did not run whole on {result['ep']['provider']}{why}; its attributed nodes were judged "
                f"alone{_alone_clause(result)}")
    rows = result["attribution"]["nodes"]
    diverging = [r["node"] for r in rows if r["status"] in DIVERGING]
    judged = [r for r in rows if r["status"] not in NOT_JUDGED]
    if diverging:
        ops = f"operators fail ({len(diverging)} node(s) diverge from the DirectML reference: {', '.join(diverging[:3])})"
    elif rows:
        ops = f"operators pass ({len(judged)} of {len(rows)} nodes judged on their own EP inputs)"
    else:
        ops = "no operator under test in the model"
    drift = result.get("drift") or {}
    clause = drift.get("statement") or ""
    mode = (drift.get("policy") or {}).get("mode")
    if drift.get("outputs_differ") and mode == "report":
        clause += " (reported, not failed: --drift-tol report)"
    baseline = result.get("baseline")
    tail = f"; baseline {baseline['outcome']}" if baseline else ""
    return f"{ops}; {clause}{tail}" if clause else f"{ops}{tail}"


def _alone_clause(result: Mapping[str, Any]) -> str:
    """How the nodes judged alone fared, for the verdict line: ``": 4 of 4 match"`` or the diverging ones."""
    rows = [r for r in result["attribution"]["nodes"] if r.get("alone")]
    diverging = [r["node"] for r in rows if r["status"] in DIVERGING]
    if diverging:
        return f": {len(diverging)} diverge from the DirectML reference ({', '.join(diverging[:3])})"
    agree = sum(1 for r in rows if r["status"] in AGREES)
    return f": {agree} of {len(rows)} agree with the DirectML reference" if rows else ""


def _placement(nodes: Any, placement: Mapping[str, str], source: str | None,
               config: ModelRunConfig) -> dict[str, Any]:
    """The ``placement`` record of ``model_result.json`` over ``nodes`` (the model's, or those
    judged alone): where each ran, counts by op type, how many on the EP under test."""
    nodes = list(nodes)
    return {"source": source, "nodes": dict(placement), "by_op": placement_counts(nodes, placement),
            "on_ep": sum(1 for n in nodes if placement.get(n.name) == config.ep.provider), "total": len(nodes),
            "off_ep": [n.name for n in nodes if placement.get(n.name) != config.ep.provider]}


def _result(loaded: LoadedModel, config: ModelRunConfig, outputs: list[dict[str, Any]],
            rows: list[dict[str, Any]], probe_error: str | None, placement: dict[str, Any]) -> dict[str, Any]:
    """The ``model_result.json`` keys known once both EPs ran and every node was judged
    (``started``, ``verdict``, ``duration_s`` and the baseline are the caller's)."""
    model = loaded.model
    first = first_divergent(rows)
    return {
        "type": "model-run",
        "started": None,
        "model": {"path": str(loaded.path), "name": loaded.path.name, "graph": model.graph.name,
                  "sha256": loaded.sha256, "ir_version": int(model.ir_version), "opset": model_opset(model),
                  "nodes": len(model.graph.node), "producer": model.producer_name,
                  "external_files": loaded.external_files},
        "ep": config.ep.to_json(), "reference_ep": config.reference.to_json(), **runtime_info(config.ep),
        "session": {**config.settings.to_json(config.ep), "disable_cpu_ep_fallback":
                    not (config.allow_fallback or config.ep.is_cpu)},
        "reference_session": (config.reference_settings or config.settings).to_json(config.reference),
        "tolerances": config.tolerances.to_json(),
        "outputs": outputs,
        "placement": placement,
        "attribution": {"reading": config.reading, "ops": list(attributed_op_types()), "nodes": rows,
                        "counts": attribution_counts(rows), "error": probe_error,
                        "first_divergent": None if first is None else divergent_summary(first)},
        "baseline": None,
        "ep_failure": None,
        "drift": None,
    }


__all__ = ["Captured", "ModelRefused", "ModelRunConfig", "READINGS", "SessionFailed", "capture", "placement_counts",
           "quiet_default_logger", "run_model", "run_session", "verdict_reasons", "verdict_statement", "whole_message"]
