"""Fuzzed cases from Hypothesis strategies: drawn in seeded batches, named so that an id regenerates its case.

A fuzz run draws, per operator, batch after batch of ``BATCH_SIZE`` cases from the operator's
strategy (its cases module's ``fuzz_strategy(op, size)``), and runs them in rounds
(``draw_round``): round r is batch r of every selected operator, its cases taken in turn (the
first case of each operator, then the second of each...), so that the first cases of a run, and
the first N of ``fuzz --max-cases N``, cover every operator it announces. A batch is one Hypothesis run in
generate-only mode with a fixed seed (``batch_seed``: a hash of operator, size, run seed and
batch number), whose test function only collects what Hypothesis draws; so the same Hypothesis
version draws the same batch anywhere (with the literals Hypothesis harvests from imported local
modules turned off: ``_no_local_constants``). A case is named after where it was drawn:

    <op>/fuzz-s<seed>-b<batch>-<index>          e.g. max_pooling2/fuzz-s7-b12-034
    <op>/fuzz-large-s<seed>-b<batch>-<index>    the ``large`` size distribution

``replay(case_id)`` redraws that batch and returns the case (a fraction of a second); the
shrinker replays the same batch to hand Hypothesis the failing draw (``harness.fuzz.shrink``).
Ids start with the operator name, so the expectations' id patterns (``roi_align*``) apply to
fuzzed cases as they do to catalog ones.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from ...graphs.cases.common import FuzzCase, FuzzDraw, cases_module, desc_elements, fuzz_recipe
from ...reference.registry import names, spec_named
from ..core.rerun import FUZZ_FAMILY

#: Cases per batch: the unit a run draws, and what a replay redraws. A batch never holds more
#: (``draw_batch`` asks Hypothesis for this many; it may find fewer distinct draws), so
#: ``MAX_INDEX`` is the largest position any run can have drawn, and an id past it is refused
#: before anything is drawn (redrawing index N costs N + 1 draws).
BATCH_SIZE = 100
MAX_INDEX = BATCH_SIZE - 1
#: The largest run seed and batch number an id may carry: the range of ``--seed``
#: (``harness/cli/options.py: MAX_SEED``; a test keeps the two equal). A batch number is only
#: hashed (``batch_seed``), so its size costs nothing, but an unbounded one would be written into
#: a header its own reader refuses.
MAX_NUMBER = 2**63 - 1

_ID = re.compile(r"^(?P<op>[a-z0-9_]+)/fuzz(?:-(?P<size>[a-z]+))?-s(?P<seed>\d+)-b(?P<batch>\d+)-(?P<index>\d+)$")
#: Where a user finds the ids a run really drew (said whenever an id is refused).
WHERE_IDS = "take the ids from the run's results.jsonl (the \"id\" of each line) or its report.html"


@dataclass(frozen=True)
class FuzzId:
    """Where a fuzzed case was drawn: operator, size distribution, run seed, batch, position."""

    op: str
    seed: int
    batch: int
    index: int
    size: str = "default"

    def text(self) -> str:
        """The case id (module docstring)."""
        size = "" if self.size == "default" else f"-{self.size}"
        return f"{self.op}/fuzz{size}-s{self.seed}-b{self.batch}-{self.index:03d}"


def parse_id(case_id: str) -> FuzzId:
    """The ``FuzzId`` of a fuzzed case id; ValueError saying what a fuzzed id looks like
    otherwise, and for an id no run can have drawn: a seed or batch past ``MAX_NUMBER``, an
    index past ``MAX_INDEX`` (checked on the digits, before any number is built or drawn)."""
    match = _ID.match(case_id)
    if not match or match["op"] not in names():
        raise ValueError(f"{case_id!r} is not a fuzzed case id: expected <op>/fuzz[-<size>]-s<seed>-b<batch>-<index> "
                         f"with <op> one of {', '.join(names())} (e.g. max_pooling2/fuzz-s0-b3-017)")
    for part, largest in (("seed", MAX_NUMBER), ("batch", MAX_NUMBER), ("index", MAX_INDEX)):
        digits = match[part].lstrip("0") or "0"
        if len(digits) > len(str(largest)) or int(digits) > largest:
            raise ValueError(_past_range(case_id, part, digits, largest))
    return FuzzId(match["op"], int(match["seed"]), int(match["batch"]), int(match["index"]), match["size"] or "default")


def _past_range(case_id: str, part: str, digits: str, largest: int) -> str:
    """The refusal of an id whose ``part`` (seed, batch, index) no run can have drawn."""
    shown = digits if len(digits) <= 24 else f"{digits[:12]}...({len(digits)} digits)"
    if part == "index":
        return (f"{case_id[:200]!r}: no batch holds index {shown}: a batch draws at most {BATCH_SIZE} cases, so the "
                f"largest index is {largest:03d}; {WHERE_IDS}")
    return f"{case_id[:200]!r}: {part} {shown} is past the largest a run can have ({largest}); {WHERE_IDS}"


def batch_seed(fid: FuzzId) -> int:
    """The Hypothesis seed of the batch ``fid`` belongs to (its index does not matter)."""
    text = f"ep-testbed-fuzz/{fid.op}/{fid.size}/{fid.seed}/{fid.batch}"
    return int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)


@functools.lru_cache(maxsize=None)
def strategy(op: str, size: str) -> Any:
    """The operator's Hypothesis strategy (built once per process: building one is costly)."""
    return cases_module(spec_named(op).dml_type).fuzz_strategy(op, size)


def hypothesis_settings(max_examples: int, shrink: bool = False) -> Any:
    """Settings of a batch run: no example database (a batch is its seed), no deadline or
    health checks (a draw is not a test), quiet; ``shrink`` adds Hypothesis's shrink phase."""
    from hypothesis import HealthCheck, Phase, Verbosity, settings

    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]
    return settings(max_examples=max_examples, database=None, phases=phases, deadline=None,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False,
                    derandomize=False)


def run_batch(fid: FuzzId, test: Callable[[FuzzDraw], None], count: int = BATCH_SIZE, shrink: bool = False) -> None:
    """Run Hypothesis over ``fid``'s batch with ``test`` as the test function (what
    ``draw_batch`` collects with, and what the shrinker replays with)."""
    from hypothesis import given, seed

    def example(draw: FuzzDraw) -> None:
        test(draw)

    with _no_local_constants():
        hypothesis_settings(count, shrink)(seed(batch_seed(fid))(given(strategy(fid.op, fid.size))(example)))()


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Keep Hypothesis from mixing in literals it harvests from the local (non-site-packages)
    modules the process has imported: which modules those are differs between the drawing
    process, the CLI and a test run, and would make one seed draw different batches. Hypothesis
    offers no setting for it, so its provider's hook is swapped for the time of a batch (when a
    Hypothesis version lacks the hook, there is nothing to swap and its draws are what they are).
    pyproject.toml pins Hypothesis to the releases where the hook is as expected, and
    tests/fuzz/test_fuzz_hypothesis_hook.py fails naming the hook and the version when it moves."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        yield
        return
    hook, cache, empty = (getattr(providers, name, None) for name in ("_get_local_constants", "CONSTANTS_CACHE",
                                                                       "Constants"))
    if hook is None or cache is None or empty is None:
        yield
        return
    nothing = empty()
    providers._get_local_constants = lambda: nothing
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = hook
        cache.cache.clear()


class _Enough(Exception):
    """What a batch's collector raises once it holds the draws asked for (``draw_batch``'s ``first``)."""


def draw_batch(op: str, run_seed: int, batch: int, size: str = "default", count: int = BATCH_SIZE,
               first: int | None = None) -> list[FuzzCase]:
    """The ``count`` cases of one batch (fewer when Hypothesis runs out of distinct draws); with
    ``first``, only the first ``first`` of them: the run stops at that draw (its test function
    raises there, and again when Hypothesis replays it), so what it drew up to there is what the
    whole batch begins with, for none of the later draws' cost."""
    draws: list[FuzzDraw] = []
    if first is None or first >= count:
        run_batch(FuzzId(op, run_seed, batch, 0, size), draws.append, count)
    else:
        def collect(draw: FuzzDraw) -> None:
            if len(draws) < first:
                draws.append(draw)
            if len(draws) >= first:
                raise _Enough

        try:
            run_batch(FuzzId(op, run_seed, batch, 0, size), collect, count)
        except _Enough:
            pass
    return [fuzz_case(FuzzId(op, run_seed, batch, i, size), d) for i, d in enumerate(draws)]


def draw_round(ops: Sequence[str], run_seed: int, number: int, size: str = "default",
               limit: int | None = None) -> list[FuzzCase]:
    """Round ``number`` of a run: batch ``number`` of each of ``ops``, interleaved (``interleave``).
    Ids stay those of the batches, so ``replay`` redraws any case of a round from its id alone.
    ``limit``: only the round's first ``limit`` cases, each batch drawn only as far as they reach
    (``draw_batch``'s ``first``; every batch whole again when one of them ran out of draws before)."""
    if limit is None:
        return interleave([draw_batch(op, run_seed, number, size) for op in ops])
    each = -(-limit // max(1, len(ops)))
    batches = [draw_batch(op, run_seed, number, size, first=each) for op in ops]
    if any(len(b) < min(each, BATCH_SIZE) for b in batches):  # one ran out: the others' later draws count
        batches = [draw_batch(op, run_seed, number, size) for op in ops]
    return interleave(batches)[:limit]


def interleave(batches: Sequence[Sequence[Any]]) -> list[Any]:
    """The items of ``batches`` taken in turn, one from each batch that has one left
    (``[[a0, a1, a2], [b0]]`` -> ``[a0, b0, a1, a2]``): the same order wherever it runs."""
    return [item for row in itertools.zip_longest(*batches, fillvalue=_NONE) for item in row if item is not _NONE]


#: A filler ``interleave`` drops (no drawn case is this object).
_NONE = object()


def fuzz_case(fid: FuzzId, draw: FuzzDraw, case_id: str | None = None) -> FuzzCase:
    """The case of ``draw`` drawn at ``fid`` (``case_id`` overrides its id: shrink candidates)."""
    values, regions = fuzz_recipe(draw.recipe)
    tags = {"dtype": draw.desc.input_tensor.data_type.lower(), "family": FUZZ_FAMILY, "values": values,
            "elements": str(desc_elements(draw.desc))}
    if draw.recipe.count(":") > 1:
        tags["regions"] = regions
    return FuzzCase(id=case_id or fid.text(), op=spec_named(fid.op).dml_type, desc=draw.desc, seed=fid.seed,
                    opset=draw.opset, tags=tags, recipe=draw.recipe, value_seed=draw.value_seed)


def replay(case_id: str) -> FuzzCase:
    """The fuzzed case ``case_id`` names, redrawn: one batch of at most ``BATCH_SIZE`` draws
    (ValueError for an id that is not one, or an index past what its batch drew)."""
    fid = parse_id(case_id)  # refuses an index past MAX_INDEX before anything is drawn
    cases = _redrawn(fid.op, fid.seed, fid.batch, fid.size)
    if fid.index >= len(cases):
        raise ValueError(f"{case_id}: batch {fid.batch} drew only {len(cases)} cases (indices 000 to "
                         f"{len(cases) - 1:03d}); {WHERE_IDS}")
    return cases[fid.index]


@functools.lru_cache(maxsize=4)
def _redrawn(op: str, run_seed: int, batch: int, size: str) -> tuple[FuzzCase, ...]:
    """``draw_batch`` kept for the next replay from the same batch (the CLI checks every
    ``--replay`` id before the run redraws it; several ids of one batch cost one draw)."""
    return tuple(draw_batch(op, run_seed, batch, size))


def draw_key(draw: FuzzDraw) -> str:
    """A key equal for equal draws (``repr``: a NaN field compares unequal to itself)."""
    return repr(draw)


def draw_of(case: FuzzCase) -> FuzzDraw:
    """The ``FuzzDraw`` a fuzzed case was made from."""
    return FuzzDraw(case.desc, case.recipe, case.value_seed, case.opset)
