"""The slow per-region oracle: a frozen copy of ``reference/roi_align_bounds.py`` as it was before the bounds
were computed over every region at once. Test-only: ``test_bounds_oracle.py`` checks that the
vectorized bounds equal this module's, bit for bit. Do not edit it to follow the reference's
implementation; a change of what the reference computes (a reading's rule) is made here too, as
the DirectML EP's adaptive count ("at-least-one") was, and the cell-edge knife edge beside an
infinite or NaN tap (FP-3), written here sample by sample (``_cell_edge_alternatives``), and a MAX
element's lowest alternative, from which a sample that may be NaN drops out (``_lowest_max``),
and the elements of a region the onnx count gives no sample, OutOfBoundsInputValue (``_evaluate``),
and a MAX range's ends under a reading whose MAX starts from a value, never below it (``_reduce``).
Its outputs are the frozen per-region kernel's (``kernel_oracle_roi_align``), so the reference's
values are checked beside its bounds.

Its original docstring follows.

ROI_ALIGN / ROI_ALIGN1 under a precision model: the exact output, a per-element rounding bound
and the knife-edge alternatives (``precision.py`` says what they are; DECISIONS.md FP-2, FP-3).

Per region and axis the page's quantities are evaluated in the model's ``Arithmetic``::

    a = x1 * SpatialScale, b = x2 * SpatialScale, size = b - a
    ratio = size / OutputSize                    -> the sample count n = clamp(ceil(ratio))
    step = size / (OutputSize * n)               (AlignRegionsToCorners: / (OutputSize * n - 1))
    x_i = (i - OutputPixelOffset) * step + a - InputPixelOffset

which gives every sample coordinate's exact value and a bound ``e_i`` on a kernel's rounded one.

* LINEAR sample: bilinear interpolation is continuous and linear along each axis within a
  cell, with a slope no larger than the largest difference of the cell's neighbouring taps;
  moving the coordinates by ``(e_y, e_x)`` moves the value by at most ``e_x*Gx + e_y*Gy``
  (``G``: slopes of every cell within reach, so the 4x4 neighbourhood where a coordinate lies
  within ``e`` of a cell edge). The weights ``1 - f`` and the four-term weighted sum add at most
  ``8u (|value| + Gx + Gy)``.
* NEAREST sample: a selection, no bound; a coordinate within ``e`` of a half pixel is a knife edge.
* Element: AVERAGE takes the mean of its samples' bounds plus the summation's ``2mu * mean|s|``;
  MAX the largest of its samples' bounds. Then one unit in the last place of the output type.
* Knife edges: a sample coordinate within ``e`` of the input's edge ``[-1, size]`` (inside or
  out), a NEAREST coordinate within ``e`` of a half, a ratio within ``e`` of a whole number (the
  sample count). Each alternative's output joins the element's ``[low, high]``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
from kernel_oracle_roi_align import compute, region_value  # the values are the frozen per-region kernel's

from ep_testbed.reference.nan_rules import nan_ignoring_max
from ep_testbed.reference.precision import Approx, Arithmetic, Expected, KnifeEdge, PrecisionModel, output_rounding
from ep_testbed.reference.roi_align import (
    MAX_SAMPLE_POINTS_PER_REGION,
    PRIMARY,
    AnyRoiAlign,
    KernelInput,
    RoiAlign1Desc,
    Rules,
    edge_taps,
    gather,
    kernel_input,
    reads_input,
    reduced_samples,
)

#: Rounding of the weights (1 - f, products) and of the four-term sum of one LINEAR sample, in
#: units of u times the magnitudes involved (FP-2: 3u weights + u products + 3u sum, rounded up).
INTERPOLATION_ROUNDINGS = 8


@dataclass
class _Along(Approx):
    """Sample coordinates along one axis of a region (``v``, ``e``: their values and error
    bounds) with what the bounds ask of each: the pair of taps it interpolates between, clamped
    to the input (``roi_align.edge_taps``, ``[low0, high0, low1, high1, ...]``), whether it reads
    the input and whether rounding can move it across the input's edge (RA-5), a pixel or more
    (``far``) or into a neighbouring cell (``near``); ``any_*`` and ``all_inside`` over them."""

    # arrays; the summaries are arrays over the regions of a grid, and bools for one region
    pairs: Any = None
    inside: Any = None
    flips: Any = None
    far: Any = None
    near: Any = None
    all_inside: Any = True
    any_flips: Any = False
    any_far: Any = False
    any_near: Any = False


def _along(c: Approx, size: int, rules: Rules = PRIMARY) -> _Along:
    """The facts of coordinates ``c`` (any shape: the last axis is a region's samples) along an
    axis of ``size`` input pixels; the ``any_*``/``all_*`` summaries are per region (last axis).
    The taps are ``edge_taps``', which hold the lerp taps' (the slopes they give cover both)."""
    low, high, _, _ = edge_taps(c.v, size)
    inside = reads_input(c.v, size, rules)
    flips = _edge_flips(c, size, rules)
    far = c.e >= 0.5
    near = _near_cell_edge(c) & ~far
    return _Along(c.v, c.e, np.stack([low, high], axis=-1).reshape(*low.shape[:-1], -1), inside, flips, far, near,
                  inside.all(axis=-1), flips.any(axis=-1), far.any(axis=-1), near.any(axis=-1))


@dataclass
class _Axis:
    """One axis of every region: the page's quantities in the model's arithmetic, as arrays over
    the regions, and each region's sample coordinates (computed once per sample count)."""

    ar: Arithmetic
    name: str             # "Y" or "X"
    size_name: str        # "OutputHeight" or "OutputWidth"
    start: Approx         # scaledRegionStart, per region
    extent: Approx        # scaledRegionSize, per region
    ratio: Approx         # scaledRegionSize / outputSize, per region (the raised size under min_size)
    out: int
    size: int             # the input's height or width
    in_offset: Approx
    out_offset: Approx
    corners: bool
    counts: list[tuple[int, ...]]  # per region: the exact sample count, then those rounding can give
    rules: Rules
    _coords: dict[int, tuple[dict[int, int], _Along]] = field(default_factory=dict)

    def coords(self, region: int, n: int) -> _Along:
        """Region ``region``'s ``out * n`` sample coordinates (``roi_align.sample_coordinates``)
        and their facts (``_along``, worked out once for every region of count ``n``)."""
        if n not in self._coords:
            rows = [r for r, counts in enumerate(self.counts) if n in counts]
            grid = _along(self._grid(np.array(rows, dtype=np.int64), n), self.size, self.rules)
            self._coords[n] = ({r: i for i, r in enumerate(rows)}, grid)
        where, g = self._coords[n]
        i = where[region]
        return _Along(g.v[i], g.e[i], g.pairs[i], g.inside[i], g.flips[i], g.far[i], g.near[i], bool(g.all_inside[i]),
                      bool(g.any_flips[i]), bool(g.any_far[i]), bool(g.any_near[i]))

    def _grid(self, rows: np.ndarray, n: int) -> Approx:
        """``(len(rows), out * n)`` coordinates of the regions ``rows``, all at count ``n``."""
        ar, total = self.ar, self.out * n
        start = Approx(self.start.v[rows, None], self.start.e[rows, None])
        extent = Approx(self.extent.v[rows, None], self.extent.e[rows, None])
        neg_offset = Approx(-self.in_offset.v, self.in_offset.e)
        if self.corners and total == 1:  # the region's centre (RA-6)
            centre = ar.add(start, ar.div(extent, ar.const(2.0)))
            coords = ar.total(start, ar.div(extent, ar.const(2.0)), neg_offset)
            return self._raised(coords, centre, np.zeros_like(centre.v), total)
        step = ar.div(extent, ar.const(float(total - 1 if self.corners else total)))
        t = ar.sub(ar.const(np.arange(total, dtype=np.float64)[None, :]), self.out_offset)
        coords = ar.total(ar.mul(t, step), start, neg_offset)
        if not self.rules.min_size:
            return coords
        # the span the samples tile: one spacing per sample, each cell centred on its sample
        span_start = ar.add(start, ar.mul(ar.sub(ar.const(-0.5), self.out_offset), step))
        return self._raised(coords, span_start, total * step.v, total)

    def _raised(self, coords: Approx, span_start: Approx, width: np.ndarray, total: int) -> Approx:
        """``coords`` with each row whose span (``roi_align.sample_span``: ``span_start``, ``width``)
        is narrower than ``rules.min_size`` replaced by the centres of that span raised to it, its
        start kept (``roi_align.raised_samples``)."""
        if not self.rules.min_size:
            return coords
        size = self.rules.min_size
        raised = width < size
        centres = (np.arange(total, dtype=np.float64)[None, :] + 0.5) * (size / total)
        moved = self.ar.total(span_start, self.ar.const(centres), Approx(-self.in_offset.v, self.in_offset.e))
        return Approx(np.where(raised, moved.v, coords.v), np.where(raised, moved.e, coords.e))


def _axis(d: RoiAlign1Desc, ar: Arithmetic, name: str, first: np.ndarray, last: np.ndarray, scale: float,
          out: int, size: int, rules: Rules = PRIMARY) -> _Axis:
    """The axis quantities of every region (``roi_align.region_samples``, with error bounds, under
    the reading ``rules``): ``first``/``last`` are the regions' x1/x2 (or y1/y2) in float64,
    ``size`` the input's pixels along the axis."""
    s = ar.const(float(np.float32(scale)))
    start, end = ar.mul(ar.const(first), s), ar.mul(ar.const(last), s)
    extent = ar.sub(end, start)
    counted = Approx(np.abs(extent.v), extent.e) if rules.inverted == "upright" else extent
    if rules.min_size:  # an adaptive count is counted on the raised size, which is exact (_Axis._raised)
        raised = extent.v < rules.min_size
        counted = Approx(np.where(raised, rules.min_size, extent.v), np.where(raised, 0.0, extent.e))
    ratio = ar.div(counted, ar.const(float(out)))
    lo, hi = d.minimum_samples_per_output, d.maximum_samples_per_output

    def count(r):  # roi_align.samples_for_ratio over arrays
        if rules.count != "clamp" and lo != hi:
            return np.clip(np.ceil(r), 0 if rules.count == "onnx" else 1, 2.0**62).astype(np.int64)
        return np.minimum(np.maximum(np.ceil(r), lo), hi).astype(np.int64)

    error = np.where(np.isfinite(ratio.e), ratio.e, 0.0)
    exact, below, above = count(ratio.v), count(ratio.v - error), count(ratio.v + error)
    counts = [tuple(dict.fromkeys((int(e), int(b), int(a)))) for e, b, a in zip(exact, below, above)]
    return _Axis(ar, name, "OutputHeight" if name == "Y" else "OutputWidth", start, extent, ratio, out, size,
                 ar.const(float(np.float32(d.input_pixel_offset)) + rules.input_offset_shift),
                 ar.const(float(np.float32(d.output_pixel_offset))), d.align_regions_to_corners, counts, rules)


def _edge_flips(c: Approx, size: int, rules: Rules = PRIMARY) -> np.ndarray:
    """Whether rounding can move each coordinate across the input's edge (``roi_align.reads_input``)."""
    now = reads_input(c.v, size, rules)
    return (reads_input(c.v - c.e, size, rules) != now) | (reads_input(c.v + c.e, size, rules) != now)


def _near_cell_edge(c: Approx) -> np.ndarray:
    """Coordinates that rounding can move into a neighbouring interpolation cell."""
    return (c.e > 0) & (np.abs(c.v - np.round(c.v)) <= c.e)


def _neighbourhood_slopes(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Largest |tap difference| along X and along Y over the 4x4 taps around each (y, x)."""
    height, width, _ = plane.shape

    def around(v, size):
        base = np.floor(np.clip(v, 0, size - 1)).astype(np.int64)
        return np.clip(base[:, None] + np.arange(-1, 3)[None, :], 0, size - 1)

    block = plane[around(ys, height)[:, None, :, None], around(xs, width)[None, :, None, :]].astype(np.float64)
    gx = np.abs(np.diff(block, axis=3)).max(axis=(2, 3))
    gy = np.abs(np.diff(block, axis=2)).max(axis=(2, 3))
    return gx, gy


@dataclass
class _Samples:
    """Every sample point of a region: rounding bound, and the range the knife-edge decisions
    allow (None: there is none). Their values are the kernel's (``roi_align.compute``)."""

    bound: np.ndarray
    low: Optional[np.ndarray] = None
    high: Optional[np.ndarray] = None
    moved: Optional[np.ndarray] = None  # (len(ys), len(xs), 1): the samples a decision can change
    edge_flips: tuple[np.ndarray, np.ndarray] | None = None
    nearest_flips: tuple[np.ndarray, np.ndarray] | None = None
    nan: Optional[np.ndarray] = None
    cell_flips: tuple[np.ndarray, np.ndarray] | None = None


def _linear_bound(plane: np.ndarray, ys: _Along, xs: _Along, k: float, slopes: type) -> np.ndarray:
    """The bounds of the LINEAR values at every (y, x) with the input clamped to its edge (RA-5):
    ``e_x Gx + e_y Gy`` for the coordinates plus ``k (|value| + Gx + Gy)`` for the arithmetic,
    with ``|value| <= |t00| + Gx + Gy``; in ``slopes`` (float32 for FLOAT32 taps, float64 for
    FLOAT16 ones, whose differences float32 may round)."""
    # Each sample's four taps at once: (len(ys), 2, len(xs), 2, C), [:, a, :, b] = t_ab.
    taps: np.ndarray = gather(plane, ys.pairs, xs.pairs).reshape(ys.v.size, 2, xs.v.size, 2, -1).astype(slopes, copy=False)
    across = np.abs(np.subtract(taps[:, :, :, 1], taps[:, :, :, 0]))  # |t01 - t00| and |t11 - t10|
    gx = np.maximum(across[:, 0], across[:, 1])
    down = np.abs(np.subtract(taps[:, 1], taps[:, 0]))  # |t10 - t00| and |t11 - t01|
    gy = np.maximum(down[:, :, 0], down[:, :, 1])
    _widen_near_cell_edges(plane, ys, xs, gx, gy)
    kind = gx.dtype.type
    bound = np.multiply(gx, (xs.e + 2 * k).astype(kind)[None, :, None], out=gx)  # in place: no copies
    bound += np.multiply(gy, (ys.e + 2 * k).astype(kind)[:, None, None], out=gy)
    magnitude = np.abs(taps[:, 0, :, 0], out=gy)
    magnitude *= kind(k)
    bound += magnitude
    return bound


def _widen_near_cell_edges(plane: np.ndarray, ys: _Along, xs: _Along, gx: np.ndarray, gy: np.ndarray) -> None:
    """Where rounding can move a coordinate into the next cell, take the slopes of every cell
    within reach (the 4x4 taps around the sample) instead of its own cell's; where it can move
    it a whole pixel or more (float16 coordinates of a large input), the plane's largest."""
    if ys.any_far or xs.any_far:
        data = plane.astype(np.float64)
        steepest = np.fmax(np.abs(np.diff(data, axis=0)).max(axis=(0, 1), initial=0.0),
                           np.abs(np.diff(data, axis=1)).max(axis=(0, 1), initial=0.0)).astype(gx.dtype)
        for slopes in (gx, gy):
            slopes[ys.far] = np.maximum(slopes[ys.far], steepest)
            slopes[:, xs.far] = np.maximum(slopes[:, xs.far], steepest)
    if ys.any_near:
        rows = np.flatnonzero(ys.near)
        wide = _neighbourhood_slopes(plane, ys.v[rows], xs.v)
        gx[rows], gy[rows] = np.maximum(gx[rows], wide[0]), np.maximum(gy[rows], wide[1])
    if xs.any_near:
        cols = np.flatnonzero(xs.near)
        wide = _neighbourhood_slopes(plane, ys.v, xs.v[cols])
        gx[:, cols], gy[:, cols] = np.maximum(gx[:, cols], wide[0]), np.maximum(gy[:, cols], wide[1])


def _nearest_samples(plane: np.ndarray, ys: Approx, xs: Approx, ar: Arithmetic,
                     k: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple]:
    """NEAREST values at every (y, x) clamped to the input, their bounds (only the sum's
    ``k |value|``: a selection is exact), the lowest and highest value rounding of
    ``floor(c + 0.5)`` can pick, and where it can pick another index. Rounding can move
    ``c + 0.5`` anywhere in ``[v - e, v + e]``, so every index from ``floor(v - e)`` to
    ``floor(v + e)`` is a candidate, not only those two (FP-3): an error over one pixel reaches
    three indices or more."""
    height, width, _ = plane.shape
    half = ar.const(0.5)
    reach = []
    for c, size in ((ys, height), (xs, width)):
        shifted = ar.add(c, half)
        reach.append([np.clip(np.floor(v), 0, size - 1).astype(np.int64)
                      for v in (shifted.v, shifted.v - shifted.e, shifted.v + shifted.e)])
    (iy, first_y, last_y), (ix, first_x, last_x) = reach
    raw = gather(plane, iy, ix).astype(np.float64)
    flips = (first_y != last_y, first_x != last_x)
    low, high = raw, raw
    if flips[0].any() or flips[1].any():
        low, high = _reach_extremes(plane, (first_y, last_y), (first_x, last_x), raw, flips)
    bound = np.abs(raw, dtype=np.float32)
    bound *= np.float32(k)
    return raw, bound, low, high, flips


#: A NEAREST sample whose candidate indices form more pairs than this (rounding errors of
#: pixels: float16 coordinates on a large input) takes the extremes of the box every sample of
#: the region can reach: a superset, read in one pass over the box instead of once per pair.
MAX_NEAREST_PAIRS = 16


def _reach_extremes(plane: np.ndarray, rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray],
                    raw: np.ndarray, flips: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The smallest and largest value (``fmin``/``fmax``: NaN only where every candidate is NaN,
    as before) of ``plane`` over the candidate indices of each (y, x): rows ``rows[0][i]`` to
    ``rows[1][i]`` and columns ``cols[0][j]`` to ``cols[1][j]``, inclusive; ``raw`` where neither
    index can move. Offsets past a sample's last index repeat that index, which changes no
    extreme, so every sample takes one gather per offset pair."""
    (first_y, last_y), (first_x, last_x) = rows, cols
    span_y, span_x = int((last_y - first_y).max()) + 1, int((last_x - first_x).max()) + 1
    if span_y * span_x > MAX_NEAREST_PAIRS:
        box = plane[first_y.min():last_y.max() + 1, first_x.min():last_x.max() + 1].astype(np.float64)
        moving = (flips[0][:, None] | flips[1][None, :])[:, :, None]
        return (np.where(moving, np.fmin.reduce(box, axis=(0, 1)), raw),
                np.where(moving, np.fmax.reduce(box, axis=(0, 1)), raw))
    low = high = raw  # the exact index is one of the candidates
    for dy, dx in itertools.product(range(span_y), range(span_x)):
        other = gather(plane, np.minimum(first_y + dy, last_y), np.minimum(first_x + dx, last_x))
        low, high = np.fmin(low, other), np.fmax(high, other)
    return low, high


def _samples(plane: np.ndarray, ys: _Along, xs: _Along, d: RoiAlign1Desc, ar: Arithmetic, m: int,
             slopes: type, rules: Rules = PRIMARY) -> _Samples:
    """Bounds and knife-edge ranges of every sample point of a region (module docstring); ``m``
    samples make one element (AVERAGE sums them: ``2mu |value|`` more per sample). The sample
    values are read (the reading's, ``roi_align.reduced_samples``) only where a decision can flip."""
    oob = float(np.float32(d.out_of_bounds_input_value))
    k_sum = 2 * m * ar.unit if d.reduction_function == "AVERAGE" else 0.0
    nearest: Any = None
    raw_low: Any
    raw_high: Any
    if d.interpolation_mode == "NEAREST_NEIGHBOR":
        _, bound, raw_low, raw_high, nearest = _nearest_samples(plane, ys, xs, ar, k_sum)
    else:
        bound = _linear_bound(plane, ys, xs, INTERPOLATION_ROUNDINGS * ar.unit + k_sum, slopes)
        raw_low = raw_high = None
    in_y, in_x, flip_y, flip_x = ys.inside, xs.inside, ys.flips, xs.flips
    samples = _Samples(bound, edge_flips=(flip_y, flip_x), nearest_flips=nearest)
    if not (ys.all_inside and xs.all_inside):
        inside = (in_y[:, None] & in_x[None, :])[:, :, None]
        samples.bound = np.where(inside, bound, np.float32(k_sum * abs(oob)))
    ranged = nearest is not None and (nearest[0].any() or nearest[1].any())
    can_in = ((in_y | flip_y)[:, None] & (in_x | flip_x)[None, :])[:, :, None]
    cell = None
    if nearest is None:
        # a coordinate within its error of a cell edge, whose sample's slope bound is not finite
        cell = ~np.isfinite(bound) & (ys.near[:, None, None] | xs.near[None, :, None]) & can_in
        cell = cell if cell.any() else None
    if not (ys.any_flips or xs.any_flips or ranged or cell is not None):
        return samples
    if raw_low is None:  # the values the reading's reduction takes: corner terms for corner-term-max
        raw_low = raw_high = reduced_samples(plane, ys.v, xs.v, d.reduction_function, rules)
    can_in = ((in_y | flip_y)[:, None] & (in_x | flip_x)[None, :])[:, :, None]
    can_out = ((~in_y | flip_y)[:, None] | (~in_x | flip_x)[None, :])[:, :, None]
    samples.low = np.fmin(np.where(can_in, raw_low, np.inf), np.where(can_out, oob, np.inf))
    samples.high = np.fmax(np.where(can_in, raw_high, -np.inf), np.where(can_out, oob, -np.inf))
    samples.moved = can_in & can_out
    if ranged:
        samples.moved = samples.moved | (nearest[0][:, None] | nearest[1][None, :])[:, :, None]
    if cell is not None:
        samples.low, samples.high, samples.nan = _cell_edge_alternatives(plane, ys, xs, cell, samples.low,
                                                                         samples.high, d.reduction_function, rules)
        samples.moved = samples.moved | cell
        samples.cell_flips = (ys.near & cell.any(axis=(1, 2)), xs.near & cell.any(axis=(0, 2)))
    samples.bound = np.where(can_in, bound, np.float32(k_sum * abs(oob)))
    return samples


def _reach(c: float, e: float, near: bool, far: bool) -> list[float]:
    """The coordinates a kernel's rounded ``c`` can stand for: ``c - e``, ``c + e`` and, near an
    integer ``k``, ``k`` and its float64 neighbours on the sides the reach holds."""
    spread = 0.0 if far else e
    out = [c - spread, c + spread]
    if near:
        k = float(np.round(c))
        out.append(k)
        if c - e < k:
            out.append(float(np.nextafter(k, -np.inf)))
        if c + e > k:
            out.append(float(np.nextafter(k, np.inf)))
    return out


def _cell_edge_alternatives(plane: np.ndarray, ys: _Along, xs: _Along, cell: np.ndarray, low: np.ndarray,
                            high: np.ndarray, reduction: str, rules: Rules) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``low``/``high`` widened, sample by sample and channel by channel where ``cell`` holds, by the
    values (the reading's, as its ``reduction`` takes them) at every pair of reachable coordinates,
    and where one of them is NaN."""
    low, high, nan = low.copy(), high.copy(), np.zeros(cell.shape, dtype=bool)
    for i, j, ch in zip(*np.nonzero(cell)):
        cy = _reach(float(ys.v[i]), float(ys.e[i]), bool(ys.near[i]), bool(ys.far[i]))
        cx = _reach(float(xs.v[j]), float(xs.e[j]), bool(xs.near[j]), bool(xs.far[j]))
        values = reduced_samples(plane, np.array(cy), np.array(cx), reduction, rules)[:, :, ch].ravel()
        numbers = values[~np.isnan(values)]
        if numbers.size:
            low[i, j, ch] = min(low[i, j, ch], numbers.min()) if not np.isnan(low[i, j, ch]) else numbers.min()
            high[i, j, ch] = max(high[i, j, ch], numbers.max()) if not np.isnan(high[i, j, ch]) else numbers.max()
        nan[i, j, ch] = np.isnan(values).any()
    return low, high, nan


@dataclass
class _Region:
    """One region's output elements ``(OutputHeight, OutputWidth, C)``: value (the kernel's),
    bound, range."""

    value: np.ndarray
    bound: np.ndarray
    low: Optional[np.ndarray]
    high: Optional[np.ndarray]
    samples: _Samples
    nan: Optional[np.ndarray] = None


def _reduce(d: RoiAlign1Desc, s: _Samples, n_y: int, n_x: int, value: np.ndarray, rules: Any = None) -> _Region:
    """The page's reduction of each element's ``n_y x n_x`` sample bounds and ranges (AVERAGE:
    the mean of the sample bounds, the sum's rounding being in them; MAX: the largest), beside
    the elements' ``value``. An element none of whose samples a decision can change keeps
    ``value`` as its range (``low == high == value``): its samples' range would be their mean
    again, summed in another order than the kernel's."""
    _, _, out_h, out_w = d.output_tensor.sizes

    def grid(a):
        return a.reshape(out_h, n_y, out_w, n_x, -1)

    if d.reduction_function == "AVERAGE":
        def reduce(a):
            # ``grid(a).mean(axis=(1, 3))``, the same sum and division, without its per-call
            # bookkeeping (once per region and decision).
            total = np.add.reduce(grid(a), axis=(1, 3))
            return np.true_divide(total, np.intp(n_y * n_x), out=total, casting="unsafe")

        bound = reduce(s.bound)
    else:
        def reduce(a):
            return nan_ignoring_max(grid(a), axis=(1, 3))

        bound = np.fmax.reduce(grid(s.bound), axis=(1, 3))
    if s.low is None or s.high is None:
        return _Region(value, bound, None, None, s)
    moved = grid(s.moved).any(axis=(1, 3))
    nan = None if s.nan is None else grid(s.nan).any(axis=(1, 3))
    low = reduce(s.low) if d.reduction_function == "AVERAGE" else _lowest_max(grid, s.low, s.high, s.nan)
    high = reduce(s.high)
    start = None if d.reduction_function == "AVERAGE" or rules is None else _start(rules.max_start, n_y * n_x)
    if start is not None:  # the kernel's MAX folds every alternative with its start: nothing lies below it
        low = np.where(np.isposinf(low), low, np.fmax(low, low.dtype.type(start)))
        high = np.where(np.isposinf(high), high, np.fmax(high, high.dtype.type(start)))
    return _Region(value, bound, np.where(moved, low, value), np.where(moved, high, value), s, nan)


def _start(max_start: str, samples: int) -> Optional[float]:
    """Where a reading's MAX of ``samples`` samples starts: float32's lowest finite value (MLAS's
    MaxPool of more than one sample too), -inf or 0; None from its first sample."""
    lowest = float(np.finfo(np.float32).min)
    if max_start == "mlas-x86":
        return lowest if samples > 1 else None
    return {"first": None, "lowest": lowest, "minus-inf": -np.inf, "zero": 0.0}[max_start]


def _lowest_max(grid: Callable[[np.ndarray], np.ndarray], low: np.ndarray, high: np.ndarray,
                nan: Optional[np.ndarray]) -> np.ndarray:
    """The lowest number a MAX element's samples give under their alternatives (``grid``: a sample
    array as ``(OutputHeight, Sy, OutputWidth, Sx, C)``; ``low``, ``high``, ``nan``: the samples'
    ``_Samples`` fields). A sample that an alternative makes NaN (``nan``), or that is NaN under
    every one (an empty range, ``low > high``), loses the max (NAN-1) and may drop out of it: the lowest is the largest ``low`` of the samples that stay
    numbers, or, where every sample may drop out, the smallest ``low`` of one left alone. Taking
    every sample's ``low`` instead missed the max of the others (fuzzed case
    ``roi_align1/fuzz-s2-b2-033``, FP-3). An element of NaN-only samples keeps ``inf``."""
    numbers = low <= high
    droppable = ~numbers if nan is None else ~numbers | nan
    kept: np.ndarray = np.fmax.reduce(grid(np.where(droppable, np.nan, low)), axis=(1, 3))
    alone: np.ndarray = np.fmin.reduce(grid(np.where(numbers, low, np.inf)), axis=(1, 3))
    lowest: np.ndarray = np.where(np.isnan(kept), alone, kept)
    return lowest


def _evaluate(p: KernelInput, row: int, y: _Axis, x: _Axis, n_y: int, n_x: int, ar: Arithmetic,
              value: Optional[np.ndarray] = None) -> _Region:
    """Region ``row`` at sample counts ``(n_y, n_x)``, its elements' values being ``value`` (the
    kernel's output at the exact counts) or, at an alternative count, the kernel's region
    computed at that count (``roi_align.region_value``), rounded once to the output type like
    the output."""
    if n_y == 0 or n_x == 0:  # no sample (the onnx count of an empty region): OutOfBoundsInputValue, exactly
        _, _, out_h, out_w = p.desc.output_tensor.sizes
        zeros = np.zeros((out_h, out_w, p.planes.shape[-1]), dtype=p.dtype)
        filled = np.full(zeros.shape, np.float32(p.desc.out_of_bounds_input_value)).astype(p.dtype)
        return _Region(filled if value is None else value, zeros.astype(np.float32), None, None, _Samples(zeros))
    ys, xs = y.coords(row, n_y), x.coords(row, n_x)
    if value is None:
        value = region_value(p, row, ys.v, xs.v, n_y, n_x).astype(p.dtype)
    plane = p.plane(row)
    return _reduce(p.desc, _samples(plane, ys, xs, p.desc, ar, n_y * n_x, _slope_type(p.dtype, plane), p.rules),
                   n_y, n_x, value, p.rules)


def _slope_type(dtype: np.dtype, plane: np.ndarray) -> type:
    """The type the tap differences (slopes) are taken in: float32 for FLOAT32 taps whose
    differences cannot overflow it (every finite magnitude under 2**127); float64 for FLOAT16
    taps, whose differences float32 may round, and for FLOAT32 taps near FLT_MAX, whose
    difference overflows float32 to an infinite slope that no comparison can use (FP-2)."""
    if dtype != np.float32:
        return np.float64
    finite = np.abs(plane[np.isfinite(plane)])
    return np.float32 if finite.size == 0 or float(finite.max()) < 2.0**127 else np.float64


def _merge(region: _Region, other: _Region) -> None:
    """Widen ``region``'s range and bound by another decision's outcome."""
    low = region.value if region.low is None else region.low
    high = region.value if region.high is None else region.high
    region.low = np.fmin(low, other.value if other.low is None else other.low)
    region.high = np.fmax(high, other.value if other.high is None else other.high)
    region.bound = np.fmax(region.bound, other.bound)
    if other.nan is not None:
        region.nan = other.nan if region.nan is None else region.nan | other.nan


def region_bounded(p: KernelInput, row: int, value: np.ndarray, y: _Axis, x: _Axis, expected: Expected) -> _Region:
    """Region ``row`` (of ``p``), whose elements the kernel computed as ``value`` (channels
    last): their bounds and knife-edge ranges; notes each knife edge in ``expected``."""
    d = p.desc
    counts_y, counts_x = y.counts[row], x.counts[row]
    region = _evaluate(p, row, y, x, counts_y[0], counts_x[0], y.ar, value)
    first = region.samples
    _, _, out_h, out_w = d.output_tensor.sizes
    for n_y, n_x in itertools.product(counts_y, counts_x):
        # An alternative count past the reference's limit is not evaluated (the exact one was).
        if (n_y, n_x) != (counts_y[0], counts_x[0]) and n_y * out_h * n_x * out_w <= MAX_SAMPLE_POINTS_PER_REGION:
            _merge(region, _evaluate(p, row, y, x, n_y, n_x, y.ar))
    if region.low is not None:
        _note_region(expected, d, row, region, first, y, x)
    return region


def _note_region(expected: Expected, d: RoiAlign1Desc, row: int, region: _Region, s: _Samples, y: _Axis,
                 x: _Axis) -> None:
    """One note per kind of knife-edge decision this region holds."""
    elements = int(np.count_nonzero(region.low != region.high))
    sizes = {"Y": d.input_tensor.sizes[2], "X": d.input_tensor.sizes[3]}
    coords = {"Y": y.coords(row, y.counts[row][0]).v, "X": x.coords(row, x.counts[row][0]).v}
    for axis in (y, x):
        counts = axis.counts[row]
        if len(counts) > 1:
            expected.note(KnifeEdge(
                "OutputTensor", f"region {row}: samples per output along {axis.name} = ceil(scaledRegionSize{axis.name}"
                f" / {axis.size_name}) = ceil({float(axis.ratio.v[row]):.9g})", str(counts[0]),
                " or ".join(str(n) for n in counts[1:]) + f" (the quotient may be off by {float(axis.ratio.e[row]):.3g})",
                elements))
    for flips, name in zip(s.edge_flips or (), "YX"):
        for i in np.flatnonzero(flips)[:1]:
            c, size = float(coords[name][i]), sizes[name]
            inside = bool(reads_input(np.array([c]), size, y.rules)[0])
            edge = f"[-1, {size}]" if y.rules.edge == "closed" else f"(-1, {size})"
            expected.note(KnifeEdge(
                "OutputTensor", f"region {row}: sample {name} = {c:.9g} against the input's edge {edge}",
                "inside" if inside else "outside", "outside (OutOfBoundsInputValue)" if inside else
                "inside (the edge pixel)", elements))
    for flips, name in zip(s.nearest_flips or (), "YX"):
        for i in np.flatnonzero(flips)[:1]:
            expected.note(KnifeEdge(
                "OutputTensor", f"region {row}: nearest index of sample {name} = {float(coords[name][i]):.9g}",
                "floor(c + 0.5)", "another index within the coordinate's rounding error", elements))
    for flips, name in zip(s.cell_flips or (), "YX"):
        for i in np.flatnonzero(flips)[:1]:
            c = float(coords[name][i])
            expected.note(KnifeEdge(
                "OutputTensor", f"region {row}: LINEAR sample {name} = {c:.9g} on the cell edge {round(c)} beside an "
                "infinite or NaN input value", "the cell of the exact coordinate",
                f"the cell on the other side of {round(c)} or a weight of exactly 0 (NaN, an infinity or a number)",
                elements))


def execute_bounded(desc: AnyRoiAlign, tensors: dict[str, np.ndarray], model: PrecisionModel,
                    rules: Rules = PRIMARY) -> Expected:
    """The registry's ``bounded``: ``roi_align``'s output under ``model`` with its bound and
    knife-edge alternatives (an ``Expected``), for the reading ``rules`` (the primary one by
    default). The output is the kernel's (``roi_align.compute``, what ``execute_desc`` returns):
    only the bounds and ranges are computed here, region by region alongside it."""
    p = kernel_input(desc, tensors["InputTensor"], tensors["ROITensor"], tensors["BatchIndicesTensor"], rules)
    d = p.desc
    ar = model.arithmetic(d.input_tensor.data_type)
    expected = Expected(outputs={}, model=model)
    if ar.exact:
        expected.outputs["OutputTensor"] = compute(p)
        return expected
    _, _, out_h, out_w = d.output_tensor.sizes
    bound = np.empty((p.rois.shape[0], p.planes.shape[-1], out_h, out_w), dtype=np.float32)
    height, width = p.planes.shape[1:3]
    y = _axis(d, ar, "Y", p.rois[:, 1], p.rois[:, 3], d.spatial_scale_y, out_h, height, rules)
    x_axis = _axis(d, ar, "X", p.rois[:, 0], p.rois[:, 2], d.spatial_scale_x, out_w, width, rules)
    ranges, nan = {}, {}

    def beside(r: int, values: np.ndarray) -> None:
        with np.errstate(invalid="ignore", over="ignore"):  # NaN and inf inputs: no allowance (FP-2)
            region = region_bounded(p, r, values, y, x_axis, expected)
        bound[r] = region.bound.transpose(2, 0, 1)
        if region.low is not None:
            ranges[r] = (region.low, region.high)
        if region.nan is not None and region.nan.any():
            nan[r] = region.nan

    output = expected.outputs["OutputTensor"] = compute(p, beside)
    expected.bounds["OutputTensor"] = output_rounding(bound, output, d.output_tensor.data_type)
    if ranges:
        low, high = output.copy(), output.copy()
        for r, (lo, hi) in ranges.items():
            # Each alternative is an output in its own right: rounded once to the output type.
            low[r], high[r] = np.moveaxis(np.asarray(lo), -1, 0), np.moveaxis(np.asarray(hi), -1, 0)
        expected.alternatives["OutputTensor"] = (low, high)
    if nan:
        flags = np.zeros(output.shape, dtype=bool)
        for r, region_nan in nan.items():
            flags[r] = np.moveaxis(region_nan, -1, 0)
        expected.nan_alternatives["OutputTensor"] = flags
    return expected
