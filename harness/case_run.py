"""Run one case in this process: map, compute the reference, run on the EP, prove placement, compare.

``run_case(case, config)`` returns a result line (a dict, the ``case`` schema of
``harness.results``) with the *raw* outcome: expectations are applied by the caller. It never
raises for anything the case does; it can only be stopped by the process dying (a crashing
EP), which is why the harness calls it inside a worker process (``harness.worker``).

Outcomes decided here, in the order they are checked:

- ``error``: the mapper, the reference or the harness raised (the message says which);
- ``inexpressible``: the mapper flagged a field ONNX cannot express; nothing runs;
- ``not-on-ep``: ONNX Runtime refused the session because a node would fall back to the CPU
  EP (fallback is disabled for every EP but CPU), or the node -> provider record shows an op
  node elsewhere; a session with fallback allowed is then built only to name where it went;
- ``fail``: the EP raised while building or running the session, or an output is out of
  tolerance, of the wrong shape or dtype;
- ``tie-only`` / ``pass``.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import itertools
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import placement as placement_mod
from ep_testbed.reference import execute, spec_for

from .artifacts import write_artifacts
from .compare import compare_outputs
from .providers import EpSpec, SessionSettings, providers_arg, session_options
from .results import ERROR_KEYS, case_record
from .tolerances import Tolerances

DEFAULT_MAPPER = "ep_testbed.graphs:to_onnx"


@dataclass(frozen=True)
class CaseConfig:
    """Everything a worker needs besides the case; sent once when the worker starts."""

    ep: EpSpec
    session: SessionSettings = field(default_factory=SessionSettings)
    tolerances: Tolerances = field(default_factory=Tolerances.defaults)
    run_dir: str | None = None        # artifacts go to run_dir/cases/...; None: no artifacts
    mapper: str = DEFAULT_MAPPER      # "module:function" with graphs.to_onnx's contract


@dataclass(frozen=True)
class ArtifactPolicy:
    """When the worker writes a case folder: always (``force``), for failures, or for a passing
    case at least as bad as the current N-th worst (``threshold``, None: never)."""

    force: bool = False
    threshold: float | None = None


def load_mapper(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "to_onnx")


def severity(line: dict[str, Any]) -> float:
    """How close a compared case came to failing: the share of its tolerance used (0 if none)."""
    value = line.get("tolerance_used")
    return float(value) if value is not None else 0.0


def new_line(case: Any, ep: EpSpec) -> dict[str, Any]:
    """A result line for ``case`` with nothing decided yet: every key of
    ``harness.results.CASE_KEYS``, those not given here ``None`` (outcome, placement_source,
    tolerance_used, expected_outcome, artifacts)."""
    tags = dict(getattr(case, "tags", {}) or {})
    return case_record(
        id=case.id, op=case.op, dtype=tags.get("dtype"), tags=tags, ep=ep.provider, placement={},
        errors=dict.fromkeys(ERROR_KEYS), worst=[], mismatches=0, ties=0, flags=[], message="", duration_s=0.0)


def run_case(case: Any, config: CaseConfig, policy: ArtifactPolicy = ArtifactPolicy(),
             mapper: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Run ``case`` on ``config.ep`` and return its result line (raw outcome)."""
    start = time.perf_counter()
    line = new_line(case, config.ep)
    state: dict[str, Any] = {}
    try:
        _run(case, config, mapper or load_mapper(config.mapper), line, state)
    except Exception as exc:  # the harness itself: never let one case take the worker down
        line["outcome"] = "error"
        line["message"] = f"harness raised {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    line["duration_s"] = round(time.perf_counter() - start, 6)
    if config.run_dir and _wants_artifacts(line, policy):
        try:
            line["artifacts"] = write_artifacts(
                config.run_dir, case.id, desc=case.desc, model=state.get("model"), feeds=state.get("feeds"),
                expected=state.get("expected"), actual=state.get("actual"))
        except Exception as exc:
            line["message"] += f" (writing artifacts failed: {exc})"
    return line


def _wants_artifacts(line: dict[str, Any], policy: ArtifactPolicy) -> bool:
    if policy.force or line["outcome"] in ("fail", "error"):
        return True
    if line["outcome"] in ("pass", "tie-only") and policy.threshold is not None:
        value = severity(line)
        return value > 0 and value >= policy.threshold
    return False


def _run(case: Any, config: CaseConfig, mapper: Callable[..., Any], line: dict[str, Any],
         state: dict[str, Any]) -> None:
    try:
        mapping = mapper(case.desc, opset=getattr(case, "opset", None))
    except Exception as exc:
        line.update(outcome="error", message=f"mapper raised {type(exc).__name__}: {exc}")
        return
    line["flags"] = [flag.to_json() for flag in mapping.flags]
    try:
        inputs = case.inputs()
    except Exception as exc:
        line.update(outcome="error", message=f"the case's inputs raised {type(exc).__name__}: {exc}")
        return
    # Flags that only this case's input values raise (a NaN, a float32 bin end, an int64 beyond
    # what the composition carries exactly); they count like the desc's own flags.
    flags = list(mapping.flags) + list(getattr(mapping, "input_flags", lambda _: [])(inputs))
    line["flags"] = [flag.to_json() for flag in flags]
    inexpressible = [f for f in flags if f.kind == "inexpressible"]
    if not mapping.expressible or inexpressible:
        reasons = [f"{f.field}={f.value}: {f.reason}" for f in inexpressible]
        line.update(outcome="inexpressible", message="; ".join(reasons) or "the mapper marked the desc inexpressible")
        return
    state["model"] = mapping.model
    try:
        expected = execute(case.desc, inputs)
    except Exception as exc:
        line.update(outcome="error", message=f"reference raised {type(exc).__name__}: {exc}")
        return
    state["expected"] = expected
    feeds = mapping.feeds(inputs)
    state["feeds"] = feeds
    node_names = [n.name for n in mapping.model.graph.node]
    op_nodes = list(getattr(mapping, "op_nodes", None) or node_names)

    ep = config.ep
    scratch = os.path.join(_scratch_dir(), f"case{next(_CASE_NUMBERS)}")  # a profile file prefix
    # Traces are removed as they are read; what a failing session leaves goes at process exit.
    model_bytes = mapping.model.SerializeToString()
    try:
        session = _session(model_bytes, config, scratch + "-strict", allow_fallback=False)
    except Exception as exc:
        if placement_mod.is_fallback_refusal(exc):
            _diagnose_refusal(model_bytes, feeds, config, scratch, node_names, op_nodes, line, exc)
        else:
            line.update(outcome="fail", message=f"{ep.provider} could not build the session: {_first_line(exc)}")
        return
    try:
        outputs = session.run(None, feeds)
    except Exception as exc:
        line.update(outcome="fail", message=f"{ep.provider} raised while running: {_first_line(exc)}")
        return
    placement, source = placement_mod.read_placement(session, node_names, session.end_profiling())
    line["placement"], line["placement_source"] = placement, source
    off = placement_mod.off_ep(placement, op_nodes, ep.provider)
    if off:
        line.update(outcome="not-on-ep", message=f"op node(s) not proven on {ep.provider}: "
                    + ", ".join(f"{n} -> {placement.get(n, 'unknown')}" for n in off))
        return

    try:
        actual = mapping.outputs(outputs)
    except Exception as exc:  # e.g. an output of the wrong shape or count
        line.update(outcome="fail", message=f"{ep.provider}'s outputs could not be read back: {_first_line(exc)}")
        return
    state["actual"] = actual
    spec = spec_for(case.desc)
    in_window = functools.partial(spec.index_rule, case.desc) if spec.index_rule else None
    comparison = compare_outputs(expected, actual, config.tolerances, inputs, in_window=in_window,
                                 index_outputs=spec.index_outputs)
    line.update(errors=comparison.errors(), worst=comparison.worst, mismatches=comparison.mismatches,
                ties=comparison.ties, tolerance_used=comparison.tolerance_used)
    if not comparison.passed:
        line.update(outcome="fail", message=comparison.summary())
    elif comparison.ties:
        line.update(outcome="tie-only", message=comparison.summary())
    else:
        line.update(outcome="pass", message=comparison.summary())
    helpers_off = placement_mod.off_ep(placement, [n for n in node_names if n not in op_nodes], ep.provider)
    if helpers_off:
        line["message"] += "; helper node(s) elsewhere: " + ", ".join(f"{n} -> {placement.get(n)}" for n in helpers_off)


_CASE_NUMBERS = itertools.count()


@functools.lru_cache(maxsize=1)
def _scratch_dir() -> str:
    """One folder per process for profiling traces: a TemporaryDirectory per case cost ~1 ms."""
    path = tempfile.mkdtemp(prefix="ep-testbed-prof-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _session(model_bytes: bytes, config: CaseConfig, profile_prefix: str, allow_fallback: bool) -> Any:
    import onnxruntime as ort

    so = session_options(config.ep, config.session, allow_fallback=allow_fallback, profile_prefix=profile_prefix)
    return ort.InferenceSession(model_bytes, so, providers=providers_arg(config.ep))


def _diagnose_refusal(model_bytes: bytes, feeds: dict[str, np.ndarray], config: CaseConfig, scratch: str,
                      node_names: list[str], op_nodes: list[str], line: dict[str, Any], refusal: Exception) -> None:
    """The strict session was refused: build one with fallback allowed only to name the nodes
    the EP declined. The case is ``not-on-ep`` either way (its strict session does not exist);
    the message says whether the op node itself or only a helper node (Cast, Reshape...) was
    declined."""
    ep = config.ep.provider
    try:
        session = _session(model_bytes, config, scratch + "-diagnose", allow_fallback=True)
        session.run(None, feeds)
        placement, source = placement_mod.read_placement(session, node_names, session.end_profiling())
    except Exception as exc:
        line.update(outcome="not-on-ep", message=f"{ep} refused the session with CPU fallback disabled "
                    f"({_first_line(refusal)}); the diagnostic session failed too: {_first_line(exc)}")
        return
    line["placement"], line["placement_source"] = placement, source
    off = placement_mod.off_ep(placement, op_nodes, ep)
    where = ", ".join(f"{n} -> {placement.get(n, 'unknown')}" for n in (off or node_names))
    if off:
        line.update(outcome="not-on-ep", message=f"{ep} does not take the op node(s): {where} "
                    "(session with CPU fallback disabled was refused)")
    else:
        line.update(outcome="not-on-ep", message=f"{ep} takes the op node(s) but declines helper node(s): "
                    f"{', '.join(f'{n} -> {placement.get(n)}' for n in node_names if placement.get(n) != ep)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
