"""What the operators' fuzz strategies share: size limits and the Hypothesis pieces they draw from.

Each cases module builds its operator's strategy (``fuzz_strategy(op, size)``) from these; a
strategy draws a ``common.FuzzDraw`` -- a desc that obeys its page, an input recipe, a value
seed, an opset -- over the operator's whole field space. Every choice lists its simplest value
first (and integers shrink towards their lower bound), because Hypothesis's shrinker moves a
failing draw towards the first values: that is how a shrunk case ends with one batch, one
channel, small windows and fields back at their defaults.

Only ``ep-testbed fuzz`` imports this module: Hypothesis is the ``fuzz`` extra, not a
dependency of the catalog.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from hypothesis import strategies as st

from .common import REGION_KINDS, VALUE_KINDS

#: Size distributions ``ep-testbed fuzz --size`` offers.
SIZES = ("default", "large")


@dataclass(frozen=True)
class Limits:
    """Bounds of one size distribution: elements of any one tensor, a spatial axis (4-D and 5-D
    inputs), batch, channels, regions and an output (pooled) axis."""

    elements: int
    spatial: int
    spatial_3d: int
    batch: int
    channels: int
    rois: int
    out: int


LIMITS = {
    # Median a few hundred elements, at most 4096 per tensor: ~5 ms per case on the CPU EP.
    "default": Limits(elements=4096, spatial=24, spatial_3d=10, batch=4, channels=8, rois=16, out=8),
    # GPU dispatch sizes: past 65,535 thread groups and 2^16 per axis, within a second a case here.
    "large": Limits(elements=2**21, spatial=320, spatial_3d=48, batch=8, channels=256, rois=2000, out=16),
}


_F = TypeVar("_F", bound=Callable[..., st.SearchStrategy])


def _reused(make: _F) -> _F:
    """``make`` returning one strategy object per distinct arguments: a strategy draws the same
    values whichever object it is, but Hypothesis validates each new object on its first draw,
    and a draw builds a dozen of them (a fifth of a fuzzed case's drawing time, measured). The
    arguments are few and small (field values and bounds), so the cache is bounded by the
    operators' field spaces."""
    made: dict[str, st.SearchStrategy] = {}

    @functools.wraps(make)
    def strategy(*args: Any) -> st.SearchStrategy:
        # The arguments are literals (numbers, strings, None, tuples and lists of them), whose
        # repr tells apart what equality does not: True from 1, -0.0 from 0.0, NaN from NaN.
        key = repr(args)
        if key not in made:
            if len(made) >= 4096:  # a bound on memory, far above the field spaces' needs
                made.clear()
            made[key] = make(*args)
        return made[key]

    return strategy  # type: ignore[return-value]


def limits(size: str) -> Limits:
    """The ``Limits`` of a size distribution; ValueError naming the sizes otherwise."""
    if size not in LIMITS:
        raise ValueError(f"size = {size!r}: one of {', '.join(SIZES)}")
    return LIMITS[size]


@_reused
def choice(values: Sequence[Any]) -> st.SearchStrategy:
    """One of ``values``, shrinking towards the first (list the default or simplest first)."""
    return st.sampled_from(tuple(values))


@_reused
def weighted(pairs: Sequence[tuple[Any, int]]) -> st.SearchStrategy:
    """One of the values of ``(value, weight)`` pairs, drawn in proportion to the weights and
    shrinking towards the first value: values ONNX cannot express (which never reach an EP) or
    that only ever exercise the mapper get small weights, so drawing time goes to cases that run."""
    return st.sampled_from(tuple(value for value, weight in pairs for _ in range(weight)))


@_reused
def value_seed() -> st.SearchStrategy:
    """The seed of a case's input values (shrinks towards 0)."""
    return st.integers(0, 2**32 - 1)


def value_kind() -> st.SearchStrategy:
    """An input value kind (``common.VALUE_KINDS``, simplest first)."""
    return choice(VALUE_KINDS)


def region_kind(allowed: Sequence[str] = REGION_KINDS) -> st.SearchStrategy:
    """A region placement (``common.REGION_KINDS``, simplest first) among ``allowed``."""
    return choice([k for k in REGION_KINDS if k in allowed])


@_reused
def bounded(low: int, high: int) -> st.SearchStrategy:
    """An integer in ``[low, max(low, high)]`` (shrinks towards ``low``)."""
    return st.integers(low, max(low, high))


def recipe(values: str, regions: str | None = None) -> str:
    """The recipe string of a fuzzed case (``common.fuzz_recipe`` reads it back)."""
    return f"fuzz:{values}" + (f":{regions}" if regions else "")
