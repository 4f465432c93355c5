"""Readings: the other ways a kernel can read a page, as variants of the reference itself.

The reference computes each operator under one *primary* reading: the page's words, and where the
page is silent or ambiguous, what DirectML.dll itself computes (DECISIONS.md says which and why).
Other kernels read some fields differently: ONNX Runtime's CPU kernels start a max from the lowest
finite float, round a halfway ROI corner away from zero, give a sample outside the input
``0 * X[b, c, 0, 0]``; DirectML starts its maxima at -FLT_MAX where the page says "the maximum of the
elements". Each such departure is a ``Reading``: a name, what it changes, who computes that way and
where that is seen, and the *rules* of the operator's kernel it switches (``Rules``: a frozen
dataclass per operator whose defaults are the primary reading).

A reading is executed by the very kernel that computes the primary reading, with those switches
set (``execute_reading``), under the same precision models and error bounds. So a fault planted in
the shared kernel shows in every reading too, and a reading can only explain an EP's differing
elements by the one departure it names, never by being an independent implementation that happens
to agree with the EP. Readings combine (``combine``): two readings that switch different rules
make one kernel; two that set one rule differently cannot be combined.

Each reading also says where its departure can show at all (``shows``: a predicate over the desc
and the inputs, e.g. "some sample lies exactly on the input's edge", "the input holds a NaN"). A
reading is tried only on a case where it can show: on any other case the two readings compute the
same thing, and a reading "explaining" a difference there would be explaining a fault of the
primary reading's own code.

An expectation (``harness/expectations/*.json``) names the readings that explain a known
divergence; a case is ``known`` only when every element outside the primary reading's tolerance
lies within the tolerance of one of those readings, or of a combination of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .errors import DescError


@dataclass(frozen=True)
class Reading:
    """One departure from the primary reading of an operator.

    ``name`` is what expectations name (lower case, ``-`` separated; one name may be used by several
    operators for the same idea, e.g. ``lowest-start``); ``changes`` the kernel rules it sets (field
    of the operator's ``Rules`` -> value); ``summary`` what it computes, in one sentence; ``held_by``
    who computes that way (e.g. "ONNX Runtime's CPU kernel (roi_pool.cc)", "DirectML.dll 1.15.4,
    observed"); ``source`` where that can be checked (a URL, ``file:line``, a test)."""

    name: str
    changes: tuple[tuple[str, Any], ...]
    summary: str
    held_by: tuple[str, ...]
    source: str
    #: ``shows(desc, arrays)``: whether the departure can change any output of these inputs (None:
    #: always); a cheap, conservative test (it may say yes where nothing differs, never no where
    #: something can).
    shows: Optional[Callable[[Any, Mapping[str, np.ndarray]], bool]] = field(default=None, compare=False)

    def can_show(self, desc: Any, arrays: Mapping[str, np.ndarray]) -> bool:
        """Whether this reading's departure can show on ``desc`` with ``arrays`` (``shows``)."""
        return True if self.shows is None else bool(self.shows(desc, arrays))

    def to_json(self) -> dict[str, Any]:
        """The reading as a result line or a report shows it."""
        return {"name": self.name, "changes": dict(self.changes), "summary": self.summary,
                "held_by": list(self.held_by), "source": self.source}


def reading(name: str, summary: str, held_by: Sequence[str], source: str,
            shows: Optional[Callable[[Any, Mapping[str, np.ndarray]], bool]] = None, **changes: Any) -> Reading:
    """A ``Reading`` whose ``changes`` are the keyword arguments."""
    return Reading(name, tuple(sorted(changes.items())), summary, tuple(held_by), source, shows)


def holds(arrays: Mapping[str, np.ndarray], *classes: str, member: str = "InputTensor") -> bool:
    """Whether the float array ``member`` holds a value of one of ``classes``: ``nan``, ``inf``,
    ``-inf``, ``huge`` (a finite magnitude of 2**120 or more: float32 sums of such values overflow)."""
    values = np.asarray(arrays[member])
    if values.dtype.kind != "f" or values.size == 0:
        return False
    wide = values.astype(np.float64, copy=False)
    tests: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "nan": np.isnan, "inf": np.isposinf, "-inf": np.isneginf,
        "huge": lambda v: np.isfinite(v) & (np.abs(v) >= 2.0**120)}
    return any(bool(tests[c](wide).any()) for c in classes)


class ReadingError(ValueError):
    """A reading name the operator does not have, or readings that set one rule differently."""


def named(readings: Sequence[Reading], name: str, op: str) -> Reading:
    """The reading called ``name`` among an operator's ``readings``; ``ReadingError`` naming the
    operator's readings otherwise."""
    for r in readings:
        if r.name == name:
            return r
    raise ReadingError(f"{op} has no reading {name!r}; its readings: {', '.join(r.name for r in readings) or 'none'}")


def combine(primary: Any, readings: Sequence[Reading]) -> Any:
    """The ``Rules`` instance ``primary`` with every reading's changes applied; ``ReadingError``
    when two readings set one rule to different values (they cannot both hold) or a reading names a
    rule the operator's kernel does not have."""
    changes: dict[str, Any] = {}
    fields = {f.name for f in dataclasses.fields(primary)}
    for r in readings:
        for key, value in r.changes:
            if key not in fields:
                raise ReadingError(f"reading {r.name!r} changes {key!r}, which {type(primary).__qualname__} does not "
                                   f"have (its rules: {', '.join(sorted(fields))})")
            if key in changes and changes[key] != value:
                raise ReadingError(f"readings {', '.join(x.name for x in readings)} set {key} to both "
                                   f"{changes[key]!r} and {value!r}")
            changes[key] = value
    return dataclasses.replace(primary, **changes)


def check_rules(rules: Any, allowed: Mapping[str, Sequence[Any]], op: str) -> None:
    """``DescError`` when a rule holds a value its kernel does not implement (``allowed``: rule ->
    values; a rule not listed takes any value of its type)."""
    for key, values in allowed.items():
        value = getattr(rules, key)
        if value not in values:
            raise DescError(f"<rules>.{key}", value, f"one of {', '.join(map(repr, values))}", op)


__all__ = ["Reading", "ReadingError", "check_rules", "combine", "holds", "named", "reading"]
