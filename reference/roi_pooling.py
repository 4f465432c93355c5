"""DML_ROI_POOLING_OPERATOR_DESC: max pooling over the bins of each region of interest.

The page, in order:

    x1 = round(RoiX1 * SpatialScale)            (likewise x2, y1, y2)
    RegionHeight = y2 - y1 + 1                  RegionWidth = x2 - x1 + 1
    StartY = (OutputIndices.Y * RegionHeight) / PooledSize.Height + y1
    EndY   = ((OutputIndices.Y + 1) * RegionHeight + PooledSize.Height - 1) / PooledSize.Height + y1
    (likewise X)  "If the computed coordinates are out of bounds, then they are clamped to the
    input boundaries."

Readings (each one an entry of DECISIONS.md): ``round`` is half away from zero and the product
``Roi * SpatialScale`` is a float32 product (RP-1); the divisions are integer divisions, which
are exact floor/ceil because RegionHeight >= 1 (RP-2); EndY/EndX are exclusive (RP-3); clamping
is to ``[0, Height]`` / ``[0, Width]`` and a bin left empty by it yields 0 (RP-4); the batch id
is a whole number in ``[0, BatchCount)`` and ``x2 >= x1, y2 >= y1`` holds, else DescError (RP-5);
a NaN in a bin is ignored unless the whole bin is NaN (the NaN rule, NAN-1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .checks import TypeTable, check_tensor, expect_sizes, finite, same_type
from .descs import Desc, Size2D, TensorDesc, dml_field
from .dtypes import random_values
from .errors import DescError

PAGE = "https://learn.microsoft.com/windows/win32/api/directml/ns-directml-dml_roi_pooling_operator_desc"


@dataclass(frozen=True)
class RoiPoolingDesc(Desc):
    """``DML_ROI_POOLING_OPERATOR_DESC`` (DML_FEATURE_LEVEL_1_0)."""

    TYPE: ClassVar[str] = "DML_OPERATOR_ROI_POOLING"
    FEATURE_LEVEL: ClassVar[str] = "1.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor", "ROITensor")
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = dml_field("InputTensor")
    roi_tensor: TensorDesc = dml_field("ROITensor")
    output_tensor: TensorDesc = dml_field("OutputTensor")
    spatial_scale: float = dml_field("SpatialScale")
    pooled_size: Size2D = dml_field("PooledSize")


#: [(feature level, {tensor member: allowed data types})], newest first: the page's table.
TENSOR_SUPPORT: tuple[tuple[str, TypeTable], ...] = (
    ("1.0", {"InputTensor": ("FLOAT32", "FLOAT16"), "ROITensor": ("FLOAT32", "FLOAT16"),
             "OutputTensor": ("FLOAT32", "FLOAT16")}),
)


def validate_desc(d: RoiPoolingDesc, types: TypeTable) -> None:
    """The page's rules for the desc's fields (the registry's ``validate``)."""
    op = d.TYPE
    check_tensor(op, "InputTensor", d.input_tensor, types, [4])
    check_tensor(op, "ROITensor", d.roi_tensor, types, [4])
    check_tensor(op, "OutputTensor", d.output_tensor, types, [4])
    same_type(op, {"InputTensor": d.input_tensor, "ROITensor": d.roi_tensor, "OutputTensor": d.output_tensor})
    roi = d.roi_tensor.sizes
    if roi[0] != 1 or roi[1] != 1 or roi[3] != 5:
        raise DescError("ROITensor.Sizes", list(roi), "must be {1, 1, NumROIs, 5} (rows [BatchID, x1, y1, x2, y2])", op)
    finite(op, "SpatialScale", d.spatial_scale)
    if d.spatial_scale < 0:
        raise DescError("SpatialScale", d.spatial_scale,
                        "must be >= 0: a negative scale inverts every region, and the page requires x2 >= x1, y2 >= y1", op)
    if d.pooled_size.height < 1 or d.pooled_size.width < 1:
        raise DescError("PooledSize", {"Height": d.pooled_size.height, "Width": d.pooled_size.width},
                        "Height and Width must be at least 1", op)
    n, c = roi[2], d.input_tensor.sizes[1]
    expect_sizes(op, "OutputTensor", d.output_tensor.sizes, (n, c, d.pooled_size.height, d.pooled_size.width),
                 "{NumROIs, InputChannelCount, PooledSize.Height, PooledSize.Width}")


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


def execute_desc(desc: RoiPoolingDesc, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The registry's ``execute``: ``roi_pooling`` on arrays keyed by DML member name."""
    return roi_pooling(desc, tensors["InputTensor"], tensors["ROITensor"])


def roi_pooling(desc: RoiPoolingDesc, input_tensor: np.ndarray, roi_tensor: np.ndarray) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    return {"OutputTensor": compute(kernel_input(desc, input_tensor, roi_tensor))}


@dataclass(frozen=True)
class KernelInput:
    """A validated desc's ROI rows and input, checked and laid out once: what the kernel
    (``compute``) reads, and what the precision models (``roi_pooling_bounds``) read beside it."""

    desc: RoiPoolingDesc
    rois: np.ndarray    # (NumROIs, 5): rows [BatchID, x1, y1, x2, y2] in the input's type
    planes: np.ndarray  # (BatchCount, H, W, C): channels last
    maximum: np.ufunc   # the max of a bin (``bin_maximum``)


def kernel_input(desc: RoiPoolingDesc, input_tensor: np.ndarray, roi_tensor: np.ndarray) -> KernelInput:
    """The ROI rows, refused where the page leaves them undefined (ERR-1, RP-5), and the input
    laid out channels last."""
    rois = roi_tensor.reshape(-1, 5)
    _check_rois(desc, rois, input_tensor.shape[0])
    planes = np.ascontiguousarray(np.moveaxis(input_tensor, 1, -1))
    return KernelInput(desc, rois, planes, bin_maximum(input_tensor))


def compute(k: KernelInput) -> np.ndarray:
    """The kernel: the ``(NumROIs, C, PooledHeight, PooledWidth)`` output. ``execute`` and every
    precision model take their outputs from here."""
    return pool_all(k.desc, k.planes, k.rois, k.maximum)


def pool_all(desc: RoiPoolingDesc, channels_last: np.ndarray, rois: np.ndarray, maximum: np.ufunc) -> np.ndarray:
    """The ``(NumROIs, C, PooledHeight, PooledWidth)`` output for checked ROI rows of a
    channels-last input ``(N, H, W, C)``."""
    pooled_h, pooled_w = desc.pooled_size.height, desc.pooled_size.width
    output = np.zeros((rois.shape[0], pooled_h, pooled_w, channels_last.shape[-1]), dtype=channels_last.dtype)
    for r, roi in enumerate(rois):
        pool_region(channels_last[int(roi[0])], scaled_region(roi[1:], desc.spatial_scale), pooled_h, pooled_w,
                    maximum, output[r])
    return np.ascontiguousarray(np.moveaxis(output, -1, 1))


def bin_maximum(input_tensor: np.ndarray) -> np.ufunc:
    """The max of a bin (NAN-1): ``np.fmax`` (NaN loses) when the input holds a NaN, else ``np.maximum``."""
    floating = np.issubdtype(input_tensor.dtype, np.floating)
    return np.fmax if floating and np.isnan(input_tensor).any() else np.maximum


def pool_region(plane: np.ndarray, corners: tuple[int, int, int, int], pooled_h: int, pooled_w: int,
                maximum: np.ufunc, out: np.ndarray) -> None:
    """Write the ``(PooledHeight, PooledWidth, C)`` bin maxima of the region with rounded
    ``corners`` ``(x1, y1, x2, y2)`` of a channels-last ``(H, W, C)`` plane into ``out``, which
    holds zeros (RP-4: an empty bin stays 0)."""
    # A max is separable: the max over a bin is the max over its columns of the max over its
    # rows, so a region takes PooledSize.Height + PooledSize.Width reductions, each over whole
    # rows of channels (the input is laid out channels-last once so those are contiguous).
    height, width, _ = plane.shape
    x1, y1, x2, y2 = corners
    rows = [bin_bounds(py, y2 - y1 + 1, pooled_h, y1, height) for py in range(pooled_h)]
    cols = [bin_bounds(px, x2 - x1 + 1, pooled_w, x1, width) for px in range(pooled_w)]
    left, right = min(c[0] for c in cols), max(c[1] for c in cols)
    if right <= left:
        return  # every bin is empty: zeros (RP-4)
    region = plane[:, left:right]                                                      # (H, columns, C)
    filled_rows = [py for py, (top, bottom) in enumerate(rows) if bottom > top]
    if not filled_rows:
        return
    row_max = np.stack([maximum.reduce(region[rows[py][0]:rows[py][1]], axis=0) for py in filled_rows])
    for px, (start, end) in enumerate(cols):
        if end > start:
            out[filled_rows, px] = maximum.reduce(row_max[:, start - left:end - left], axis=1)


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


def random_inputs(desc: RoiPoolingDesc, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Any valid input of a validated desc: values multiples of 1/8 in [-4, 4], regions in and
    around the input (the registry's ``random_inputs``)."""
    x = random_values(desc.input_tensor.sizes, desc.input_tensor.data_type, rng)
    batch, _, height, width = desc.input_tensor.sizes
    count = desc.roi_tensor.sizes[2]
    scale = desc.spatial_scale or 1.0
    x1 = rng.uniform(-1, width, count) / scale
    y1 = rng.uniform(-1, height, count) / scale
    x2 = x1 + rng.uniform(0, width, count) / scale
    y2 = y1 + rng.uniform(0, height, count) / scale
    rois = np.stack([rng.integers(0, batch, count), x1, y1, x2, y2], axis=1)
    return {"InputTensor": x, "ROITensor": rois.astype(x.dtype).reshape(desc.roi_tensor.sizes)}
