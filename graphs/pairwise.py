"""All-pairs (pairwise) covering of a parameter grid, deterministic."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Optional, Sequence

import numpy as np


def all_pairs(params: Sequence[tuple[str, Sequence[Any]]], valid: Optional[Callable[[dict], bool]] = None,
              candidates: int = 40, seed: int = 12345) -> list[dict[str, Any]]:
    """Rows (dicts name -> value) such that every pair of values of two parameters appears in
    some row that ``valid`` accepts (pairs no valid row can hold are dropped). Greedy: each new
    row is the best of ``candidates`` random rows, then improved one parameter at a time."""
    cover = _Cover(params, valid or (lambda row: True), np.random.default_rng(seed))
    rows: list[dict[str, Any]] = []
    stale = 0
    while (target := cover.first_uncovered()) is not None and stale < 50:
        best = cover.best_row(target, candidates)
        if best is None:
            cover.drop(target)  # no valid row holds this pair
            stale += 1
            continue
        stale = 0
        rows.append(cover.as_row(best))
        cover.mark(best)
    return rows


class _Cover:
    """The pairs not yet in a row: ``uncovered[i, j][a][b]`` is 1 while the pair (parameter i =
    its a-th value, parameter j = its b-th value) is in no row; ``across[i, j][b][a]`` is the
    same flag seen from parameter j. Plain lists of ints, not arrays: the grids are a handful of
    values a parameter, where one NumPy call costs more than the arithmetic it does."""

    def __init__(self, params: Sequence[tuple[str, Sequence[Any]]], valid: Callable[[dict], bool],
                 rng: np.random.Generator):
        self.names = [n for n, _ in params]
        self.values = [list(v) for _, v in params]
        self.sizes = [len(v) for v in self.values]
        self._highs = np.array(self.sizes, dtype=np.int64)
        self.valid, self.rng = valid, rng
        self.count = len(self.names)
        self.pairs = list(itertools.combinations(range(self.count), 2))
        self.uncovered = {(i, j): [[1] * self.sizes[j] for _ in range(self.sizes[i])] for i, j in self.pairs}
        self.across = {(i, j): [[1] * self.sizes[i] for _ in range(self.sizes[j])] for i, j in self.pairs}
        self._validity: dict[tuple[int, ...], bool] = {}

    def is_valid(self, choice: list[int]) -> bool:
        """``valid`` of the row ``choice``, asked once per distinct row (``valid`` is pure)."""
        key = tuple(choice)
        if key not in self._validity:
            self._validity[key] = bool(self.valid(self.as_row(choice)))
        return self._validity[key]

    def gain(self, choice: list[int]) -> int:
        """Uncovered pairs a row of value indices ``choice`` would cover."""
        return sum(self.uncovered[i, j][choice[i]][choice[j]] for i, j in self.pairs)

    def gains(self, choices: list[list[int]]) -> list[int]:
        """``gain`` of each of many rows at once (for hundreds of rows NumPy pays for its calls)."""
        rows = np.asarray(choices, dtype=np.int64).reshape(len(choices), self.count)
        total = np.zeros(len(choices), dtype=np.int64)
        for i, j in self.pairs:
            total += np.asarray(self.uncovered[i, j], dtype=np.int64)[rows[:, i], rows[:, j]]
        return total.tolist()

    def best_value(self, choice: list[int], k: int) -> int:
        """The value of parameter k that adds most uncovered pairs with the rest of ``choice``
        (the first on ties)."""
        rows = [self.uncovered[j, k][choice[j]] for j in range(k)]
        rows += [self.across[k, j][choice[j]] for j in range(k + 1, self.count)]
        total = list(map(sum, zip(*rows))) if rows else [0] * self.sizes[k]
        return total.index(max(total))

    def first_uncovered(self) -> Optional[tuple[int, int, int, int]]:
        """The smallest uncovered (i, a, j, b), in tuple order."""
        for i in range(self.count):
            for a in range(self.sizes[i]):
                for j in range(i + 1, self.count):
                    row = self.uncovered[i, j][a]
                    if 1 in row:
                        return i, a, j, row.index(1)
        return None

    def drop(self, target: tuple[int, int, int, int]) -> None:
        """Forget a pair no valid row can hold."""
        i, a, j, b = target
        self.uncovered[i, j][a][b] = self.across[i, j][b][a] = 0

    def as_row(self, choice: list[int]) -> dict[str, Any]:
        return {self.names[i]: self.values[i][choice[i]] for i in range(self.count)}

    def mark(self, choice: list[int]) -> None:
        for i, j in self.pairs:
            self.uncovered[i, j][choice[i]][choice[j]] = self.across[i, j][choice[j]][choice[i]] = 0

    def _random_holding(self, target: tuple[int, int, int, int], count: int) -> list[list[int]]:
        """``count`` random rows holding ``target``: one draw for all of them, which gives the
        values ``count`` draws of one row each would (the generator fills the array in order)."""
        i0, a0, j0, b0 = target
        choices = self.rng.integers(0, self._highs, size=(count, self.count)).tolist()
        for choice in choices:
            choice[i0], choice[j0] = a0, b0
        return choices

    def best_row(self, target: tuple[int, int, int, int], candidates: int) -> Optional[list[int]]:
        """The valid row holding ``target`` that covers most: the best of ``candidates`` random
        rows, each improved one parameter at a time (the value adding most pairs, the first on
        ties); if those are all invalid, the best of plain random rows. None if none is valid."""
        best, best_gain = None, 0
        free = [k for k in range(self.count) if k not in (target[0], target[2])]
        for choice in self._random_holding(target, candidates):
            for k in free:
                choice[k] = self.best_value(choice, k)
            # gain first: validity (a desc built and checked) is asked only of a row that would win
            if (g := self.gain(choice)) > best_gain and self.is_valid(choice):
                best, best_gain = choice, g
        if best is None:
            rows = self._random_holding(target, candidates * 10)
            for choice, g in zip(rows, self.gains(rows)):
                if g > best_gain and self.is_valid(choice):
                    best, best_gain = choice, g
        return best
