"""Where each ONNX node ran: read back from ONNX Runtime, never assumed.

Three sources, all of the session that produced the outputs; each node's placement records the
one that proved it (``EVIDENCE``, strongest first):

1. ``trace-node``: the profiling trace (``enable_profiling``) has an event with ``"cat": "Node"``
   named ``<node>_kernel_time`` whose ``args.provider`` names the EP (ORT's
   ``sequential_executor.cc``). A compiling EP (OpenVINO, TensorRT, DirectML graph fusion)
   reports its fused node instead (``OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0``,
   ``DmlFusedNode_0_3``); DirectML sessions therefore run with graph fusion disabled
   (``harness.eps.providers``), so each node gets its own event.
2. ``assignment-info``: ``InferenceSession.get_provider_graph_assignment_info()`` (ONNX Runtime
   >= 1.24.1 with ``session.record_ep_graph_assignment_info = 1``): EP -> original node names,
   recorded at partitioning, before any fusion.
3. ``single-partition-rule``: a node neither names is attributed to the provider of the fused
   nodes only when exactly one provider ran fused nodes (copies between devices,
   ``MemcpyFromHost``/``MemcpyToHost``, do not count); otherwise it stays unproven.

A node whose provider could not be read back is absent from the placement, and therefore
never counts as "on the EP".
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

#: ONNX Runtime's message when a node lands on the CPU EP while fallback is disabled
#: (``inference_session.cc``); it separates "not on the EP" from an EP failure.
FALLBACK_REFUSAL_TEXT = "fallback to CPU EP has been explicitly disabled"


def is_fallback_refusal(error: BaseException | str) -> bool:
    """True if a session-creation error is ONNX Runtime refusing a CPU fallback."""
    return FALLBACK_REFUSAL_TEXT in str(error)


def placement_from_assignment(session: Any) -> dict[str, str] | None:
    """Node name -> provider from the graph assignment info, or None if this ORT lacks it."""
    getter = getattr(session, "get_provider_graph_assignment_info", None)
    if getter is None:
        return None
    try:
        subgraphs = getter()
    except Exception:
        return None
    placement: dict[str, str] = {}
    for subgraph in subgraphs:
        for node in subgraph.get_nodes():
            placement[node.name] = subgraph.ep_name
    return placement or None


#: How a node's placement was proven, strongest first (module docstring).
EVIDENCE = ("trace-node", "assignment-info", "single-partition-rule")
#: Op types ONNX Runtime inserts to copy between devices; their events prove nothing about the graph.
COPY_OPS = ("MemcpyFromHost", "MemcpyToHost")


def _node_events(events: Iterable[dict[str, Any]]) -> Iterable[tuple[str, str, str]]:
    """``(node name, provider, op type)`` of each per-node kernel event of a trace."""
    for event in events:
        if not isinstance(event, dict) or event.get("cat") != "Node":
            continue
        name = str(event.get("name", ""))
        given = event.get("args")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        if name.endswith("_kernel_time") and args.get("provider"):
            yield name[: -len("_kernel_time")], str(args["provider"]), str(args.get("op_name", ""))


def placement_evidence(events: Iterable[dict[str, Any]], node_names: Iterable[str],
                       assignment: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """``(node -> provider, node -> evidence)`` from a trace's events and the graph assignment info.

    A node's own event wins (``trace-node``), then the assignment info (``assignment-info``),
    then the fused nodes' provider when exactly one provider ran fused nodes
    (``single-partition-rule``); a node none of them proves is in neither dict."""
    names = set(node_names)
    placement: dict[str, str] = {}
    evidence: dict[str, str] = {}
    fused_providers: set[str] = set()
    for node, provider, op_type in _node_events(events):
        if node in names:
            placement[node], evidence[node] = provider, "trace-node"
        elif op_type not in COPY_OPS:
            fused_providers.add(provider)
    for node in sorted(names - placement.keys()):
        if assignment and node in assignment:
            placement[node], evidence[node] = assignment[node], "assignment-info"
        elif len(fused_providers) == 1:
            placement[node], evidence[node] = next(iter(fused_providers)), "single-partition-rule"
    return placement, evidence


def placement_from_profile(events: Iterable[dict[str, Any]], node_names: Iterable[str],
                           fallback: dict[str, str] | None = None) -> dict[str, str]:
    """Node name -> provider from the events of an ONNX Runtime profiling trace, with ``fallback``
    (the graph assignment info) for nodes the trace does not name (``placement_evidence``)."""
    return placement_evidence(events, node_names, fallback)[0]


def describe_evidence(evidence: dict[str, str], note: str = "") -> str:
    """The ``placement_source`` of a result line: the one source that proved every node
    (``"trace-node"``), else each source with its nodes (``"trace-node: a, b; assignment-info: c"``),
    ``"none"`` when nothing was proven; ``note`` (e.g. an unreadable trace) is appended in brackets."""
    by_source = {source: sorted(n for n, s in evidence.items() if s == source) for source in EVIDENCE}
    used = [source for source in EVIDENCE if by_source[source]]
    if not used:
        text = "none"
    elif len(used) == 1:
        text = used[0]
    else:
        text = "; ".join(f"{source}: {', '.join(by_source[source])}" for source in used)
    return f"{text} ({note})" if note else text


def read_profile(path: str) -> list[dict[str, Any]]:
    """The events of a profiling trace file, which is then removed."""
    try:
        with open(path, encoding="utf-8") as f:
            events = json.load(f)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    return events if isinstance(events, list) else []


def read_placement(session: Any, node_names: Iterable[str], profile_path: str | None) -> tuple[dict[str, str], str]:
    """``(placement, source)`` for a session that has run once with profiling on; ``source`` says
    which evidence proved which node (``describe_evidence``)."""
    placement, evidence, note = read_evidence(session, node_names, profile_path)
    return placement, describe_evidence(evidence, note)


def read_evidence(session: Any, node_names: Iterable[str], profile_path: str | None
                  ) -> tuple[dict[str, str], dict[str, str], str]:
    """``(placement, evidence, note)`` for a session that has run once with profiling on: node ->
    provider, node -> what proved it (``EVIDENCE``), and why a source could not be read ("" when
    none); the profiling trace is removed once read."""
    names = list(node_names)
    note = ""
    try:
        events = read_profile(profile_path) if profile_path else []
    except ValueError:
        # Some EPs' traces hold node names unescaped (onnxruntime-openvino 1.24.1): a name with a
        # quote makes the file invalid JSON. Then only the assignment info can prove placement,
        # and a node it does not name stays unproven (never a pass).
        events, note = [], "profiling trace unreadable"
    placement, evidence = placement_evidence(events, names, placement_from_assignment(session))
    return {n: placement[n] for n in names if n in placement}, evidence, note


def off_ep(placement: dict[str, str], nodes: Iterable[str], provider: str) -> list[str]:
    """The nodes among ``nodes`` not proven to have run on ``provider``."""
    return [n for n in nodes if placement.get(n) != provider]
