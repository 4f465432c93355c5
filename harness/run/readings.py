"""Which readings of the reference reproduce a failing case's differing elements: the evidence a
``known`` rests on (``harness.core.expectations``, DECISIONS.md READ-1).

Only readings whose departure can show on the case's inputs are tried (``Reading.can_show``; the
others are listed under ``cannot_show``): where a reading computes what the primary reading
computes, it cannot tell an EP's departure from a fault of the primary reading's own code.

A case fails the primary reading at some elements (``Comparison.failing``). The expectations that
hold for it name readings (``expectations.readings_to_try``); ``explain`` computes each with the
same kernel, precision model and bounds (``reference.execute_reading``), compares the EP's outputs
with it under the same rule (``case_steps.compare``), and gives each failing element to the first
set of readings, in the order tried, whose outputs it lies within: each reading alone (the
expectations' order), then all of them combined (leaving out, in order, each that sets a rule an
earlier one already set otherwise: no kernel computes both), then each pair, then each triple
that can be combined, up to ``MAX_SETS`` sets in all. It stops as soon as every element
has one. The line's ``readings`` record says what was tried, how many elements each set explains
(``"a+b"`` for a combination), how many none does, and the first of those with what the readings
give there. Readings are computed only for a case that failed on element values and has
expectations naming readings: a passing case costs nothing.

Where the operator's output rows are independent (an ROI operator's regions,
``reference.select_regions``), each set is computed for the rows that still hold an element no
earlier set explained, and compared there: row for row the same outputs, bounds and comparison
as computing it whole, for the regions that are looked at only (on 800 fuzzed cases of the CPU
EP, 1,470 of the 2,442 rows the sets computed whole).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ...reference import ReadingError, execute_reading, readings_of, select_regions
from ...reference.readings import Reading, combine
from ...reference.registry import spec_for
from ..core.compare import Comparison
from ..core.results import jsonable
from ..eps.ep_run import first_line
from .case_steps import CaseConfig, Prepared, compare

#: At most this many sets of readings are computed for one case (each one run of the kernel with
#: its bounds): the singles, all together, then pairs and triples while the budget lasts.
MAX_SETS = 48
#: Sets larger than this are tried only as "all together".
MAX_SET_SIZE = 3


def explain(case: Any, prepared: Prepared, actual: dict[str, np.ndarray], config: CaseConfig,
            names: Sequence[str]) -> dict[str, Any] | None:
    """The ``readings`` record of a case whose ``actual`` outputs failed its comparison (module
    docstring); None when nothing is to be explained (no element failed, a structural failure, or no
    reading of this operator named). Never raises for a reading: one that cannot be computed for
    these inputs is recorded under ``could_not`` and explains nothing."""
    primary = compare(case, prepared.expected, actual, config, prepared.inputs, prepared.reference)
    own = {r.name: r for r in readings_of(case.desc)}
    named = [n for n in dict.fromkeys(names) if n in own]
    if primary.problems or not primary.mismatches or not named:
        return None
    shows = [n for n in named if own[n].can_show(case.desc, prepared.inputs)]
    left = {name: mask.copy() for name, mask in primary.failing.items() if mask.any()}
    record: dict[str, Any] = {"tried": [], "mismatches": primary.mismatches, "explained": {}, "unexplained": 0}
    if len(shows) < len(named):
        record["cannot_show"] = [n for n in named if n not in shows]
    rules = spec_for(case.desc).rules
    singles: dict[str, _Part] = {}
    for combo in _sets(shows, lambda combo: _combinable(rules, [own[n] for n in combo])):
        if not any(mask.any() for mask in left.values()):
            break
        key = "+".join(combo)
        record["tried"].append(key)
        part = _Part.of(case.desc, prepared.inputs, actual, left)
        try:
            expected = execute_reading(part.desc, part.inputs, list(combo), config.precision_model)
        except Exception as exc:  # noqa: BLE001 - a reading that cannot run explains nothing; the case stands
            record.setdefault("could_not", {})[key] = f"{type(exc).__name__}: {first_line(exc)}"[:300]
            continue
        part.outputs = expected.outputs
        if len(combo) == 1:
            singles[key] = part
        comparison = compare(part, expected.outputs, part.actual, config, part.inputs, expected)
        found = part.explained(comparison, left)
        if found:
            record["explained"][key] = found
    record["unexplained"] = int(sum(int(mask.sum()) for mask in left.values()))
    if record["unexplained"]:
        record["first_unexplained"] = _first(left, prepared.expected, actual, singles)
    return record


@dataclass
class _Part:
    """What one set of readings is computed and compared on: the case's desc and inputs, or,
    where its output rows are independent, those of the rows still ``left`` alone (``rows``;
    None: every row). ``desc`` is what ``case_steps.compare`` reads of a case; ``outputs`` are the
    set's, once computed."""

    desc: Any
    inputs: dict[str, np.ndarray]
    actual: dict[str, np.ndarray]
    rows: np.ndarray | None = None
    outputs: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, desc: Any, inputs: dict[str, np.ndarray], actual: dict[str, np.ndarray],
           left: dict[str, np.ndarray]) -> "_Part":
        """The part to compute next: the rows of ``left`` (flat masks over ``actual``'s outputs)
        still holding an element; every row when the operator's rows are not independent, or
        when every row is left."""
        shapes = {name: np.shape(a) for name, a in actual.items()}
        counts = {shape[0] if shape else -1 for shape in shapes.values()}
        if len(counts) != 1 or -1 in counts or not set(left) <= set(shapes):
            return cls(desc, inputs, actual)
        held = [mask.reshape(shapes[name][0], -1).any(axis=1) for name, mask in left.items()]
        rows = np.flatnonzero(np.logical_or.reduce(held))
        if len(rows) == counts.pop():
            return cls(desc, inputs, actual)
        selected = select_regions(desc, inputs, rows)
        if selected is None:
            return cls(desc, inputs, actual)
        return cls(selected[0], selected[1], {name: np.asarray(a)[rows] for name, a in actual.items()}, rows)

    def explained(self, comparison: Comparison, left: dict[str, np.ndarray]) -> int:
        """``_explained`` for this part's rows of ``left`` (flat masks; the entries are replaced)."""
        if self.rows is None:
            return _explained(comparison, left)
        shaped = {name: mask.reshape(-1, *np.shape(self.actual[name])[1:]) for name, mask in left.items()}
        mine = {name: shaped[name][self.rows].ravel() for name in left}
        found = _explained(comparison, mine)
        for name, mask in mine.items():
            whole = shaped[name].copy()
            whole[self.rows] = mask.reshape(whole[self.rows].shape)
            left[name] = whole.ravel()
        return found

    def value(self, name: str, index: tuple[int, ...]) -> Any:
        """The set's output ``name`` at ``index`` of the whole output (a row this part computed)."""
        if self.rows is not None:
            index = (int(np.searchsorted(self.rows, index[0])), *index[1:])
        return jsonable(np.asarray(self.outputs[name])[index].item())


def _combinable(rules: Any, readings: Sequence[Reading]) -> bool:
    """Whether ``readings`` can hold together (no two set one rule to different values)."""
    try:
        combine(rules, readings)
    except ReadingError:
        return False
    return True


def _sets(names: Sequence[str], combinable: Callable[[tuple[str, ...]], bool]) -> Iterator[tuple[str, ...]]:
    """Each reading alone, then as many as can be combined, in order, then each combinable pair and
    triple, at most ``MAX_SETS`` sets in all."""
    together: tuple[str, ...] = ()
    for name in names:
        if combinable(together + (name,)):
            together += (name,)
    sizes = range(2, min(MAX_SET_SIZE, len(names) - 1) + 1)
    larger = (s for size in sizes for s in itertools.combinations(names, size) if s != together and combinable(s))
    ordered = itertools.chain(((n,) for n in names), [together] if len(together) > 1 else [], larger)
    yield from itertools.islice(ordered, MAX_SETS)


def _explained(comparison: Comparison, left: dict[str, np.ndarray]) -> int:
    """How many of the elements still ``left`` (masks, updated in place) ``comparison`` accepts."""
    if comparison.problems:
        return 0
    count = 0
    for name, mask in left.items():
        failing = comparison.failing.get(name)
        if failing is None or failing.shape != mask.shape:
            continue
        hit = mask & ~failing
        count += int(hit.sum())
        mask &= ~hit
    return count


def _first(left: dict[str, np.ndarray], expected: dict[str, np.ndarray], actual: dict[str, np.ndarray],
           singles: dict[str, _Part]) -> dict[str, Any]:
    """The first element no reading explains: where, what the primary reading expects, what the EP
    gave, and what each single reading gives there (its row was left, so every single computed it)."""
    name = next(n for n, mask in left.items() if mask.any())
    flat = int(np.flatnonzero(left[name])[0])
    shape = np.shape(expected[name])
    index = tuple(int(i) for i in np.unravel_index(flat, shape))
    value = {key: part.value(name, index) for key, part in singles.items() if name in part.outputs}
    return {"output": name, "index": list(index),
            "expected": jsonable(np.asarray(expected[name]).ravel()[flat].item()),
            "actual": jsonable(np.asarray(actual[name]).ravel()[flat].item()), "readings": value}


__all__ = ["MAX_SETS", "MAX_SET_SIZE", "explain"]
