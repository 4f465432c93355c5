"""One whole model on the EP under test and on a reference EP: owns ``run_model``, the result of
``ep-testbed model run`` as a JSON-able dict (written to ``OUT/model_result.json``, rendered
by ``reports.model_report``):

1. **Outputs**: the model runs on the EP under test and on the reference EP (CPU by default),
   both through the harness's one session layer (``harness.session.run_on_ep``: graph
   optimizations off unless ``--graph-opt``); each graph output is compared with the harness's
   one comparison (``outputs.compare_named`` over ``harness.compare.compare_outputs``). An
   index output (a MaxPool's ``Indices``: the operator record's ``index_outputs``) is compared
   tie-aware, against the input it indexes as the reference EP computed it.
2. **Placement**: node -> provider read back from the EP session (``harness.placement``),
   counted by op type. Unlike a conformance case, a model run takes the production path by
   default: nodes the EP declines run on the CPU EP, and the counts say so;
   ``allow_fallback=False`` refuses that instead (and names the declined nodes).
3. **Per-node attribution** (``attribution``): a probe copy of the model exposes every input and
   output of each attributed node and runs on both EPs; each node is judged on its own EP
   inputs against the DirectML reference, and the first divergent node is named.
4. **Baseline** (``baseline``), when given, compares the EP's outputs with stored ones.

The verdict: ``pass`` when every output matches the reference EP (and the baseline, if any),
else ``fail``; attribution divergences are reported but do not change it (a CPU EP that
diverges from DirectML's semantics on a node still matches itself).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np
import onnx
from ep_testbed.graphs import attributed_op_types
from ep_testbed.graphs.from_onnx import MODES

from .. import session as session_mod
from ..providers import EpSpec, SessionSettings, runtime_info
from ..session import EpRun, first_line
from ..tolerances import Tolerances
from .attribution import (
    attribute_nodes,
    attributed_nodes,
    captured_values,
    divergent_summary,
    first_divergent,
    probe_model,
)
from .outputs import compare_named, tie_contexts
from .untrusted import LoadedModel, ModelRefused, explain_session_error, model_opset

#: How ``graphs.import_node`` reads attributed nodes: ``"spec"`` or ``"dml-ep"``.
READINGS = MODES
#: Declined nodes named in a refused ``--no-cpu-fallback`` run's message, at most.
DECLINED_SHOWN = 8


class SessionFailed(RuntimeError):
    """An EP could not build or run the model (not a refusal of the model itself)."""


@dataclass(frozen=True)
class ModelRunConfig:
    """How ``run_model`` runs: the EP under test, the reference EP, session settings, tolerances."""

    ep: EpSpec
    reference: EpSpec
    settings: SessionSettings = field(default_factory=SessionSettings)
    tolerances: Tolerances = field(default_factory=Tolerances.defaults)
    allow_fallback: bool = True
    reading: str = "spec"  # from_onnx mode for attribution: "spec" or "dml-ep"
    #: (tolerances, where they come from) for the baseline check; None: ``tolerances``
    baseline_tolerances: tuple[Tolerances, str] | None = None
    #: Initializer arrays kept out of the model message (a model over 2 GiB: ``untrusted``),
    #: handed to every session; ``run_model`` sets them from the ``LoadedModel``.
    initializers: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Captured:
    """Every tensor attribution reads, from both EPs, and the EP's placement of the run they come from."""

    ep_values: dict[str, np.ndarray]
    ref_values: dict[str, np.ndarray]
    placement: dict[str, str]
    error: str | None = None  # why the probe copy did not run (its nodes are then not judged)


def run_session(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec, config: ModelRunConfig,
                profile: bool, name: str = "model") -> EpRun:
    """Run ``model`` once on ``ep`` through ``harness.session.run_on_ep`` (the model run's
    settings: CPU fallback as ``config.allow_fallback`` says, ONNX Runtime's log quiet) and,
    when ``profile``, read placement back. Raises ``ModelRefused`` when ONNX Runtime refuses the
    model itself (no kernel for an op, an IR version too new), else ``SessionFailed``."""
    try:
        return session_mod.run_on_ep(model, feeds, ep, config.settings, profile=profile, quiet=True,
                                     allow_fallback=config.allow_fallback or ep.is_cpu,
                                     initializers=config.initializers)
    except session_mod.SessionError as exc:
        raise _failure(exc, model, feeds, ep, config, name) from None


def _failure(exc: session_mod.SessionError, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec,
             config: ModelRunConfig, name: str) -> Exception:
    """The ``ModelRefused`` or ``SessionFailed`` a session error means for a model run."""
    import onnxruntime as ort  # only on this failure path: naming the providers a refusal was checked against

    if exc.stage == "run":
        return SessionFailed(f"{ep.provider} raised while running {name}: {first_line(exc.cause)}")
    refused = explain_session_error(exc.cause, list(ort.get_available_providers()), name)
    if refused is not None:
        return refused
    if exc.refused_fallback:
        return SessionFailed(f"{ep.provider} does not take every node and CPU fallback is disabled "
                             f"(--no-cpu-fallback): {first_line(exc.cause).rstrip('.')}."
                             f"{_declined(model, feeds, ep, config)}")
    return SessionFailed(f"{ep.provider} could not build a session for {name}: {first_line(exc.cause)}")


def _declined(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec, config: ModelRunConfig) -> str:
    """The nodes ``ep`` declines, as a message tail, from a session with fallback allowed
    (``harness.session.diagnose_refusal``)."""
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


def placement_counts(model: onnx.ModelProto, placement: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """op type -> provider -> node count (``unproven`` where no provider was read back)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for node in model.graph.node:
        counts[node.op_type][placement.get(node.name, "unproven")] += 1
    return {op: dict(c) for op, c in sorted(counts.items())}


def capture(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep_run: EpRun, ref_run: EpRun,
            config: ModelRunConfig, name: str, run_as: onnx.ModelProto | None = None) -> Captured:
    """Run the probe copy (``attribution.probe_model``) on both EPs and collect every tensor an
    attributed node reads or writes; a probe copy that fails keeps the model's own outputs and
    placement and says why in ``Captured.error``."""
    captured = captured_values(model, feeds)
    result = Captured(ep_run.named(), ref_run.named(), dict(ep_run.placement))
    if not attributed_nodes(model):
        return result
    probe = probe_model(model, captured)
    try:
        ep_probe = run_session(probe if run_as is None else probe_model(run_as, captured), feeds, config.ep,
                               config, profile=True, name=f"{name} (probe copy)")
        ref_probe = run_session(probe, feeds, config.reference, config, profile=False, name=f"{name} (probe copy)")
    except SessionFailed as exc:  # the model itself ran: keep its outputs and placement, say why no attribution
        result.error = f"the probe copy (intermediates exposed as outputs) did not run: {exc}"
        return result
    result.ep_values.update({k: v for k, v in ep_probe.named().items() if k in captured})
    result.ref_values.update({k: v for k, v in ref_probe.named().items() if k in captured})
    result.placement = ep_probe.placement
    return result


def run_model(loaded: LoadedModel, feeds: Mapping[str, np.ndarray], config: ModelRunConfig,
              baseline: Any = None, *, run_as: onnx.ModelProto | None = None) -> dict[str, Any]:
    """Run the model (module docstring) and return the result dict; raises ``ModelRefused`` or
    ``SessionFailed`` when the model cannot run at all. The arrays behind the result (outputs of
    both EPs, diverging nodes' pairs) come under the key ``_arrays``, for the caller to store.

    ``run_as`` exists for testing attribution; it is no user option. It is a variant of the
    model, with the same node names, that the EP under test runs instead, while attribution
    reads the nodes of ``loaded.model``: it simulates an EP that computes something other than
    what a node means (e.g. a perturbed attribute), so a test can plant a divergence."""
    if config.reading not in READINGS:
        raise ValueError(f"reading = {config.reading!r}: one of {', '.join(READINGS)}")
    started = time.perf_counter()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    model, name = loaded.model, loaded.path.name
    config = replace(config, initializers=loaded.initializers)
    ep_run = run_session(run_as if run_as is not None else model, feeds, config.ep, config, profile=True, name=name)
    ref_run = run_session(model, feeds, config.reference, config, profile=False, name=name)
    captured = capture(model, feeds, ep_run, ref_run, config, name, run_as)

    ties = tie_contexts(model, {**config.initializers, **feeds, **captured.ref_values})
    outputs = compare_named(ref_run.named(), ep_run.named(), config.tolerances, ties)
    node_arrays: dict[str, dict[str, np.ndarray]] = {}
    rows = attribute_nodes(model, feeds, captured.ep_values, captured.ref_values, captured.placement, config,
                           node_arrays)
    if captured.error:
        for row in rows:
            if row["status"] == "error":
                row["message"] = captured.error
    result = _result(loaded, config, ep_run, outputs, rows, captured.error)
    result["started"] = started_at
    if baseline is not None:
        result["baseline"] = baseline.compare(ep_run.named(), *(config.baseline_tolerances or (config.tolerances,)))
    failed = any(o["outcome"] == "fail" for o in outputs)
    regressed = bool(result["baseline"] and result["baseline"]["outcome"] == "regression")
    result["verdict"] = "fail" if failed or regressed else "pass"
    result["duration_s"] = round(time.perf_counter() - started, 4)
    result["_arrays"] = {"outputs": ep_run.named(), "reference_outputs": ref_run.named(), "nodes": node_arrays}
    return result


def _result(loaded: LoadedModel, config: ModelRunConfig, ep_run: EpRun, outputs: list[dict[str, Any]],
            rows: list[dict[str, Any]], probe_error: str | None) -> dict[str, Any]:
    """The ``model_result.json`` keys known once both EPs ran and every node was judged
    (``started``, ``verdict``, ``duration_s`` and the baseline are the caller's)."""
    model = loaded.model
    first = first_divergent(rows)
    node_count = len(model.graph.node)
    on_ep = sum(1 for n in model.graph.node if ep_run.placement.get(n.name) == config.ep.provider)
    return {
        "type": "model-run",
        "started": None,
        "model": {"path": str(loaded.path), "name": loaded.path.name, "graph": model.graph.name,
                  "sha256": loaded.sha256, "ir_version": int(model.ir_version), "opset": model_opset(model),
                  "nodes": node_count, "producer": model.producer_name, "external_files": loaded.external_files},
        "ep": config.ep.to_json(), "reference_ep": config.reference.to_json(), **runtime_info(),
        "session": {**config.settings.to_json(config.ep), "disable_cpu_ep_fallback":
                    not (config.allow_fallback or config.ep.is_cpu)},
        "tolerances": config.tolerances.to_json(),
        "outputs": outputs,
        "placement": {"source": ep_run.placement_source, "nodes": ep_run.placement,
                      "by_op": placement_counts(model, ep_run.placement), "on_ep": on_ep, "total": node_count,
                      "off_ep": [n.name for n in model.graph.node
                                 if ep_run.placement.get(n.name) != config.ep.provider]},
        "attribution": {"reading": config.reading, "ops": list(attributed_op_types()), "nodes": rows,
                        "error": probe_error, "first_divergent": None if first is None else divergent_summary(first)},
        "baseline": None,
    }


__all__ = ["Captured", "ModelRefused", "ModelRunConfig", "READINGS", "SessionFailed", "capture", "placement_counts",
           "run_model", "run_session"]
