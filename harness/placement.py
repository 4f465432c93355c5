"""Where each ONNX node ran: read back from ONNX Runtime, never assumed.

Two records, both of the session that produced the outputs:

1. The profiling trace (``enable_profiling``): events with ``"cat": "Node"`` named
   ``<node>_kernel_time`` carry ``args.provider``. A compiling EP (OpenVINO, TensorRT,
   DirectML graph fusion) reports its fused node (e.g.
   ``OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0``) instead of the nodes inside it.
2. ``InferenceSession.get_provider_graph_assignment_info()`` (ONNX Runtime >= 1.24 with
   ``session.record_ep_graph_assignment_info = 1``): EP -> original node names, fused or not.
   It names the nodes inside a fused node; without it they are attributed to the fused
   nodes' provider only when exactly one provider ran fused nodes, else they stay unproven.

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


def placement_from_profile(events: Iterable[dict[str, Any]], node_names: Iterable[str],
                           fallback: dict[str, str] | None = None) -> dict[str, str]:
    """Node name -> provider from the events of an ONNX Runtime profiling trace.

    Nodes the trace names directly get the provider of their own event. Nodes hidden inside a
    fused node take their provider from ``fallback`` (the graph assignment info) when given,
    else from the fused nodes' provider when exactly one provider ran fused nodes.
    """
    names = set(node_names)
    placement: dict[str, str] = {}
    fused_providers: set[str] = set()
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        provider = (event.get("args") or {}).get("provider")
        if not provider:
            continue
        node = event["name"][: -len("_kernel_time")]
        if node in names:
            placement[node] = provider
        else:
            fused_providers.add(provider)
    for node in names - placement.keys():
        if fallback and node in fallback:
            placement[node] = fallback[node]
        elif len(fused_providers) == 1:
            placement[node] = next(iter(fused_providers))
    return placement


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
    """``(placement, source)`` for a session that has run once with profiling on.

    The profiling trace is the primary record; the graph assignment info (when this ONNX
    Runtime has it) resolves nodes that a compiling EP fused. ``source`` says what was used.
    """
    names = list(node_names)
    source = "profiling"
    try:
        events = read_profile(profile_path) if profile_path else []
    except ValueError:
        # Some EPs' traces hold node names unescaped (onnxruntime-openvino 1.24.1): a name with a
        # quote makes the file invalid JSON. Then only the assignment info can prove placement,
        # and a node it does not name stays unproven (never a pass).
        events, source = [], "profiling trace unreadable"
    assignment = placement_from_assignment(session)
    placement = placement_from_profile(events, names, assignment)
    if assignment:
        source += "+graph-assignment-info"
    return {n: placement[n] for n in names if n in placement}, source


def off_ep(placement: dict[str, str], nodes: Iterable[str], provider: str) -> list[str]:
    """The nodes among ``nodes`` not proven to have run on ``provider``."""
    return [n for n in nodes if placement.get(n) != provider]
