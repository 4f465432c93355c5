"""Shrink one failure to a minimal case that still fails the same way, every step on the EP.

Two stages share one time budget:

1. **Structure** (fuzzed cases): Hypothesis replays the case's batch with the same seed (the
   test function skips the draws before the failing one without running them), sees the
   failing draw fail, and shrinks it with its own shrinker: fewer batches, channels and
   regions, smaller inputs and windows, fields back to the first (default) value of each
   choice, simpler value kinds, value seed 0. A candidate counts as failing only when its raw
   result line has the original's ``Signature``.
   Hypothesis orders draws by their choices; of the failing draws, the one with the fewest
   elements (``desc_elements``) is kept.
2. **Values**: the smallest failing case becomes a ``LiteralCase`` (its arrays), whose input
   arrays are then simplified: each array set to zeros, then ever smaller blocks of it zeroed
   (as delta debugging does), then its floats rounded to whole numbers -- each change kept
   only if the failure stays.

Every candidate runs through ``run`` (a worker of the shrink pool: crash and hang isolation,
placement proof and the comparison are those of a normal case). Past the deadline, candidates
are answered "does not fail" without running, so Hypothesis stops at once and the best case
so far is the result. Verdicts are cached by draw, so Hypothesis's final replay of the
minimal draw costs nothing and never looks flaky.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ep_testbed.graphs.cases.common import FuzzCase, LiteralCase, desc_elements
from ep_testbed.harness.core.signature import Signature, same_failure

from . import draw as draw_mod

#: Runs one case on the EP (in a worker) and returns its raw result line.
Runner = Callable[[Any], dict[str, Any]]


class _StillFails(Exception):
    """Raised inside the Hypothesis test function: this draw fails the same way."""


@dataclass
class ShrinkResult:
    """A shrink's outcome: the minimal case, its raw line, and what it took."""

    original: Any
    minimal: LiteralCase
    minimal_line: dict[str, Any] | None
    seconds: float = 0.0
    candidates: int = 0
    accepted: int = 0
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def original_elements(self) -> int:
        """Elements of the original case's inputs and outputs."""
        return desc_elements(self.original.desc)

    @property
    def minimal_elements(self) -> int:
        """Elements of the minimal case's inputs and outputs."""
        return desc_elements(self.minimal.desc)


class _Trial:
    """Runs candidates against one target signature, counting them and minding the deadline."""

    def __init__(self, original: Any, target: Signature, run: Runner, deadline: float):
        self.original, self.target, self.run, self.deadline = original, target, run, deadline
        self.candidates = self.accepted = 0
        self.best_line: dict[str, Any] | None = None

    def expired(self) -> bool:
        """Whether the shrink budget is spent."""
        return time.monotonic() >= self.deadline

    def fails(self, case: Any) -> bool:
        """Run ``case`` (a fresh id per candidate); True when it fails like the original."""
        self.candidates += 1
        line = self.run(_renamed(case, f"{self.original.id}-shrink{self.candidates}"))
        if same_failure(self.target, line):
            self.accepted += 1
            self.best_line = line
            return True
        return False


def shrink(original: Any, target: Signature, run: Runner, budget_s: float) -> ShrinkResult:
    """Shrink ``original`` (a fuzzed, catalog or literal case whose raw outcome has ``target``)
    within ``budget_s`` seconds (module docstring); every candidate goes through ``run``."""
    start = time.monotonic()
    trial = _Trial(original, target, run, start + budget_s)
    result = ShrinkResult(original, _literal(original, original.id + "-min"), None)
    best: Any = original
    if isinstance(original, FuzzCase):
        best, stage = _structure_stage(original, trial)
        result.stages["structure"] = stage
        result.notes += stage.pop("notes", [])
    values_start, before = time.monotonic(), trial.candidates
    result.minimal = _values_stage(_literal(best, original.id + "-min"), trial)
    result.stages["values"] = {"seconds": round(time.monotonic() - values_start, 3),
                               "candidates": trial.candidates - before}
    result.minimal_line = trial.best_line
    result.seconds, result.candidates, result.accepted = time.monotonic() - start, trial.candidates, trial.accepted
    if trial.expired():
        result.notes.append(f"stopped at the {budget_s:g} s shrink budget")
    return result


def _structure_stage(original: FuzzCase, trial: _Trial) -> tuple[Any, dict[str, Any]]:
    """Hypothesis's shrinker on ``original``'s draw (module docstring, stage 1): the smallest
    failing ``FuzzCase`` found, and the stage's figures."""
    start, before = time.monotonic(), trial.candidates
    try:
        fid = draw_mod.parse_id(original.id)
    except ValueError:
        return original, {"seconds": 0.0, "candidates": 0, "notes": ["not a fuzzed id: values stage only"]}
    target_key = draw_mod.draw_key(draw_mod.draw_of(original))
    state: dict[str, Any] = {"calls": 0, "reached": False, "best": original, "diverged": False}
    verdicts: dict[str, bool] = {target_key: True}

    def test(candidate: Any) -> None:
        """Hypothesis's test function: skip the draws before the failing one, then raise for every
        candidate that fails like the original (verdicts cached by draw)."""
        key = draw_mod.draw_key(candidate)
        if not state["reached"]:  # replaying the batch up to the failing draw: nothing runs
            state["calls"] += 1
            if state["calls"] <= fid.index:
                return
            state["reached"], state["diverged"] = True, key != target_key
            if state["diverged"]:
                return
        if key not in verdicts:
            if trial.expired():
                return
            verdicts[key] = trial.fails(draw_mod.fuzz_case(fid, candidate, original.id))
        if verdicts[key]:
            case = draw_mod.fuzz_case(fid, candidate, original.id)
            # Hypothesis orders draws by their choices, not by size: keep the fewest elements seen
            if desc_elements(case.desc) <= desc_elements(state["best"].desc):
                state["best"] = case
            raise _StillFails

    notes = []
    try:
        draw_mod.run_batch(fid, test, count=draw_mod.BATCH_SIZE, shrink=True)  # parse_id bounds the index
    except _StillFails:
        pass
    except Exception as exc:  # e.g. Hypothesis calling a flaky EP flaky: keep the best case so far
        notes.append(f"Hypothesis stopped: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    if state["diverged"] or not state["reached"]:
        notes.append("this Hypothesis version did not redraw the case at its position: values stage only")
    return state["best"], {"seconds": round(time.monotonic() - start, 3), "candidates": trial.candidates - before,
                           "replayed": state["reached"] and not state["diverged"], "notes": notes}


def _values_stage(case: LiteralCase, trial: _Trial) -> LiteralCase:
    """Simplify the input arrays of ``case`` (module docstring, stage 2)."""
    for name in list(case.arrays):
        for simpler in _simplifications(case.arrays[name]):
            if trial.expired():
                return case
            candidate = _with_array(case, name, simpler(case.arrays[name]))
            if candidate is not None and trial.fails(candidate):
                case = candidate
    return case


def _simplifications(array: np.ndarray) -> list[Callable[[np.ndarray], np.ndarray | None]]:
    """The value moves, in order: all zeros; zeroed blocks of size n/2, n/4, ... 1; whole numbers."""
    moves: list[Callable[[np.ndarray], np.ndarray | None]] = [lambda a: np.zeros_like(a)]
    block = array.size // 2
    while block >= 1:
        for begin in range(0, array.size, block):
            moves.append(lambda a, b=begin, n=block: _zero_block(a, b, n))
        block //= 2
    if array.dtype.kind == "f":
        moves.append(lambda a: np.round(a) if np.isfinite(a).all() else None)
    return moves


def _zero_block(array: np.ndarray, begin: int, size: int) -> np.ndarray | None:
    """``array`` with flat elements ``[begin, begin+size)`` set to 0; None when they already are."""
    flat = array.reshape(-1)
    block = flat[begin:begin + size]
    if not block.size or not np.any(block != 0):  # NaN != 0: a NaN block is not zero yet
        return None
    changed = flat.copy()
    changed[begin:begin + size] = 0
    return changed.reshape(array.shape)


def _with_array(case: LiteralCase, name: str, array: np.ndarray | None) -> LiteralCase | None:
    """``case`` with input ``name`` replaced (None when the move does not change it)."""
    if array is None or np.array_equal(array, case.arrays[name], equal_nan=array.dtype.kind == "f"):
        return None
    return LiteralCase(id=case.id, op=case.op, desc=case.desc, seed=case.seed, opset=case.opset, tags=case.tags,
                       recipe=case.recipe, arrays={**case.arrays, name: array})


def _literal(case: Any, case_id: str) -> LiteralCase:
    """``case`` with its inputs made explicit, under ``case_id``."""
    return LiteralCase(id=case_id, op=case.op, desc=case.desc, seed=case.seed, opset=getattr(case, "opset", None),
                       tags=dict(getattr(case, "tags", {}) or {}), recipe="literal", arrays=case.inputs())


def _renamed(case: Any, case_id: str) -> Any:
    """A copy of ``case`` under another id (its inputs do not depend on the id for these kinds)."""
    if isinstance(case, LiteralCase):
        return LiteralCase(id=case_id, op=case.op, desc=case.desc, seed=case.seed, opset=case.opset, tags=case.tags,
                           recipe=case.recipe, arrays=case.arrays)
    if isinstance(case, FuzzCase):
        return FuzzCase(id=case_id, op=case.op, desc=case.desc, seed=case.seed, opset=case.opset, tags=case.tags,
                        recipe=case.recipe, value_seed=case.value_seed)
    return _literal(case, case_id)
