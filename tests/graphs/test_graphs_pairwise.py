"""The all-pairs grid generator (graphs/pairwise.py) that the catalog's grid families are drawn from."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ep_testbed.graphs.pairwise import all_pairs

GRIDS = st.lists(st.integers(1, 5), min_size=2, max_size=6).map(
    lambda sizes: [(f"p{i}", list(range(n))) for i, n in enumerate(sizes)])


@settings(max_examples=30)
@given(GRIDS)
def test_every_pair_of_values_is_in_some_row(params):
    rows = all_pairs(params)
    for (a, va), (b, vb) in itertools.combinations(params, 2):
        held = {(row[a], row[b]) for row in rows}
        assert held == set(itertools.product(va, vb)), (a, b)
    assert rows == all_pairs(params)  # the same grid every time: catalog ids depend on it


@settings(max_examples=30)
@given(GRIDS, st.integers(2, 4))
def test_rows_obey_the_rule_and_hold_every_pair_a_valid_row_can(params, modulus):
    def valid(row):
        return sum(row.values()) % modulus != 0

    rows = all_pairs(params, valid=valid)
    assert all(valid(row) for row in rows)
    names = [n for n, _ in params]
    everything = [dict(zip(names, values)) for values in itertools.product(*(v for _, v in params))]
    for a, b in itertools.combinations(names, 2):
        possible = {(row[a], row[b]) for row in everything if valid(row)}
        held = {(row[a], row[b]) for row in rows}
        # a pair is dropped only after 440 random rows holding it were all invalid: with at
        # least every other row valid here, that does not happen
        assert held == possible, (a, b)
