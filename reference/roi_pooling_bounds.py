"""ROI_POOLING under a precision model: the knife-edge alternatives (``precision.py``; DECISIONS.md
FP-3). A max selects an input value, so no element has a rounding bound: only decisions can flip.

* ``round(Roi * SpatialScale)`` for x1, y1, x2, y2 (RP-1): the exact product ``p`` against the
  product in the model's type, ``p`` within its rounding error ``e``; every value ``round``
  takes on ``[p - e, p + e]`` is a candidate corner (the reference's own, of the float32
  product, first), rounded as the reading rounds. An exact product (``e = 0``) has no
  alternative, a halfway one included: which neighbour a tie takes is a reading
  (``half-away-rounding``), not rounding error.
* Bin bounds are the reading's own (RP-2): kernels that compute the page's integer divisions in
  float32 are the ``float32-bins`` reading, not a rounding of the page's formula.

Each alternative bin's maximum joins the element's ``[low, high]``; a bin that an alternative
can leave empty adds 0 (RP-4) and its smallest element to the low side.
"""

from __future__ import annotations

import itertools

import numpy as np

from .precision import MAX_NOTES, Arithmetic, Expected, KnifeEdge, PrecisionModel
from .roi_pooling import (
    PRIMARY,
    RoiPoolingDesc,
    Rules,
    bin_bounds_over,
    compute,
    integers,
    kernel_input,
    pool_region,
    round_corner,
    scaled_regions,
)

_CORNERS = ("x1", "y1", "x2", "y2")


def corner_candidates(ar: Arithmetic, rois: np.ndarray, spatial_scale: float, rules: Rules = PRIMARY) -> np.ndarray:
    """``(regions, 4, 3)`` for ROI rows ``[BatchID, x1, y1, x2, y2]``: per corner the reference's
    rounded value (of the float32 product, RP-1), then the lowest and highest value ``round()``
    (as ``rules`` round) takes over the exact product's rounding error in the model's type.
    Integers as ``roi_pooling.integers`` holds them (int64 unless a corner is beyond 2**62)."""
    values = rois[:, 1:].astype(np.float64)
    reference = scaled_regions(rois[:, 1:], spatial_scale, rules).reshape(-1, 4)
    product = ar.mul(ar.const(values), ar.const(float(np.float32(spatial_scale))))
    error = np.where(np.isfinite(product.e), product.e, 0.0)
    moves = error > 0  # an exact product has one rounding: the reading's own
    low = np.where(moves, integers(round_corner(product.v - error, rules)), reference)
    high = np.where(moves, integers(round_corner(product.v + error, rules)), reference)
    return integers(np.stack([reference, np.minimum(low, reference), np.maximum(high, reference)], axis=-1))


def bin_candidates(ar: Arithmetic, start: np.ndarray, region: np.ndarray, pooled: int,
                   limit: int, rules: Rules = PRIMARY) -> tuple[np.ndarray, np.ndarray]:
    """For regions starting at ``start`` of ``region`` rows (arrays over the regions): the bin
    bounds along one axis, ``starts`` and ``ends`` of shape ``(regions, pooled, 3)`` clamped to
    ``[0, limit]``: the reading's bound (``roi_pooling.bin_bounds``) in every slot, since a bin's
    bounds are a formula of whole numbers that the reading computes, not a rounding (module
    docstring). ``ar`` is kept for the shape of the other candidates."""
    start, region = (np.ravel(integers(np.asarray(a)))[:, None] for a in (start, region))
    starts, ends = bin_bounds_over(np.arange(pooled)[None, :], region, pooled, start, limit, rules)
    return np.repeat(starts[..., None], 3, axis=-1), np.repeat(ends[..., None], 3, axis=-1)


def _bin_range(plane: np.ndarray, wide: tuple[int, int, int, int], narrow: tuple[int, int, int, int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` per channel of a bin's maximum over its candidate bounds: ``wide`` and
    ``narrow`` are ``(top, bottom, left, right)`` of the largest and the smallest candidate."""
    block = plane[wide[0]:wide[1], wide[2]:wide[3]]
    if block.size == 0:
        zero = np.zeros(plane.shape[-1])
        return zero, zero
    high = np.fmax.reduce(block, axis=(0, 1))
    top, bottom, left, right = narrow
    if bottom > top and right > left:
        low = np.fmax.reduce(plane[top:bottom, left:right], axis=(0, 1))
    else:  # an alternative can leave the bin empty: 0 (RP-4), or any maximum of a smaller range
        low = np.fmin(0.0, np.fmin.reduce(block, axis=(0, 1)))
    return low, high


def region_range(plane: np.ndarray, value: np.ndarray, rows: tuple[np.ndarray, np.ndarray],
                 cols: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` of one region's bins ``(PooledHeight, PooledWidth, C)`` whose exact maxima
    are ``value``, over the bin bounds ``rows`` / ``cols`` (``bin_candidates`` of this region)."""
    low, high = value.copy(), value.copy()  # every candidate is an input value or 0: exact in its type
    def spans(bounds):  # per bin (widest start, widest end, narrowest start, narrowest end)
        starts, ends = bounds
        return list(zip(starts.min(axis=1).tolist(), ends.max(axis=1).tolist(), starts.max(axis=1).tolist(),
                        ends.min(axis=1).tolist()))

    row_span, col_span = spans(rows), spans(cols)
    row_exact = list(zip(rows[0][:, 0].tolist(), rows[1][:, 0].tolist()))
    col_exact = list(zip(cols[0][:, 0].tolist(), cols[1][:, 0].tolist()))
    moving_rows = [span[:2] != exact or span[2:] != exact for span, exact in zip(row_span, row_exact)]
    moving_cols = [span[:2] != exact or span[2:] != exact for span, exact in zip(col_span, col_exact)]
    for py, px in itertools.product(range(len(row_span)), range(len(col_span))):
        if moving_rows[py] or moving_cols[px]:
            r, c = row_span[py], col_span[px]
            narrow = (r[2], r[3], c[2], c[3])
            if narrow == (*row_exact[py], *col_exact[px]):
                high[py, px] = _bin_range(plane, (r[0], r[1], c[0], c[1]), (0, 0, 0, 0))[1]
            else:
                low[py, px], high[py, px] = _bin_range(plane, (r[0], r[1], c[0], c[1]), narrow)
    return low, high


def execute_bounded(desc: RoiPoolingDesc, tensors: dict[str, np.ndarray], model: PrecisionModel,
                    rules: Rules = PRIMARY) -> Expected:
    """The registry's ``bounded``: ``roi_pooling``'s output with its knife-edge alternatives under
    ``model`` (no bound: every element is an input value). The output is the kernel's
    (``roi_pooling.compute``, what ``execute_desc`` returns); only the alternatives are computed here."""
    k = kernel_input(desc, tensors["InputTensor"], tensors["ROITensor"], rules)
    output = compute(k)
    expected = Expected(outputs={"OutputTensor": output}, model=model)
    ar = model.arithmetic(desc.input_tensor.data_type)
    if ar.exact:
        return expected
    rois, channels_last, maximum = k.rois, k.planes, k.maximum
    corners = corner_candidates(ar, rois, desc.spatial_scale, rules)
    exact = corners[..., 0]
    _, height, width, _ = channels_last.shape
    pooled_h, pooled_w = desc.pooled_size.height, desc.pooled_size.width
    rows = bin_candidates(ar, exact[:, 1], exact[:, 3] - exact[:, 1] + 1, pooled_h, height, rules)
    cols = bin_candidates(ar, exact[:, 0], exact[:, 2] - exact[:, 0] + 1, pooled_w, width, rules)
    moving = ((rows[0] != rows[0][..., :1]).any(axis=(1, 2)) | (rows[1] != rows[1][..., :1]).any(axis=(1, 2))
              | (cols[0] != cols[0][..., :1]).any(axis=(1, 2)) | (cols[1] != cols[1][..., :1]).any(axis=(1, 2))
              | (corners != corners[..., :1]).any(axis=(1, 2)))
    low = high = None  # the output itself until an alternative lowers (or raises) an element
    for r in np.flatnonzero(moving):
        plane = channels_last[int(rois[r, 0])]
        candidates = [tuple(dict.fromkeys(c.tolist())) for c in corners[r]]
        value = np.moveaxis(output[r], 0, -1)
        lo, hi = _region_alternatives(desc, plane, int(r), value, candidates, ar, expected,
                                      (rows[0][r], rows[1][r]), (cols[0][r], cols[1][r]), maximum, rules)
        if lo is None or hi is None:
            continue
        if (lo != value).any():  # most alternatives only widen a bin: its maximum can only grow
            low = output.copy() if low is None else low
            low[r] = np.moveaxis(lo, -1, 0)
        high = output.copy() if high is None else high
        high[r] = np.moveaxis(hi, -1, 0)
    if high is not None:
        expected.alternatives["OutputTensor"] = (output if low is None else low, high)
    return expected


def _region_alternatives(desc: RoiPoolingDesc, plane: np.ndarray, row: int, value: np.ndarray,
                         candidates: list[tuple[int, ...]], ar: Arithmetic, expected: Expected,
                         rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray],
                         maximum: np.ufunc, rules: Rules = PRIMARY) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(low, high)`` of region ``row`` (exact maxima ``value``, channels last) over every corner
    and bin alternative, or ``(None, None)`` when none changes an element; notes the decisions."""
    pooled_h, pooled_w = desc.pooled_size.height, desc.pooled_size.width
    height, width, channels = plane.shape
    low, high = region_range(plane, value, rows, cols)
    for corners in itertools.product(*candidates):
        if corners == tuple(c[0] for c in candidates):
            continue
        other = np.zeros((pooled_h, pooled_w, channels), dtype=plane.dtype)
        x1, y1, x2, y2 = corners
        pool_region(plane, (x1, y1, x2, y2), pooled_h, pooled_w, maximum, other, rules)
        rows_c = tuple(a[0] for a in bin_candidates(ar, np.array([y1]), np.array([y2 - y1 + 1]), pooled_h, height,
                                                    rules))
        cols_c = tuple(a[0] for a in bin_candidates(ar, np.array([x1]), np.array([x2 - x1 + 1]), pooled_w, width,
                                                    rules))
        lo, hi = region_range(plane, other, rows_c, cols_c)
        low, high = np.fmin(low, lo), np.fmax(high, hi)
    changed = int(np.count_nonzero(low != high))
    if not changed:
        return None, None
    _note(expected, row, candidates, rows, cols, changed)
    return low, high


def _note(expected: Expected, row: int, candidates: list[tuple[int, ...]], rows: tuple[np.ndarray, np.ndarray],
          cols: tuple[np.ndarray, np.ndarray], changed: int) -> None:
    """Note a region's first few flippable decisions: rounded corners, then bin bounds (only
    counted once ``expected`` holds all the notes it keeps)."""
    if len(expected.knife_edges) >= MAX_NOTES:
        expected.knife_edge_count += 1
        return
    found = [(f"round(Roi{name.upper()} * SpatialScale) (the reference rounds the float32 product, RP-1; "
              "the exact product lies within its rounding error of a half)", c[0], c[1:])
             for name, c in zip(_CORNERS, candidates) if len(c) > 1]
    for axis, (starts, ends) in (("Y", rows), ("X", cols)):
        for kind, bounds in (("start", starts), ("end", ends)):
            for i in np.flatnonzero((bounds != bounds[:, :1]).any(axis=1)):
                moved = tuple(int(v) for v in dict.fromkeys(bounds[i, 1:]) if v != bounds[i, 0])
                found.append((f"bin {i} {kind} along {axis} (float {'floor' if kind == 'start' else 'ceil'} of "
                              f"k * RegionSize / PooledSize)", int(bounds[i, 0]), moved))
    for decision, exact, others in found[:3]:
        expected.note(KnifeEdge("OutputTensor", f"region {row}: {decision}", str(exact),
                                " or ".join(str(o) for o in others), changed))
