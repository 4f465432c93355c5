"""Precision models: how far a correct kernel that rounds may lie from the exact answer.

The reference computes each output exactly (float64 from exact tensor values) and rounds once,
to the output type (DECISIONS.md FP-1). A real kernel rounds on the way: sample coordinates,
interpolation weights, sums. A *precision model* names the floating-point type such a kernel
computes in; from it the reference derives, per output element (DECISIONS.md FP-2, FP-3):

* a **bound**: ``|kernel - exact| <= bound`` for every kernel that evaluates the page's formulas
  in the model's type, one rounding per operation (running error analysis, propagated to
  first order, each rounding charged a whole unit in the last place);
* **knife edges**: a discrete decision (a sample inside or outside the input, a sample count, a
  bin start or end, a ``round()``) that such rounding can flip. The reference returns the
  range ``[low, high]`` of the outputs the alternative decisions give, and notes each one.

The models (``MODELS``; ``--precision-model``):

* ``fp32`` (default): coordinates, weights and sums in float32 whatever the tensor type, the
  value rounded once to the output type. What a careful GPU kernel does: float32 coordinate
  rounding is absorbed, a float16 kernel that computes coordinates in float16 is not.
* ``tensor-type``: all arithmetic in the tensor's own type (float16 coordinates for a FLOAT16
  tensor, like torchvision's CUDA ``roi_align`` in half precision).
* ``exact``: no rounding allowed: bounds are zero and no knife edge is accepted (the plain
  tolerance rule, ``--strict-tolerance``).

Nothing here knows an operator: the kernels (``roi_align``, ``roi_pooling``) use ``Arithmetic``
to bound their own formulas and return an ``Expected``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .dtypes import numpy_dtype


@dataclass(frozen=True)
class PrecisionModel:
    """One precision model: ``compute`` is the DML type a kernel computes in ("FLOAT32"),
    ``"TENSOR"`` for the tensor's own type, or None for no rounding at all (``exact``)."""

    name: str
    compute: Optional[str]
    summary: str
    #: How a comparison names the bound it applied ("within the ... bound").
    bound_phrase: str

    def arithmetic(self, tensor_type: str) -> "Arithmetic":
        """The arithmetic a kernel of this model uses for tensors of ``tensor_type``."""
        if self.compute is None:
            return Arithmetic(None)
        kind = tensor_type if self.compute == "TENSOR" else self.compute
        return Arithmetic(numpy_dtype(kind))

    def to_json(self) -> dict[str, Any]:
        """``{"name", "summary"}`` for a results header."""
        return {"name": self.name, "summary": self.summary}


#: Every precision model, by ``--precision-model`` name (the first is the default).
MODELS: dict[str, PrecisionModel] = {m.name: m for m in (
    PrecisionModel("fp32", "FLOAT32",
                   "coordinates, weights and sums in float32 whatever the tensor type, one rounding to the output "
                   "type (a careful GPU kernel)",
                   "fp32 rounding bound (coordinates, weights and sums in float32)"),
    PrecisionModel("tensor-type", "TENSOR",
                   "all arithmetic in the tensor's own data type (float16 coordinates for a FLOAT16 tensor)",
                   "tensor-type rounding bound (arithmetic in the tensor's data type)"),
    PrecisionModel("exact", None,
                   "no arithmetic error and no knife edge allowed: the plain tolerance rule",
                   "exact model (no rounding allowed)"),
)}
DEFAULT_MODEL = "fp32"
#: The model ``--strict-tolerance`` selects.
STRICT_MODEL = "exact"


def precision_model(name: str) -> PrecisionModel:
    """The model called ``name``; ValueError listing the names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"precision model {name!r}: one of {', '.join(MODELS)}") from None


@dataclass
class Approx:
    """A quantity a kernel computes: its exact value ``v`` and a bound ``e`` on how far the
    kernel's rounded value may lie from it (arrays of one shape, or scalars)."""

    v: np.ndarray
    e: np.ndarray

    @property
    def is_exact(self) -> np.ndarray:
        """Where the kernel's value equals the exact one (no error to carry)."""
        return self.e == 0


@dataclass(frozen=True)
class Arithmetic:
    """Running error analysis in one floating-point type (``dtype`` None: exact arithmetic).

    Each operation's result carries the propagated error of its operands plus its own rounding:
    nothing when the operands are exact and the exact result is representable (the operation is
    then exact in any order), else one unit in the last place of the result's magnitude, twice
    the round-to-nearest bound, which covers reordering the page's additions and products."""

    dtype: Optional[np.dtype]

    @property
    def exact(self) -> bool:
        """True for exact arithmetic (the ``exact`` model): every error is 0."""
        return self.dtype is None

    @property
    def unit(self) -> float:
        """The unit roundoff u (2**-24 for float32, 2**-11 for float16; 0 exact)."""
        return 0.0 if self.dtype is None else float(np.finfo(self.dtype).eps) / 2

    def spacing(self, magnitude: Any) -> np.ndarray:
        """The distance to the next representable value above ``|magnitude|`` (inf past the range)."""
        m = np.abs(np.asarray(magnitude, dtype=np.float64))
        if self.dtype is None:
            return np.zeros_like(m)
        with np.errstate(over="ignore", invalid="ignore"):
            return self._spacing_of(m)

    def representable(self, value: Any) -> np.ndarray:
        """Whether each exact value is a value of the type (NaN and infinities are not)."""
        v = np.asarray(value, dtype=np.float64)
        if self.dtype is None:
            return np.isfinite(v)
        with np.errstate(over="ignore", invalid="ignore"):
            return self._holds(v)

    def _spacing_of(self, m: np.ndarray) -> np.ndarray:
        """``spacing`` of float64 magnitudes ``m``, in a type, with overflow warnings already off."""
        s = np.spacing(np.abs(m).astype(self.dtype)).astype(np.float64)
        return np.where(np.isfinite(s), s, np.inf)

    def _holds(self, v: np.ndarray) -> np.ndarray:
        """``representable`` of float64 values ``v``, in a type, with overflow warnings already off."""
        return np.isfinite(v) & (v.astype(self.dtype).astype(np.float64) == v)

    def _rounding(self, result: np.ndarray, propagated: Any, operands_exact: Any) -> np.ndarray:
        """The error one rounding of ``result`` adds (class docstring): 0 where the operands are
        exact and ``result`` is representable, else ``spacing(|result| + propagated)``. Every
        operation of the error analysis ends here, so it quiets warnings once for both parts."""
        r = np.asarray(result, dtype=np.float64)
        if self.dtype is None:
            return np.zeros_like(r)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.where(operands_exact & self._holds(r), 0.0, self._spacing_of(np.abs(r) + propagated))

    def const(self, value: Any) -> Approx:
        """A value converted to the type (a tensor value, a FLOAT field, an integer index)."""
        v = np.asarray(value, dtype=np.float64)
        return Approx(v, self._rounding(v, 0.0, True))

    def add(self, a: Approx, b: Approx) -> Approx:
        """``a + b``: the operands' errors plus the sum's rounding."""
        v = a.v + b.v
        e = a.e + b.e
        return Approx(v, e + self._rounding(v, e, a.is_exact & b.is_exact))

    def sub(self, a: Approx, b: Approx) -> Approx:
        """``a - b``."""
        return self.add(a, Approx(-b.v, b.e))

    def mul(self, a: Approx, b: Approx) -> Approx:
        """``a * b``: ``|a| e_b + |b| e_a + e_a e_b`` plus the product's rounding."""
        v = a.v * b.v
        e = np.abs(a.v) * b.e + np.abs(b.v) * a.e + a.e * b.e
        e = e + self._rounding(v, e, a.is_exact & b.is_exact)
        # An exact zero operand makes an exact zero product, whatever the other one's error.
        zero = ((a.v == 0) & a.is_exact) | ((b.v == 0) & b.is_exact)
        return Approx(v, np.where(zero, 0.0, e))

    def div(self, a: Approx, b: Approx) -> Approx:
        """``a / b``: ``(e_a + |a/b| e_b) / (|b| - e_b)`` plus the quotient's rounding (infinite
        when ``b`` may be 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            v = a.v / b.v
            margin = np.abs(b.v) - b.e
            e = np.where(margin > 0, (a.e + np.abs(v) * b.e) / np.where(margin > 0, margin, 1.0), np.inf)
        return Approx(v, e + self._rounding(v, e, a.is_exact & b.is_exact))

    def total(self, *terms: Approx) -> Approx:
        """The sum of three or fewer terms, added left to right by the reference and in any
        order by a kernel: exact only if every partial sum of exact terms is representable."""
        v = terms[0].v
        for t in terms[1:]:
            v = v + t.v
        e = sum(t.e for t in terms)
        exact = np.ones(np.shape(v), dtype=bool)
        for t in terms:
            exact = exact & t.is_exact
        partial = [terms[i].v + terms[j].v for i in range(len(terms)) for j in range(i + 1, len(terms))]
        for p in partial:
            exact = exact & self.representable(p)
        magnitude = sum(np.abs(t.v) for t in terms) + e
        rounding = np.where(exact & self.representable(v), 0.0, (len(terms) - 1) * self.spacing(magnitude))
        return Approx(v, e + (0.0 if self.dtype is None else rounding))  # type: ignore[arg-type]  # scalars in, scalar out


def output_rounding(bound: np.ndarray, values: np.ndarray, data_type: str) -> np.ndarray:
    """The element bounds a comparison uses (float32): ``bound`` plus one unit in the last place
    of the output type at each value, since the kernel rounds its result once and the reference
    its own (FP-2). ``eps * |x|`` is at least one unit in the last place of ``x``; the float32
    sum is nudged up so that it never rounds below the exact one. Non-finite bounds become 0 (no
    allowance: an infinite or NaN value is compared exactly)."""
    eps_up, up, tiny = rounding_factors(data_type)
    total = np.abs(values, dtype=np.float32)
    total += bound
    total *= eps_up
    total += bound
    total *= up
    total += tiny
    total[~np.isfinite(total)] = 0.0
    return total


def rounding_factors(data_type: str) -> tuple[np.float32, np.float32, np.float32]:
    """``output_rounding``'s float32 factors for an output of ``data_type``: ``eps`` nudged up, the
    nudge, and the type's smallest subnormal."""
    info = np.finfo(numpy_dtype(data_type))
    eps, tiny = float(info.eps), float(info.smallest_subnormal)
    return np.float32(eps * (1 + 2**-20)), np.float32(1 + 2**-20), np.float32(tiny)


@dataclass(frozen=True)
class KnifeEdge:
    """One discrete decision that rounding in the model's type can flip: ``exact`` is the
    reference's choice (exact arithmetic; for ROI_POOLING's corners, its float32 product, RP-1),
    ``alternative`` what a rounding kernel can choose instead, ``elements`` the output elements
    whose value the flip changes."""

    output: str
    decision: str
    exact: str
    alternative: str
    elements: int

    def text(self) -> str:
        """One line for a person: the decision, the exact choice, the alternative."""
        return (f"{self.decision}: the reference takes {self.exact}, rounding can give {self.alternative} "
                f"({self.elements} element{'s' if self.elements != 1 else ''})")

    def to_json(self) -> dict[str, Any]:
        """The note as a results file holds it."""
        return {"output": self.output, "decision": self.decision, "exact": self.exact,
                "alternative": self.alternative, "elements": self.elements}


#: A kernel keeps at most this many knife-edge notes (the count says how many there were).
MAX_NOTES = 20


@dataclass
class Expected:
    """What the reference expects of a kernel under a precision model.

    ``outputs``: the exact outputs rounded once (``execute``'s result, bit for bit).
    ``bounds[name]``: per element, how far a kernel of the model may lie from ``outputs[name]``
    (float64, >= 0; an output not listed has bound 0: a selection is exact).
    ``alternatives[name]``: ``(low, high)`` per element, the range of outputs that the
    alternative knife-edge decisions give, each rounded once to the output type like the output
    (``low == high == outputs`` where there is none). An infinite ``low`` or ``high`` is an
    alternative output in its own right (a kernel may give exactly it); NaN, which no range holds,
    is in ``nan_alternatives``.
    ``nan_alternatives[name]``: per element (bool), whether some knife-edge alternative gives NaN
    where the reference's output need not be NaN (``0 * inf`` in a LINEAR sample on a cell edge,
    FP-3); absent where no element has one.
    ``knife_edges``: notes on the decisions (at most ``MAX_NOTES``); ``knife_edge_count`` counts
    the notes made, at least one per region (or element group) that holds a knife edge."""

    outputs: dict[str, np.ndarray]
    model: PrecisionModel
    bounds: dict[str, np.ndarray] = field(default_factory=dict)
    alternatives: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    nan_alternatives: dict[str, np.ndarray] = field(default_factory=dict)
    knife_edges: list[KnifeEdge] = field(default_factory=list)
    knife_edge_count: int = 0

    def note(self, edge: KnifeEdge) -> None:
        """Record a knife-edge decision (kept when fewer than ``MAX_NOTES`` are)."""
        self.knife_edge_count += 1
        if len(self.knife_edges) < MAX_NOTES:
            self.knife_edges.append(edge)


__all__ = ["Approx", "Arithmetic", "DEFAULT_MODEL", "Expected", "KnifeEdge", "MODELS", "PrecisionModel",
           "STRICT_MODEL", "output_rounding", "precision_model"]
