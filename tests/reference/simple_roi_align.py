"""The simple form of ROI_ALIGN1 (channels first, one region at a time): the oracle that the
fast reference in reference/ is checked against. Same semantics, same DECISIONS.md; the
per-axis helpers (sample counts, coordinates, taps) are the reference's own.
"""

from __future__ import annotations

import numpy as np

from ep_testbed.reference.nan_rules import nan_ignoring_max
from ep_testbed.reference.roi_align import (
    RoiAlign1Desc,
    RoiAlignDesc,
    as_roi_align1,
    linear_taps,
    nearest_tap,
    region_samples,
    regions,
)


def interpolate(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, mode: str, out_of_bounds: float) -> np.ndarray:
    """``interpolate2D`` of a ``(C, H, W)`` plane at every (y, x) of the two axes' grids, in float64:
    ``(C, len(ys), len(xs))``; points outside the input read ``OutOfBoundsInputValue``."""
    _, height, width = plane.shape
    if mode == "NEAREST_NEIGHBOR":
        iy, in_y = nearest_tap(ys, height)
        ix, in_x = nearest_tap(xs, width)
        values = plane[:, iy[:, None], ix[None, :]].astype(np.float64)
    else:  # RA-5: a + t * (b - a) along Y, then X (the taps' second weight is t)
        y0, y1, _, ty, in_y = linear_taps(ys, height)
        x0, x1, _, tx, in_x = linear_taps(xs, width)
        def tap(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
            return plane[:, rows[:, None], cols[None, :]].astype(np.float64)

        with np.errstate(invalid="ignore"):
            left = tap(y0, x0) + ty[:, None] * (tap(y1, x0) - tap(y0, x0))
            right = tap(y0, x1) + ty[:, None] * (tap(y1, x1) - tap(y0, x1))
            values = left + tx[None, :] * (right - left)
    return np.where(in_y[:, None] & in_x[None, :], values, np.float64(np.float32(out_of_bounds)))


def roi_align(desc: RoiAlignDesc | RoiAlign1Desc, input_tensor: np.ndarray, roi_tensor: np.ndarray,
              batch_indices_tensor: np.ndarray) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    d = as_roi_align1(desc)
    _, channels, _, _ = input_tensor.shape
    _, _, out_h, out_w = d.output_tensor.sizes
    rois, batch_indices = regions(desc, input_tensor, roi_tensor, batch_indices_tensor)

    output = np.empty((rois.shape[0], channels, out_h, out_w), dtype=np.float64)
    for r, roi in enumerate(rois):
        ys, xs, n_y, n_x = region_samples(d, r, roi)
        plane = input_tensor[int(batch_indices[r])]
        samples = interpolate(plane, ys, xs, d.interpolation_mode, d.out_of_bounds_input_value)
        samples = samples.reshape(channels, out_h, n_y, out_w, n_x)
        if d.reduction_function == "AVERAGE":
            output[r] = samples.mean(axis=(2, 4))
        else:
            output[r] = nan_ignoring_max(samples, axis=(2, 4))
    return {"OutputTensor": output.astype(input_tensor.dtype)}
