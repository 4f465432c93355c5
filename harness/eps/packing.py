"""Several models in one session: packed side by side, run once, each given back its own run.

A session's fixed costs (building it, an EP's device and kernels, profiling) are paid per
session, not per node: on an EP where they dominate, K small models packed as K independent
subgraphs of one model cost little more than one. ``pack(models)`` puts each model's graph into
one model under its own prefix (``c0__``, ``c1__``, ...: every node, graph input, graph output,
initializer and value info renamed; an empty name, an absent optional input, stays empty), so
no two members share a tensor and no node reads another member's value. ``run_packed`` runs the
pack with ``session.run_on_ep`` (the conformance settings, the EP's adapter, an EP whose
sessions live in another process included) and gives each member an ``EpRun`` in its own names:
its outputs in its own output order, and where each of its nodes ran with what proved it,
``placement_source`` described over its own nodes alone (``placement.describe_evidence``), as a
session of the member alone describes it. One model is run as it is (no prefix).

Only models that can share a graph are packed (``pack_key``): the same IR version and opset
imports, no local functions, no subgraph attributes (If, Loop, Scan bodies name outer values),
no sparse initializers; the caller groups by the key. ``run_packed`` raises ``SessionError``
for the pack as a whole: which member caused it is the caller's question (``harness.run.case_run``
splits the pack).

``default_batch(ep)`` is how many cases a run packs into one session when ``--batch`` is not
given, and ``default_jobs(ep, cores)`` how many worker processes it starts when ``--jobs`` is
not: chosen per EP from measurement (its record's ``default_batch`` and ``default_jobs``,
``harness.eps.registry``; ``benchmarks/bench_throughput.py``), 1 case a session and one worker a
core where never measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import onnx

from . import placement as placement_mod
from . import registry
from . import session as session_mod
from .ep_run import Diagnosis, EpRun, SessionError
from .providers import EpSpec, SessionSettings

#: Cases packed into one session by default, per provider: what each EP's record says it measured
#: (``default_batch``; the numbers are in ``harness.eps.registry`` and DESIGN.md, "Throughput"). Every
#: EP whose record names none gets 1: never measured, so never assumed.
DEFAULT_BATCH: dict[str, int] = {r.provider: r.default_batch for r in registry.records() if r.default_batch > 1}
#: Worker processes by default, per provider (at most the cores): each EP's record's measured
#: ``default_jobs``. A GPU EP's workers share one device and each pays its start (CUDA: a context
#: and cuDNN; WebGPU: Dawn, 0.6-1.6 s). Every EP whose record names none: one worker a core.
DEFAULT_JOBS: dict[str, int] = {r.provider: r.default_jobs for r in registry.records() if r.default_jobs}
#: Elements (inputs fed and outputs expected, all members together) one packed session may hold:
#: a larger case runs alone, so packing never multiplies a large case's memory or time.
PACK_ELEMENTS = 2**20


def default_batch(ep: EpSpec) -> int:
    """Cases per session for ``ep`` when no ``--batch`` is given (its record's ``default_batch``)."""
    return registry.of_spec(ep).default_batch


def default_jobs(ep: EpSpec, cores: int) -> int:
    """Worker processes for ``ep`` when no ``--jobs`` is given (its record's ``default_jobs``, else
    one a core), at most ``cores`` (at least 1)."""
    cores = max(1, cores)
    return min(cores, registry.of_spec(ep).default_jobs or cores)


def pack_key(model: onnx.ModelProto) -> tuple[Any, ...] | None:
    """What models must share to be packed together (IR version, opset imports), or None when
    ``model`` cannot be packed with another (module docstring)."""
    graph = model.graph
    if model.functions or graph.sparse_initializer:
        return None
    subgraph = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    if any(a.type in subgraph for node in graph.node for a in node.attribute):
        return None
    return model.ir_version, tuple(sorted((o.domain, o.version) for o in model.opset_import))


def prefix(index: int) -> str:
    """The prefix of member ``index``'s names (``c3__``): no member's prefix starts another's."""
    return f"c{index}__"


@dataclass
class Member:
    """One model inside a pack: its prefix and its own names."""

    prefix: str
    inputs: list[str]
    outputs: list[str]
    nodes: list[str]


@dataclass
class Packed:
    """The model a packed session runs and its members, in the order given to ``pack``."""

    model: onnx.ModelProto
    members: list[Member] = field(default_factory=list)

    def feeds(self, feeds: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """One session's feeds from each member's own (by member order)."""
        merged: dict[str, np.ndarray] = {}
        for member, own in zip(self.members, feeds):
            merged.update({member.prefix + name: value for name, value in own.items()})
        return merged

    def split(self, run: EpRun) -> list[EpRun]:
        """Each member's run in its own names (module docstring); one member: ``run`` itself."""
        if len(self.members) == 1 and not self.members[0].prefix:
            return [run]
        named = run.named()
        runs = []
        for m in self.members:
            own = EpRun([named[m.prefix + o] for o in m.outputs], list(m.outputs), build_s=run.build_s,
                        run_s=run.run_s, placement_note=run.placement_note)
            own.placement = {n: run.placement[m.prefix + n] for n in m.nodes if m.prefix + n in run.placement}
            own.evidence = {n: run.evidence[m.prefix + n] for n in m.nodes if m.prefix + n in run.evidence}
            if run.placement_source is not None:
                own.placement_source = placement_mod.describe_evidence(own.evidence, run.placement_note)
            runs.append(own)
        return runs


def pack(models: Sequence[onnx.ModelProto]) -> Packed:
    """``models`` as one model (module docstring); ValueError when they do not share a ``pack_key``."""
    if len(models) == 1:
        graph = models[0].graph
        return Packed(models[0], [Member("", [i.name for i in graph.input], [o.name for o in graph.output],
                                         [n.name for n in graph.node])])
    keys = {pack_key(m) for m in models}
    if None in keys or len(keys) != 1:
        raise ValueError("models packed into one session must share IR version and opset imports, and have no "
                         "functions, subgraphs or sparse initializers (packing.pack_key)")
    merged = onnx.ModelProto()
    merged.ir_version, merged.producer_name = models[0].ir_version, "ep-testbed"
    merged.opset_import.extend(models[0].opset_import)
    merged.graph.name = "ep-testbed-packed"
    packed = Packed(merged)
    for index, model in enumerate(models):
        packed.members.append(_add_member(merged.graph, model.graph, prefix(index)))
    return packed


def _add_member(into: onnx.GraphProto, graph: onnx.GraphProto, tag: str) -> Member:
    """Copy ``graph`` into ``into`` with every name prefixed by ``tag`` (empty names kept empty)."""
    def renamed(name: str) -> str:
        """``name`` under ``tag``; an empty name (an absent optional input) stays empty."""
        return tag + name if name else name

    for source, target in ((graph.input, into.input), (graph.output, into.output),
                           (graph.value_info, into.value_info), (graph.initializer, into.initializer)):
        for item in source:
            copy = target.add()
            copy.CopyFrom(item)
            copy.name = renamed(item.name)
    for node in graph.node:
        copy = into.node.add()
        copy.CopyFrom(node)
        copy.name = tag + node.name
        copy.input[:] = [renamed(n) for n in node.input]
        copy.output[:] = [renamed(n) for n in node.output]
    return Member(tag, [i.name for i in graph.input], [o.name for o in graph.output], [n.name for n in graph.node])


def run_packed(models: Sequence[onnx.ModelProto], feeds: Sequence[Mapping[str, np.ndarray]], ep: EpSpec,
               settings: SessionSettings, *, allow_fallback: bool = False) -> list[EpRun]:
    """One session of ``models`` packed (``pack``) on ``ep``, run once on each member's ``feeds``,
    profiled; each member's ``EpRun`` in its own names. Raises ``SessionError`` for the pack
    as a whole (ONNX Runtime's refusal, a build or run failure, an EP process that died)."""
    packed = pack(models)
    run = session_mod.run_on_ep(packed.model, packed.feeds(feeds), ep, settings, allow_fallback=allow_fallback)
    return packed.split(run)


def diagnose_packed(models: Sequence[onnx.ModelProto], feeds: Sequence[Mapping[str, np.ndarray]], ep: EpSpec,
                    settings: SessionSettings) -> list[Diagnosis] | None:
    """After ONNX Runtime refused a packed session a CPU fallback: one session of the same pack
    with fallback allowed, only to read where each member's nodes went (``session.diagnose_refusal``
    for many models at once); None when that session failed too."""
    try:
        runs = run_packed(models, feeds, ep, settings, allow_fallback=True)
    except SessionError:
        return None
    return [Diagnosis(run.placement, run.placement_source) for run in runs]


__all__ = ["DEFAULT_BATCH", "Member", "PACK_ELEMENTS", "Packed", "default_batch", "diagnose_packed", "pack",
           "pack_key", "prefix", "run_packed"]
