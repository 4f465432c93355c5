"""What "fails the same way" means, for telling failures apart and for keeping one while shrinking.

A failure's ``Signature`` is read from its *raw* result line (before expectations apply):

- ``outcome``: ``fail``, ``crash`` or ``timeout`` (``known`` cases are shrunk by their raw outcome);
- ``kind``: for a ``fail``, how it failed: ``values`` (elements out of tolerance), ``shape``
  (an output missing or of the wrong shape or dtype), ``build`` / ``run`` (the EP raised while
  building or running the session), ``read-back`` (its outputs could not be read back);
- ``outputs``: the outputs with an element out of tolerance (``values`` only), e.g.
  ``("OutputIndicesTensor",)``: "the same output tensor";
- ``values``: what the worst failing element expected and got, as classes (``nan``, ``inf``,
  ``-inf``, ``number``, ``index``): ``-inf -> number`` (an all -inf window read back as the
  lowest float) and ``number -> number`` (a rounding difference) are different failures;
- ``diverging``: the DML fields the mapper flagged ``diverges`` for this desc or these inputs
  (a NaN input, RoiAlign MAX...): a failure that loses its NaN is a different failure.

Two failures with one signature are one finding: a fuzz run shrinks the first of each (or all,
when asked); a shrink step is kept only when its signature equals the original's. A run's
re-check on a second EP (``harness.run.recheck``) calls a failure shared when the second EP's
has the same signature, and an expectation's ``shows_when`` may name the signature its cause has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...reference.registry import index_output_names
from .results import decode_number

#: Raw outcomes a fuzz run shrinks (``known`` ones too when asked: their raw outcome is one of these).
SHRINKABLE = ("fail", "crash", "timeout")


@dataclass(frozen=True)
class Signature:
    """How a case failed (module docstring)."""

    op: str
    outcome: str
    kind: str = ""
    outputs: tuple[str, ...] = ()
    values: str = ""
    diverging: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The signature as written in ``shrinks.jsonl`` and corpus case files."""
        return {"op": self.op, "outcome": self.outcome, "kind": self.kind, "outputs": list(self.outputs),
                "values": self.values, "diverging": list(self.diverging)}

    def describe(self) -> str:
        """One line: ``fail (values in OutputIndicesTensor, number -> number; diverging: InputTensor)``."""
        detail = self.kind + (f" in {', '.join(self.outputs)}" if self.outputs else "")
        detail += f", {self.values}" if self.values else ""
        if self.diverging:
            detail += f"; diverging: {', '.join(self.diverging)}"
        return f"{self.outcome} ({detail})" if detail else self.outcome


def signature(line: Mapping[str, Any]) -> Signature | None:
    """The signature of a raw result line, or None when its outcome is not a failure to shrink."""
    outcome = line.get("outcome")
    if outcome not in SHRINKABLE:
        return None
    diverging = tuple(sorted({str(f.get("field")) for f in line.get("flags") or [] if f.get("kind") == "diverges"}))
    kind, values = "", ""
    outputs: tuple[str, ...] = ()
    if outcome == "fail":
        kind, outputs = _fail_kind(line)
        values = _value_classes(line)
    return Signature(str(line.get("op")), outcome, kind, outputs, values, diverging)


def _value_classes(line: Mapping[str, Any]) -> str:
    """``"<expected class> -> <actual class>"`` of the worst failing element ("" when none)."""
    worst = next((w for w in line.get("worst") or [] if w.get("failed")), None)
    if worst is None:
        return ""
    if isinstance(worst.get("expected"), int) and isinstance(worst.get("actual"), int) \
            and str(worst.get("output")) in index_output_names():
        return "index"
    return f"{_value_class(worst.get('expected'))} -> {_value_class(worst.get('actual'))}"


def _value_class(value: Any) -> str:
    """``nan``, ``inf``, ``-inf`` or ``number`` (results spell non-finite numbers as strings)."""
    number = decode_number(value)
    if isinstance(number, float) and math.isnan(number):
        return "nan"
    if isinstance(number, (int, float)) and math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return "number"


def _fail_kind(line: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """``(kind, outputs)`` of a ``fail`` line (module docstring), from its worst elements and message."""
    # a worst entry is data: its output named as text, whatever kind the line holds
    failed = tuple(sorted({str(w.get("output", "")) for w in line.get("worst") or [] if w.get("failed")}))
    if failed:
        return "values", failed
    message = str(line.get("message") or "")
    for marker, kind in (("could not build the session", "build"), ("raised while running", "run"),
                         ("could not be read back", "read-back")):
        if marker in message:
            return kind, ()
    return "shape", ()


def same_failure(target: Signature, line: Mapping[str, Any]) -> bool:
    """Whether the raw result ``line`` fails exactly as ``target`` says."""
    return signature(line) == target


#: The classes of input values a cause may need to show (``input_extremes``; an expectation's
#: ``shows_when.inputs``): a NaN, +inf, -inf, or a finite magnitude of at least ``HUGE``.
INPUT_CLASSES = ("nan", "inf", "-inf", "huge")
#: 2**120: float32 arithmetic on a few such values can overflow (256 of them sum past FLT_MAX,
#: 2**128; a difference of two of opposite sign needs only 2**127), so an EP that computes in
#: another order than the reference may give an infinity or NaN where the reference gives a number.
HUGE = 2.0**120


def input_extremes(arrays: Mapping[str, Any]) -> list[str]:
    """The ``INPUT_CLASSES`` present among the floating-point arrays of ``arrays`` (a case's
    inputs), in that order; integer arrays hold none."""
    found: set[str] = set()
    for array in arrays.values():
        values = np.asarray(array)
        if values.dtype.kind != "f" or values.size == 0:
            continue
        wide = values.astype(np.float64, copy=False)
        finite = np.isfinite(wide)
        if np.isnan(wide).any():
            found.add("nan")
        if np.isposinf(wide).any():
            found.add("inf")
        if np.isneginf(wide).any():
            found.add("-inf")
        if (np.abs(wide[finite]) >= HUGE).any():
            found.add("huge")
    return [c for c in INPUT_CLASSES if c in found]
