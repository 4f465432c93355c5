"""The simple form of ROI_POOLING (a loop over regions and bins): the oracle that the fast reference
in reference/ is checked against, bit for bit. Same semantics, same DECISIONS.md; the
rounding and bin helpers are the reference's own.
"""

from __future__ import annotations

import numpy as np

from ep_testbed.reference import RoiPoolingDesc
from ep_testbed.reference.nan_rules import nan_ignoring_max
from ep_testbed.reference.roi_pooling import _check_rois, bin_bounds, scaled_region


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
