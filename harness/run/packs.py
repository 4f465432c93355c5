"""Cases sharing sessions: which cases go into one packed session, and how a packed session
that fails is taken apart so that every case ends exactly as it would in a session of its own.

``Packer`` groups prepared cases (``Item``) into packs that can share a session
(``harness.eps.packing.pack_key``: the same opset; at most ``packing.PACK_ELEMENTS`` elements
together) as they are prepared. ``settle(pack, config, memory)`` runs a pack in one session
(``packing.run_packed``) and decides each case's line from it (``case_steps.accept``), or takes
the pack apart:

- the session ran: each case is judged on its own outputs and placement. A case that does not
  pass (``pass`` or ``tie-only``) is run again in a session of its own and judged there (with
  its attribution), so every line that reports a failure is the line the case gets alone,
  repro bundle included, and an EP that computes differently next to other nodes cannot turn
  one case's pass into another case's failure;
- ONNX Runtime refused it a CPU fallback: one session of the same pack with fallback allowed
  (``packing.diagnose_packed``) says where every case's nodes went. The cases whose nodes all
  ran on the EP are settled again together, a case with a node the diagnosis did not read back
  at all (and none proven elsewhere) is settled again alone: a missing placement proves no
  refusal; the cases with a node proven elsewhere are refused as they would be alone: their
  carrier models next (``case_steps.carrier_of``: for an EP that declines an operator node only
  as the one node of a model, or, as the OpenVINO EP does, as a one-node part of a model it takes
  only partly), packed together and settled the same way, and a case whose carrier model is
  refused too is ``not-on-ep`` with its own part of the first diagnosis
  (``case_steps.refusal_outcome``): no second session per case. A pack of carrier models that
  fails other than by a refusal is settled case by case (all of its cases were refused once
  already);
- the device is lost (``harness.eps.device_loss``: a TDR, a driver reset): ``DeviceLost`` of
  the pack's cases goes up to the worker, which is restarted with a fresh device; the pool
  halves the pack there, so a loss is never retried on the lost device;
- anything else (a build or run failure, the EP's own process dying, or that diagnosis failing):
  the pack is halved and each half settled again, down to single cases, which fail exactly as
  alone (``case_steps.session_failure``). A case that fails in a session of its own teaches the
  process's ``Memory`` its likeness (its op types and tensor types): cases like it are not
  packed again, so an EP that cannot build some kind of node costs one halving, not one per pack.
  A case whose expectations announce that its session fails (``expected_failures``) is never
  packed, and its failure teaches nothing: on 800 fuzzed cases of the CPU EP, 167 sessions
  instead of 277, the same lines.

Every session's time is shared out between the cases in it (``Item.timings``: a refused or
failed session counts as building).
"""

from __future__ import annotations

import contextlib
import re
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from ..core.results import PASSING, CaseLine
from ..eps import device_loss, packing
from ..eps import placement as placement_mod
from ..eps import session as session_mod
from ..eps.ep_run import Diagnosis, EpRun, SessionError, case_scope
from .case_steps import (
    ArtifactPolicy,
    CaseConfig,
    Prepared,
    accept,
    carrier_of,
    carry,
    refusal_outcome,
    session_failure,
)

#: The keys of a line's ``timings``, besides ``shared_by`` (``harness.core.results``).
TIMING_KEYS = ("prepare_s", "build_s", "run_s", "judge_s")


@dataclass
class Item:
    """One case on its way through a batch: its line, what its folder holds, its preparation,
    where its time went, and the strict session's refusal once there is one."""

    case: Any
    policy: ArtifactPolicy
    mapper: Callable[..., Any]
    line: CaseLine
    state: dict[str, Any] = field(default_factory=dict)
    prepared: Prepared | None = None
    timings: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIMING_KEYS, 0.0))
    shared_by: int = 1
    refusal: BaseException | None = None   # ONNX Runtime's refusal of the strict session
    diagnosis: Diagnosis | None = None     # where its own model's nodes went with fallback allowed
    carried: Any = None                    # the mapping with carrier nodes, once tried

    def model(self, carried: bool = False) -> Any:
        """The model this case runs: its own, or the one with carrier nodes."""
        return (self.carried if carried else self.ready.mapping).model

    @property
    def ready(self) -> Prepared:
        """``prepared``, which every item has once it is in a pack (RuntimeError before)."""
        if self.prepared is None:
            raise RuntimeError(f"{self.case.id} was packed before it was prepared")
        return self.prepared

    @property
    def decided(self) -> bool:
        """True once the line has an outcome."""
        return self.line["outcome"] is not None


def likeness(model: Any) -> tuple[Any, ...]:
    """What a case shares with the cases an EP is likely to fail the same way: its node op types
    and the element types of its graph inputs and outputs."""
    graph = model.graph
    return (tuple(n.op_type for n in graph.node), tuple(v.type.tensor_type.elem_type for v in graph.input),
            tuple(v.type.tensor_type.elem_type for v in graph.output))


def expected_failures(item: Item) -> list[str]:
    """The ``error`` patterns of the case's expectations that announce a session the EP cannot
    build or run for this very case (a ``not-on-ep`` entry naming an error, whose flags the mapped
    case holds: e.g. ONNX Runtime refusing a MaxPool whose pad reaches its window). Such a case
    runs alone from the start: in a pack it would fail the pack and cost a halving. Only where a
    case runs changes, never what it is judged: every case ends as it would alone."""
    flags = item.line.get("flags")
    return [entry.error for entry in item.policy.expected
            if entry.refusal and entry.error and entry.has_flags_of(flags)]


class Memory:
    """What this process learned about packing on its EP: the likenesses of cases that failed in a
    session of their own other than by a refusal (module docstring). Such cases fail every pack
    they are in, so they run alone. A failure the case's expectations announce for that case
    (``expected_failures``) teaches nothing: it is the case's own, not its likeness's (a MaxPool
    refused for its pads says nothing of MaxPools with smaller ones)."""

    def __init__(self) -> None:
        self.alone: set[tuple[Any, ...]] = set()

    def learn(self, item: Item) -> None:
        """``item`` failed alone: cases like it run alone from now on."""
        self.alone.add(likeness(item.model()))

    def runs_alone(self, item: Item) -> bool:
        """Whether ``item`` is like a case that failed alone."""
        return likeness(item.model()) in self.alone


@contextlib.contextmanager
def guarded(items: list[Item]) -> Iterator[None]:
    """Turn an exception of the harness into ``error`` for each undecided case of ``items``: one
    case's failure never takes the worker (or the other cases of its pack) down. An exception
    that says the device is lost (``device_loss``) goes on as ``DeviceLost`` of those cases."""
    try:
        yield
    except Exception as exc:
        lost = device_loss.loss_of(exc, [item.case.id for item in items if not item.decided])
        if lost is not None:  # no case's fault: the worker and its device are restarted (harness.run.pool)
            raise lost from exc
        message = f"harness raised {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        for item in items:
            if not item.decided:
                item.line.update({"outcome": "error", "message": message})


@contextlib.contextmanager
def timed(item: Item, key: str) -> Iterator[None]:
    """Add the time the block takes to ``item``'s ``timings[key]``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        item.timings[key] += time.perf_counter() - start


class Packer:
    """Packs of cases that can share a session (module docstring), made as cases are prepared:
    ``add`` hands back the packs to settle now (one that the new case would overflow; the case
    alone when it cannot be packed, is too large, or is like one that failed alone), ``rest`` the
    packs still open, so no more than ``packing.PACK_ELEMENTS`` elements per kind of pack wait at
    a time."""

    def __init__(self, memory: Memory):
        """``memory``: what this process learned about packing on its EP."""
        self.memory = memory
        self.open: dict[Any, tuple[list[Item], int]] = {}

    def add(self, item: Item) -> list[list[Item]]:
        """Take ``item`` (prepared); the packs ready to settle now."""
        alone = self.memory.runs_alone(item) or bool(expected_failures(item))
        key = None if alone else packing.pack_key(item.model())
        size = item.ready.elements
        if key is None or size >= packing.PACK_ELEMENTS:
            return [[item]]
        pack, total = self.open.pop(key, ([], 0))
        ready = []
        if pack and total + size > packing.PACK_ELEMENTS:
            ready.append(pack)
            pack, total = [], 0
        self.open[key] = (pack + [item], total + size)
        return ready

    def rest(self) -> list[list[Item]]:
        """The packs still open (and forget them)."""
        packs = [pack for pack, _ in self.open.values()]
        self.open.clear()
        return packs


def settle(items: list[Item], config: CaseConfig, memory: Memory, carried: bool = False) -> None:
    """Run ``items`` (their own models, or with ``carried`` their carrier models) in one session
    and decide every line from it, or take the pack apart (module docstring) until every case is
    decided."""
    try:
        runs = _session(items, config, carried)
    except SessionError as exc:
        lost = device_loss.loss_of(exc, [item.case.id for item in items])
        if lost is not None:  # every later session on this device fails too: never halve on it
            raise lost from exc
        _after_failure(items, config, memory, carried, exc)
        return
    if carried:
        for item in items:
            carry(item.ready, item.carried, config.ep.provider)
    if len(items) == 1:
        item = items[0]
        with guarded([item]), timed(item, "judge_s"):
            accept(item.case, item.ready, runs[0], config, item.line, item.state)
        return
    again = [item for item, run in zip(items, runs) if not _passed_in_pack(item, run, config, len(items))]
    for item in again:
        settle([item], config, memory, carried)


def _passed_in_pack(item: Item, run: EpRun, config: CaseConfig, size: int) -> bool:
    """Judge ``item`` on its part of a packed session (no attribution yet); keep the verdict when
    it passes, and say False (nothing kept) when it must be run alone (module docstring)."""
    line, state = item.line.copy(), dict(item.state)
    try:
        with timed(item, "judge_s"):
            accept(item.case, item.ready, run, replace(config, diagnose=False), line, state)
    except Exception:  # judged again alone, where the harness's error is the case's line
        return False
    if line["outcome"] not in PASSING:
        return False
    item.line.update(line)
    item.state.update(state)
    item.shared_by = size
    return True


def _session(items: list[Item], config: CaseConfig, carried: bool) -> list[EpRun]:
    """One packed session of ``items`` (their own or their carried models), its time shared out
    between them; each case's ``EpRun``. Raises ``SessionError`` for the pack."""
    start = time.perf_counter()
    try:
        with case_scope(*(item.case.id for item in items)):  # names the session's cases to per-case EP hooks
            runs = packing.run_packed([item.model(carried) for item in items],
                                      [item.ready.feeds for item in items],
                                      config.ep, config.session)
    except SessionError:
        _share(items, time.perf_counter() - start, None)
        raise
    _share(items, time.perf_counter() - start, runs[0].build_s)
    return runs


def _share(items: list[Item], seconds: float, build_s: float | None) -> None:
    """Give each of ``items`` its share of a session that took ``seconds``, ``build_s`` of them
    building it (None: the session failed, all of it counts as building)."""
    build = seconds if build_s is None else min(build_s, seconds)
    for item in items:
        item.timings["build_s"] += build / len(items)
        item.timings["run_s"] += (seconds - build) / len(items)


def _after_failure(items: list[Item], config: CaseConfig, memory: Memory, carried: bool,
                   exc: SessionError) -> None:
    """A session of ``items`` failed with ``exc``: a case alone ends as it would alone; a refused
    pack is diagnosed in one session and sorted; a failing pack of carrier models is settled case
    by case; any other failing pack loses the cases like one that failed alone (each settled
    alone) or, with none, is halved."""
    if len(items) == 1:
        _alone_failed(items[0], config, memory, carried, exc)
        return
    if exc.refused_fallback and _sort_refused(items, config, memory, carried, exc):
        return
    if carried:
        for item in items:
            settle([item], config, memory, carried)
        return
    lone = [item for item in items if memory.runs_alone(item)]
    rest = [item for item in items if item not in lone]
    for item in lone:
        settle([item], config, memory)
    if lone and rest:
        settle(rest, config, memory)
    elif rest:
        half = len(rest) // 2
        settle(rest[:half], config, memory)
        settle(rest[half:], config, memory)


def _sort_refused(items: list[Item], config: CaseConfig, memory: Memory, carried: bool, exc: SessionError) -> bool:
    """After a packed session was refused a CPU fallback: one diagnostic session of the pack sorts
    its cases (``_sorted``): those whose nodes all ran on the EP are settled again together, those
    with a node proven elsewhere are refused (``_refused``), and those the diagnosis could not place
    either way are settled again one by one (never called refused without proof). False (nothing
    done) when the diagnosis failed or proved no case refused."""
    start = time.perf_counter()
    diagnoses = packing.diagnose_packed([item.model(carried) for item in items],
                                        [item.ready.feeds for item in items],
                                        config.ep, config.session)
    _share(items, time.perf_counter() - start, None)
    if diagnoses is None:
        return False
    on, unproven, refused = _sorted(items, diagnoses, config.ep.provider, carried)
    if not refused:  # nothing proven elsewhere, yet the strict pack was refused: halve instead
        return False
    if on:
        settle(on, config, memory, carried)
    for item in unproven:
        settle([item], config, memory, carried)
    waiting = [item for item, d in refused if _refused(item, config, carried, exc.cause, d)]
    if waiting:
        settle(waiting, config, memory, carried=True)
    return True


def _sorted(items: list[Item], diagnoses: list[Diagnosis], provider: str, carried: bool
            ) -> tuple[list[Item], list[Item], list[tuple[Item, Diagnosis]]]:
    """``items`` by their part of a packed diagnosis: every node on ``provider``; no node proven
    elsewhere but some not read back at all (a profile or assignment that misses a node proves
    nothing); some node proven on another provider (with its diagnosis)."""
    on: list[Item] = []
    unproven: list[Item] = []
    refused: list[tuple[Item, Diagnosis]] = []
    for item, diagnosis in zip(items, diagnoses):
        off = placement_mod.off_ep(diagnosis.placement, [n.name for n in item.model(carried).graph.node], provider)
        if not off:
            on.append(item)
        elif all(name not in diagnosis.placement for name in off):
            unproven.append(item)
        else:
            refused.append((item, diagnosis))
    return on, unproven, refused


def _refused(item: Item, config: CaseConfig, carried: bool, refusal: BaseException, diagnosis: Diagnosis | None
             ) -> bool:
    """``item``'s strict session was refused (``diagnosis``: where its nodes went, when known). Its
    own model: True when it has a carrier model to try next; else, and for a refused carrier
    model, the case is ``not-on-ep`` (from its own model's diagnosis) and False."""
    if not carried:
        item.refusal, item.diagnosis = refusal, diagnosis
        item.carried = carrier_of(item.ready)
        if item.carried is not None:
            return True
    _not_on_ep(item, config)
    return False


def _alone_failed(item: Item, config: CaseConfig, memory: Memory, carried: bool, exc: SessionError) -> None:
    """``item``'s own session failed. Refused: its carrier model next, alone (when it has one and
    this was not it), else ``not-on-ep``; its carrier model failed in any way: ``not-on-ep``;
    anything else: as ``case_steps.session_failure`` says, and ``memory`` learns its likeness."""
    if not carried and not exc.refused_fallback:
        message = str(exc.cause)
        if not any(re.search(pattern, message) for pattern in expected_failures(item)):
            memory.learn(item)
        session_failure(item.line, exc, config.ep.provider)
    elif _refused(item, config, carried, exc.cause, item.diagnosis):
        settle([item], config, memory, carried=True)


def _not_on_ep(item: Item, config: CaseConfig) -> None:
    """Decide a refused case ``not-on-ep`` from where its own model's nodes went: its part of its
    pack's diagnosis, or a diagnostic session of its own."""
    prepared = item.prepared
    if item.diagnosis is None:
        with timed(item, "build_s"):
            item.diagnosis = session_mod.diagnose_refusal(prepared.mapping.model,  # type: ignore[union-attr]
                                                          prepared.feeds, config.ep, config.session)  # type: ignore
    refusal_outcome(prepared, config.ep.provider, item.line,  # type: ignore[arg-type]
                    item.refusal or RuntimeError("the strict session was refused"), item.diagnosis)


__all__ = ["Item", "Memory", "Packer", "TIMING_KEYS", "expected_failures", "guarded", "likeness", "settle", "timed"]
