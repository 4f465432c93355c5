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

Each alternative set of corners is pooled by the reading's own kernel (its bins, its fold) and
its outputs join the element's ``[low, high]``: a bin the alternative leaves empty gives 0 (RP-4),
one of only -inf what the reading's fold gives (-inf on the page, -FLT_MAX under
``lowest-start`` and ``std-max-fold``).
"""

from __future__ import annotations

import itertools

import numpy as np

from .precision import MAX_NOTES, Arithmetic, Expected, KnifeEdge, PrecisionModel
from .roi_pooling import (
    PRIMARY,
    RoiPoolingDesc,
    Rules,
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
    moving = (corners != corners[..., :1]).any(axis=(1, 2))
    low = high = None  # the output itself until an alternative lowers (or raises) an element
    for r in np.flatnonzero(moving):
        plane = channels_last[int(rois[r, 0])]
        candidates = [tuple(dict.fromkeys(c.tolist())) for c in corners[r]]
        value = np.moveaxis(output[r], 0, -1)
        lo, hi = _region_alternatives(desc, plane, int(r), value, candidates, expected, maximum, rules)
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
                         candidates: list[tuple[int, ...]], expected: Expected, maximum: np.ufunc,
                         rules: Rules = PRIMARY) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(low, high)`` of region ``row`` (exact maxima ``value``, channels last) over every corner
    alternative, each pooled by the reading's own kernel (its bins, its fold: a bin of only -inf
    under ``lowest-start`` is -FLT_MAX there too), or ``(None, None)`` when none changes an
    element; notes the decisions."""
    pooled_h, pooled_w = desc.pooled_size.height, desc.pooled_size.width
    low, high = value.copy(), value.copy()
    for corners in itertools.product(*candidates):
        if corners == tuple(c[0] for c in candidates):
            continue
        other = np.zeros((pooled_h, pooled_w, plane.shape[-1]), dtype=plane.dtype)
        x1, y1, x2, y2 = corners
        pool_region(plane, (x1, y1, x2, y2), pooled_h, pooled_w, maximum, other, rules)
        low, high = np.fmin(low, other), np.fmax(high, other)
    changed = int(np.count_nonzero(low != high))
    if not changed:
        return None, None
    _note(expected, row, candidates, changed)
    return low, high


def _note(expected: Expected, row: int, candidates: list[tuple[int, ...]], changed: int) -> None:
    """Note a region's first few flippable decisions, its rounded corners (only counted once
    ``expected`` holds all the notes it keeps)."""
    if len(expected.knife_edges) >= MAX_NOTES:
        expected.knife_edge_count += 1
        return
    found = [(f"round(Roi{name.upper()} * SpatialScale) (the reference rounds the float32 product, RP-1; "
              "the exact product lies within its rounding error of a half)", c[0], c[1:])
             for name, c in zip(_CORNERS, candidates) if len(c) > 1]
    for decision, exact, others in found[:3]:
        expected.note(KnifeEdge("OutputTensor", f"region {row}: {decision}", str(exact),
                                " or ".join(str(o) for o in others), changed))
