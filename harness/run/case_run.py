"""Run cases in this process: map, compute the reference, run on the EP, prove placement, compare;
each case alone in a session, or several packed into one session (``--batch``).

``run_case(case, config)`` returns one result line (a dict, the ``case`` schema of
``harness.core.results``) with the *raw* outcome: expectations are applied by the caller.
``run_batch(requests, config)`` runs several cases and packs those that can share a session
(``harness.run.packs``); every line is the one ``run_case`` gives the case alone, apart from its
timings. Neither raises for anything a case does; they can only be stopped by the process dying
(a crashing EP), which is why the harness calls them inside a worker process
(``harness.run.worker``), whose pool splits a batch that killed its worker
(``harness.run.pool``). The steps of one case and the outcomes they decide are
``harness.run.case_steps``'; how a packed session that fails is taken apart is ``packs``'.

Each line's ``timings`` says where its time went: ``prepare_s`` (map, inputs, reference; of it
``reference_s``, the expected outputs with their bounds), ``build_s`` and ``run_s`` (its share of
every session it took part in: a session's time divided by the cases in it; a refused or failed
session counts as building), ``judge_s`` (comparison, attribution) and ``shared_by`` (how many
cases shared the session its outputs came from); ``duration_s`` is their sum (``reference_s`` is
inside ``prepare_s``).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Sequence

import onnx

from ...graphs import to_onnx
from ...graphs.cases.common import probe_case
from ...reference.checks import element_cap, max_elements
from ..core.expectations import readings_to_try
from ..core.results import CaseLine
from ..eps import session as session_mod
from ..eps.ep_run import first_line
from .artifacts import write_artifacts
from .case_steps import (
    DEFAULT_MAPPER,
    ArtifactPolicy,
    CaseConfig,
    load_mapper,
    mark_shows,
    new_line,
    prepare,
    severity,
    wants_artifacts,
)
from .packs import TIMING_KEYS, Item, Memory, Packer, guarded, settle, timed
from .readings import explain

#: What ``run_batch`` takes per case: the case, when its folder is written, and its mapper.
Request = tuple[Any, ArtifactPolicy, Callable[..., Any]]


def run_case(case: Any, config: CaseConfig, policy: ArtifactPolicy = ArtifactPolicy(),
             mapper: Callable[..., Any] | None = None) -> CaseLine:
    """Run ``case`` on ``config.ep`` in a session of its own and return its result line (raw outcome)."""
    return run_batch([(case, policy, mapper or load_mapper(config.mapper))], config)[0]


def run_batch(requests: Sequence[Request], config: CaseConfig, emit: Callable[[CaseLine], None] | None = None,
              before_session: Callable[[list[Any]], None] | None = None,
              memory: Memory | None = None) -> list[CaseLine]:
    """Run every request's case on ``config.ep``, packing those that can share a session (module
    docstring), and return their lines (raw outcomes), each also handed to ``emit`` as soon as it
    is decided (cases that need no session first). Cases are prepared one by one and a pack is
    settled as soon as it is full (``packs.Packer``), so a batch of large cases holds one at a
    time. ``before_session(cases)`` is called right before the first session of each pack (the
    worker's fault injection); ``memory`` keeps what this process learned about packing on its EP
    from one batch to the next."""
    memory = memory if memory is not None else Memory()
    packer = Packer(memory)
    lines: list[CaseLine] = []

    def done(item: Item) -> None:
        """Finish ``item``'s line and hand it on."""
        lines.append(_finish(item, config))
        if emit is not None:
            emit(lines[-1])

    def run_pack(pack: list[Item]) -> None:
        """Settle one pack and finish its cases (their arrays go with them)."""
        if before_session is not None:
            before_session([item.case for item in pack])
        with guarded(pack):
            settle(pack, config, memory)
        for item in pack:
            done(item)

    with element_cap(config.max_elements or max_elements()):  # a worker does not inherit --limit
        for case, policy, mapper in requests:
            item = Item(case, policy, mapper, new_line(case, config.ep))
            with guarded([item]), timed(item, "prepare_s"):
                item.prepared = prepare(case, mapper, item.line, item.state, config.precision_model)
                if item.prepared is not None and any(e.shows_flags for e in policy.expected):
                    mark_shows(case, item.prepared, config, item.line)  # only an entry's shows_when reads it
            if item.decided:
                done(item)
                continue
            for pack in packer.add(item):
                run_pack(pack)
        for pack in packer.rest():
            run_pack(pack)
    return lines


def _finish(item: Item, config: CaseConfig) -> CaseLine:
    """``item``'s line with its duration and timings, and its case folder when its policy wants one."""
    line = item.line
    if line["outcome"] is None:  # never expected: every path decides; say so rather than lose the case
        line.update({"outcome": "error", "message": "the harness left the case undecided"})
    names = readings_to_try(item.policy.expected, line) if line["outcome"] == "fail" else ()
    if names and item.prepared is not None and item.state.get("actual") is not None:
        with timed(item, "judge_s"):
            line["readings"] = _evidence(item, config, names)
    timings: dict[str, Any] = {**{k: round(v, 6) for k, v in item.timings.items()}, "shared_by": item.shared_by}
    if "reference_s" in item.state:  # the part of prepare_s the reference took
        timings["reference_s"] = round(item.state["reference_s"], 6)
    line["timings"] = timings
    line["duration_s"] = round(sum(item.timings.values()), 6)
    if config.run_dir and wants_artifacts(line, item.policy):
        state = item.state
        try:
            line["artifacts"] = write_artifacts(
                config.run_dir, item.case.id, desc=item.case.desc, model=state.get("model"), feeds=state.get("feeds"),
                expected=state.get("expected"), actual=state.get("actual"), allowance=state.get("allowance"))
        except Exception as exc:
            line["message"] = f"{line['message'] or ''} (writing artifacts failed: {exc})"
    return line


def _evidence(item: Item, config: CaseConfig, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The ``readings`` record of a failed case (``harness.run.readings.explain``); a record saying
    why when explaining raised (the case then stays failed: nothing proved it known)."""
    try:
        return explain(item.case, item.ready, item.state["actual"], config, names)
    except Exception as exc:  # noqa: BLE001 - the verdict stands without evidence
        return {"tried": list(names), "mismatches": item.line.get("mismatches"), "explained": {},
                "unexplained": item.line.get("mismatches") or 0,
                "error": f"explaining raised {type(exc).__name__}: {first_line(exc)}"[:300]}


@functools.lru_cache(maxsize=1)
def warm_up_model() -> tuple[bytes, dict[str, Any]]:
    """The model and feeds a worker warms its EP up with: the probe case's (the preflight's one-node
    MaxPool, ``graphs.cases.common.probe_case``), made once per process by the pool that starts
    the workers, so no worker builds a catalog to find it."""
    case = probe_case()
    mapping = to_onnx(case.desc, opset=case.opset)
    return mapping.require_model().SerializeToString(), mapping.feeds(case.inputs())


def warm_up(config: CaseConfig, model: bytes | None = None, feeds: dict[str, Any] | None = None) -> str:
    """Start the EP in this process before any case is timed: one session of ``model`` on ``feeds``
    (default ``warm_up_model()``), CPU fallback allowed, not profiled, its outcome ignored. What an
    EP starts once per process (a device, compiled kernels, a DirectML host) is then no case's
    cost. Returns one line saying how it went."""
    start = time.perf_counter()
    try:
        if model is None or feeds is None:
            model, feeds = warm_up_model()
        session_mod.run_on_ep(onnx.load_model_from_string(model), feeds, config.ep, config.session,
                              allow_fallback=True, profile=False, quiet=True)
    except Exception as exc:  # the cases will meet the same failure and report it themselves
        return f"warm-up session failed after {time.perf_counter() - start:.3f} s: {session_mod.first_line(exc)}"
    return f"warm-up session on {config.ep.provider}: {time.perf_counter() - start:.3f} s"


__all__ = ["DEFAULT_MAPPER", "TIMING_KEYS", "ArtifactPolicy", "CaseConfig", "Memory", "Request", "load_mapper",
           "new_line", "run_batch", "run_case", "severity", "warm_up", "warm_up_model"]
