"""The checks every operator's validation is made of, each raising ``DescError`` naming the field.

An operator module states its page's rules with these (``check_tensor`` for dimension counts,
sizes and data types, ``same_type`` for "must have the same DataType", ``expect_sizes`` for
sizes the page derives, ``finite`` for FLOAT fields); ``validation.validate`` runs them.

The reference's own limits are checked here too, before anything is allocated: no tensor of a
desc (``check_tensor``), and no array or loop a kernel would build for it (``within_cap``, used
by the operators' validation with the sizes they compute), may exceed the element cap
(``max_elements``: 2**28 by default; ``element_cap`` raises it for a block, as
``ep-testbed --limit elements=N`` does). Python-level loops are held to ``max_loop`` iterations
and vectorised work to ``max_work`` element-steps, both derived from the same cap. These are
limits of this reference on one machine, not DirectML rules, and their messages say so.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Iterable, Iterator, Mapping, Optional, Sequence

from .descs import TensorDesc
from .errors import DescError

#: Per tensor member, the data types a feature level allows.
TypeTable = Mapping[str, tuple[str, ...]]


def parse_feature_level(level: str | float) -> tuple[int, int]:
    """``"5.0"`` -> ``(5, 0)``; a DescError for anything that is not ``MAJOR.MINOR``."""
    text = str(level)
    parts = text.split(".")
    if len(parts) == 2 and all(p.isdigit() and len(p) <= 3 for p in parts):
        return int(parts[0]), int(parts[1])
    raise DescError("feature_level", level, 'a DirectML feature level "MAJOR.MINOR", e.g. "3.0" or "5.0"')


def types_at(op_type: str, support: Sequence[tuple[str, TypeTable]], feature_level: str) -> TypeTable:
    """The type table of ``support`` (newest level first) that holds at ``feature_level``."""
    level = parse_feature_level(feature_level)
    for table_level, table in support:
        if level >= parse_feature_level(table_level):
            return table
    introduced = support[-1][0]
    raise DescError("feature_level", feature_level,
                    f"{op_type} was introduced in DML_FEATURE_LEVEL_{introduced.replace('.', '_')}")


#: The default element cap: no tensor or intermediate of more elements is allocated.
DEFAULT_MAX_ELEMENTS = 2**28
_ELEMENT_CAP: contextvars.ContextVar[int] = contextvars.ContextVar("ep_testbed_element_cap",
                                                                   default=DEFAULT_MAX_ELEMENTS)


def max_elements() -> int:
    """The element cap in force (``DEFAULT_MAX_ELEMENTS`` unless ``element_cap`` set another)."""
    return _ELEMENT_CAP.get()


def max_loop() -> int:
    """The most iterations a kernel's Python-level loop may take: the element cap / 256 (2**20)."""
    return max(1, max_elements() // 256)


def max_work() -> int:
    """The most element-steps of vectorised work one desc may take: 16 x the element cap (2**32)."""
    return 16 * max_elements()


@contextlib.contextmanager
def element_cap(cap: int) -> Iterator[int]:
    """Make ``cap`` the element cap inside the block (``max_loop``/``max_work`` follow it)."""
    token = _ELEMENT_CAP.set(int(cap))
    try:
        yield cap
    finally:
        _ELEMENT_CAP.reset(token)


def within_cap(op: str, member: str, value: object, count: int, what: str = "elements",
               cap: int | None = None) -> None:
    """DescError naming ``member`` when ``count`` (elements, iterations or steps the reference
    would allocate or run for it) exceeds ``cap`` (default: ``max_elements``)."""
    cap = max_elements() if cap is None else cap
    if count > cap:
        raise DescError(member, value, f"needs {count} {what}; this reference computes at most {cap} (a limit of the "
                        "reference, not a DirectML rule: ep-testbed --limit elements=N raises it)", op)


def check_tensor(op: str, member: str, t: Optional[TensorDesc], types: TypeTable, dims: Iterable[int]) -> None:
    """A required tensor: its dimension count among ``dims``, sizes >= 1, one stride per
    dimension, a data type ``types`` allows for ``member``, and at most ``max_elements``."""
    if t is None:
        raise DescError(member, None, "required tensor", op)
    dims = tuple(dims)
    if t.dimension_count not in dims:
        allowed = f"{dims[0]}" if len(dims) == 1 else f"{dims[0]} to {dims[-1]}"
        raise DescError(f"{member}.Sizes", list(t.sizes), f"must have {allowed} dimensions", op)
    for i, size in enumerate(t.sizes):
        if size < 1:
            raise DescError(f"{member}.Sizes[{i}]", size, "sizes must be at least 1", op)
    if t.strides is not None and len(t.strides) != len(t.sizes):
        raise DescError(f"{member}.Strides", list(t.strides), f"one stride per dimension ({len(t.sizes)})", op)
    if t.data_type not in types[member]:
        raise DescError(f"{member}.DataType", t.data_type,
                        f"one of {', '.join(types[member])} at this feature level", op)
    within_cap(op, f"{member}.Sizes", list(t.sizes), t.element_count)


def same_type(op: str, members: Mapping[str, TensorDesc]) -> None:
    """Every tensor of ``members`` has the first one's data type."""
    (first, t0), *rest = members.items()
    for member, t in rest:
        if t.data_type != t0.data_type:
            raise DescError(f"{member}.DataType", t.data_type,
                            f"must have the same DataType as {first} ({t0.data_type})", op)


def finite(op: str, member: str, value: float) -> None:
    """A FLOAT field that must be a finite float32 (a larger magnitude overflows to infinity)."""
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        raise DescError(member, value, f"a finite number that float32 holds (|x| <= {FLOAT32_MAX:.6g})", op)


def float32_value(op: str, member: str, value: float) -> None:
    """A FLOAT field that may be infinite or NaN when given so, but not a finite number that
    float32 cannot hold (it would silently become infinity)."""
    if math.isfinite(value) and abs(value) > FLOAT32_MAX:
        raise DescError(member, value, f"a number float32 holds (|x| <= {FLOAT32_MAX:.6g}); a larger one overflows "
                        "to infinity", op)


def expect_sizes(op: str, member: str, actual: Sequence[int], expected: Sequence[int], why: str) -> None:
    """``member.Sizes`` equals what the page derives (``why`` says how)."""
    if tuple(actual) != tuple(expected):
        raise DescError(f"{member}.Sizes", list(actual), f"must be {list(expected)} ({why})", op)


#: The largest finite float32: DirectML's FLOAT fields are float32.
FLOAT32_MAX = 3.4028234663852886e38
