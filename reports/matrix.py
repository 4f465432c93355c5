"""The summary matrices: outcome counts per (op, dtype) and per (op, tag value).

A cell is a Counter of outcomes plus the filter that lists its cases in the case table.  Tags that
are constant within an op, or take more than ``MAX_TAG_VALUES`` values (a per-case id, a seed),
say nothing about where failures cluster and are left out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlencode

from .rendering import short_op
from .results import OUTCOMES, CaseResult

MAX_TAG_VALUES = 12
#: Tags that are already a matrix axis or are not a field of the desc.
IGNORED_TAGS = frozenset({"dtype"})


@dataclass
class Cell:
    counts: Counter
    link: str

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def worst(self) -> str | None:
        """The most severe outcome present (it colours the cell)."""
        for outcome in OUTCOMES:
            if self.counts.get(outcome):
                return outcome
        return next(iter(self.counts), None)

    @property
    def parts(self) -> list[tuple[str, int]]:
        """(outcome, count) in severity order, for the stacked bar and the cell text."""
        known = [(o, self.counts[o]) for o in OUTCOMES if self.counts.get(o)]
        other = [(o, n) for o, n in sorted(self.counts.items()) if o not in OUTCOMES]
        return known + other


def filter_link(**criteria: str) -> str:
    """Fragment that report.js reads to filter the case table (``#cases?op=..&dtype=..``)."""
    return "#cases?" + urlencode(criteria)


@dataclass
class Matrix:
    ops: list[str]
    dtypes: list[str]
    cells: dict[tuple[str, str], Cell]
    op_totals: dict[str, Cell]
    by_tag: dict[str, list[tuple[str, list[tuple[str, Cell]]]]]  # op -> [(tag, [(value, cell)])]


def _sort_key(value: str) -> tuple:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def build_matrix(cases: list[CaseResult]) -> Matrix:
    ops = sorted({c.op for c in cases})
    dtypes = sorted({c.dtype for c in cases})
    counts: dict[tuple[str, str], Counter] = {}
    op_counts: dict[str, Counter] = {op: Counter() for op in ops}
    tag_counts: dict[str, dict[str, dict[str, Counter]]] = {op: {} for op in ops}
    for c in cases:
        counts.setdefault((c.op, c.dtype), Counter())[c.outcome] += 1
        op_counts[c.op][c.outcome] += 1
        for key, value in c.tags.items():
            if key in IGNORED_TAGS:
                continue
            tag_counts[c.op].setdefault(key, {}).setdefault(value, Counter())[c.outcome] += 1
    cells = {k: Cell(v, filter_link(op=short_op(k[0]), dtype=k[1])) for k, v in counts.items()}
    by_tag: dict[str, list[tuple[str, list[tuple[str, Cell]]]]] = {}
    for op in ops:
        rows = []
        for key in sorted(tag_counts[op]):
            values = tag_counts[op][key]
            if not 2 <= len(values) <= MAX_TAG_VALUES:
                continue
            rows.append((key, [(v, Cell(values[v], filter_link(op=short_op(op), tag=f"{key}={v}")))
                               for v in sorted(values, key=_sort_key)]))
        by_tag[op] = rows
    return Matrix(ops, dtypes, cells, {op: Cell(op_counts[op], filter_link(op=short_op(op))) for op in ops}, by_tag)
