"""The summary matrices: outcome counts per (op, dtype) and per (op, field value).

A case's "fields" are its catalog tags (family, ...) plus every DML field the mapper flagged, with
its value (each result line carries the mapper's flags, one per desc field: ``ReductionFunction``,
``SpatialScaleX``, ``Strides`` ...), so the second matrix shows where failures cluster by DML field
without reading any desc file.  A cell is a Counter of outcomes plus the filter that lists its
cases in the case table.  Fields that are constant within an op, or take more than
``MAX_TAG_VALUES`` values (sizes, ids), say nothing about clustering and are left out, as are
values longer than ``MAX_TAG_VALUE_LENGTH`` (a "why" sentence).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlencode

from ..harness.core.results import REPORT_ORDER
from .rendering import short_op
from .results import CaseResult

MAX_TAG_VALUES = 12
#: A tag value longer than this is a sentence (a "why" note), not a field value.
MAX_TAG_VALUE_LENGTH = 32
#: Tags that are already a matrix axis or are not a field of the desc.
IGNORED_TAGS = frozenset({"dtype"})


@dataclass
class Cell:
    counts: Counter
    link: str

    @property
    def total(self) -> int:
        """Cases in the cell."""
        return sum(self.counts.values())

    @property
    def worst(self) -> str | None:
        """The most severe outcome present (``REPORT_ORDER``; it colours the cell)."""
        for outcome in REPORT_ORDER:
            if self.counts.get(outcome):
                return outcome
        return next(iter(self.counts), None)

    @property
    def parts(self) -> list[tuple[str, int]]:
        """(outcome, count) in severity order (``REPORT_ORDER``, then unknown outcomes by name),
        for the stacked bar and the cell text."""
        known = [(o, self.counts[o]) for o in REPORT_ORDER if self.counts.get(o)]
        other = [(o, n) for o, n in sorted(self.counts.items()) if o not in REPORT_ORDER]
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
    by_tag: dict[str, list[tuple[str, list[tuple[str, Cell]]]]]  # op -> [(field, [(value, cell)])]

    field_keys: dict[str, set[str]]  # op -> the fields its rows filter on

    def keys_for(self, op: str) -> set[str]:
        """The fields shown for ``op`` (the case table needs their values to filter by them)."""
        return self.field_keys.get(op, set())

    def grid(self) -> "Grid":
        """The op x dtype table laid out to fit a page: the longer of the two lists runs down the
        rows (a run has few operators and up to a dozen data types; as columns, a dozen types
        would be wider than a laptop screen), the per-operator totals as the last column or row."""
        ops_down = len(self.ops) >= len(self.dtypes)
        if ops_down:
            rows = [(short_op(op), [self.cells.get((op, d)) for d in self.dtypes] + [self.op_totals[op]])
                    for op in self.ops]
            return Grid("operator", [*self.dtypes, "all types"], rows, [], True)
        rows = [(d, [self.cells.get((op, d)) for op in self.ops]) for d in self.dtypes]
        return Grid("type", [short_op(op) for op in self.ops], rows, [self.op_totals[op] for op in self.ops], False)


@dataclass
class Grid:
    """A matrix as the page draws it: header labels, labelled rows of cells (None: no case),
    and the per-operator totals as the rows' last cell (``ops_down``) or as a last row."""

    corner: str
    columns: list[str]
    rows: list[tuple[str, list[Cell | None]]]
    total_row: list[Cell]
    ops_down: bool


def _sort_key(value: str) -> tuple:
    """Numbers in numeric order first, then other text alphabetically."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def _text(value: object) -> str:
    """A field value as matrix text: lists as ``[a, b]``, None as ``null``."""
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


def case_fields(case: CaseResult) -> dict[str, str]:
    """Tags (except dtype) and flagged DML fields of one case, as text; tags win on a clash
    (worked out once per case: the matrix and the table both read them)."""
    def compute() -> dict[str, str]:
        fields = {str(f["field"]): _text(f.get("value")) for f in case.flags
                  if isinstance(f, dict) and f.get("field")}
        fields.update({k: v for k, v in case.tags.items() if k not in IGNORED_TAGS})
        return fields

    fields: dict[str, str] = case.derived("fields", compute)
    return fields


def _merge_identical(rows: list[tuple[str, list[tuple[str, Cell]]]]) -> list[tuple[str, list[tuple[str, Cell]]]]:
    """Show fields that always agree (InputTensor.DataType, OutputTensor.DataType) as one row."""
    merged: list[tuple[str, list[tuple[str, Cell]]]] = []
    seen: dict[tuple, int] = {}
    for key, cells in rows:
        signature = tuple((v, tuple(sorted(c.counts.items()))) for v, c in cells)
        if signature in seen:
            i = seen[signature]
            merged[i] = (merged[i][0] + " = " + key, merged[i][1])
        else:
            seen[signature] = len(merged)
            merged.append((key, cells))
    return merged


def build_matrix(cases: list[CaseResult]) -> Matrix:
    """The op x dtype cells, op totals and per-op field rows of ``cases`` (see the module docstring)."""
    ops = sorted({c.op for c in cases})
    dtypes = sorted({c.dtype for c in cases})
    counts: dict[tuple[str, str], Counter] = {}
    op_counts: dict[str, Counter] = {op: Counter() for op in ops}
    tag_counts: dict[str, dict[str, dict[str, Counter]]] = {op: {} for op in ops}
    for c in cases:
        counts.setdefault((c.op, c.dtype), Counter())[c.outcome] += 1
        op_counts[c.op][c.outcome] += 1
        for key, value in case_fields(c).items():
            tag_counts[c.op].setdefault(key, {}).setdefault(value, Counter())[c.outcome] += 1
    cells = {k: Cell(v, filter_link(op=short_op(k[0]), dtype=k[1])) for k, v in counts.items()}
    by_tag: dict[str, list[tuple[str, list[tuple[str, Cell]]]]] = {}
    field_keys: dict[str, set[str]] = {}
    for op in ops:
        rows = []
        # catalog tags first (family ...), then DML fields in the mapper's order
        tag_keys = {k for c in cases if c.op == op for k in c.tags}
        for key in sorted(tag_counts[op], key=lambda k: k not in tag_keys):
            values = tag_counts[op][key]
            if not 2 <= len(values) <= MAX_TAG_VALUES or max(map(len, values)) > MAX_TAG_VALUE_LENGTH:
                continue
            rows.append((key, [(v, Cell(values[v], filter_link(op=short_op(op), tag=f"{key}={v}")))
                               for v in sorted(values, key=_sort_key)]))
        field_keys[op] = {key for key, _ in rows}
        by_tag[op] = _merge_identical(rows)
    return Matrix(ops, dtypes, cells, {op: Cell(op_counts[op], filter_link(op=short_op(op))) for op in ops}, by_tag,
                  field_keys)
