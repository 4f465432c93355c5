"""The simple form of ROI_POOLING (a loop over regions and bins): the oracle that the fast reference
in reference/ is checked against, bit for bit (issue 7). Same semantics, same DECISIONS.md.
"""

from __future__ import annotations

import numpy as np

from reference.descs import RoiPoolingDesc
from reference.errors import DescError
from reference.nan_rules import nan_ignoring_max


def round_half_away_from_zero(x: np.ndarray) -> np.ndarray:
    """C's ``roundf``: 0.5 -> 1, 1.5 -> 2, -0.5 -> -1."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def scaled_region(roi: np.ndarray, spatial_scale: float) -> tuple[int, int, int, int]:
    """``(x1, y1, x2, y2)``: the ROI's corners times SpatialScale (float32), rounded."""
    scaled = roi.astype(np.float32) * np.float32(spatial_scale)
    x1, y1, x2, y2 = (int(v) for v in round_half_away_from_zero(scaled.astype(np.float64)))
    return x1, y1, x2, y2


def bin_bounds(index: int, region_size: int, pooled: int, origin: int, limit: int) -> tuple[int, int]:
    """``[start, end)`` of bin ``index`` along one axis, clamped to ``[0, limit]``."""
    start = (index * region_size) // pooled + origin
    end = ((index + 1) * region_size + pooled - 1) // pooled + origin
    return min(max(start, 0), limit), min(max(end, 0), limit)


def roi_pooling(desc: RoiPoolingDesc, input_tensor: np.ndarray, roi_tensor: np.ndarray) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    batch_count, channels, height, width = input_tensor.shape
    pooled_h, pooled_w = desc.pooled_size.height, desc.pooled_size.width
    rois = roi_tensor.reshape(-1, 5)
    _check_rois(desc, rois, batch_count)
    output = np.zeros((rois.shape[0], channels, pooled_h, pooled_w), dtype=input_tensor.dtype)
    for r, roi in enumerate(rois):
        batch = int(roi[0])
        x1, y1, x2, y2 = scaled_region(roi[1:], desc.spatial_scale)
        region_h, region_w = y2 - y1 + 1, x2 - x1 + 1
        plane = input_tensor[batch]
        for py in range(pooled_h):
            start_y, end_y = bin_bounds(py, region_h, pooled_h, y1, height)
            for px in range(pooled_w):
                start_x, end_x = bin_bounds(px, region_w, pooled_w, x1, width)
                if end_y > start_y and end_x > start_x:
                    window = plane[:, start_y:end_y, start_x:end_x].reshape(channels, -1)
                    output[r, :, py, px] = nan_ignoring_max(window, axis=1)
    return {"OutputTensor": output}


def _check_rois(desc: RoiPoolingDesc, rois: np.ndarray, batch_count: int) -> None:
    values = rois.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
    if bad.size:
        r = int(bad[0])
        raise DescError(f"ROITensor[0, 0, {r}, :]", rois[r].tolist(), "ROI values must be finite", desc.TYPE)
    batch = values[:, 0]
    bad = np.flatnonzero((batch != np.floor(batch)) | (batch < 0) | (batch >= batch_count))
    if bad.size:
        r = int(bad[0])
        raise DescError(f"ROITensor[0, 0, {r}, 0]", float(batch[r]),
                        f"BatchID must be a whole number in [0, {batch_count}) (InputTensor BatchCount)", desc.TYPE)
    inverted = np.flatnonzero((values[:, 3] < values[:, 1]) | (values[:, 4] < values[:, 2]))
    if inverted.size:
        r = int(inverted[0])
        raise DescError(f"ROITensor[0, 0, {r}, :]", rois[r].tolist(),
                        "the page requires x2 >= x1 and y2 >= y1 (rows are [BatchID, x1, y1, x2, y2])", desc.TYPE)
