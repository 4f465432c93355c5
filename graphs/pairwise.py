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
    uncovered = {(i, a, j, b) for i, j in itertools.combinations(range(len(names)), 2)
                 for a in range(len(values[i])) for b in range(len(values[j]))}
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []

    def gain(choice):
        return sum((i, choice[i], j, choice[j]) in uncovered for i, j in itertools.combinations(range(len(names)), 2))

    def as_row(choice):
        return {names[i]: values[i][choice[i]] for i in range(len(names))}

    stale = 0
    while uncovered and stale < 50:
        i0, a0, j0, b0 = min(uncovered)
        best, best_gain = None, 0
        for _ in range(candidates):
            choice = [int(rng.integers(len(v))) for v in values]
            choice[i0], choice[j0] = a0, b0
            for k in range(len(names)):  # local improvement
                if k in (i0, j0):
                    continue
                options = []
                for v in range(len(values[k])):
                    trial = list(choice)
                    trial[k] = v
                    options.append((gain(trial), -v, v))
                choice[k] = max(options)[2]
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
            uncovered.discard((i0, a0, j0, b0))  # no valid row holds this pair
            stale += 1
            continue
        stale = 0
        rows.append(as_row(best))
        for i, j in itertools.combinations(range(len(names)), 2):
            uncovered.discard((i, best[i], j, best[j]))
    return rows
