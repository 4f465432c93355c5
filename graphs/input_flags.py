"""Divergences that depend on a case's input values, not on its desc.

``to_onnx`` flags field values; some differences between ONNX Runtime and the page only show
for particular data (a NaN, an empty region, a float32 bin end that lands one off). These
checks find them in a case's inputs so that a case can say "this input diverges" up front.
Each returns ``diverges`` flags naming the input and the reason; none means none predicted.
"""

from __future__ import annotations

import math
from typing import Mapping as MappingT

import numpy as np

from ep_testbed.reference.descs import Desc, MaxPooling2Desc, RoiAlign1Desc, RoiAlignDesc, RoiPoolingDesc, as_roi_align1
from ep_testbed.reference.roi_pooling import bin_bounds, scaled_region

from .flags import Flag

UINT32_MAX = 2**32 - 1


def input_flags(desc: Desc, tensors: MappingT[str, np.ndarray], opset: int | None = None) -> list[Flag]:
    """``diverges`` flags for input values ONNX Runtime treats differently from the page, and
    ``inexpressible`` ones for values the mapper's composition cannot carry exactly."""
    flags: list[Flag] = []
    x = np.asarray(tensors["InputTensor"])
    roi_align_avg = isinstance(desc, (RoiAlignDesc, RoiAlign1Desc)) and desc.reduction_function == "AVERAGE"
    if roi_align_avg and np.issubdtype(x.dtype, np.floating) and not np.isfinite(x[:, :, 0, 0]).all():
        flags.append(Flag("InputTensor[:, :, 0, 0]", "NaN/Inf", "diverges",
                          "ORT's out-of-range samples add 0 * X[b, c, 0, 0] (roialign.cc), which is NaN when that "
                          "element is NaN or Inf; the page reads OutOfBoundsInputValue"))
    elif np.issubdtype(x.dtype, np.floating) and not roi_align_avg:
        # Infinities order like numbers in every max; in ROI align's interpolation 0 * Inf is NaN
        bad = ~np.isfinite(x) if isinstance(desc, (RoiAlignDesc, RoiAlign1Desc)) else np.isnan(x)
        if bad.any():
            flags.append(Flag("InputTensor", "NaN" if not np.isinf(x).any() else "NaN/Inf", "diverges",
                              "the input holds NaN: the reference ignores NaN in every max; ORT's max kernels let "
                              "a NaN win or lose depending on where it is scanned, so outputs may differ"))
    if isinstance(desc, RoiPoolingDesc):
        flags.extend(_roi_pooling(desc, np.asarray(tensors["ROITensor"])))
    elif isinstance(desc, (RoiAlignDesc, RoiAlign1Desc)):
        flags.extend(_roi_align(as_roi_align1(desc), np.asarray(tensors["ROITensor"])))
        if opset is not None and opset < 16:
            flags.extend(_roi_align10_clamp(as_roi_align1(desc), opset, np.asarray(tensors["ROITensor"])))
    elif isinstance(desc, MaxPooling2Desc) and x.dtype in (np.int64, np.uint64):
        if np.abs(x.astype(np.float64)).max(initial=0) > 2**53:
            flags.append(Flag("InputTensor", "|x| > 2^53", "inexpressible", "ONNX MaxPool has no 64-bit integer "
                              "type, and 64-bit integers beyond 2^53 collide in the float64 the composition pools in"))
    return flags


def float32_bin_end_differs(region: int, pooled: int) -> bool:
    """True if ORT's float32 ``ceil((p+1) * (region/pooled))`` or ``floor(p * ...)`` differs
    from the page's bins (``reference.roi_pooling.bin_bounds``) for some bin ``p`` (roi_pool.cc)."""
    size = np.float32(region) / np.float32(pooled)
    for p in range(pooled):
        start = math.floor(float(np.float32(p) * size))
        end = math.ceil(float(np.float32(p + 1) * size))
        if (start, end) != bin_bounds(p, region, pooled, 0, region):
            return True
    return False


def _roi_pooling(desc: RoiPoolingDesc, rois: np.ndarray) -> list[Flag]:
    flags = []
    for row in rois.reshape(-1, 5):
        x1, y1, x2, y2 = scaled_region(row[1:], desc.spatial_scale)
        if (float32_bin_end_differs(y2 - y1 + 1, desc.pooled_size.height)
                or float32_bin_end_differs(x2 - x1 + 1, desc.pooled_size.width)):
            flags.append(Flag("ROITensor", row.astype(np.float64).tolist(), "diverges",
                              "ORT computes this region's bin bounds in float32 and lands one element off the page's "
                              "integer division (roi_pool.cc)"))
            break
    return flags


def _roi_align(d: RoiAlign1Desc, rois: np.ndarray) -> list[Flag]:
    adaptive = d.minimum_samples_per_output != d.maximum_samples_per_output
    if not adaptive:
        return []
    flags = []
    sx, sy = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    _, _, oh, ow = d.output_tensor.sizes
    for row in rois.reshape(-1, 4).astype(np.float64):
        size_x, size_y = (row[2] - row[0]) * sx, (row[3] - row[1]) * sy
        if size_x <= 0 or size_y <= 0:
            flags.append(Flag("ROITensor", row.tolist(), "diverges", "an empty or inverted region with an adaptive "
                              "sample count: ORT takes ceil(size/output) <= 0 samples (output 0), the page at least "
                              "MinimumSamplesPerOutput"))
            break
        ratios = (size_x / ow, size_y / oh)
        if any(0 < abs(r - round(r)) < 1e-4 and r > 0.5 for r in ratios):
            flags.append(Flag("ROITensor", row.tolist(), "diverges", "size/output is within 1e-4 of a whole number (not one): "
                              "ORT's float32 ceil may pick one sample more or fewer than the float64 reference"))
            break
    return flags


def _roi_align10_clamp(d: RoiAlign1Desc, opset: int, rois: np.ndarray) -> list[Flag]:
    from .map_roi_align import rewritten_region_sizes

    sizes = rewritten_region_sizes(d, opset, rois)
    small = np.flatnonzero((sizes < 1).any(axis=1))
    if not small.size:
        return []
    row = rois.reshape(-1, 4)[small[0]].astype(np.float64).tolist()
    return [Flag("ROITensor", row, "diverges", "RoiAlign-10 raises a region smaller than one pixel to 1x1 (ORT's CPU "
                 "kernel and the ONNX reference); the page samples it as it is")]
