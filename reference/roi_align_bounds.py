"""ROI_ALIGN / ROI_ALIGN1 under a precision model: the exact output, a per-element rounding bound
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
  sample count), and a LINEAR coordinate within ``e`` of a cell edge (an integer) whose sample's
  slope bound is not finite: bilinear interpolation is continuous across a cell edge only for
  finite taps; beside an infinity or a NaN, which cell the kernel's rounded coordinate falls in
  (and whether a weight is exactly 0, ``0 * inf = NaN``) decides between NaN, an infinity or a
  number (``_cell_alternatives``). Each alternative's output joins the element's ``[low, high]``;
  an alternative NaN is flagged per element (``Expected.nan_alternatives``). Every alternative is
  the reading's: its sample values are what the reading's reduction folds
  (``roi_align.reduced_samples``), the largest weighted corner terms under ``corner-term-max``.

The bounds are computed over many regions at once (``_Pass``, ``_bulk_regions``: vectorized over
regions and channels, in chunks of ``CHUNK_BYTES``), each chunk of the separable AVERAGE's regions
in the worker thread that computed its values (``roi_align.compute``), and region by region
(``region_bounded``) only for the regions that hold a knife edge, which are found without a loop
too (``_knife_edge_regions``). Both give the same numbers, bit for bit, with any number of worker
threads, as the region-by-region computation this module once was (``tests/reference/
test_bounds_oracle.py`` holds that computation and checks it). Where the optional compiled loops
are built (``native``), the AVERAGE of LINEAR samples takes its bounds (and, for a FLOAT32
output, their rounding allowance) from one C pass (``_native_bounds``), with the same numbers.
"""

from __future__ import annotations

import functools
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from . import native
from .nan_rules import nan_ignoring_max
from .precision import Approx, Arithmetic, Expected, KnifeEdge, PrecisionModel, output_rounding, rounding_factors
from .roi_align import (
    MAX_SAMPLE_POINTS_PER_REGION,
    PRIMARY,
    AnyRoiAlign,
    KernelInput,
    RoiAlign1Desc,
    Rules,
    compute,
    edge_taps,
    gather,
    kernel_input,
    max_start,
    no_sample_value,
    reads_input,
    reduced_samples,
    region_value,
)
from .workers import Workers, buffer

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
    the regions, and the regions' sample coordinates (computed once per sample count, for every
    region that count is among the counts of)."""

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
    # per region: the exact sample count, and those rounding the ratio down or up gives
    exact: np.ndarray
    below: np.ndarray
    above: np.ndarray
    rules: Rules
    _coords: dict[int, tuple[np.ndarray, _Along]] = field(default_factory=dict)

    def counts(self, region: int) -> tuple[int, ...]:
        """Region ``region``'s sample counts: the exact one, then the others rounding can give."""
        return tuple(dict.fromkeys((int(self.exact[region]), int(self.below[region]), int(self.above[region]))))

    @property
    def several(self) -> np.ndarray:
        """Per region: whether rounding can give it another sample count (a knife edge)."""
        return (self.below != self.exact) | (self.above != self.exact)

    def grid(self, n: int) -> tuple[np.ndarray, _Along]:
        """The regions (ascending) that ``n`` is a sample count of, and their ``out * n`` sample
        coordinates (``roi_align.sample_coordinates``) with their facts (``_along``), row by row."""
        if n not in self._coords:
            rows = np.flatnonzero((self.exact == n) | (self.below == n) | (self.above == n))
            self._coords[n] = (rows, _along(self._grid(rows, n), self.size, self.rules))
        return self._coords[n]

    def along(self, regions: np.ndarray, n: int) -> _Along:
        """The coordinates and facts of ``regions`` (each of count ``n``), one row each; the
        summaries ``all_inside``, ``any_*`` are arrays over them."""
        rows, g = self.grid(n)
        return _take(g, np.searchsorted(rows, regions))

    def coords(self, region: int, n: int) -> _Along:
        """Region ``region``'s ``out * n`` sample coordinates and their facts (``grid``), the
        summaries as Python bools."""
        a = self.along(np.array([region]), n)
        return _Along(a.v[0], a.e[0], a.pairs[0], a.inside[0], a.flips[0], a.far[0], a.near[0], bool(a.all_inside[0]),
                      bool(a.any_flips[0]), bool(a.any_far[0]), bool(a.any_near[0]))

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
    return _Axis(ar, name, "OutputHeight" if name == "Y" else "OutputWidth", start, extent, ratio, out, size,
                 ar.const(float(np.float32(d.input_pixel_offset)) + rules.input_offset_shift),
                 ar.const(float(np.float32(d.output_pixel_offset))), d.align_regions_to_corners, exact, below, above,
                 rules)


def _edge_flips(c: Approx, size: int, rules: Rules = PRIMARY) -> np.ndarray:
    """Whether rounding can move each coordinate across the input's edge (``roi_align.reads_input``)."""
    now = reads_input(c.v, size, rules)
    return (reads_input(c.v - c.e, size, rules) != now) | (reads_input(c.v + c.e, size, rules) != now)


def _near_cell_edge(c: Approx) -> np.ndarray:
    """Coordinates that rounding can move into a neighbouring interpolation cell."""
    return (c.e > 0) & (np.abs(c.v - np.round(c.v)) <= c.e)


def _neighbourhood_slopes(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Largest |tap difference| along X and along Y (float64) over the 4x4 taps around each
    (y, x) of a plane: for ``ys (K, A)`` and ``xs (K, B)``, each row of ``ys`` with the same row
    of ``xs``, ``(K, A, B, C)`` each."""
    height, width, _ = plane.shape

    def around(v, size):
        base = np.floor(np.clip(v, 0, size - 1)).astype(np.int64)
        return np.clip(base[..., None] + np.arange(-1, 3), 0, size - 1)

    block = plane[around(ys, height)[:, :, None, :, None], around(xs, width)[:, None, :, None, :]].astype(np.float64)
    gx = np.abs(np.diff(block, axis=4)).max(axis=(3, 4))
    gy = np.abs(np.diff(block, axis=3)).max(axis=(3, 4))
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
    nan: Optional[np.ndarray] = None  # (len(ys), len(xs), C): the samples an alternative makes NaN
    cell_flips: tuple[np.ndarray, np.ndarray] | None = None  # the coordinates of cell-edge knife edges


def _linear_bound(plane: np.ndarray, ys: _Along, xs: _Along, k: float, slopes: type,
                  steepest: Optional[Callable[[], np.ndarray]] = None) -> np.ndarray:
    """The bounds of the LINEAR values at every (y, x) with the input clamped to its edge (RA-5):
    ``e_x Gx + e_y Gy`` for the coordinates plus ``k (|value| + Gx + Gy)`` for the arithmetic,
    with ``|value| <= |t00| + Gx + Gy``; in ``slopes`` (float32 for FLOAT32 taps, float64 for
    FLOAT16 ones, whose differences float32 may round). ``steepest``: the plane's ``_steepest``
    (worked out here when not given)."""
    # Each sample's four taps at once: (len(ys), 2, len(xs), 2, C), [:, a, :, b] = t_ab.
    taps: np.ndarray = gather(plane, ys.pairs, xs.pairs).reshape(ys.v.size, 2, xs.v.size, 2, -1).astype(slopes, copy=False)
    gx, gy = _tap_slopes(taps)
    _widen(plane, _rows_of(ys), _rows_of(xs), gx[None], gy[None], steepest or (lambda: _steepest(plane)))
    return _combine(gx, gy, taps[..., 0, :, 0, :], ys.e, xs.e, k)


def _tap_slopes(taps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Gx, Gy)`` of each sample's cell from its taps ``(..., Sy, 2, Sx, 2, C)`` (``[..., a, :, b, :]
    = t_ab``): ``max(|t01 - t00|, |t11 - t10|)`` and ``max(|t10 - t00|, |t11 - t01|)``."""
    across = np.subtract(taps[..., 1, :], taps[..., 0, :])  # |t01 - t00| and |t11 - t10|
    np.abs(across, out=across)
    gx = np.maximum(across[..., 0, :, :], across[..., 1, :, :])
    down = np.subtract(taps[..., 1, :, :, :], taps[..., 0, :, :, :])  # |t10 - t00| and |t11 - t01|
    np.abs(down, out=down)
    gy = np.maximum(down[..., 0, :], down[..., 1, :])
    return gx, gy


def _pair_slopes(taps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_tap_slopes`` of taps laid out ``(regions, Sy, 2, 2, Sx, C)`` (``[:, :, a, b] = t_ab``), in
    the thread's work arrays: the same differences, each pass over whole rows of samples."""
    shape = (taps.shape[0], taps.shape[1], taps.shape[4], taps.shape[5])
    gx, gy, other = (buffer(f"bounds.{name}", shape, taps.dtype) for name in ("gx", "gy", "other"))
    t00, t01, t10, t11 = taps[:, :, 0, 0], taps[:, :, 0, 1], taps[:, :, 1, 0], taps[:, :, 1, 1]
    # each difference and maximum with its operands in _tap_slopes' order (a NaN's payload is the first's)
    for slopes, first, second in ((gx, (t01, t00), (t11, t10)), (gy, (t10, t00), (t11, t01))):
        np.subtract(*first, out=slopes)
        np.abs(slopes, out=slopes)
        np.subtract(*second, out=other)
        np.abs(other, out=other)
        np.maximum(slopes, other, out=slopes)
    return gx, gy


def _combine(gx: np.ndarray, gy: np.ndarray, t00: np.ndarray, ey: np.ndarray, ex: np.ndarray, k: float) -> np.ndarray:
    """The sample bounds ``Gx (e_x + 2k) + Gy (e_y + 2k) + k |t00|`` in the slopes' type, added in
    that order, from the slopes and first taps ``(..., Sy, Sx, C)`` and the coordinate errors
    ``ey (..., Sy)``, ``ex (..., Sx)``; ``gx`` and ``gy`` are overwritten (no copies)."""
    kind = gx.dtype.type
    bound = np.multiply(gx, (ex + 2 * k).astype(kind)[..., None, :, None], out=gx)
    bound += np.multiply(gy, (ey + 2 * k).astype(kind)[..., :, None, None], out=gy)
    magnitude = np.abs(t00, out=gy)
    magnitude *= kind(k)
    bound += magnitude
    return bound


def _steepest(plane: np.ndarray) -> np.ndarray:
    """Per channel, the largest difference of neighbouring pixels of the plane along either
    axis, in float64: the slope of any cell within reach of a coordinate that rounding can move
    by a pixel or more."""
    data = plane.astype(np.float64)
    return np.fmax(np.abs(np.diff(data, axis=0)).max(axis=(0, 1), initial=0.0),
                   np.abs(np.diff(data, axis=1)).max(axis=(0, 1), initial=0.0))


def _rows_of(a: _Along) -> _Along:
    """One region's coordinates and facts as a one-row group (``_Axis.along``'s shape)."""
    return _Along(a.v[None], a.e[None], a.pairs[None], a.inside[None], a.flips[None], a.far[None], a.near[None],
                  np.array([a.all_inside]), np.array([a.any_flips]), np.array([a.any_far]), np.array([a.any_near]))


def _widen(plane: np.ndarray, ys: _Along, xs: _Along, gx: np.ndarray, gy: np.ndarray,
           steepest: Callable[[], np.ndarray]) -> None:
    """Where rounding can move a coordinate into the next cell, take the slopes of every cell
    within reach (the 4x4 taps around the sample) instead of its own cell's; where it can move
    it a whole pixel or more (float16 coordinates of a large input), the plane's largest
    (``steepest()``). For regions of one plane, one row each (``ys``, ``xs``: ``_Axis.along``),
    the slopes ``(regions, Sy, Sx, C)`` widened in place: first every far row, then every far
    column, of ``gx`` then of ``gy``; then the near rows, then the near columns."""
    if ys.far.any() or xs.far.any():
        wide = steepest().astype(gx.dtype)
        for slopes in (gx, gy):
            np.maximum(slopes, wide, out=slopes, where=ys.far[:, :, None, None])
            np.maximum(slopes, wide, out=slopes, where=xs.far[:, None, :, None])
    for near, along in ((ys.near, 1), (xs.near, 2)):
        regions, index = np.nonzero(near)
        if not regions.size:
            continue
        # the 4x4 slopes of a near row at every column of its region, of a near column at every row
        rows = ys.v[regions, index][:, None] if along == 1 else ys.v[regions]
        cols = xs.v[regions] if along == 1 else xs.v[regions, index][:, None]
        step = max(1, CHUNK_BYTES // (rows.shape[1] * cols.shape[1] * 16 * gx.shape[-1] * 8))
        for start in range(0, regions.size, step):
            part = slice(start, start + step)
            wide_x, wide_y = _neighbourhood_slopes(plane, rows[part], cols[part])
            for slopes, wide in ((gx, wide_x), (gy, wide_y)):
                if along == 1:
                    at = (regions[part], index[part])
                    slopes[at] = np.maximum(slopes[at], wide[:, 0])
                else:
                    slopes[regions[part], :, index[part]] = np.maximum(slopes[regions[part], :, index[part]],
                                                                       wide[:, :, 0])


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
             slopes: type, rules: Rules = PRIMARY, steepest: Optional[Callable[[], np.ndarray]] = None) -> _Samples:
    """Bounds and knife-edge ranges of every sample point of a region (module docstring); ``m``
    samples make one element (AVERAGE sums them: ``2mu |value|`` more per sample). The sample
    values are read only where a decision can flip, as the reading's reduction takes them
    (``roi_align.reduced_samples``: a MAX of corner terms ranges over corner terms)."""
    oob = float(np.float32(d.out_of_bounds_input_value))
    k_sum = 2 * m * ar.unit if d.reduction_function == "AVERAGE" else 0.0
    nearest: Any = None
    raw_low: Any
    raw_high: Any
    if d.interpolation_mode == "NEAREST_NEIGHBOR":
        _, bound, raw_low, raw_high, nearest = _nearest_samples(plane, ys, xs, ar, k_sum)
    else:
        bound = _linear_bound(plane, ys, xs, INTERPOLATION_ROUNDINGS * ar.unit + k_sum, slopes, steepest)
        raw_low = raw_high = None
    in_y, in_x, flip_y, flip_x = ys.inside, xs.inside, ys.flips, xs.flips
    samples = _Samples(bound, edge_flips=(flip_y, flip_x), nearest_flips=nearest)
    if not (ys.all_inside and xs.all_inside):
        inside = (in_y[:, None] & in_x[None, :])[:, :, None]
        samples.bound = np.where(inside, bound, np.float32(k_sum * abs(oob)))
    ranged = nearest is not None and (nearest[0].any() or nearest[1].any())
    can_in = ((in_y | flip_y)[:, None] & (in_x | flip_x)[None, :])[:, :, None]
    cell = None
    if nearest is None and (ys.any_near or xs.any_near):
        cell = beside_non_finite(bound, ys.near, xs.near, can_in)
    if not (ys.any_flips or xs.any_flips or ranged or cell is not None):
        return samples
    if raw_low is None:
        raw_low = raw_high = reduced_samples(plane, ys.v, xs.v, d.reduction_function, rules)
    can_out = ((~in_y | flip_y)[:, None] | (~in_x | flip_x)[None, :])[:, :, None]
    samples.low = np.fmin(np.where(can_in, raw_low, np.inf), np.where(can_out, oob, np.inf))
    samples.high = np.fmax(np.where(can_in, raw_high, -np.inf), np.where(can_out, oob, -np.inf))
    samples.moved = can_in & can_out
    if ranged:
        samples.moved = samples.moved | (nearest[0][:, None] | nearest[1][None, :])[:, :, None]
    if cell is not None:
        low, high, nan = _cell_alternatives(plane, ys, xs, cell, d.reduction_function, rules)
        samples.low = np.where(cell, np.fmin(samples.low, low), samples.low)
        samples.high = np.where(cell, np.fmax(samples.high, high), samples.high)
        samples.nan = cell & nan
        samples.moved = samples.moved | cell
        samples.cell_flips = (ys.near & cell.any(axis=(1, 2)), xs.near & cell.any(axis=(0, 2)))
    samples.bound = np.where(can_in, bound, np.float32(k_sum * abs(oob)))
    return samples


def beside_non_finite(bound: np.ndarray, near_y: np.ndarray, near_x: np.ndarray,
                      can_in: np.ndarray) -> Optional[np.ndarray]:
    """The LINEAR samples ``(Sy, Sx, C)`` whose cell-edge decision is a knife edge (None: none is):
    a coordinate within its error of a cell edge (``near``), the sample able to read the input,
    and its slope bound (over the 4x4 taps within reach, ``_widen``) not finite, so an
    infinity or a NaN lies among the taps the cells on either side read. With finite taps the
    slope bound covers the move into the next cell, and nothing changes."""
    cell = np.logical_not(np.isfinite(bound))
    cell &= near_y[:, None, None] | near_x[None, :, None]
    cell &= can_in
    return cell if cell.any() else None


#: Candidate coordinates per axis of a cell-edge knife edge (``_cell_candidates``).
CELL_CANDIDATES = 5


def _cell_candidates(a: _Along, index: np.ndarray) -> np.ndarray:
    """``(len(index), CELL_CANDIDATES)`` coordinates that cover every value a kernel's rounded
    coordinate can give, for the coordinates ``index`` of ``a``: the ends of the reach ``c - e``
    and ``c + e`` and, where ``c`` lies within ``e`` of an integer ``k``, ``k`` itself (the taps
    ``k, k + 1`` with weights 1 and 0) and its float64 neighbours on either side that the reach
    holds (``floor`` one lower, or a weight just above 0). Within one cell a value is linear in the
    coordinate (finite taps) or keeps its infinity or NaN, so the ends and the edge's sides hold
    its extremes. A coordinate that rounding moves a pixel or more takes ``c`` alone (its slope
    bound is the plane's: no allowance there)."""
    v, e, near = a.v[index], a.e[index], a.near[index]
    spread = np.where(a.far[index], 0.0, e)
    k = np.round(v)
    below = np.where(near & (v - e < k), np.nextafter(k, -np.inf), v)
    above = np.where(near & (v + e > k), np.nextafter(k, np.inf), v)
    return np.stack([v - spread, below, np.where(near, k, v), above, v + spread], axis=-1)


def _cell_alternatives(plane: np.ndarray, ys: _Along, xs: _Along, cell: np.ndarray, reduction: str,
                       rules: Rules) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lowest and highest value (``fmin``/``fmax``) and whether some value is NaN, per sample
    ``(Sy, Sx, C)``, over the candidate coordinates (``_cell_candidates``) of the rows and
    columns that hold a sample of ``cell``; elsewhere ``inf``, ``-inf``, False. The values are the
    reading's (``roi_align.reduced_samples``: its interpolation, or its corner terms for a MAX of
    them), so its taps and weights decide, ``0 * inf`` too."""
    rows, cols = np.flatnonzero(cell.any(axis=(1, 2))), np.flatnonzero(cell.any(axis=(0, 2)))
    cy, cx = _cell_candidates(ys, rows), _cell_candidates(xs, cols)
    values = reduced_samples(plane, cy.ravel(), cx.ravel(), reduction, rules)
    values = values.reshape(rows.size, CELL_CANDIDATES, cols.size, CELL_CANDIDATES, -1)
    shape = (ys.v.size, xs.v.size, values.shape[-1])
    low, high = np.full(shape, np.inf, dtype=values.dtype), np.full(shape, -np.inf, dtype=values.dtype)
    nan = np.zeros(shape, dtype=bool)
    at = np.ix_(rows, cols)
    low[at] = np.fmin.reduce(values, axis=(1, 3))
    high[at] = np.fmax.reduce(values, axis=(1, 3))
    nan[at] = np.isnan(values).any(axis=(1, 3))
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
    nan: Optional[np.ndarray] = None  # elements an alternative makes NaN (None: none)


def _reduce(d: RoiAlign1Desc, s: _Samples, n_y: int, n_x: int, value: np.ndarray, rules: Rules = PRIMARY) -> _Region:
    """The page's reduction of each element's ``n_y x n_x`` sample bounds and ranges (AVERAGE:
    the mean of the sample bounds, the sum's rounding being in them; MAX: the largest, both ends
    of the range folded with the value ``rules``' MAX starts from, as the kernel folds it:
    ``roi_align.max_start``), beside the elements' ``value``. An element none of whose samples a
    decision can change keeps ``value`` as its range (``low == high == value``): its samples'
    range would be their mean again, summed in another order than the kernel's."""
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
    # A NaN sample makes its element's mean NaN; for MAX this is a superset (a NaN sample may lose).
    nan = None if s.nan is None else grid(s.nan).any(axis=(1, 3))
    if d.reduction_function == "AVERAGE":
        low, high = reduce(s.low), reduce(s.high)
    else:
        start = max_start(rules, n_y * n_x)
        low, high = _started(_lowest_max(grid, s.low, s.high, s.nan), start), _started(reduce(s.high), start)
    return _Region(value, bound, np.where(moved, low, value), np.where(moved, high, value), s, nan)


def _started(extreme: np.ndarray, start: Optional[float]) -> np.ndarray:
    """A MAX range's end ``extreme`` as a MAX that starts from ``start`` gives it (None: unchanged):
    no lower than the start, so where every sample an alternative leaves is -inf or dropped, the
    end is the start (-FLT_MAX under ``lowest-start``), as the kernel outputs it. An end of NaN
    samples only (``inf``, above every number) is left for ``_lowest_max``'s reader to see."""
    if start is None:
        return extreme
    with np.errstate(over="ignore"):  # -FLT_MAX in a float16 range is -inf, as the output rounds it
        return np.where(np.isposinf(extreme), extreme, np.fmax(extreme, extreme.dtype.type(start)))


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


def _evaluate(b: "_Bounding", row: int, n_y: int, n_x: int, value: Optional[np.ndarray] = None) -> _Region:
    """Region ``row`` at sample counts ``(n_y, n_x)``, its elements' values being ``value`` (the
    kernel's output at the exact counts) or, at an alternative count, the kernel's region
    computed at that count (``roi_align.region_value``), rounded once to the output type like
    the output."""
    p = b.p
    if n_y == 0 or n_x == 0:  # no sample (the onnx count of an empty region): OutOfBoundsInputValue, exactly
        filled = no_sample_value(p.desc, p.planes.shape[-1]).astype(p.dtype)
        zeros = np.zeros(filled.shape, dtype=p.dtype)
        return _Region(filled if value is None else value, zeros.astype(np.float32), None, None, _Samples(zeros))
    ys, xs = b.y.coords(row, n_y), b.x.coords(row, n_x)
    if value is None:
        value = region_value(p, row, ys.v, xs.v, n_y, n_x).astype(p.dtype)
    batch = int(p.batch_indices[row])
    samples = _samples(p.planes[batch], ys, xs, p.desc, b.ar, n_y * n_x, b.slope_type(batch), p.rules,
                       lambda: b.steepest(batch))
    return _reduce(p.desc, samples, n_y, n_x, value, p.rules)


def _slope_type(dtype: np.dtype, plane: np.ndarray) -> type:
    """The type the tap differences (slopes) are taken in: float32 for FLOAT32 taps whose
    differences cannot overflow it (every finite magnitude under 2**127); float64 for FLOAT16
    taps, whose differences float32 may round, and for FLOAT32 taps near FLT_MAX, whose
    difference overflows float32 to an infinite slope that no comparison can use (FP-2)."""
    if dtype != np.float32:
        return np.float64
    if plane.size:
        lowest, highest = float(plane.min()), float(plane.max())  # no copy; NaN if the plane holds one
        if np.isfinite(lowest) and np.isfinite(highest):
            return np.float32 if max(-lowest, highest) < 2.0**127 else np.float64
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


@dataclass
class _Bounding:
    """What the bounds of one desc's regions read: the kernel's input, both axes of every region,
    the model's arithmetic, and each input plane's slope type (``_slope_type``, a scan of the
    plane: taken once per plane)."""

    p: KernelInput
    y: _Axis
    x: _Axis
    ar: Arithmetic
    _slopes: dict[int, type] = field(default_factory=dict)
    _steepest: dict[int, np.ndarray] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def steepest(self, batch: int) -> np.ndarray:
        """``_steepest`` of input plane ``batch`` (a scan of the plane: taken once per plane, by
        the first of the worker threads that asks)."""
        with self._lock:
            if batch not in self._steepest:
                self._steepest[batch] = _steepest(self.p.planes[batch])
            return self._steepest[batch]

    def slope_type(self, batch: int) -> type:
        """The slope type of input plane ``batch``."""
        with self._lock:
            if batch not in self._slopes:
                self._slopes[batch] = _slope_type(self.p.dtype, self.p.planes[batch])
            return self._slopes[batch]


def region_bounded(b: _Bounding, row: int, value: np.ndarray, expected: Expected) -> _Region:
    """Region ``row`` (of ``b.p``), whose elements the kernel computed as ``value`` (channels
    last): their bounds and knife-edge ranges; notes each knife edge in ``expected``. The
    per-region path, for the regions ``_Pass`` leaves to it."""
    d = b.p.desc
    counts_y, counts_x = b.y.counts(row), b.x.counts(row)
    region = _evaluate(b, row, counts_y[0], counts_x[0], value)
    first = region.samples
    _, _, out_h, out_w = d.output_tensor.sizes
    for n_y, n_x in itertools.product(counts_y, counts_x):
        # An alternative count past the reference's limit is not evaluated (the exact one was).
        if (n_y, n_x) != (counts_y[0], counts_x[0]) and n_y * out_h * n_x * out_w <= MAX_SAMPLE_POINTS_PER_REGION:
            _merge(region, _evaluate(b, row, n_y, n_x))
    if region.low is not None:
        _note_region(expected, d, row, region, first, b.y, b.x)
    return region


def _note_region(expected: Expected, d: RoiAlign1Desc, row: int, region: _Region, s: _Samples, y: _Axis,
                 x: _Axis) -> None:
    """One note per kind of knife-edge decision this region holds."""
    elements = int(np.count_nonzero(region.low != region.high))
    sizes = {"Y": d.input_tensor.sizes[2], "X": d.input_tensor.sizes[3]}
    coords = {"Y": y.coords(row, y.counts(row)[0]).v, "X": x.coords(row, x.counts(row)[0]).v}
    for axis in (y, x):
        counts = axis.counts(row)
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


# --- every region at once ---------------------------------------------------------------------

#: Bytes of sample-point work (per sample point and channel: its four taps for LINEAR, its value
#: for NEAREST) the bounds take at a time: regions are taken in chunks of about this size, a few
#: arrays of it alive per chunk.
CHUNK_BYTES = 2**20

#: Bytes of sample-point work of one worker task of the regions the kernel does not hand over.
TASK_BYTES = 2**24


def _knife_edge_regions(b: _Bounding) -> np.ndarray:
    """Per region: whether it holds a knife edge that shows before its bounds are computed, so
    that ``region_bounded`` takes it: a sample count that rounding can change (or no sample), a
    coordinate that rounding can move across the input's edge, a NEAREST coordinate within its
    error of a half. Vectorized over the regions of each sample count; it works out each count's
    coordinates (``_Axis.grid``), which the worker threads of ``_Pass.rows`` then only read. (A
    LINEAR coordinate within its error of a cell edge beside an infinite or NaN tap shows while
    the bounds are computed: ``_bulk_regions``.)"""
    linear = b.p.desc.interpolation_mode == "LINEAR"
    left: np.ndarray = b.y.several | b.x.several | (b.y.exact == 0) | (b.x.exact == 0)
    for axis in (b.y, b.x):
        for n in np.unique(axis.exact[~left]).tolist():
            regions = np.flatnonzero(~left & (axis.exact == n))
            a = axis.along(regions, n)
            edge = a.any_flips if linear else a.any_flips | _nearest_moves(a, b.ar, axis.size)
            left[regions[edge]] = True
    if linear:
        for batch in np.unique(b.p.batch_indices[~left]).tolist():
            b.slope_type(int(batch))
    return left


@dataclass
class _Pass:
    """One pass of the bounds over the regions without a knife edge (``execute_bounded``):
    ``left`` marks the regions ``region_bounded`` takes (``_knife_edge_regions``, and the
    cell-edge ones found here), ``done`` those whose bound is written and rounded (``output_rounding``)."""

    b: _Bounding
    bound: np.ndarray
    left: np.ndarray
    done: np.ndarray

    def rows(self, rows: np.ndarray, output: np.ndarray) -> None:
        """The bounds of ``rows`` (any regions whose values ``output`` holds), in the thread that
        calls it: grouped by plane and sample count, ``_bulk_regions`` each group, then rounded
        to the output type's allowance (where ``_bulk_regions`` has not). Regions ``left`` are
        skipped; rows are never shared
        between two calls running at once, so each writes its own rows of ``bound``, ``left``
        and ``done`` alone."""
        b = self.b
        rows = rows[~self.left[rows]]
        if not rows.size:
            return
        with np.errstate(invalid="ignore", over="ignore"):  # NaN and inf inputs: no allowance (FP-2)
            keys = np.stack([b.p.batch_indices[rows].astype(np.int64), b.y.exact[rows], b.x.exact[rows]], axis=1)
            for batch, n_y, n_x in np.unique(keys, axis=0).tolist():
                regions = rows[(keys == (batch, n_y, n_x)).all(axis=1)]
                beside, rounded = _bulk_regions(b, batch, regions, b.y.along(regions, n_y), b.x.along(regions, n_x),
                                                n_y, n_x, self.bound, output)
                self.left[regions[beside]] = True
                self.done[regions[rounded]] = True
            rows = rows[~self.left[rows] & ~self.done[rows]]
            if rows.size:
                self.bound[rows] = output_rounding(self.bound[rows], output[rows], b.p.desc.output_tensor.data_type)
        self.done[rows] = True

    def rest(self, output: np.ndarray, pool: Workers) -> None:
        """``rows`` of every region neither ``left`` nor ``done`` (those the separable kernel did
        not hand over: MAX, NEAREST, a non-finite input), in tasks of about ``TASK_BYTES`` of
        sample-point work, in ``pool``."""
        b = self.b
        rest = np.flatnonzero(~self.left & ~self.done)
        _, channels, out_h, out_w = self.bound.shape
        work = (b.y.exact[rest] * b.x.exact[rest]).astype(np.float64) * (out_h * out_w * channels * 16)
        for part in np.split(rest, np.flatnonzero(np.diff(np.cumsum(work) // TASK_BYTES)) + 1):
            pool.submit(functools.partial(self.rows, part, output))


def _nearest_moves(c: _Along, ar: Arithmetic, size: int) -> np.ndarray:
    """Per region (row of ``c``): whether rounding can move some NEAREST index ``floor(c + 0.5)``
    (``_nearest_samples``' candidates differ)."""
    shifted = ar.add(c, ar.const(0.5))
    first = np.clip(np.floor(shifted.v - shifted.e), 0, size - 1)
    last = np.clip(np.floor(shifted.v + shifted.e), 0, size - 1)
    return (first != last).any(axis=-1)


def _bulk_regions(b: _Bounding, batch: int, regions: np.ndarray, ys: _Along, xs: _Along, n_y: int, n_x: int,
                  bound: np.ndarray, output: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bounds of ``regions`` (all on plane ``batch``, all at counts ``(n_y, n_x)``, coordinates
    ``ys``/``xs`` one row per region): the sample bounds as ``_samples`` computes them, then each
    region's reduction as ``_reduce`` computes it. Returns, per region, whether it holds a
    cell-edge knife edge (``beside_non_finite``: a near coordinate whose sample bound is not
    finite), which ``region_bounded`` must take instead, and whether its bound is already the
    allowance ``output_rounding`` makes of it with the values ``output`` holds. The regions the
    compiled loop takes (``_native_bounds``: bound and rounding in one pass) go there, the rest to
    ``_numpy_bulk``; both give the same numbers."""
    quiet = ~(ys.any_near | xs.any_near | ys.any_far | xs.any_far)
    none = np.zeros(regions.size, dtype=bool)
    done = _native_bounds(b, batch, regions[quiet], _take(ys, quiet), _take(xs, quiet), n_y, n_x, bound,
                          output) if quiet.any() else False
    if done is False:
        return _numpy_bulk(b, batch, regions, ys, xs, n_y, n_x, bound), none
    beside = none.copy()
    if not quiet.all():
        beside[~quiet] = _numpy_bulk(b, batch, regions[~quiet], _take(ys, ~quiet), _take(xs, ~quiet), n_y, n_x, bound)
    return beside, (quiet if done else none)


def _sum_constants(b: _Bounding, m: int) -> tuple[float, np.float32]:
    """The AVERAGE's summation allowance ``k_sum`` (0 for MAX) and the bound of a sample outside
    the input, ``k_sum |OutOfBoundsInputValue|``, for ``m`` samples per element."""
    d = b.p.desc
    k_sum = 2 * m * b.ar.unit if d.reduction_function == "AVERAGE" else 0.0
    return k_sum, np.float32(k_sum * abs(float(np.float32(d.out_of_bounds_input_value))))


def _native_bounds(b: _Bounding, batch: int, regions: np.ndarray, ys: _Along, xs: _Along, n_y: int, n_x: int,
                   bound: np.ndarray, output: np.ndarray) -> bool | None:
    """``_numpy_bulk`` of regions no coordinate of which rounding can move into another cell, by
    the compiled loop (``native_kernels.c``: LINEAR samples, AVERAGE, float32 or float64 slopes),
    writing ``bound``, then for a float32 output ``output_rounding`` with their values in
    ``output`` in the same pass. Returns True (bounds and rounding written), None (bounds written,
    rounding left to the caller), or False (nothing written: it does not apply or is not
    available). One channel is left to NumPy: its reduction then runs in another order (the C
    loop adds Y outer, X inner)."""
    d, plane = b.p.desc, b.p.planes[batch]
    if d.interpolation_mode != "LINEAR" or d.reduction_function != "AVERAGE" or plane.shape[-1] < 2:
        return False
    kind = b.slope_type(batch)
    if kind not in (np.float32, np.float64) or plane.dtype != np.float32:
        return False
    if not (bound.flags.c_contiguous and output.flags.c_contiguous and bound.shape == output.shape):
        return False
    lib = native.kernels()
    if lib is None:
        return False
    height, width = plane.shape[:2]
    _, _, out_h, out_w = d.output_tensor.sizes
    # The C loop reads and writes wherever its arrays point: a tap outside the plane (which NumPy's
    # clipping gather would survive), a region outside the output or arrays of other shapes than
    # the counts say leave these regions to NumPy rather than reach past an array.
    shapes = {(ys.pairs.shape, ys.e.shape, ys.inside.shape), (xs.pairs.shape, xs.e.shape, xs.inside.shape)}
    if shapes != {((regions.size, 2 * out_h * n_y), (regions.size, out_h * n_y), (regions.size, out_h * n_y)),
                  ((regions.size, 2 * out_w * n_x), (regions.size, out_w * n_x), (regions.size, out_w * n_x))}:
        return False
    if not (_within(ys.pairs, height) and _within(xs.pairs, width) and _within(regions, bound.shape[0])):
        return False
    k_sum, outside = _sum_constants(b, n_y * n_x)
    k = INTERPOLATION_ROUNDINGS * b.ar.unit + k_sum
    weights = [np.ascontiguousarray((a.e + 2 * k).astype(kind)) for a in (ys, xs)]
    rounded = output.dtype == np.float32  # a float16 output's rounding stays in NumPy
    function = lib.linear_average_bounds if kind is np.float32 else lib.linear_average_bounds_f64
    status = function(
        np.ascontiguousarray(plane), plane.shape[1], plane.shape[2], regions.size, out_h, out_w, n_y, n_x,
        np.ascontiguousarray(ys.pairs, dtype=np.int64), np.ascontiguousarray(xs.pairs, dtype=np.int64), *weights,
        kind(k), np.ascontiguousarray(ys.inside, dtype=np.uint8), np.ascontiguousarray(xs.inside, dtype=np.uint8),
        outside, np.ascontiguousarray(regions, dtype=np.int64), bound, output.ctypes.data if rounded else None,
        *rounding_factors(d.output_tensor.data_type))
    if status != 0:
        raise MemoryError("the compiled ROI_ALIGN bounds could not allocate one element's sums")
    return True if rounded else None


def _within(taps: np.ndarray, size: int) -> bool:
    """Whether every tap index lies in ``[0, size)``."""
    return taps.size == 0 or (int(taps.min()) >= 0 and int(taps.max()) < size)


def _take(a: _Along, index: Any) -> _Along:
    """The rows ``index`` of the coordinates of several regions (``_Axis.along``): a slice gives
    views, a mask or indices copies."""
    return _Along(a.v[index], a.e[index], a.pairs[index], a.inside[index], a.flips[index], a.far[index], a.near[index],
                  a.all_inside[index], a.any_flips[index], a.any_far[index], a.any_near[index])


def _numpy_bulk(b: _Bounding, batch: int, regions: np.ndarray, ys: _Along, xs: _Along, n_y: int, n_x: int,
                bound: np.ndarray) -> np.ndarray:
    """``_bulk_regions`` in NumPy, in chunks of about ``CHUNK_BYTES``."""
    p, ar = b.p, b.ar
    d = p.desc
    plane = p.planes[batch]
    channels = plane.shape[-1]
    _, _, out_h, out_w = d.output_tensor.sizes
    m = n_y * n_x
    average = d.reduction_function == "AVERAGE"
    k_sum, outside = _sum_constants(b, m)
    linear = d.interpolation_mode == "LINEAR"
    kind = b.slope_type(batch) if linear else np.float32
    per_region = ys.v.shape[1] * xs.v.shape[1] * channels * np.dtype(kind).itemsize * (4 if linear else 1)
    step = max(1, CHUNK_BYTES // per_region)
    beside = np.zeros(regions.size, dtype=bool)
    # per region: whether some coordinate is near a cell edge, or moves a pixel; some sample outside
    near = ys.any_near | xs.any_near
    moves = near | ys.any_far | xs.any_far
    partly_outside = ~(ys.all_inside & xs.all_inside)
    for start in range(0, regions.size, step):
        part = slice(start, start + step)
        cy, cx = _take(ys, part), _take(xs, part)
        if linear:
            samples = _tap_bounds(b, batch, cy, cx, INTERPOLATION_ROUNDINGS * ar.unit + k_sum, kind,
                                  bool(moves[part].any()))
            if near[part].any():  # no region here has flips: can_in is inside
                cell = np.logical_not(np.isfinite(samples))
                cell &= cy.near[:, :, None, None] | cx.near[:, None, :, None]
                cell &= (cy.inside[:, :, None] & cx.inside[:, None, :])[..., None]
                beside[part] = cell.any(axis=(1, 2, 3))
        else:
            samples = _nearest_bounds(plane, cy, cx, ar, k_sum)
        if partly_outside[part].any():
            # A sample outside the input reads OutOfBoundsInputValue: the sum's share of its size alone
            inside = (cy.inside[:, :, None] & cx.inside[:, None, :])[..., None]
            np.copyto(samples, outside, where=~inside)
        totals = buffer("bounds.totals", (samples.shape[0], out_h, out_w, channels), samples.dtype.type)
        # each region's reduction as _reduce makes it, the regions side by side: the same sums
        grid = samples.reshape(samples.shape[0], out_h, n_y, out_w, n_x, channels)
        (np.add if average else np.fmax).reduce(grid, axis=(2, 4), out=totals)
        if average and m & (m - 1):
            np.true_divide(totals, np.intp(m), out=totals, casting="unsafe")  # in float64, rounded once
        elif average:  # a power of two: exact in float64, so float32's own quotient is the same
            np.true_divide(totals, np.float32(m), out=totals)
        bound[regions[part]] = totals.transpose(0, 3, 1, 2)
    return beside


def _tap_bounds(b: _Bounding, batch: int, ys: _Along, xs: _Along, k: float, kind: type, moves: bool = True
                ) -> np.ndarray:
    """The LINEAR sample bounds ``(regions, Sy, Sx, C)`` of ``_combine``, from each sample's four
    taps: ``_linear_bound`` for several regions of plane ``batch`` (``moves``: whether some
    coordinate of them can move into another cell, which widens the slopes)."""
    plane = b.p.planes[batch]
    height, width, channels = plane.shape
    regions, rows, cols = ys.v.shape[0], ys.v.shape[1], xs.v.shape[1]
    # [region, row, a, b, column] = t_ab of that sample: each difference is of whole rows
    cells = (ys.pairs.reshape(regions, rows, 2)[:, :, :, None, None] * width
             + xs.pairs.reshape(regions, cols, 2).transpose(0, 2, 1)[:, None, None, :, :])
    # mode="clip" (every cell is in range): take buffers its output under the default mode="raise"
    taps = plane.reshape(height * width, channels).take(
        cells.ravel(), axis=0, out=buffer("bounds.taps", (cells.size, channels), plane.dtype), mode="clip")
    taps = taps.reshape(regions, rows, 2, 2, cols, channels).astype(kind, copy=False)
    gx, gy = _pair_slopes(taps)
    if moves:
        _widen(plane, ys, xs, gx, gy, lambda: b.steepest(batch))
    return _combine(gx, gy, taps[:, :, 0, 0], ys.e, xs.e, k)


def _nearest_bounds(plane: np.ndarray, ys: _Along, xs: _Along, ar: Arithmetic, k: float) -> np.ndarray:
    """The NEAREST sample bounds ``(regions, Sy, Sx, C)`` of ``_nearest_samples``: the sum's
    ``k |value|`` (a selection is exact), for regions whose indices rounding cannot move."""
    height, width, channels = plane.shape
    half = ar.const(0.5)
    iy = np.clip(np.floor(ar.add(ys, half).v), 0, height - 1).astype(np.int64)
    ix = np.clip(np.floor(ar.add(xs, half).v), 0, width - 1).astype(np.int64)
    cells = iy[:, :, None] * width + ix[:, None, :]
    raw = plane.reshape(height * width, channels).take(cells.ravel(), axis=0)
    bound = np.abs(raw.reshape(*cells.shape, channels), dtype=np.float32)
    bound *= np.float32(k)
    return bound


def execute_bounded(desc: AnyRoiAlign, tensors: dict[str, np.ndarray], model: PrecisionModel,
                    rules: Rules = PRIMARY) -> Expected:
    """The registry's ``bounded``: ``roi_align``'s output under ``model`` with its bound and
    knife-edge alternatives (an ``Expected``), for the reading ``rules`` (the primary one by
    default). The output is the kernel's (``roi_align.compute``, what ``execute_desc`` returns);
    the bounds are computed beside it, over many regions at once (``_Pass``: the separable
    AVERAGE's chunks in the worker threads that computed their values, the other regions in
    worker tasks after them), and region by region only where a knife edge asks for it
    (``region_bounded``).

    Memory, beyond the kernel's own (its output, the input laid out channels last, and per worker
    thread one chunk's elements in float64 and one region's taps): the bound, 4 bytes per output
    element, which becomes the allowance ``output_rounding`` makes of it chunk by chunk, in place;
    per worker thread, work arrays of a few ``CHUNK_BYTES`` (a region larger than a chunk is taken
    alone: its four taps per sample value, as the region-by-region computation held them); with
    knife edges, the range's two copies of the output. Measured (tracemalloc, two worker threads)
    on the stress tier: 9 to 21 bytes per output element with the input (the whole-image cases of
    8 output elements aside), well within each stress case's ``memory_mb``."""
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
    b = _Bounding(p, _axis(d, ar, "Y", p.rois[:, 1], p.rois[:, 3], d.spatial_scale_y, out_h, height, rules),
                  _axis(d, ar, "X", p.rois[:, 0], p.rois[:, 2], d.spatial_scale_x, out_w, width, rules), ar)

    # The kernel computes every region's values and hands each chunk of separable regions to the
    # bounds in the thread that computed it (their taps are still in its cache); the kernel refuses
    # a region of too many samples before the bounds allocate for it.
    left = _knife_edge_regions(b)
    run = _Pass(b, bound, left, np.zeros(left.shape, dtype=bool))
    output = expected.outputs["OutputTensor"] = compute(p, beside_chunk=run.rows)
    with Workers(1 if output.size * 8 <= TASK_BYTES else None) as pool:
        run.rest(output, pool)
    ranges, nan = {}, {}
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and inf inputs: no allowance (FP-2)
        for r in np.flatnonzero(left).tolist():
            region = region_bounded(b, r, output[r].transpose(1, 2, 0), expected)
            bound[r] = region.bound.transpose(2, 0, 1)
            if region.low is not None:
                ranges[r] = (region.low, region.high)
            if region.nan is not None and region.nan.any():
                nan[r] = region.nan
        if left.any():
            bound[left] = output_rounding(bound[left], output[left], d.output_tensor.data_type)
    expected.bounds["OutputTensor"] = bound
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
