"""DML_ROI_ALIGN1_OPERATOR_DESC (and DML_ROI_ALIGN, which is ROI_ALIGN1 with fixed offsets).

The page's logic, in order, per region ``roiIndex``:

    scaledRegionX1 = ROITensor[roiIndex, 0] * SpatialScaleX      (Y1, X2, Y2 likewise)
    scaledRegionSizeX = scaledRegionX2 - scaledRegionX1
    inputSamplesPerOutputSampleX = clamp(scaledRegionSizeX / outputSizeX, Minimum.., Maximum..)
    outputSampleSizeX = outputSizeX * inputSamplesPerOutputSampleX
    outputSampleToInputScaleX = scaledRegionSizeX / outputSampleSizeX
    for each output element, for each of its samples sampleX (and sampleY):
        inputTensorX = (sampleX - OutputPixelOffset) * outputSampleToInputScaleX
                       + scaledRegionX1 - InputPixelOffset
        inputValue = interpolate2D(InputTensor, BatchIndicesTensor[roiIndex], channel, X, Y)
        outputValue = average or maximum of the inputValues

Readings (DECISIONS.md): the Y scale uses Y quantities (RA-1, the page's typo); the sample loops
are exclusive, ``n`` samples per output element per axis (RA-2); a fractional sample count is
rounded up before the clamp, a negative one clamps to the minimum (RA-3); MAX starts from the
first sample (RA-4); the bilinear and nearest edge rule (RA-5); AlignRegionsToCorners divides
by ``outputSampleSize - 1`` (RA-6); arithmetic in float64, one rounding to the output type
(FP-1); inverted regions sample backwards, which mirrors the output, as the page says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Optional, Union

import numpy as np

from .checks import TypeTable, check_tensor, expect_sizes, finite, float32_value, max_elements, same_type, within_cap
from .descs import Desc, TensorDesc, dml_field
from .dtypes import numpy_dtype, random_values
from .errors import DescError
from .nan_rules import nan_ignoring_max

PAGE_V0 = "https://learn.microsoft.com/windows/win32/api/directml/ns-directml-dml_roi_align_operator_desc"
PAGE_V1 = "https://learn.microsoft.com/windows/win32/api/directml/ns-directml-dml_roi_align1_operator_desc"


@dataclass(frozen=True)
class RoiAlignDesc(Desc):
    """``DML_ROI_ALIGN_OPERATOR_DESC`` (DML_FEATURE_LEVEL_3_0).

    Its page gives no formula; the ROI_ALIGN1 page defines it: ROI_ALIGN is ROI_ALIGN1 with
    ``InputPixelOffset = 0.5``, ``OutputPixelOffset = -0.5`` and ``AlignRegionsToCorners = FALSE``.
    """

    TYPE: ClassVar[str] = "DML_OPERATOR_ROI_ALIGN"
    FEATURE_LEVEL: ClassVar[str] = "3.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor", "ROITensor", "BatchIndicesTensor")
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = dml_field("InputTensor")
    roi_tensor: TensorDesc = dml_field("ROITensor")
    batch_indices_tensor: TensorDesc = dml_field("BatchIndicesTensor")
    output_tensor: TensorDesc = dml_field("OutputTensor")
    reduction_function: str = dml_field("ReductionFunction")
    interpolation_mode: str = dml_field("InterpolationMode")
    spatial_scale_x: float = dml_field("SpatialScaleX")
    spatial_scale_y: float = dml_field("SpatialScaleY")
    out_of_bounds_input_value: float = dml_field("OutOfBoundsInputValue")
    minimum_samples_per_output: int = dml_field("MinimumSamplesPerOutput")
    maximum_samples_per_output: int = dml_field("MaximumSamplesPerOutput")


@dataclass(frozen=True)
class RoiAlign1Desc(Desc):
    """``DML_ROI_ALIGN1_OPERATOR_DESC`` (DML_FEATURE_LEVEL_4_0)."""

    TYPE: ClassVar[str] = "DML_OPERATOR_ROI_ALIGN1"
    FEATURE_LEVEL: ClassVar[str] = "4.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor", "ROITensor", "BatchIndicesTensor")
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = dml_field("InputTensor")
    roi_tensor: TensorDesc = dml_field("ROITensor")
    batch_indices_tensor: TensorDesc = dml_field("BatchIndicesTensor")
    output_tensor: TensorDesc = dml_field("OutputTensor")
    reduction_function: str = dml_field("ReductionFunction")
    interpolation_mode: str = dml_field("InterpolationMode")
    spatial_scale_x: float = dml_field("SpatialScaleX")
    spatial_scale_y: float = dml_field("SpatialScaleY")
    input_pixel_offset: float = dml_field("InputPixelOffset")
    output_pixel_offset: float = dml_field("OutputPixelOffset")
    out_of_bounds_input_value: float = dml_field("OutOfBoundsInputValue")
    minimum_samples_per_output: int = dml_field("MinimumSamplesPerOutput")
    maximum_samples_per_output: int = dml_field("MaximumSamplesPerOutput")
    align_regions_to_corners: bool = dml_field("AlignRegionsToCorners")


AnyRoiAlign = Union[RoiAlignDesc, RoiAlign1Desc]


def as_roi_align1(desc: AnyRoiAlign) -> RoiAlign1Desc:
    """ROI_ALIGN as the ROI_ALIGN1 desc its page says it equals (pixel offsets 0.5 / -0.5)."""
    if type(desc) is RoiAlign1Desc:
        return desc
    return RoiAlign1Desc(
        input_tensor=desc.input_tensor, roi_tensor=desc.roi_tensor, batch_indices_tensor=desc.batch_indices_tensor,
        output_tensor=desc.output_tensor, reduction_function=desc.reduction_function,
        interpolation_mode=desc.interpolation_mode, spatial_scale_x=desc.spatial_scale_x,
        spatial_scale_y=desc.spatial_scale_y, input_pixel_offset=0.5, output_pixel_offset=-0.5,
        out_of_bounds_input_value=desc.out_of_bounds_input_value,
        minimum_samples_per_output=desc.minimum_samples_per_output,
        maximum_samples_per_output=desc.maximum_samples_per_output, align_regions_to_corners=False)


_FLOATS = ("FLOAT32", "FLOAT16")

#: [(feature level, {tensor member: allowed data types})], newest first: the pages' tables.
TENSOR_SUPPORT_V0: tuple[tuple[str, TypeTable], ...] = (
    ("3.0", {"InputTensor": _FLOATS, "ROITensor": _FLOATS, "BatchIndicesTensor": ("UINT32",), "OutputTensor": _FLOATS}),
)
TENSOR_SUPPORT_V1: tuple[tuple[str, TypeTable], ...] = (
    ("5.0", {"InputTensor": _FLOATS, "ROITensor": _FLOATS, "BatchIndicesTensor": ("UINT64", "UINT32"),
             "OutputTensor": _FLOATS}),
    ("4.0", {"InputTensor": _FLOATS, "ROITensor": _FLOATS, "BatchIndicesTensor": ("UINT32",), "OutputTensor": _FLOATS}),
)

ROI_SHAPES = "{NumROIs, 4}, {1, NumROIs, 4} or {1, 1, NumROIs, 4}"
BATCH_INDICES_SHAPES = "{NumROIs}, {1, NumROIs}, {1, 1, NumROIs} or {1, 1, 1, NumROIs}"


def roi_count(roi_sizes: tuple[int, ...]) -> int:
    """NumROIs of an ROI_ALIGN ROITensor (its second to last size)."""
    return roi_sizes[-2]


def validate_desc(d: AnyRoiAlign, types: TypeTable) -> None:
    """The pages' rules for the desc's fields (the registry's ``validate``, both versions)."""
    op = d.TYPE
    _validate_tensors(d, types)
    if d.reduction_function not in ("AVERAGE", "MAX"):
        raise DescError("ReductionFunction", "DML_REDUCE_FUNCTION_" + d.reduction_function,
                        "DML_REDUCE_FUNCTION_AVERAGE or DML_REDUCE_FUNCTION_MAX", op)
    if d.interpolation_mode not in ("NEAREST_NEIGHBOR", "LINEAR"):
        raise DescError("InterpolationMode", d.interpolation_mode, "NEAREST_NEIGHBOR or LINEAR", op)
    finite(op, "SpatialScaleX", d.spatial_scale_x)
    finite(op, "SpatialScaleY", d.spatial_scale_y)
    if type(d) is RoiAlign1Desc:
        finite(op, "InputPixelOffset", d.input_pixel_offset)
        finite(op, "OutputPixelOffset", d.output_pixel_offset)
    float32_value(op, "OutOfBoundsInputValue", d.out_of_bounds_input_value)
    if d.minimum_samples_per_output < 1:
        raise DescError("MinimumSamplesPerOutput", d.minimum_samples_per_output,
                        "must be at least 1: an output element with no sample has no value to reduce", op)
    if d.maximum_samples_per_output < d.minimum_samples_per_output:
        raise DescError("MaximumSamplesPerOutput", d.maximum_samples_per_output,
                        f"must be >= MinimumSamplesPerOutput ({d.minimum_samples_per_output}) for the clamp to mean "
                        "anything", op)


def _validate_tensors(d: AnyRoiAlign, types: TypeTable) -> None:
    op = d.TYPE
    check_tensor(op, "InputTensor", d.input_tensor, types, [4])
    check_tensor(op, "ROITensor", d.roi_tensor, types, [2, 3, 4])
    check_tensor(op, "BatchIndicesTensor", d.batch_indices_tensor, types, [1, 2, 3, 4])
    check_tensor(op, "OutputTensor", d.output_tensor, types, [4])
    same_type(op, {"InputTensor": d.input_tensor, "OutputTensor": d.output_tensor, "ROITensor": d.roi_tensor})
    roi = d.roi_tensor.sizes
    if roi[-1] != 4 or any(s != 1 for s in roi[:-2]):
        raise DescError("ROITensor.Sizes", list(roi), f"must be {ROI_SHAPES}", op)
    n = roi_count(roi)
    batch = d.batch_indices_tensor.sizes
    if batch[-1] != n or any(s != 1 for s in batch[:-1]):
        raise DescError("BatchIndicesTensor.Sizes", list(batch), f"must be {BATCH_INDICES_SHAPES} with NumROIs = "
                        f"{n} (from ROITensor)", op)
    expect_sizes(op, "OutputTensor", d.output_tensor.sizes[:2], (n, d.input_tensor.sizes[1]),
                 "the first two of {NumROIs, ChannelCount, OutputHeight, OutputWidth}")

#: The reference refuses regions that need more sample points than this per channel (a
#: guard against a hang on absurd ROIs, not a DirectML rule).
MAX_SAMPLE_POINTS_PER_REGION = 2**24


def check_values(desc: AnyRoiAlign, tensors: dict[str, np.ndarray]) -> None:
    """The reference's limit on one region's samples, once the ROI values are known (the
    registry's ``check_values``, run before the kernel): the kernel interpolates every sample
    point of a region for all channels at once, in float64, so sample points x channels must
    stay within ``max_elements() // 8`` (several such arrays are alive at a time). Rows that
    are not finite are left to the kernel, which refuses them (ERR-1)."""
    d = as_roi_align1(desc)
    _, _, out_h, out_w = d.output_tensor.sizes
    channels = d.input_tensor.sizes[1]
    rois = np.asarray(tensors["ROITensor"], dtype=np.float64).reshape(-1, 4)
    finite_rows = np.isfinite(rois).all(axis=1)
    scale_x, scale_y = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    with np.errstate(over="ignore", invalid="ignore"):
        size_x = rois[:, 2] * scale_x - rois[:, 0] * scale_x
        size_y = rois[:, 3] * scale_y - rois[:, 1] * scale_y
        low, high = float(d.minimum_samples_per_output), float(d.maximum_samples_per_output)
        n_x = np.minimum(np.maximum(np.ceil(size_x / out_w), low), high)
        n_y = np.minimum(np.maximum(np.ceil(size_y / out_h), low), high)
        points = n_x * out_w * n_y * out_h * channels
    points = np.where(finite_rows & ~np.isnan(points), points, 0.0)
    if points.size and points.max() > max_elements() // 8:
        row = int(np.argmax(points))
        within_cap(d.TYPE, f"ROITensor row {row}", rois[row].tolist(), int(min(points[row], 2.0**80)),
                   f"sample values ({int(n_y[row])}x{int(n_x[row])} samples per output element x {channels} channels; "
                   "a lower MaximumSamplesPerOutput bounds them)",
                   max_elements() // 8)


def samples_per_output(scaled_size: float, output_size: int, minimum: int, maximum: int) -> int:
    """``clamp(scaledRegionSize / outputSize, Minimum, Maximum)``, a fraction rounded up (RA-3)."""
    return samples_for_ratio(scaled_size / output_size, minimum, maximum)


def samples_for_ratio(ratio: float, minimum: int, maximum: int) -> int:
    """``clamp(ceil(ratio), Minimum, Maximum)``: the sample count of a size / output ratio (RA-3)."""
    return int(min(max(math.ceil(ratio), minimum), maximum))


def sample_coordinates(scaled_start: float, scaled_size: float, output_size: int, samples: int,
                       input_pixel_offset: float, output_pixel_offset: float, align_to_corners: bool) -> np.ndarray:
    """Input coordinates of the ``output_size * samples`` sample points along one axis, in
    output order: samples ``[o*samples, (o+1)*samples)`` belong to output element ``o``."""
    sample_count = output_size * samples
    sample = np.arange(sample_count, dtype=np.float64)
    if align_to_corners:
        if sample_count == 1:
            # One sample stretched to both corners: the page is silent; take the centre (RA-6).
            return np.array([scaled_start + scaled_size / 2 - input_pixel_offset])
        scale = scaled_size / (sample_count - 1)
    else:
        scale = scaled_size / sample_count
    return (sample - output_pixel_offset) * scale + scaled_start - input_pixel_offset


def region_samples(d: RoiAlign1Desc, row: int, roi: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The page's per-region quantities: the Y and X sample coordinates of region ``row`` (ROI
    ``[x1, y1, x2, y2]``) and its samples per output element along Y and X."""
    _, _, out_h, out_w = d.output_tensor.sizes
    scale_x, scale_y = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    in_offset, out_offset = float(np.float32(d.input_pixel_offset)), float(np.float32(d.output_pixel_offset))
    x1, y1, x2, y2 = (float(v) for v in roi)
    start_x, start_y = x1 * scale_x, y1 * scale_y
    size_x, size_y = x2 * scale_x - start_x, y2 * scale_y - start_y
    n_x = samples_per_output(size_x, out_w, d.minimum_samples_per_output, d.maximum_samples_per_output)
    n_y = samples_per_output(size_y, out_h, d.minimum_samples_per_output, d.maximum_samples_per_output)
    check_sample_points(d, row, roi, n_y, n_x)
    xs = sample_coordinates(start_x, size_x, out_w, n_x, in_offset, out_offset, d.align_regions_to_corners)
    ys = sample_coordinates(start_y, size_y, out_h, n_y, in_offset, out_offset, d.align_regions_to_corners)
    return ys, xs, n_y, n_x


def check_sample_points(d: RoiAlign1Desc, row: int, roi: np.ndarray, n_y: int, n_x: int) -> None:
    """DescError when region ``row`` would need more than ``MAX_SAMPLE_POINTS_PER_REGION`` points."""
    _, _, out_h, out_w = d.output_tensor.sizes
    if n_x * out_w * n_y * out_h > MAX_SAMPLE_POINTS_PER_REGION:
        raise DescError(f"ROITensor row {row}", [float(v) for v in roi],
                        f"this region needs {n_y}x{n_x} samples per output element ({n_y * out_h}x{n_x * out_w} "
                        f"points); the reference computes at most {MAX_SAMPLE_POINTS_PER_REGION} points per region "
                        "(lower MaximumSamplesPerOutput)", d.TYPE)


def edge_taps(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate, clamped to the input (RA-5, whether or not it reads the input): the two
    neighbouring input indices and their LINEAR weights."""
    c = np.clip(coords, 0.0, size - 1)
    low = np.floor(c).astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    frac = np.where(at_end, 0.0, c - low)
    return low, high, 1.0 - frac, frac


def linear_taps(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate: the two neighbouring input indices, their weights, and whether the
    coordinate reads the input at all (RA-5: within ``[-1, size]``; [-1, 0) and (size-1, size]
    clamp to the edge pixel)."""
    inside = (coords >= -1.0) & (coords <= size)
    low, high, w_low, w_high = edge_taps(coords, size)
    return np.where(inside, low, 0), np.where(inside, high, 0), w_low, w_high, inside


def nearest_tap(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per coordinate: the nearest input index (halves round up) and whether it reads the input
    (the same ``[-1, size]`` range as LINEAR, RA-5)."""
    inside = (coords >= -1.0) & (coords <= size)
    index = np.clip(np.floor(coords + 0.5), 0, size - 1).astype(np.int64)
    return np.where(inside, index, 0), inside


def gather(plane: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``plane[rows[:, None], cols[None, :]]`` of a channels-last ``(H, W, C)`` plane:
    ``(len(rows), len(cols), C)``, taken as whole rows of channels from the plane viewed as
    ``(H * W, C)``, which NumPy copies faster than a two-index gather."""
    height, width, channels = plane.shape
    taken = plane.reshape(height * width, channels).take((rows[:, None] * width + cols[None, :]).ravel(), axis=0)
    return taken.reshape(rows.size, cols.size, channels)


def reads_input(coords: np.ndarray, size: int) -> np.ndarray:
    """Whether each coordinate reads the input (RA-5: within ``[-1, size]``)."""
    return (coords >= -1.0) & (coords <= size)


def interpolate(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, mode: str, out_of_bounds: float) -> np.ndarray:
    """``interpolate2D`` of a channels-last ``(H, W, C)`` plane at every (y, x) of the two axes'
    grids, in float64: ``(len(ys), len(xs), C)``; points outside the input read
    ``OutOfBoundsInputValue``."""
    height, width, _ = plane.shape
    inside = (reads_input(ys, height)[:, None] & reads_input(xs, width)[None, :])[:, :, None]
    return np.where(inside, clamped_samples(plane, ys, xs, mode), np.float64(np.float32(out_of_bounds)))


def clamped_samples(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, mode: str) -> np.ndarray:
    """``interpolate2D`` of a channels-last ``(H, W, C)`` plane at every (y, x), in float64, with
    the coordinates clamped to the input (RA-5) whether or not they read it: ``interpolate``
    replaces the points outside by ``OutOfBoundsInputValue``; the precision models read a
    point outside where rounding could move it inside (``roi_align_bounds``)."""
    height, width, _ = plane.shape

    def tap(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return gather(plane, rows, cols).astype(np.float64)

    if mode == "NEAREST_NEIGHBOR":
        def nearest(coords: np.ndarray, size: int) -> np.ndarray:
            return np.clip(np.floor(coords + 0.5), 0, size - 1).astype(np.int64)

        return tap(nearest(ys, height), nearest(xs, width))
    y0, y1, wy0, wy1 = edge_taps(ys, height)
    x0, x1, wx0, wx1 = edge_taps(xs, width)
    wx0, wx1 = wx0[None, :, None], wx1[None, :, None]
    top = tap(y0, x0) * wx0 + tap(y0, x1) * wx1
    bottom = tap(y1, x0) * wx0 + tap(y1, x1) * wx1
    return top * wy0[:, None, None] + bottom * wy1[:, None, None]


def execute_desc(desc: AnyRoiAlign, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The registry's ``execute``: ``roi_align`` on arrays keyed by DML member name."""
    return roi_align(desc, tensors["InputTensor"], tensors["ROITensor"], tensors["BatchIndicesTensor"])


def random_inputs(desc: AnyRoiAlign, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Any valid input of a validated desc: values multiples of 1/8 in [-4, 4], regions in and
    around the input, batch indices in range (the registry's ``random_inputs``)."""
    x = random_values(desc.input_tensor.sizes, desc.input_tensor.data_type, rng)
    batch, _, height, width = desc.input_tensor.sizes
    count = roi_count(desc.roi_tensor.sizes)
    sx, sy = desc.spatial_scale_x or 1.0, desc.spatial_scale_y or 1.0
    x1 = rng.uniform(-1, width, count) / sx
    y1 = rng.uniform(-1, height, count) / sy
    x2 = x1 + rng.uniform(0, width, count) / sx
    y2 = y1 + rng.uniform(0, height, count) / sy
    rois = np.stack([x1, y1, x2, y2], axis=1).astype(x.dtype).reshape(desc.roi_tensor.sizes)
    ids = rng.integers(0, batch, count).astype(numpy_dtype(desc.batch_indices_tensor.data_type))
    return {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": ids.reshape(desc.batch_indices_tensor.sizes)}


def roi_align(desc: AnyRoiAlign, input_tensor: np.ndarray, roi_tensor: np.ndarray,
              batch_indices_tensor: np.ndarray) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    return {"OutputTensor": compute(kernel_input(desc, input_tensor, roi_tensor, batch_indices_tensor))}


@dataclass
class KernelInput:
    """A validated desc's regions and input, checked and laid out once: what the kernel
    (``compute``) reads, and what the precision models (``roi_align_bounds``) read beside it."""

    desc: RoiAlign1Desc
    rois: np.ndarray           # (NumROIs, 4) float64, [x1, y1, x2, y2]
    batch_indices: np.ndarray  # (NumROIs,)
    planes: np.ndarray         # (BatchCount, H, W, C): channels last; FLOAT16 widened to float32 (exact)
    dtype: np.dtype            # the input's and the output's
    _finite: dict[int, bool] = field(default_factory=dict)

    def plane(self, row: int) -> np.ndarray:
        """The channels-last ``(H, W, C)`` image region ``row`` reads."""
        return self.planes[int(self.batch_indices[row])]

    def separable(self, row: int) -> bool:
        """Whether region ``row`` is computed by ``average_linear`` (AVERAGE of LINEAR samples
        of a finite image)."""
        d = self.desc
        if d.reduction_function != "AVERAGE" or d.interpolation_mode != "LINEAR":
            return False
        batch = int(self.batch_indices[row])
        if batch not in self._finite:
            self._finite[batch] = bool(np.isfinite(self.planes[batch]).all())
        return self._finite[batch]


def kernel_input(desc: AnyRoiAlign, input_tensor: np.ndarray, roi_tensor: np.ndarray,
                 batch_indices_tensor: np.ndarray) -> KernelInput:
    """The regions, refused where the page leaves them undefined (ERR-1), and the input laid
    out channels last, so that each sample point reads its channels as one contiguous row."""
    rois, batch_indices = regions(desc, input_tensor, roi_tensor, batch_indices_tensor)
    planes = np.ascontiguousarray(np.moveaxis(input_tensor, 1, -1))
    if planes.dtype == np.float16:  # exact in float32, which converts to float64 several times faster
        planes = planes.astype(np.float32)
    return KernelInput(as_roi_align1(desc), rois, batch_indices, planes, input_tensor.dtype)


def compute(p: KernelInput, alongside: Optional[Callable[[int, np.ndarray], None]] = None) -> np.ndarray:
    """The kernel: the ``(NumROIs, C, OutputHeight, OutputWidth)`` output, each element computed
    in float64 and rounded once to the output type (FP-1). ``execute`` and every precision model
    take their outputs from here. ``alongside(row, values)``, when given, runs after each region
    with its elements as the output holds them (``(OutputHeight, OutputWidth, C)``, read-only):
    the precision models compute that region's bounds there, beside its values."""
    _, _, out_h, out_w = p.desc.output_tensor.sizes
    # Written region by region in the output's layout: a transposed copy of the whole output
    # would be one more array of its size.
    output = np.empty((p.rois.shape[0], p.planes.shape[-1], out_h, out_w), dtype=p.dtype)
    for r, roi in enumerate(p.rois):
        ys, xs, n_y, n_x = region_samples(p.desc, r, roi)
        output[r] = region_value(p, r, ys, xs, n_y, n_x).transpose(2, 0, 1)  # channels first
        if alongside is not None:
            values = output[r].transpose(1, 2, 0)
            values.flags.writeable = False
            alongside(r, values)
    return output


def region_value(p: KernelInput, row: int, ys: np.ndarray, xs: np.ndarray, n_y: int, n_x: int) -> np.ndarray:
    """Region ``row``'s elements ``(OutputHeight, OutputWidth, C)`` in float64, from its sample
    coordinates ``ys`` / ``xs`` at ``n_y x n_x`` samples per element."""
    d, plane = p.desc, p.plane(row)
    if p.separable(row):
        return average_linear(plane, ys, xs, n_y, n_x, d.out_of_bounds_input_value)
    _, _, out_h, out_w = d.output_tensor.sizes
    samples = interpolate(plane, ys, xs, d.interpolation_mode,
                          d.out_of_bounds_input_value).reshape(out_h, n_y, out_w, n_x, plane.shape[-1])
    if d.reduction_function == "AVERAGE":
        return samples.mean(axis=(1, 3))
    return nan_ignoring_max(samples, axis=(1, 3))


def axis_weights(coords: np.ndarray, size: int, samples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One axis of the separable AVERAGE of LINEAR samples: ``(weights, taps, inside)`` where
    ``weights[o, k]`` sums the LINEAR weights that output element ``o``'s samples put on input
    index ``taps[k]`` (samples outside the input put none), and ``inside[o]`` counts its samples
    that read the input (RA-5)."""
    low, high, w_low, w_high = edge_taps(coords, size)
    inside = reads_input(coords, size)
    outputs = coords.size // samples
    owner = np.arange(coords.size) // samples
    if not inside.all():
        low, high, w_low, w_high, owner = (a[inside] for a in (low, high, w_low, w_high, owner))
    both = np.concatenate([low, high])
    taps = np.unique(both)
    # One bincount adds the low weights, then the high ones, in sample order: the order of
    # accumulating them one by one, in far fewer steps.
    cells = np.concatenate([owner, owner]) * taps.size + np.searchsorted(taps, both)
    weights = np.bincount(cells, weights=np.concatenate([w_low, w_high]), minlength=outputs * taps.size)
    return weights.reshape(outputs, taps.size), taps, np.bincount(owner, minlength=outputs)


def average_linear(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, n_y: int, n_x: int,
                   out_of_bounds: float) -> np.ndarray:
    """The AVERAGE of LINEAR samples of one region over a finite ``(H, W, C)`` plane, computed as
    ``Ay . P . Ax^T`` over the input rows and columns the samples touch: bilinear weights are a
    product of a Y and an X weight, and a sample reads the input only when both its coordinates
    do, so the mean of ``interpolate``'s samples factors by axis. Equal to the sample-by-sample
    form up to float64 rounding; it reads each touched input pixel once instead of four times
    per sample, which is where large regions spent their time. (A NaN or infinity times a zero
    weight would not vanish, so ``roi_align`` uses it only on finite planes.)"""
    height, width, _ = plane.shape
    wy, rows, in_y = axis_weights(ys, height, n_y)
    wx, cols, in_x = axis_weights(xs, width, n_x)
    total = np.zeros((wy.shape[0], wx.shape[0], plane.shape[2]))  # (out_h, out_w, C)
    if rows.size and cols.size:  # some sample reads the input
        block = gather(plane, rows, cols).astype(np.float64)  # (rows, cols, C)
        across = np.matmul(wx, block)  # (rows, out_w, C): one (out_w, cols) x (cols, C) product per row, no copy
        total += (wy @ across.reshape(rows.size, -1)).reshape(total.shape)
    outside = n_y * n_x - np.outer(in_y, in_x)  # samples of each output element that read OutOfBoundsInputValue
    if outside.any():
        # Only where some sample reads it: an infinite or NaN value times a count of 0 would
        # make NaN of elements whose samples all read the input.
        reads = outside > 0
        added = np.zeros(outside.shape)
        added[reads] = outside[reads] * np.float64(np.float32(out_of_bounds))
        total += added[:, :, None]
    return total / (n_y * n_x)


def regions(desc: AnyRoiAlign, input_tensor: np.ndarray, roi_tensor: np.ndarray,
            batch_indices_tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ROI rows ``(NumROIs, 4)`` in float64 and the batch index of each (RA-8), refused where
    the page leaves them undefined (ERR-1)."""
    rois = roi_tensor.reshape(-1, 4).astype(np.float64)
    batch_indices = batch_indices_tensor.reshape(-1)
    _check_regions(desc, rois, batch_indices, input_tensor.shape[0])
    return rois, batch_indices


def _check_regions(desc: AnyRoiAlign, rois: np.ndarray, batch_indices: np.ndarray,
                   batch_count: int) -> None:
    bad = np.flatnonzero(~np.isfinite(rois).all(axis=1))
    if bad.size:
        r = int(bad[0])
        raise DescError(f"ROITensor row {r}", rois[r].tolist(), "ROI coordinates must be finite", desc.TYPE)
    bad = np.flatnonzero(batch_indices >= batch_count)
    if bad.size:
        r = int(bad[0])
        raise DescError(f"BatchIndicesTensor[{r}]", int(batch_indices[r]),
                        f"must be in [0, {batch_count}) (InputTensor BatchCount); the page leaves other values undefined",
                        desc.TYPE)
