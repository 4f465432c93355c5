"""DML_ROI_POOLING_OPERATOR_DESC: max pooling over the bins of each region of interest.

The page, in order:

    x1 = round(RoiX1 * SpatialScale)            (likewise x2, y1, y2)
    RegionHeight = y2 - y1 + 1                  RegionWidth = x2 - x1 + 1
    StartY = (OutputIndices.Y * RegionHeight) / PooledSize.Height + y1
    EndY   = ((OutputIndices.Y + 1) * RegionHeight + PooledSize.Height - 1) / PooledSize.Height + y1
    (likewise X)  "If the computed coordinates are out of bounds, then they are clamped to the
    input boundaries."

The primary reading (each choice an entry of DECISIONS.md): ``round`` is HLSL's, halves to the
even neighbour, as DirectML.dll computes it, and the product ``Roi * SpatialScale`` is a float32
product (RP-1); the divisions are integer divisions, which
are exact floor/ceil because RegionHeight >= 1 (RP-2); EndY/EndX are exclusive (RP-3); clamping
is to ``[0, Height]`` / ``[0, Width]`` and a bin left empty by it yields 0 (RP-4); the batch id
is a whole number in ``[0, BatchCount)`` and ``x2 >= x1, y2 >= y1`` holds, else DescError (RP-5);
a NaN in a bin is ignored unless the whole bin is NaN (the NaN rule, NAN-1).

``Rules`` holds those choices other kernels make otherwise (defaults: the primary reading), and
``READINGS`` names each departure (``reference/readings.py``); the kernel computes them all.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Mapping

import numpy as np

from .checks import TypeTable, check_tensor, expect_sizes, finite, same_type
from .descs import Desc, Size2D, TensorDesc, dml_field
from .dtypes import random_values
from .errors import DescError
from .readings import check_rules, holds, reading

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


@dataclass(frozen=True)
class Rules:
    """How the kernel reads the page where kernels differ (defaults: the primary reading).

    ``rounding``: ``round(Roi * SpatialScale)`` halves to even ("half-even", HLSL's round, DirectML)
    or away from zero ("half-away", C's roundf: ONNX Runtime, torchvision). ``bins``: the page's
    integer divisions ("integer") or ``floor(k * float32(RegionSize / PooledSize))`` and ``ceil((k +
    1) * ...)`` in float32 ("float32": ONNX Runtime, torchvision, Caffe). ``fold``: a bin's max
    ignores NaN unless the whole bin is NaN ("page", NAN-1), starts from the lowest finite value and
    skips NaN ("lowest": DirectML), or is ``Y = lowest; Y = std::max(x, Y)`` over the bin in row-major
    order ("std-max": ONNX Runtime, where a NaN survives only as the last element scanned)."""

    rounding: str = "half-even"
    bins: str = "integer"
    fold: str = "page"


PRIMARY = Rules()
RULE_VALUES = {"rounding": ("half-even", "half-away"), "bins": ("integer", "float32"),
               "fold": ("page", "lowest", "std-max")}
def _halfway_product(desc: "RoiPoolingDesc", arrays: Mapping[str, np.ndarray]) -> bool:
    """Some float32 product ``Roi * SpatialScale`` lies exactly halfway between two whole numbers."""
    products = (arrays["ROITensor"].reshape(-1, 5)[:, 1:].astype(np.float32)
                * np.float32(desc.spatial_scale)).astype(np.float64)
    return bool((np.abs(products - np.floor(products)) == 0.5).any())


def _float_bins_differ(desc: "RoiPoolingDesc", arrays: Mapping[str, np.ndarray]) -> bool:
    """Some region's bins (its corners rounded either way) end or start elsewhere in float32."""
    sizes = set()
    for roi in arrays["ROITensor"].reshape(-1, 5)[:, 1:]:
        for rounding in ("half-even", "half-away"):
            x1, y1, x2, y2 = scaled_region(roi, desc.spatial_scale, Rules(rounding=rounding))
            sizes.update({(y2 - y1 + 1, desc.pooled_size.height), (x2 - x1 + 1, desc.pooled_size.width)})
    limit = 2**62
    return any(bin_bounds(k, size, pooled, 0, limit) != bin_bounds(k, size, pooled, 0, limit, Rules(bins="float32"))
               for size, pooled in sizes for k in range(pooled))


def _nan_or_minus_inf(desc: "RoiPoolingDesc", arrays: Mapping[str, np.ndarray]) -> bool:
    """The input holds a NaN or -inf (where a bin's max can start, fold or end otherwise)."""
    return holds(arrays, "nan", "-inf")


_ORT = "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/providers/cpu/nn/roi_pool.cc"
_TV = "https://github.com/pytorch/vision/blob/main/torchvision/csrc/ops/cpu/roi_pool_kernel.cpp"
#: The departures from the primary reading that kernels are known to compute (DECISIONS.md RP-*, TV-4).
READINGS = (
    reading("half-away-rounding", "a halfway product Roi * SpatialScale rounds away from zero (C's roundf), not to "
            "the even neighbour", ("ONNX Runtime's MaxRoiPool (std::round)", "torchvision's roi_pool"),
            f"{_ORT} (RoiPool<float>::Compute); {_TV}", shows=_halfway_product, rounding="half-away"),
    reading("float32-bins", "bin starts and ends are floor(k * float32(RegionSize / PooledSize)) and ceil((k + 1) * "
            "...) in float32, one row or column past the page's integer division for some sizes (29 rows into 11 bins)",
            ("ONNX Runtime's MaxRoiPool", "torchvision's roi_pool", "Caffe's ROI pooling"),
            f"{_ORT} (RoiPool<float>::Compute); {_TV}", shows=_float_bins_differ, bins="float32"),
    reading("std-max-fold", "a bin's max is Y = lowest float; Y = std::max(x, Y) over the bin in row-major order: a NaN "
            "replaces Y and the next element replaces a NaN Y, so a NaN survives only as the last element scanned, and "
            "a bin of only -inf gives -FLT_MAX", ("ONNX Runtime's MaxRoiPool",), f"{_ORT} (RoiPool<float>::Compute)",
            shows=_nan_or_minus_inf, fold="std-max"),
    reading("lowest-start", "a bin's max starts from the lowest finite value and skips NaN: a bin of only -inf or NaN "
            "gives -FLT_MAX", ("DirectML.dll 1.15.4 (observed under Wine)",), "tests/eps/test_dml_wine_observed.py",
            shows=_nan_or_minus_inf, fold="lowest"),
)


def round_half_away_from_zero(x: np.ndarray) -> np.ndarray:
    """C's ``roundf``: 0.5 -> 1, 1.5 -> 2, -0.5 -> -1."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def round_corner(x: np.ndarray, rules: Rules = PRIMARY) -> np.ndarray:
    """``round(x)`` as ``rules.rounding`` reads it: halves to even (``np.rint``) or away from zero."""
    return round_half_away_from_zero(x) if rules.rounding == "half-away" else np.rint(x)


def scaled_region(roi: np.ndarray, spatial_scale: float, rules: Rules = PRIMARY) -> tuple[int, int, int, int]:
    """``(x1, y1, x2, y2)``: the ROI's corners times SpatialScale (float32), rounded (RP-1)."""
    scaled = roi.astype(np.float32) * np.float32(spatial_scale)
    x1, y1, x2, y2 = (int(v) for v in round_corner(scaled.astype(np.float64), rules))
    return x1, y1, x2, y2


def bin_bounds(index: int, region_size: int, pooled: int, origin: int, limit: int,
               rules: Rules = PRIMARY) -> tuple[int, int]:
    """``[start, end)`` of bin ``index`` along one axis, clamped to ``[0, limit]`` (RP-2, RP-3;
    under ``rules.bins == "float32"`` the float32 floor and ceil)."""
    if rules.bins == "float32":
        size = np.float32(np.float32(region_size) / np.float32(pooled))
        start = int(np.floor(np.float32(index) * size)) + origin
        end = int(np.ceil(np.float32(index + 1) * size)) + origin
    else:
        start = (index * region_size) // pooled + origin
        end = ((index + 1) * region_size + pooled - 1) // pooled + origin
    return min(max(start, 0), limit), min(max(end, 0), limit)


def integers(values: np.ndarray) -> np.ndarray:
    """Whole numbers held as floats (or integers), as exact integers: int64 where every magnitude
    is under 2**62, else Python ints (an object array), so that no corner, bin bound or product
    of them overflows on the way (ROI corners reach 2**128 times SpatialScale)."""
    values = np.asarray(values)
    if values.dtype != object and (values.size == 0 or float(np.abs(values).max()) < 2.0**62):
        return values.astype(np.int64)
    return np.array([int(v) for v in values.ravel()], dtype=object).reshape(values.shape)


def scaled_regions(rois: np.ndarray, spatial_scale: float, rules: Rules = PRIMARY) -> np.ndarray:
    """``scaled_region`` of every ROI row ``[x1, y1, x2, y2]`` at once: ``(regions, 4)`` (``integers``)."""
    scaled = rois.astype(np.float32) * np.float32(spatial_scale)
    return integers(round_corner(scaled.astype(np.float64), rules))


def execute_desc(desc: RoiPoolingDesc, tensors: dict[str, np.ndarray], rules: Rules = PRIMARY) -> dict[str, np.ndarray]:
    """The registry's ``execute``: ``roi_pooling`` on arrays keyed by DML member name (under
    ``rules``: a reading, ``reference/readings.py``)."""
    return roi_pooling(desc, tensors["InputTensor"], tensors["ROITensor"], rules)


def roi_pooling(desc: RoiPoolingDesc, input_tensor: np.ndarray, roi_tensor: np.ndarray,
                rules: Rules = PRIMARY) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    return {"OutputTensor": compute(kernel_input(desc, input_tensor, roi_tensor, rules))}


@dataclass(frozen=True)
class KernelInput:
    """A validated desc's ROI rows and input, checked and laid out once: what the kernel
    (``compute``) reads, and what the precision models (``roi_pooling_bounds``) read beside it."""

    desc: RoiPoolingDesc
    rois: np.ndarray    # (NumROIs, 5): rows [BatchID, x1, y1, x2, y2] in the input's type
    planes: np.ndarray  # (BatchCount, H, W, C): channels last
    maximum: np.ufunc   # the max of a bin (``bin_maximum``)
    rules: Rules = PRIMARY


def kernel_input(desc: RoiPoolingDesc, input_tensor: np.ndarray, roi_tensor: np.ndarray,
                 rules: Rules = PRIMARY) -> KernelInput:
    """The ROI rows, refused where the page leaves them undefined (ERR-1, RP-5), and the input
    laid out channels last; ``rules``: the reading to compute."""
    check_rules(rules, RULE_VALUES, desc.TYPE)
    rois = roi_tensor.reshape(-1, 5)
    _check_rois(desc, rois, input_tensor.shape[0])
    planes = np.ascontiguousarray(np.moveaxis(input_tensor, 1, -1))
    return KernelInput(desc, rois, planes, bin_maximum(input_tensor), rules)


def compute(k: KernelInput) -> np.ndarray:
    """The kernel: the ``(NumROIs, C, PooledHeight, PooledWidth)`` output. ``execute`` and every
    precision model take their outputs from here."""
    return pool_all(k.desc, k.planes, k.rois, k.maximum, k.rules)


def pool_all(desc: RoiPoolingDesc, channels_last: np.ndarray, rois: np.ndarray, maximum: np.ufunc,
             rules: Rules = PRIMARY) -> np.ndarray:
    """The ``(NumROIs, C, PooledHeight, PooledWidth)`` output for checked ROI rows of a
    channels-last input ``(N, H, W, C)``."""
    pooled_h, pooled_w = desc.pooled_size.height, desc.pooled_size.width
    output = np.zeros((rois.shape[0], pooled_h, pooled_w, channels_last.shape[-1]), dtype=channels_last.dtype)
    for r, roi in enumerate(rois):
        pool_region(channels_last[int(roi[0])], scaled_region(roi[1:], desc.spatial_scale, rules), pooled_h, pooled_w,
                    maximum, output[r], rules)
    return np.ascontiguousarray(np.moveaxis(output, -1, 1))


def bin_maximum(input_tensor: np.ndarray) -> np.ufunc:
    """The max of a bin (NAN-1): ``np.fmax`` (NaN loses) when the input holds a NaN, else ``np.maximum``."""
    floating = np.issubdtype(input_tensor.dtype, np.floating)
    return np.fmax if floating and np.isnan(input_tensor).any() else np.maximum


def pool_region(plane: np.ndarray, corners: tuple[int, int, int, int], pooled_h: int, pooled_w: int,
                maximum: np.ufunc, out: np.ndarray, rules: Rules = PRIMARY) -> None:
    """Write the ``(PooledHeight, PooledWidth, C)`` bin maxima of the region with rounded
    ``corners`` ``(x1, y1, x2, y2)`` of a channels-last ``(H, W, C)`` plane into ``out``, which
    holds zeros (RP-4: an empty bin stays 0), under ``rules`` (``Rules.bins``, ``Rules.fold``)."""
    height, width, _ = plane.shape
    x1, y1, x2, y2 = corners
    rows = [bin_bounds(py, y2 - y1 + 1, pooled_h, y1, height, rules) for py in range(pooled_h)]
    cols = [bin_bounds(px, x2 - x1 + 1, pooled_w, x1, width, rules) for px in range(pooled_w)]
    if rules.fold == "std-max":
        _std_max_bins(plane, rows, cols, out)
        return
    # A max is separable: the max over a bin is the max over its columns of the max over its
    # rows, so a region takes PooledSize.Height + PooledSize.Width reductions, each over whole
    # rows of channels (the input is laid out channels-last once so those are contiguous).
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
            value = maximum.reduce(row_max[:, start - left:end - left], axis=1)
            if rules.fold == "lowest":
                value = np.fmax(value, np.finfo(plane.dtype).min)
            out[filled_rows, px] = value


def _std_max_bins(plane: np.ndarray, rows: list[tuple[int, int]], cols: list[tuple[int, int]], out: np.ndarray) -> None:
    """The ``std-max-fold`` reading: each non-empty bin ``Y = lowest; Y = std::max(x, Y)`` (``x``
    unless ``x < Y``) over its elements in row-major order, all channels at once."""
    lowest = np.finfo(plane.dtype).min
    for py, (top, bottom) in enumerate(rows):
        for px, (start, end) in enumerate(cols):
            if bottom <= top or end <= start:
                continue
            value = np.full(plane.shape[-1], lowest, dtype=plane.dtype)
            with np.errstate(invalid="ignore"):
                for x in plane[top:bottom, start:end].reshape(-1, plane.shape[-1]):
                    value = np.where(x < value, value, x)
            out[py, px] = value


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


def select_regions(desc: RoiPoolingDesc, arrays: dict[str, np.ndarray],
                   rows: np.ndarray) -> tuple[RoiPoolingDesc, dict[str, np.ndarray]]:
    """The desc and inputs of the regions ``rows`` alone (the registry's ``regions``): each output
    row is computed from its own ROI row only, so row ``i`` of their outputs and bounds is row
    ``rows[i]`` of the whole desc's, bit for bit. Strides are kept as given (they change no result)."""
    rows = np.asarray(rows, dtype=np.intp)
    sizes = (1, 1, len(rows), 5)
    part = dataclasses.replace(
        desc, roi_tensor=dataclasses.replace(desc.roi_tensor, sizes=sizes),
        output_tensor=dataclasses.replace(desc.output_tensor, sizes=(len(rows), *desc.output_tensor.sizes[1:])))
    return part, {**arrays, "ROITensor": np.asarray(arrays["ROITensor"]).reshape(-1, 5)[rows].reshape(sizes)}


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
