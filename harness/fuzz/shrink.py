"""Shrink one failure to a minimal case that still fails the same way, every step on the EP.

Three stages share one time budget:

1. **Structure** (fuzzed cases): Hypothesis replays the case's batch with the same seed (the
   test function skips the draws before the failing one without running them), sees the
   failing draw fail, and shrinks it with its own shrinker: fewer batches, channels and
   regions, smaller inputs and windows, fields back to the first (default) value of each
   choice, simpler value kinds, value seed 0. A candidate counts as failing only when its raw
   result line has the original's ``Signature``.
   Hypothesis orders draws by their choices; of the failing draws, the one with the fewest
   elements (``desc_elements``) is kept.
   A fuzzed case's input values are drawn from its value seed over its whole shape, so a draw
   with fewer channels or regions holds other values everywhere: the special value that made the
   case fail (an infinity, a NaN) is rarely where it was, and the shrinker stops at a case of
   hundreds or thousands of elements. So the stage takes at most ``STRUCTURE_SHARE`` of the
   budget, and ends once ``STRUCTURE_STALL`` candidates in a row have not failed the same way
   (its first moves, fields back to their defaults and whole batches, channels and regions
   dropped, are the ones that pay); the next stage cuts the arrays themselves.
2. **Shape**: the smallest failing case becomes a ``LiteralCase`` (its arrays), and the
   operator's cases module offers smaller variants of it that keep part of its arrays as they
   are (``shrink_moves``: one region, one channel, one image, a cropped feature map, a smaller
   output); the first that fails the same way is kept and offered smaller variants again, until
   none fails the same way. Where the runner has several workers, that many variants run at
   once and the first failing one in the moves' order is kept: the case one-by-one runs keep.
3. **Values**: the input arrays are then simplified: each array set to zeros, then ever smaller
   blocks of it zeroed (as delta debugging does), then its floats rounded to whole numbers --
   each change kept only if the failure stays.

A minimal case of more than ``SMALL_ELEMENTS`` elements gets a note saying why shrinking stopped
above it (the budget ran out, or no smaller variant failed the same way).

Every candidate runs through ``run`` (a worker of the shrink pool: crash and hang isolation,
placement proof and the comparison are those of a normal case). Past the deadline, candidates
are answered "does not fail" without running, so Hypothesis stops at once and the best case
so far is the result. Verdicts are cached by draw, so Hypothesis's final replay of the
minimal draw costs nothing and never looks flaky.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ...graphs.cases.common import FuzzCase, LiteralCase, cases_module, desc_elements
from ...reference import DescError, validate
from ..core.results import CaseLine
from ..core.signature import Signature, same_failure
from . import draw as draw_mod

#: Runs one case on the EP (in a worker) and returns its raw result line. A runner may also have
#: ``many(cases) -> lines`` (in the cases' order) and ``width`` (how many it runs at once): the
#: shape stage then runs that many variants together (``_Trial.first_failing``).
Runner = Callable[[Any], CaseLine]
#: A minimal case of at most this many elements (inputs and outputs together) reads at a glance;
#: one larger gets a note saying why shrinking stopped above it.
SMALL_ELEMENTS = 300
#: The share of a shrink's budget Hypothesis's structure stage may use: the shape and value
#: stages, which cut the case down where it failed, get the rest.
STRUCTURE_SHARE = 0.5
#: The structure stage ends after this many candidates in a row that did not fail the same way.
#: On a 620-element ROI_ALIGN failure of the CPU EP (roi_align/fuzz-s0-b8-027, before its readings
#: explained it) Hypothesis's shrinker found its last useful move (a field back to its default)
#: at candidate 7, then ran 146 more for cuts the shape stage makes anyway (the minimal case had
#: 42 elements either way).
STRUCTURE_STALL = 30


class _StillFails(Exception):
    """Raised inside the Hypothesis test function: this draw fails the same way."""


@dataclass
class ShrinkResult:
    """A shrink's outcome: the minimal case, its raw line, and what it took."""

    original: Any
    minimal: LiteralCase
    minimal_line: CaseLine | None
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
        self.best_line: CaseLine | None = None

    def expired(self) -> bool:
        """Whether the shrink budget is spent."""
        return time.monotonic() >= self.deadline

    def fails(self, case: Any) -> bool:
        """Run ``case`` (a fresh id per candidate); True when it fails like the original (False
        without running it once the budget is spent)."""
        return self.first_failing([case])[0] is not None

    def first_failing(self, candidates: Iterable[Any]) -> tuple[Any | None, int]:
        """The first of ``candidates``, in their order, that fails like the original (None when
        none does or the budget ran out), and how many were offered up to it. Where the runner
        runs several at once (``many``, ``width``: a pool of that many workers), that many go
        together and the first failing one in order is taken, so the answer is the one a run of
        them one by one gives; one run beside it counts as a candidate, never as accepted."""
        many = getattr(self.run, "many", None)
        width = max(1, int(getattr(self.run, "width", 1))) if many is not None else 1
        run_group = many if many is not None else (lambda cases: [self.run(cases[0])])
        pending, offered = iter(candidates), 0
        while not self.expired():
            group = list(itertools.islice(pending, width))
            if not group:
                break
            lines = run_group([self._named(case) for case in group])
            for case, line in zip(group, lines):
                offered += 1
                if same_failure(self.target, line):
                    self.accepted += 1
                    self.best_line = line
                    return case, offered
        return None, offered

    def _named(self, case: Any) -> Any:
        """``case`` under the next candidate id (``<original id>-shrink<n>``), counted."""
        self.candidates += 1
        return _renamed(case, f"{self.original.id}-shrink{self.candidates}")


def shrink(original: Any, target: Signature, run: Runner, budget_s: float) -> ShrinkResult:
    """Shrink ``original`` (a fuzzed, catalog or literal case whose raw outcome has ``target``)
    within ``budget_s`` seconds (module docstring); every candidate goes through ``run``."""
    start = time.monotonic()
    trial = _Trial(original, target, run, start + budget_s)
    result = ShrinkResult(original, _literal(original, original.id + "-min"), None)
    best: Any = original
    if isinstance(original, FuzzCase):
        trial.deadline = start + STRUCTURE_SHARE * budget_s
        best, stage = _structure_stage(original, trial)
        trial.deadline = start + budget_s
        result.stages["structure"] = stage
        result.notes += stage.pop("notes", [])
    shape_start, before = time.monotonic(), trial.candidates
    minimal, offered = _shape_stage(_literal(best, original.id + "-min"), trial)
    result.stages["shape"] = {"seconds": round(time.monotonic() - shape_start, 3),
                              "candidates": trial.candidates - before, "offered": offered}
    values_start, before = time.monotonic(), trial.candidates
    result.minimal = _values_stage(minimal, trial)
    result.stages["values"] = {"seconds": round(time.monotonic() - values_start, 3),
                               "candidates": trial.candidates - before}
    result.minimal_line = trial.best_line
    result.seconds, result.candidates, result.accepted = time.monotonic() - start, trial.candidates, trial.accepted
    if trial.expired():
        result.notes.append(f"stopped at the {budget_s:g} s shrink budget")
    if result.minimal_elements > SMALL_ELEMENTS:
        result.notes.append(_why_not_smaller(result, offered, trial.expired(), budget_s))
    return result


def _why_not_smaller(result: ShrinkResult, offered: int | None, expired: bool, budget_s: float) -> str:
    """Why the minimal case still has more than ``SMALL_ELEMENTS`` elements (``shrink``)."""
    size = f"still {result.minimal_elements} elements (more than {SMALL_ELEMENTS})"
    if expired:
        return f"{size}: the {budget_s:g} s shrink budget ran out first (a larger --shrink-time shrinks further)"
    if offered is None:
        return f"{size}: the operator's cases module offers no smaller variants (no shrink_moves hook)"
    return (f"{size}: none of the {offered} smaller variants of the last case (fewer regions, channels or images, "
            "a cropped input, a smaller output) failed the same way, so the failure needs this much of the case")


def _structure_stage(original: FuzzCase, trial: _Trial) -> tuple[Any, dict[str, Any]]:
    """Hypothesis's shrinker on ``original``'s draw (module docstring, stage 1): the smallest
    failing ``FuzzCase`` found, and the stage's figures."""
    start, before = time.monotonic(), trial.candidates
    try:
        fid = draw_mod.parse_id(original.id)
    except ValueError:
        return original, {"seconds": 0.0, "candidates": 0, "notes": ["not a fuzzed id: values stage only"]}
    target_key = draw_mod.draw_key(draw_mod.draw_of(original))
    state: dict[str, Any] = {"calls": 0, "reached": False, "best": original, "diverged": False, "misses": 0}
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
            if trial.expired() or state["misses"] >= STRUCTURE_STALL:
                return
            verdicts[key] = trial.fails(draw_mod.fuzz_case(fid, candidate, original.id))
            state["misses"] = 0 if verdicts[key] else state["misses"] + 1
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
                           "replayed": state["reached"] and not state["diverged"],
                           "stalled": state["misses"] >= STRUCTURE_STALL, "notes": notes}


def _shape_stage(case: LiteralCase, trial: _Trial) -> tuple[LiteralCase, int | None]:
    """Smaller variants of ``case`` from its operator's ``shrink_moves`` (module docstring, stage
    2), each valid one smaller than the case run until one fails the same way, then again from
    that one; returns the smallest case and how many variants the last round offered (None: the
    cases module has no ``shrink_moves``)."""
    moves = getattr(cases_module(case.op), "shrink_moves", None)
    if moves is None:
        return case, None
    offered, found = 0, True
    while found and not trial.expired():
        smaller, offered = trial.first_failing(_smaller_variants(case, moves))
        found = smaller is not None
        case = smaller if smaller is not None else case
    return case, offered


def _smaller_variants(case: LiteralCase, moves: Callable[..., Iterable[tuple[Any, dict[str, np.ndarray]]]]
                      ) -> Iterator[LiteralCase]:
    """The variants ``moves`` offers of ``case`` that are smaller (``_size``) and valid, in its order."""
    for desc, arrays in moves(case.desc, dict(case.arrays)):
        if _size(desc) < _size(case.desc) and _valid(desc):
            yield LiteralCase(id=case.id, op=case.op, desc=desc, seed=case.seed, opset=case.opset,
                              tags=case.tags, recipe=case.recipe, arrays=arrays)


def _size(desc: Any) -> tuple[int, int]:
    """What the shape stage makes smaller: elements, then the tensors' ranks together."""
    ranks = sum(len(getattr(desc, f.name).sizes) for f in dataclasses.fields(desc)
                if hasattr(getattr(desc, f.name), "sizes"))
    return desc_elements(desc), ranks


def _valid(desc: Any) -> bool:
    """Whether ``desc`` obeys its page (a variant that does not is never run)."""
    try:
        validate(desc)
    except DescError:
        return False
    return True


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
            moves.append(functools.partial(_zero_block, begin=begin, size=block))
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
