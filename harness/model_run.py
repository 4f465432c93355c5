"""One whole model on the EP under test and on a reference EP: outputs, placement, the node that broke.

``run_model(loaded, feeds, config)`` returns the result of ``ep-testbed model run`` as a JSON-able
dict (written to ``OUT/model_result.json``, rendered by ``reports.model_report``):

1. **Outputs**: the model runs on the EP under test and on the reference EP (CPU by default),
   both with the harness's session options (``harness.providers.session_options``: graph
   optimizations off unless ``--graph-opt``); each graph output is compared with the harness's
   tolerance model (``harness.compare.compare_outputs``). A MaxPool ``Indices`` output is
   compared tie-aware, against the pool's input as the reference EP computed it.
2. **Placement**: node -> provider read back from the EP session's profiling trace and graph
   assignment info (``harness.placement.read_placement``), counted by op type. Unlike a
   conformance case, a model run takes the production path by default: nodes the EP declines
   run on the CPU EP, and the counts say so; ``allow_fallback=False`` refuses that instead.
3. **Per-node attribution**: a copy of the model exposes every input and output of each
   ``RoiAlign`` / ``MaxRoiPool`` / ``MaxPool`` node as extra graph outputs and runs on both EPs.
   For each such node, in graph (topological) order, the inputs the EP under test actually fed
   it are translated by ``graphs.import_node`` (``from_onnx``) into a DML desc, run through
   ``reference.execute``, and compared with what the EP produced for that node. Because every
   node is judged on its own EP-produced inputs, upstream error does not leak into it: the first
   node (in topological order) whose output diverges is the node that broke the model.
4. **Baseline** (``harness.baseline``), when given, compares the EP's outputs with stored ones.

The verdict: ``pass`` when every output matches the reference EP (and the baseline, if any),
else ``fail``; attribution divergences are reported but do not change it (a CPU EP that
diverges from DirectML's semantics on a node still matches itself).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ep_testbed.graphs import attributed_op_types, import_node
from ep_testbed.reference import execute, spec_for
from ep_testbed.reference.registry import specs_for_onnx

from . import placement as placement_mod
from .compare import compare_outputs
from .providers import EpSpec, SessionSettings, providers_arg, runtime_info, session_options
from .tolerances import Tolerances
from .untrusted import LoadedModel, ModelRefused, explain_session_error, model_opset

#: ONNX ops whose nodes get per-node attribution (the DML operator families this testbed knows).
#: ONNX output position -> the DML output name the reference returns it under.
READINGS = ("spec", "dml-ep")


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


@dataclass
class SessionRun:
    """Outputs of one session by name, and (when profiled) node -> provider."""

    outputs: dict[str, np.ndarray]
    placement: dict[str, str] = field(default_factory=dict)
    placement_source: str | None = None


def run_session(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec, config: ModelRunConfig,
                profile: bool, name: str = "model") -> SessionRun:
    """Build a session for ``model`` on ``ep`` (harness session options), run it once, read placement."""
    import onnxruntime as ort

    node_names = [n.name for n in model.graph.node]
    with tempfile.TemporaryDirectory(prefix="ep-testbed-model-") as scratch:
        so = session_options(ep, config.settings, allow_fallback=config.allow_fallback or ep.is_cpu,
                             profile_prefix=os.path.join(scratch, "profile") if profile else None)
        so.log_severity_level = 4  # failures reach us as exceptions; a refused model also logs profiling noise
        try:
            session = ort.InferenceSession(model.SerializeToString(), so, providers=providers_arg(ep))
        except Exception as exc:
            refused = explain_session_error(exc, list(ort.get_available_providers()), name)
            if refused is not None:
                raise refused from None
            if placement_mod.is_fallback_refusal(exc):
                raise SessionFailed(f"{ep.provider} does not take every node and CPU fallback is disabled "
                                    f"(--no-cpu-fallback): {_first_line(exc)}") from None
            raise SessionFailed(f"{ep.provider} could not build a session for {name}: {_first_line(exc)}") from None
        try:
            values = session.run(None, dict(feeds))
        except Exception as exc:
            raise SessionFailed(f"{ep.provider} raised while running {name}: {_first_line(exc)}") from None
        outputs = {o.name: np.asarray(v) for o, v in zip(session.get_outputs(), values)}
        if not profile:
            return SessionRun(outputs)
        profile_path = session.end_profiling()
        where, source = placement_mod.read_placement(session, node_names, profile_path)
    return SessionRun(outputs, where, source)


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


def placement_counts(model: onnx.ModelProto, placement: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """op type -> provider -> node count (``unproven`` where no provider was read back)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for node in model.graph.node:
        counts[node.op_type][placement.get(node.name, "unproven")] += 1
    return {op: dict(c) for op, c in sorted(counts.items())}


def index_outputs(model: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    """Graph outputs that are an attributed node's index output (a MaxPool's ``Indices``):
    output name -> (the node's value output it locates, the node input it indexes). Read from
    the operator records' ``index_outputs``, whose DML members sit at the node's positions."""
    outputs = {o.name for o in model.graph.output}
    found = {}
    for node in model.graph.node:
        for spec in specs_for_onnx(node.op_type)[:1]:
            for index, (values, source) in spec.index_outputs.items():
                i, v, s = spec.desc.OUTPUTS.index(index), spec.desc.OUTPUTS.index(values), spec.desc.INPUTS.index(source)
                if i < len(node.output) and node.output[i] in outputs and v < len(node.output) and s < len(node.input):
                    found[node.output[i]] = (node.output[v], node.input[s])
    return found


def compare_named(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray], tolerances: Tolerances,
                  tie_context: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None) -> list[dict[str, Any]]:
    """One row per expected output, compared under the harness's rule.

    ``tie_context[name] = (values, source)`` marks ``name`` as an index output (``index_outputs``):
    an index that differs but points at an element of ``source`` equal to the expected value is
    a tie (``harness.compare``'s rule; the values are passed identical on both sides so only the
    indices are judged)."""
    rows = []
    for name, exp in expected.items():
        row: dict[str, Any] = {"name": name, "dtype": np.asarray(exp).dtype.name, "shape": list(np.shape(exp))}
        if name not in actual:
            row.update(outcome="fail", message="missing from the EP's outputs", errors=_no_errors(),
                       mismatches=None, ties=0, worst=[])
            rows.append(row)
            continue
        if tie_context and name in tie_context:
            values, source = tie_context[name]
            cmp = compare_outputs({"values": values, "indices": exp}, {"values": values, "indices": actual[name]},
                                  tolerances, {"source": source}, index_outputs={"indices": ("values", "source")})
            cmp.compared -= np.asarray(values).size
            worst = [dict(w, output=name) for w in cmp.worst if w["output"] == "indices"]
            errors = _no_errors()
            message = (f"{cmp.mismatches} of {cmp.compared} indices differ beyond a tie"
                       + (f", {cmp.ties} index ties" if cmp.ties else ""))
        else:
            cmp = compare_outputs({name: exp}, {name: actual[name]}, tolerances)
            worst, errors, message = cmp.worst, cmp.errors(), cmp.summary()
        outcome = "fail" if not cmp.passed else ("tie-only" if cmp.ties else "pass")
        row.update(outcome=outcome, errors=errors, mismatches=cmp.mismatches, ties=cmp.ties, compared=cmp.compared,
                   worst=worst, message=message)
        rows.append(row)
    return rows


def attribute_nodes(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep_values: Mapping[str, np.ndarray],
                    ref_values: Mapping[str, np.ndarray] | None, placement: Mapping[str, str],
                    config: ModelRunConfig, arrays_out: dict[str, dict[str, np.ndarray]] | None = None
                    ) -> list[dict[str, Any]]:
    """Per-node attribution rows for every attributed node, in graph (topological) order.

    ``ep_values`` / ``ref_values``: every captured tensor by name, from the EP under test and
    the reference EP. ``arrays_out`` (if given) receives, per diverging node, its reference and
    EP value outputs (``{"expected": .., "actual": ..}``) for pictures. Row ``status``: ``match``,
    ``tie-only``, ``diverges``, ``not-attributable``
    (no DML desc for the node in this reading) or ``error`` (the reference raised)."""
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    opset = model_opset(model)
    rows = []
    for position, node in enumerate(model.graph.node):
        if node.op_type not in attributed_op_types() or node.domain not in ("", "ai.onnx"):
            continue
        row: dict[str, Any] = {
            "node": node.name or f"{node.op_type}_{position}", "op_type": node.op_type, "position": position,
            "provider": placement.get(node.name, "unproven"),
            "attributes": {a.name: _attr_text(helper.get_attribute_value(a)) for a in node.attribute},
            "inputs": [], "outputs": [], "desc_type": None, "flags": [], "status": None, "errors": _no_errors(),
            "mismatches": None, "ties": 0, "worst": [], "message": "", "vs_reference_ep": None,
        }
        rows.append(row)
        arrays = []
        for name in node.input:
            value = feeds.get(name) if name in feeds else constants.get(name, ep_values.get(name))
            arrays.append(None if value is None else np.asarray(value))
        row["inputs"] = [{"name": n, "shape": None if a is None else list(a.shape),
                          "dtype": None if a is None else a.dtype.name} for n, a in zip(node.input, arrays)]
        row["outputs"] = [{"name": n, "shape": list(np.shape(ep_values[n])) if n in ep_values else None}
                          for n in node.output if n]
        if any(a is None for name, a in zip(node.input, arrays) if name) or any(n not in ep_values for n in node.output
                                                                            if n):
            row.update(status="error", message="an input or output of the node was not captured from the EP")
            continue
        try:
            imported = import_node(node, [a.shape for a in arrays], [a.dtype for a in arrays], config.reading, opset)
        except ValueError as exc:
            row.update(status="not-attributable", message=f"no DML desc in the {config.reading!r} reading: {exc}")
            continue
        row["desc_type"] = imported.desc.TYPE
        row["flags"] = [f.to_json() for f in imported.flags if f.kind != "exact"]
        try:
            expected_list = imported.outputs(execute(imported.desc, imported.inputs(arrays)))
        except Exception as exc:
            row.update(status="error", message=f"reference raised {type(exc).__name__}: {exc}")
            continue
        spec, dml_outputs = spec_for(imported.desc), imported.desc.OUTPUTS
        expected, actual = {}, {}
        for i, out_name in enumerate(node.output[:len(expected_list)]):
            if out_name:
                expected[dml_outputs[i]] = np.asarray(expected_list[i])
                actual[dml_outputs[i]] = ep_values[out_name]
        # Ties are judged where the DML index means the ONNX one (not for column-major indices)
        storage_order = next((int(a.i) for a in node.attribute if a.name == "storage_order"), 0)
        index_map = spec.index_outputs if storage_order == 0 else {}
        in_window = functools.partial(spec.index_rule, imported.desc) if spec.index_rule and index_map else None
        cmp = compare_outputs(expected, actual, config.tolerances, imported.inputs(arrays), in_window=in_window,
                              index_outputs=index_map)
        rename = {dml_outputs[i]: n for i, n in enumerate(node.output) if n}
        row.update(status="diverges" if not cmp.passed else ("tie-only" if cmp.ties else "match"),
                   errors=cmp.errors(), mismatches=cmp.mismatches, ties=cmp.ties, compared=cmp.compared,
                   worst=[dict(w, output=rename.get(w["output"], w["output"])) for w in cmp.worst],
                   message=_rename(cmp.summary(), rename))
        if arrays_out is not None and not cmp.passed:
            arrays_out[row["node"]] = {"expected": expected["OutputTensor"], "actual": actual["OutputTensor"]}
        if ref_values is not None:
            ours = {n: ep_values[n] for n in node.output if n and n in ep_values}
            theirs = {n: ref_values[n] for n in node.output if n and n in ref_values}
            if ours and theirs.keys() == ours.keys():
                vs = compare_outputs(theirs, ours, config.tolerances)
                row["vs_reference_ep"] = {"errors": vs.errors(), "mismatches": vs.mismatches}
    return rows


def first_divergent(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first attribution row (topological order) whose node diverges from the reference."""
    return next((r for r in rows if r["status"] == "diverges"), None)


def run_model(loaded: LoadedModel, feeds: Mapping[str, np.ndarray], config: ModelRunConfig,
              baseline: Any = None, *, run_as: onnx.ModelProto | None = None) -> dict[str, Any]:
    """Run the model (module docstring) and return the result dict; raises ``ModelRefused`` or
    ``SessionFailed`` when the model cannot run at all.

    ``run_as`` (tests only): a variant of the model, with the same node names, that the EP under
    test runs instead, while attribution reads the nodes of ``loaded.model``. It simulates an EP
    that computes something other than what a node means (e.g. a perturbed attribute)."""
    if config.reading not in READINGS:
        raise ValueError(f"reading = {config.reading!r}: one of {', '.join(READINGS)}")
    started = time.perf_counter()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    model = loaded.model
    name = loaded.path.name
    ep_model = run_as if run_as is not None else model
    ep_run = run_session(ep_model, feeds, config.ep, config, profile=True, name=name)
    ref_run = run_session(model, feeds, config.reference, config, profile=False, name=name)

    targets = [n for n in model.graph.node if n.op_type in attributed_op_types() and n.domain in ("", "ai.onnx")]
    captured = [v for n in targets for v in list(n.input) + list(n.output) if v]
    graph_inputs = set(feeds) | {t.name for t in model.graph.initializer}
    captured = [v for v in dict.fromkeys(captured) if v not in graph_inputs]
    ep_values: dict[str, np.ndarray] = dict(ep_run.outputs)
    ref_values: dict[str, np.ndarray] = dict(ref_run.outputs)
    probe_placement: dict[str, str] = dict(ep_run.placement)
    probe_error = None
    if targets:
        probe = probe_model(model, captured)
        try:
            ep_probe = run_session(probe if run_as is None else probe_model(run_as, captured), feeds, config.ep,
                                   config, profile=True, name=f"{name} (probe copy)")
            ref_probe = run_session(probe, feeds, config.reference, config, profile=False,
                                    name=f"{name} (probe copy)")
        except SessionFailed as exc:  # the model itself ran: keep its outputs and placement, say why no attribution
            probe_error = f"the probe copy (intermediates exposed as outputs) did not run: {exc}"
        else:
            ep_values.update({k: v for k, v in ep_probe.outputs.items() if k in captured})
            ref_values.update({k: v for k, v in ref_probe.outputs.items() if k in captured})
            probe_placement = ep_probe.placement

    tie_context = {}
    for out_name, (values, source) in index_outputs(model).items():
        if values in ref_values and source in (ref_values.keys() | feeds.keys()):
            tie_context[out_name] = (ref_values[values], feeds[source] if source in feeds else ref_values[source])
    outputs = compare_named(ref_run.outputs, ep_run.outputs, config.tolerances, tie_context)
    node_arrays: dict[str, dict[str, np.ndarray]] = {}
    rows = attribute_nodes(model, feeds, ep_values, ref_values, probe_placement, config, node_arrays)
    if probe_error:
        for row in rows:
            if row["status"] == "error":
                row["message"] = probe_error
    first = first_divergent(rows)

    node_count = len(model.graph.node)
    on_ep = sum(1 for n in model.graph.node if ep_run.placement.get(n.name) == config.ep.provider)
    result: dict[str, Any] = {
        "type": "model-run",
        "started": started_at,
        "model": {"path": str(loaded.path), "name": name, "graph": model.graph.name, "sha256": loaded.sha256,
                  "ir_version": int(model.ir_version), "opset": model_opset(model), "nodes": node_count,
                  "producer": model.producer_name, "external_files": loaded.external_files},
        "ep": config.ep.to_json(), "reference_ep": config.reference.to_json(), **runtime_info(),
        "session": {**config.settings.to_json(config.ep), "disable_cpu_ep_fallback":
                    not (config.allow_fallback or config.ep.is_cpu)},
        "tolerances": config.tolerances.to_json(),
        "outputs": outputs,
        "placement": {"source": ep_run.placement_source, "nodes": ep_run.placement,
                      "by_op": placement_counts(model, ep_run.placement), "on_ep": on_ep, "total": node_count,
                      "off_ep": [n.name for n in model.graph.node
                                 if ep_run.placement.get(n.name) != config.ep.provider]},
        "attribution": {"reading": config.reading, "ops": list(attributed_op_types()), "nodes": rows, "error": probe_error,
                        "first_divergent": None if first is None else _summary(first)},
        "baseline": None,
    }
    if baseline is not None:
        result["baseline"] = baseline.compare(ep_run.outputs, *(config.baseline_tolerances or (config.tolerances,)))
    failed = any(o["outcome"] == "fail" for o in outputs)
    regressed = bool(result["baseline"] and result["baseline"]["outcome"] == "regression")
    result["verdict"] = "fail" if failed or regressed else "pass"
    result["duration_s"] = round(time.perf_counter() - started, 4)
    result["_arrays"] = {"outputs": ep_run.outputs, "reference_outputs": ref_run.outputs, "nodes": node_arrays}
    return result


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    worst = row["worst"][0] if row["worst"] else None
    return {"node": row["node"], "op_type": row["op_type"], "position": row["position"], "provider": row["provider"],
            "errors": row["errors"], "mismatches": row["mismatches"], "worst": worst, "message": row["message"]}


def _no_errors() -> dict[str, None]:
    return {"max_abs": None, "max_rel": None, "max_ulp": None}


def _rename(text: str, rename: Mapping[str, str]) -> str:
    for dml, onnx_name in rename.items():
        text = text.replace(dml, onnx_name)
    return text


def _attr_text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_attr_text(v) for v in value]
    if isinstance(value, (int, float, str)):
        return value
    return type(value).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


__all__ = ["ModelRefused", "ModelRunConfig", "SessionFailed", "attribute_nodes",
           "compare_named", "first_divergent", "placement_counts", "probe_model", "run_model", "run_session"]
