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
    names = [n for n, _ in params]
    values = [list(v) for _, v in params]
    valid = valid or (lambda row: True)
    count = len(names)
    pairs = list(itertools.combinations(range(count), 2))
    # uncovered[i, j][a, b]: the pair (names[i] = values[i][a], names[j] = values[j][b]) is not yet in a row
    uncovered = {(i, j): np.ones((len(values[i]), len(values[j])), dtype=bool) for i, j in pairs}
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []

    def gain(choice: list[int]) -> int:
        return sum(bool(uncovered[i, j][choice[i], choice[j]]) for i, j in pairs)

    def gain_by_value(choice: list[int], k: int) -> np.ndarray:
        """For each value of parameter k: the uncovered pairs it would add with the rest of ``choice``."""
        total = np.zeros(len(values[k]), dtype=np.int64)
        for j in range(count):
            if j < k:
                total += uncovered[j, k][choice[j], :]
            elif j > k:
                total += uncovered[k, j][:, choice[j]]
        return total

    def first_uncovered() -> Optional[tuple[int, int, int, int]]:
        """The smallest uncovered (i, a, j, b), in tuple order."""
        for i in range(count):
            for a in range(len(values[i])):
                for j in range(i + 1, count):
                    row = uncovered[i, j][a]
                    if row.any():
                        return i, a, j, int(np.argmax(row))
        return None

    def as_row(choice: list[int]) -> dict[str, Any]:
        return {names[i]: values[i][choice[i]] for i in range(count)}

    stale = 0
    while (target := first_uncovered()) is not None and stale < 50:
        i0, a0, j0, b0 = target
        best, best_gain = None, 0
        for _ in range(candidates):
            choice = [int(rng.integers(len(v))) for v in values]
            choice[i0], choice[j0] = a0, b0
            for k in range(count):  # local improvement: the value adding most pairs, the first on ties
                if k not in (i0, j0):
                    choice[k] = int(np.argmax(gain_by_value(choice, k)))
            if not valid(as_row(choice)):
                continue
            g = gain(choice)
            if g > best_gain:
                best, best_gain = choice, g
        if best is None:  # the improved rows were all invalid: plain random rows holding the pair
            for _ in range(candidates * 10):
                choice = [int(rng.integers(len(v))) for v in values]
                choice[i0], choice[j0] = a0, b0
                if valid(as_row(choice)) and gain(choice) > best_gain:
                    best, best_gain = choice, gain(choice)
        if best is None:
            uncovered[i0, j0][a0, b0] = False  # no valid row holds this pair
            stale += 1
            continue
        stale = 0
        rows.append(as_row(best))
        for i, j in pairs:
            uncovered[i, j][best[i], best[j]] = False
    return rows
