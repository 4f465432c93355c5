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

The primary reading (DECISIONS.md): the Y scale uses Y quantities (RA-1, the page's typo); the
sample loops are exclusive, ``n`` samples per output element per axis (RA-2); a fractional sample
count is rounded up before the clamp, a negative one clamps to the minimum (RA-3); MAX starts from
the first sample (RA-4); a sample reads the input strictly inside ``(-1, size)`` and interpolates
``a + t * (b - a)`` along Y, then X, between its two neighbouring pixels, each clamped to the input
(RA-5: DirectML.dll's own reading); AlignRegionsToCorners divides by ``outputSampleSize - 1``
(RA-6); arithmetic in float64, one rounding to the output type (FP-1); inverted regions sample
backwards, which mirrors the output, as the page says.

``Rules`` holds each of those choices that another kernel makes otherwise; its defaults are the
primary reading, and ``READINGS`` names the departures (``reference/readings.py``): the kernel below
computes every reading, switch by switch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Optional, Union
from typing import Mapping as MappingT

import numpy as np

from . import native
from .checks import TypeTable, check_tensor, expect_sizes, finite, float32_value, max_elements, same_type, within_cap
from .descs import Desc, TensorDesc, dml_field
from .dtypes import numpy_dtype, random_values
from .errors import DescError
from .max_pooling2 import mlas_kernel, mlas_x86_fold
from .readings import check_rules, holds, reading
from .workers import Workers, buffer

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


@dataclass(frozen=True)
class Rules:
    """How the kernel reads the page where kernels differ; the defaults are the primary reading
    (module docstring, DECISIONS.md RA-3 to RA-5) and ``READINGS`` switch them.

    ``edge``: a sample reads the input strictly inside ``(-1, size)`` ("open", DirectML.dll) or on
    ``[-1, size]`` ("closed": ONNX Runtime, torchvision). ``interpolation``: LINEAR as ``a + t * (b -
    a)`` along Y then X between the two neighbouring pixels, each clamped to the input ("lerp": a
    coordinate in ``(-1, 0)`` reads pixel 0 twice), or as the weighted sum ``w0 * a + w1 * b`` with
    ONNX Runtime's taps ("weighted": a coordinate below 0 takes pixels 0 and 1 with weights 1 and 0).
    ``outside``: a sample outside reads OutOfBoundsInputValue ("value") or that plus ``0 * X[b, c, 0,
    0]`` ("value-plus-zero-corner", ONNX Runtime's weights of 0 at pixel 0). ``count``: the page's
    clamp ("clamp"), ONNX's adaptive count ("onnx": ``ceil(size / output)`` with no clamp when
    Minimum != Maximum, no sample at all, output 0, when that is <= 0) or the DirectML EP's desc for
    it ("at-least-one": ``clamp(ceil(size / output), 1, UINT32_MAX)`` when Minimum != Maximum). ``min_size``: a region whose
    samples tile a span narrower than this many pixels along an axis is raised to it, the span's start
    kept, its samples at the centres of its equal cells (RoiAlign-10's 1x1; ``raised_samples``). ``max_of``:
    MAX over interpolated samples ("samples") or over each sample's largest weighted corner term
    ("corner-terms", ONNX Runtime's mode="max"). ``max_start``: MAX starts from its first sample
    ("first"), the output type's lowest finite value ("lowest"), -inf ("minus-inf": NaN samples skipped) or 0
    ("zero"). ``max_nan``: a NaN
    sample loses to a number ("ignore") or wins ("propagate"); both "mlas-x86": MAX as ONNX Runtime's
    float32 MaxPool (MLAS, x86-64) folds each element's samples laid out as the composed MaxPool's
    input (``mlas_sample_max``), which decides where the max starts and whether a NaN wins together.
    ``arithmetic``: float64 rounded once
    ("exact") or samples and sums in float32, in ONNX Runtime's order ("float32"). ``coordinates``:
    sample coordinates in float64 ("exact") or the page's formula evaluated in float32, step by step
    (``sample_coordinates``).
    ``input_offset_shift``: added to InputPixelOffset (the desc the DirectML EP builds for RoiAlign-10).
    ``inverted``: an inverted region's sample count is the page's clamp of its negative ratio, its
    Minimum ("minimum", RA-10), or its upright twin's, ``clamp(ceil(|size| / output), Minimum,
    Maximum)`` ("upright", DirectML.dll); its samples run backwards either way."""

    edge: str = "open"
    interpolation: str = "lerp"
    outside: str = "value"
    count: str = "clamp"
    min_size: float = 0.0
    max_of: str = "samples"
    max_start: str = "first"
    max_nan: str = "ignore"
    arithmetic: str = "exact"
    coordinates: str = "exact"
    input_offset_shift: float = 0.0
    inverted: str = "minimum"

    def fast(self) -> bool:
        """Whether the separable AVERAGE (``average_linear``) computes these rules on a finite input."""
        return self.outside == "value" and self.arithmetic == "exact"


PRIMARY = Rules()
#: What each rule may hold (``readings.check_rules``).
RULE_VALUES = {"edge": ("open", "closed"), "interpolation": ("lerp", "weighted"),
               "outside": ("value", "value-plus-zero-corner"), "count": ("clamp", "onnx", "at-least-one"),
               "max_of": ("samples", "corner-terms"), "max_start": ("first", "lowest", "minus-inf", "zero", "mlas-x86"),
               "max_nan": ("ignore", "propagate", "mlas-x86"), "arithmetic": ("exact", "float32"),
               "coordinates": ("exact", "float32"),
               "inverted": ("minimum", "upright")}

def _regions(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> np.ndarray:
    """The ROI rows ``(NumROIs, 4)`` in float64."""
    return np.asarray(arrays["ROITensor"]).reshape(-1, 4).astype(np.float64)


def _sample_on_edge(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """Some sample lies exactly at -1 or exactly at the input's size on an axis, under the primary
    reading or any reading that moves samples (counts, 1x1 regions, the DML EP's offset)."""
    d = as_roi_align1(desc)
    height, width = d.input_tensor.sizes[2:]
    variants = (PRIMARY, Rules(count="onnx"), Rules(min_size=1.0), Rules(input_offset_shift=0.5),
                Rules(count="onnx", min_size=1.0))
    for row, roi in enumerate(_regions(desc, arrays)):
        if not np.isfinite(roi).all():
            continue
        for rules in variants:
            try:
                ys, xs, _, _ = region_samples(d, row, roi, rules)
            except DescError:
                return True  # too many samples to look at: say it can show
            if np.isin(ys, (-1.0, float(height))).any() or np.isin(xs, (-1.0, float(width))).any():
                return True
    return False


def _non_finite(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """The input holds NaN or an infinity (where the two LINEAR formulas part)."""
    return holds(arrays, "nan", "inf", "-inf")


def _non_finite_or_huge(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """The input holds NaN, an infinity, or values whose float32 differences overflow (where the two
    LINEAR formulas part, exactly or in float32)."""
    return holds(arrays, "nan", "inf", "-inf", "huge")


def _corner_not_finite(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """Some ``X[b, c, 0, 0]`` is NaN or infinite (``0 * X[b, c, 0, 0]`` is then NaN)."""
    return not np.isfinite(np.asarray(arrays["InputTensor"])[:, :, 0, 0]).all()


def _axis_ratios(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> list[np.ndarray]:
    """Per axis (X, then Y), each region's signed ``scaledRegionSize / outputSize``: the ratio an
    adaptive count is the ceiling of (negative for an inverted region)."""
    d = as_roi_align1(desc)
    rois = _regions(desc, arrays)
    out_h, out_w = d.output_tensor.sizes[2:]
    ratios = []
    with np.errstate(invalid="ignore", over="ignore"):
        for first, last, scale, out in ((0, 2, d.spatial_scale_x, out_w), (1, 3, d.spatial_scale_y, out_h)):
            s = float(np.float32(scale))
            ratios.append((rois[:, last] * s - rois[:, first] * s) / out)
    return ratios


def _count_differs(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray], floor: int = 0) -> bool:
    """An adaptive count (Minimum != Maximum) that the page's clamp changes for some region against
    an unclamped count of at least ``floor`` samples (ONNX: 0, a region of size <= 0 taking none),
    or would change for an inverted region counted as its upright twin (``upright-count``)."""
    d = as_roi_align1(desc)
    lo, hi = d.minimum_samples_per_output, d.maximum_samples_per_output
    if lo == hi:
        return False
    with np.errstate(invalid="ignore"):
        for exact in _axis_ratios(desc, arrays):
            ratio = np.ceil(exact)
            if ((np.maximum(ratio, floor) < max(lo, 1)) | (ratio > hi) | ((exact < 0) & (np.ceil(-exact) > hi))).any():
                return True
    return False


def _count_differs_from_at_least_one(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """An adaptive count that the page's clamp changes against ``max(ceil(ratio), 1)``."""
    return _count_differs(desc, arrays, floor=1)


def _inverted_count_differs(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """Some inverted region (x2 < x1 or y2 < y1, scaled) whose upright twin takes more samples
    than the page's Minimum gives it (``Rules.inverted``)."""
    d = as_roi_align1(desc)
    lo, hi = d.minimum_samples_per_output, d.maximum_samples_per_output
    with np.errstate(invalid="ignore"):
        return lo != hi and any(((ratio < 0) & (np.ceil(-ratio) > max(lo, 1))).any()
                                for ratio in _axis_ratios(desc, arrays))


def _small_region(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """Some region's samples can tile a span narrower than one pixel along an axis (``sample_span``):
    the scaled region is (AlignRegionsToCorners only widens the span), or one sample per axis is
    stretched to both corners, which spans nothing."""
    d = as_roi_align1(desc)
    rois = _regions(desc, arrays)
    sx, sy = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    out_h, out_w = d.output_tensor.sizes[2:]
    if d.align_regions_to_corners and d.minimum_samples_per_output == 1 and min(out_h, out_w) == 1 and len(rois):
        return True
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(((rois[:, 2] * sx - rois[:, 0] * sx) < 1).any() or ((rois[:, 3] * sy - rois[:, 1] * sy) < 1).any())


def _max(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """The reduction is MAX."""
    return desc.reduction_function == "MAX"


def _max_of_non_finite(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """MAX, and samples that can be NaN or -inf: the input or OutOfBoundsInputValue not finite, or
    huge (a lerp in float32, the float32-accumulation reading this combines with, overflows there)."""
    return _max(desc, arrays) and (_non_finite_or_huge(desc, arrays)
                                   or not np.isfinite(desc.out_of_bounds_input_value))


def _pooled_max_of_non_finite(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """MAX over a fixed grid of at least 2x2 samples (which the mapper composes as RoiAlign of every
    sample, then a MaxPool over them), with samples that can be NaN or infinite (the input or
    OutOfBoundsInputValue not finite, or huge: float32 sums of such values overflow)."""
    d = as_roi_align1(desc)
    return (_max(desc, arrays) and d.minimum_samples_per_output == d.maximum_samples_per_output >= 2
            and (_non_finite_or_huge(desc, arrays) or not np.isfinite(d.out_of_bounds_input_value)))


def _huge(desc: "AnyRoiAlign", arrays: MappingT[str, np.ndarray]) -> bool:
    """Values whose float32 sums can overflow (2**120 or more) in the input or OutOfBoundsInputValue."""
    oob = abs(float(desc.out_of_bounds_input_value))
    return holds(arrays, "huge") or (np.isfinite(oob) and oob >= 2.0**120)


_ORT_ROIALIGN = "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/providers/cpu/object_detection/roialign.cc"
_ORT_POOL = "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/providers/cpu/nn/pool_functors.h"
_MLAS_POOLING = "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/mlas/lib/pooling.cpp"
_TV_ROIALIGN = "https://github.com/pytorch/vision/blob/main/torchvision/csrc/ops/cpu/roi_align_kernel.cpp"
#: The departures from the primary reading that kernels are known to compute (DECISIONS.md RA-*, TV-*).
READINGS = (
    reading("closed-edge", "a sample exactly at -1 or exactly at the input's width (height) reads the edge pixel "
            "instead of OutOfBoundsInputValue", ("ONNX Runtime's RoiAlign kernels", "torchvision's roi_align"),
            f"{_ORT_ROIALIGN} (PreCalcForBilinearInterpolate: y < -1.0 || y > height); {_TV_ROIALIGN}", shows=_sample_on_edge, edge="closed"),
    reading("weighted-interpolation", "LINEAR is the weighted sum w1*v1 + w2*v2 + w3*v3 + w4*v4, a coordinate below 0 "
            "taking pixels 0 and 1 with weights 1 and 0, so an infinite or NaN neighbour of weight 0 makes NaN "
            "(0 * inf) where the primary reading's clamped taps read the edge pixel, and an infinite tap of weight "
            "above 0 stays infinite where a + t * (b - a) gives NaN",
            ("ONNX Runtime's RoiAlign kernels", "torchvision's roi_align", "the page's words: 'weighted average'"),
            f"{_ORT_ROIALIGN} (RoiAlignForward); {_TV_ROIALIGN} (bilinear_interpolate)", shows=_non_finite_or_huge,
            interpolation="weighted"),
    reading("zero-times-corner", "a sample outside the input adds 0 * X[b, c, 0, 0] to OutOfBoundsInputValue (NaN "
            "when that pixel is NaN or infinite)", ("ONNX Runtime's RoiAlign kernels",),
            f"{_ORT_ROIALIGN} (PreCalcForBilinearInterpolate: pos 0 and weights 0 for a sample outside)",
            shows=_corner_not_finite, outside="value-plus-zero-corner"),
    reading("onnx-adaptive-count", "an adaptive sample count (Minimum != Maximum) is ceil(size / output) with no "
            "clamp, and an empty or inverted region takes no sample and outputs OutOfBoundsInputValue (no sample "
            "reads the input; 0 in ONNX's RoiAlign, which has no such value)",
            ("the ONNX spec's sampling_ratio=0", "ONNX Runtime's RoiAlign kernels", "OpenVINO"),
            f"https://onnx.ai/onnx/operators/onnx__RoiAlign.html; {_ORT_ROIALIGN} (roi_bin_grid_h)", shows=_count_differs, count="onnx"),
    reading("directml-ep-adaptive-count", "an adaptive sample count (Minimum != Maximum) is ceil(size / output), at "
            "least 1 and with no upper clamp: the DirectML EP builds RoiAlign sampling_ratio=0 as "
            "MinimumSamplesPerOutput 1, MaximumSamplesPerOutput UINT32_MAX",
            ("ONNX Runtime's DirectML EP (DmlOperatorRoiAlign.cpp)",),
            "https://github.com/microsoft/onnxruntime/blob/129fc79768698d0b02fa36074e46238769e376ec/onnxruntime/core/"
            "providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorRoiAlign.cpp#L47-L48",
            shows=_count_differs_from_at_least_one, count="at-least-one"),
    reading("upright-count", "an inverted region (x2 < x1 or y2 < y1) takes the sample count of its upright twin, "
            "clamp(ceil(|size| / output), Minimum, Maximum), where the page's pseudo-code clamps a negative ratio to "
            "Minimum; its samples still run backwards (mirrored, as the page says)",
            ("DirectML.dll 1.15.4 (observed under Wine)",),
            "tests/eps/test_dml_wine_observed.py (test_directml_counts_an_inverted_region_as_its_upright_twin)",
            shows=_inverted_count_differs, inverted="upright"),
    reading("onnx-1x1-regions", "along each axis, the span its N samples (OutputSize x samples per output) "
            "tile (N cells one sample spacing wide, each centred on its sample), when narrower than one pixel (empty or inverted "
            "included), is raised to one pixel with its start kept, and the samples move to the centres of its N "
            "equal cells. The span is the region itself for OutputPixelOffset -0.5 without AlignRegionsToCorners;"
            " another OutputPixelOffset shifts it by -(OutputPixelOffset + 0.5) spacings, AlignRegionsToCorners "
            "widens it to N/(N-1) times the region, and one sample stretched to both corners spans nothing at the"
            " region's centre, so it is always raised. RoiAlign-10 raises the ROI it is given, and the ROI a "
            "graph must give it to place the page's samples is that span (an adaptive count is counted on the "
            "raised size)",
            ("ONNX RoiAlign-10 and output_half_pixel in ONNX Runtime", "OpenVINO", "torchvision aligned=False"),
            f"{_ORT_ROIALIGN} ('Force malformed ROIs to be 1x1'); https://github.com/onnx/onnx/issues/3428",
            shows=_small_region, min_size=1.0),
    reading("corner-term-max", "MAX is the running max over samples of each sample's largest weighted corner term "
            "max(w1*v1, w2*v2, w3*v3, w4*v4), not the max of the interpolated samples",
            ("ONNX Runtime's RoiAlign mode=max", "the ONNX reference implementation"),
            "https://github.com/microsoft/onnxruntime/issues/6146; https://github.com/onnx/onnx/issues/4764",
            shows=_max, max_of="corner-terms"),
    reading("lowest-start", "MAX starts from float32's lowest finite value (-FLT_MAX) and takes max() with each "
            "sample, skipping NaN: an output whose samples are all -inf or NaN is -FLT_MAX, which a FLOAT16 output "
            "rounds to -inf (the float32 MaxPool of samples of a FLOAT16 desc composed in float32; never -65504)",
            ("DirectML.dll 1.15.4 (observed under Wine)", "ONNX Runtime's MaxPool (the MaxPool of samples)"),
            f"tests/eps/test_dml_wine_observed.py; {_ORT_POOL}", shows=_max_of_non_finite, max_start="lowest"),
    reading("minus-inf-start", "MAX starts from -inf and skips NaN samples: an output whose samples are all NaN is "
            "-inf", ("ONNX Runtime's float16 MaxPool (MLAS), the MaxPool of samples of a float16 MAX",),
            f"{_ORT_POOL}; https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/mlas/lib/pooling_fp16.cpp",
            shows=_max_of_non_finite, max_start="minus-inf"),
    reading("max-from-zero", "MAX starts from 0: an output whose samples are all negative is 0",
            ("the OpenVINO EP's RoiAlign mode=max (onnxruntime-openvino 1.24.1, observed)",),
            "harness/expectations/openvino.json", shows=_max, max_start="zero"),
    reading("nan-propagates", "a NaN sample wins a MAX (the max is NaN when any sample is NaN)",
            ("ONNX Runtime's MaxPool without Indices (MLAS), on some windows",), _ORT_POOL, shows=_max_of_non_finite, max_nan="propagate"),
    reading("mlas-x86-fold", "MAX folds each element's n x n samples as ONNX Runtime's CPU MaxPool(n x n, stride n) "
            "without Indices folds them on x86-64 (MLAS), over the samples laid out as that MaxPool's input: for n = 2 "
            "down each pair of sample rows, then across, with _mm_max_ps (a NaN held gives way to the next sample, a "
            "NaN coming wins), the columns past the last whole group of four with std::max down; for n > 2 from "
            "-FLT_MAX, skipping NaN (reference/max_pooling2.py, mlas_x86_fold)",
            ("ONNX Runtime's CPU MaxPool without Indices (MLAS, x86-64), the MaxPool of samples of a MAX",),
            f"{_MLAS_POOLING}; tests/reference/test_readings.py::test_onnxruntime_composed_max_is_its_reading",
            shows=_pooled_max_of_non_finite, max_start="mlas-x86", max_nan="mlas-x86"),
    reading("float32-accumulation", "samples and their AVERAGE sum are computed in float32, in the kernel's order, so "
            "values near FLT_MAX overflow to an infinity (or inf - inf = NaN) where the exact value is finite",
            ("ONNX Runtime's RoiAlign kernels", "DirectML.dll (observed)"), f"{_ORT_ROIALIGN} (RoiAlignForward)",
            shows=_huge, arithmetic="float32"),
    reading("float32-coordinates", "the sample coordinates are the page's formula evaluated in float32, step by "
            "step: scaledRegionX1 = x1 * SpatialScaleX, scaledRegionSizeX = x2 * SpatialScaleX - scaledRegionX1, "
            "scale = size / (outputSize * samples), (sampleX - OutputPixelOffset) * scale + scaledRegionX1 - "
            "InputPixelOffset, so t differs from the exact one by float32 rounding; near FLT_MAX that decides "
            "whether a lerp's difference overflows to an infinity",
            ("DirectML.dll 1.15.4 (observed under Wine)",),
            "harness/expectations/dml.json (roi_align1/fuzz-s0-b0-004); tests/eps/test_dml_wine_observed.py",
            shows=_non_finite_or_huge, coordinates="float32"),
    reading("directml-ep-roialign10-offset", "the samples sit half a pixel off: the DirectML EP builds "
            "InputPixelOffset 0.5 for a RoiAlign-10 node, which ONNX defines without an input offset",
            ("ONNX Runtime's DirectML EP (DmlOperatorRoiAlign.cpp)",),
            "https://github.com/microsoft/onnxruntime/blob/c4780e65b57e8c7e3f8f184a80c25aabc5530b06/onnxruntime/core/"
            "providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorRoiAlign.cpp#L39", input_offset_shift=0.5),
)


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


def samples_per_output(scaled_size: float, output_size: int, minimum: int, maximum: int,
                       rules: Rules = PRIMARY) -> int:
    """``clamp(scaledRegionSize / outputSize, Minimum, Maximum)``, a fraction rounded up (RA-3);
    under ``rules.count == "onnx"`` ONNX's adaptive count instead (``Rules``; 0: no sample)."""
    return samples_for_ratio(scaled_size / output_size, minimum, maximum, rules)


def samples_for_ratio(ratio: float, minimum: int, maximum: int, rules: Rules = PRIMARY) -> int:
    """``clamp(ceil(ratio), Minimum, Maximum)``: the sample count of a size / output ratio (RA-3);
    ONNX's ``max(ceil(ratio), 0)`` for an adaptive count under ``rules.count == "onnx"``, and
    ``max(ceil(ratio), 1)`` under ``"at-least-one"``."""
    if rules.count != "clamp" and minimum != maximum:  # no upper clamp; at least 0 (ONNX) or 1 sample
        return max(int(math.ceil(ratio)), 0 if rules.count == "onnx" else 1)
    return int(min(max(math.ceil(ratio), minimum), maximum))


def sample_coordinates(scaled_start: float, scaled_size: float, output_size: int, samples: int,
                       input_pixel_offset: float, output_pixel_offset: float, align_to_corners: bool,
                       kind: type = np.float64) -> np.ndarray:
    """Input coordinates of the ``output_size * samples`` sample points along one axis, in
    output order: samples ``[o*samples, (o+1)*samples)`` belong to output element ``o``; each step
    rounded to ``kind`` (float32: the ``float32-coordinates`` reading), returned in float64."""
    sample_count = output_size * samples
    sample: np.ndarray = np.arange(sample_count, dtype=kind)
    start, size, in_offset = kind(scaled_start), kind(scaled_size), kind(input_pixel_offset)
    with np.errstate(over="ignore", invalid="ignore"):
        if align_to_corners:
            if sample_count == 1:
                # One sample stretched to both corners: the page is silent; take the centre (RA-6).
                return np.array([start + size / kind(2) - in_offset], dtype=np.float64)
            scale = size / kind(sample_count - 1)
        else:
            scale = size / kind(sample_count) if sample_count else kind(0)
        return ((sample - kind(output_pixel_offset)) * scale + start - in_offset).astype(np.float64)


def region_samples(d: RoiAlign1Desc, row: int, roi: np.ndarray,
                   rules: Rules = PRIMARY) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The page's per-region quantities: the Y and X sample coordinates of region ``row`` (ROI
    ``[x1, y1, x2, y2]``) and its samples per output element along Y and X (0 where ``rules``
    give an axis no sample)."""
    _, _, out_h, out_w = d.output_tensor.sizes
    scale_x, scale_y = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    in_offset = float(np.float32(d.input_pixel_offset)) + rules.input_offset_shift
    out_offset = float(np.float32(d.output_pixel_offset))
    x1, y1, x2, y2 = (float(v) for v in roi)
    start_x, start_y = x1 * scale_x, y1 * scale_y
    size_x, size_y = x2 * scale_x - start_x, y2 * scale_y - start_y
    kind: type = np.float64
    if rules.coordinates == "float32":  # each product and difference rounded as DirectML's kernel rounds it
        kind = np.float32
        f32 = np.float32
        with np.errstate(over="ignore", invalid="ignore"):
            sx32, ex32, sy32, ey32 = f32(x1) * f32(scale_x), f32(x2) * f32(scale_x), f32(y1) * f32(scale_y), f32(y2) * f32(scale_y)
            start_x, start_y, size_x, size_y = float(sx32), float(sy32), float(ex32 - sx32), float(ey32 - sy32)
    # An adaptive count under min_size is counted on the raised size (a fixed one is fixed)
    count_x, count_y = (abs(s) if rules.inverted == "upright" else s for s in (size_x, size_y))
    count_x, count_y = (max(s, rules.min_size) if rules.min_size else s for s in (count_x, count_y))
    n_x = samples_per_output(count_x, out_w, d.minimum_samples_per_output, d.maximum_samples_per_output, rules)
    n_y = samples_per_output(count_y, out_h, d.minimum_samples_per_output, d.maximum_samples_per_output, rules)
    check_sample_points(d, row, roi, n_y, n_x)
    xs = sample_coordinates(start_x, size_x, out_w, n_x, in_offset, out_offset, d.align_regions_to_corners, kind)
    ys = sample_coordinates(start_y, size_y, out_h, n_y, in_offset, out_offset, d.align_regions_to_corners, kind)
    if rules.min_size:
        xs = raised_samples(xs, start_x, size_x, out_w * n_x, in_offset, out_offset, d.align_regions_to_corners,
                            rules.min_size)
        ys = raised_samples(ys, start_y, size_y, out_h * n_y, in_offset, out_offset, d.align_regions_to_corners,
                            rules.min_size)
    return ys, xs, n_y, n_x


def sample_span(scaled_start: float, scaled_size: float, sample_count: int, output_pixel_offset: float,
                align_to_corners: bool) -> tuple[float, float]:
    """The span one axis's ``sample_count`` samples tile, as ``(start, width)`` before the
    InputPixelOffset: ``sample_count`` cells one sample spacing wide, each centred on its sample
    (``sample_coordinates``). It is the region itself for OutputPixelOffset -0.5 without
    AlignRegionsToCorners; another OutputPixelOffset shifts it by ``-(OutputPixelOffset + 0.5)``
    spacings, corners widen it to ``size * N / (N - 1)``, and one sample stretched to both corners
    spans nothing at the region's centre (RA-6)."""
    if align_to_corners and sample_count == 1:
        return scaled_start + scaled_size / 2, 0.0
    spacing = scaled_size / (sample_count - 1 if align_to_corners else sample_count)
    return scaled_start - (output_pixel_offset + 0.5) * spacing, sample_count * spacing


def raised_samples(coords: np.ndarray, scaled_start: float, scaled_size: float, sample_count: int,
                   input_pixel_offset: float, output_pixel_offset: float, align_to_corners: bool,
                   min_size: float) -> np.ndarray:
    """The ``onnx-1x1-regions`` reading of one axis's sample ``coords``: when the span the samples
    tile (``sample_span``) is narrower than ``min_size`` (an empty or inverted one included), it is
    raised to ``min_size`` with its start kept and the samples move to the centres of its
    ``sample_count`` equal cells; otherwise ``coords`` as they are. This is what RoiAlign-10 does to
    the ROI it is given, and the ROI a graph gives it for the page's offsets and corners is that
    span (``graphs/ops/roi_align.py``, ``roi_affine``)."""
    if sample_count == 0:
        return coords
    start, width = sample_span(scaled_start, scaled_size, sample_count, output_pixel_offset, align_to_corners)
    if width >= min_size:
        return coords
    return start + (np.arange(sample_count, dtype=np.float64) + 0.5) * (min_size / sample_count) - input_pixel_offset


def check_sample_points(d: RoiAlign1Desc, row: int, roi: np.ndarray, n_y: int, n_x: int) -> None:
    """DescError when region ``row`` would need more than ``MAX_SAMPLE_POINTS_PER_REGION`` points."""
    _, _, out_h, out_w = d.output_tensor.sizes
    if n_x * out_w * n_y * out_h > MAX_SAMPLE_POINTS_PER_REGION:
        raise DescError(f"ROITensor row {row}", [float(v) for v in roi],
                        f"this region needs {n_y}x{n_x} samples per output element ({n_y * out_h}x{n_x * out_w} "
                        f"points); the reference computes at most {MAX_SAMPLE_POINTS_PER_REGION} points per region "
                        "(lower MaximumSamplesPerOutput)", d.TYPE)


def edge_taps(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate, ONNX Runtime's and torchvision's taps (the ``weighted`` reading, RA-5),
    whether or not it reads the input: the coordinate clamped to ``[0, size - 1]``, its two
    neighbouring input indices and their LINEAR weights (a coordinate below 0 takes pixels 0 and 1
    with weights 1 and 0; one at or past ``size - 1`` the last pixel twice)."""
    c = np.clip(coords, 0.0, size - 1)
    low = np.floor(c).astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    frac = np.where(at_end, 0.0, c - low)
    return low, high, 1.0 - frac, frac


def lerp_taps(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate, the primary reading's taps (RA-5, DirectML.dll's): the two neighbouring
    pixels ``floor(c)`` and ``floor(c) + 1``, each clamped to the input, and ``t = c - floor(c)``;
    a coordinate in ``(-1, 0)`` or ``(size - 1, size)`` reads its edge pixel twice."""
    with np.errstate(invalid="ignore"):
        base = np.floor(coords)
    low = np.clip(base, 0, size - 1).astype(np.int64)
    high = np.clip(base + 1, 0, size - 1).astype(np.int64)
    return low, high, coords - base


def linear_taps(coords: np.ndarray, size: int, rules: Rules = PRIMARY
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate: the two neighbouring input indices, their weights ``(1 - t, t)``, and whether
    the coordinate reads the input at all (``reads_input``), under ``rules.interpolation``."""
    inside = reads_input(coords, size, rules)
    if rules.interpolation == "weighted":
        low, high, w_low, w_high = edge_taps(coords, size)
    else:
        low, high, t = lerp_taps(np.where(inside, coords, 0.0), size)
        w_low, w_high = 1.0 - t, t
    return np.where(inside, low, 0), np.where(inside, high, 0), w_low, w_high, inside


def nearest_tap(coords: np.ndarray, size: int, rules: Rules = PRIMARY) -> tuple[np.ndarray, np.ndarray]:
    """Per coordinate: the nearest input index (halves round up) and whether it reads the input
    (the same range as LINEAR, ``reads_input``)."""
    inside = reads_input(coords, size, rules)
    index = np.clip(np.floor(coords + 0.5), 0, size - 1).astype(np.int64)
    return np.where(inside, index, 0), inside


def gather(plane: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``plane[rows[:, None], cols[None, :]]`` of a channels-last ``(H, W, C)`` plane:
    ``(len(rows), len(cols), C)``, taken as whole rows of channels from the plane viewed as
    ``(H * W, C)``, which NumPy copies faster than a two-index gather."""
    height, width, channels = plane.shape
    taken = plane.reshape(height * width, channels).take((rows[:, None] * width + cols[None, :]).ravel(), axis=0)
    return taken.reshape(rows.size, cols.size, channels)


def reads_input(coords: np.ndarray, size: int, rules: Rules = PRIMARY) -> np.ndarray:
    """Whether each coordinate reads the input (RA-5): strictly inside ``(-1, size)``, as DirectML
    reads it; on ``[-1, size]`` under the ``closed-edge`` reading."""
    if rules.edge == "closed":
        return (coords >= -1.0) & (coords <= size)
    return (coords > -1.0) & (coords < size)


def interpolate(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, mode: str, out_of_bounds: float,
                rules: Rules = PRIMARY) -> np.ndarray:
    """``interpolate2D`` of a channels-last ``(H, W, C)`` plane at every (y, x) of the two axes'
    grids, in float64 (float32 under ``rules.arithmetic``): ``(len(ys), len(xs), C)``; points
    outside the input read ``OutOfBoundsInputValue`` (plus ``0 * X[b, c, 0, 0]`` under ``rules.outside``)."""
    height, width, _ = plane.shape
    inside = (reads_input(ys, height, rules)[:, None] & reads_input(xs, width, rules)[None, :])[:, :, None]
    samples = clamped_samples(plane, ys, xs, mode, rules)
    return np.where(inside, samples, outside_value(plane, out_of_bounds, rules, samples.dtype.type))


def clamped_samples(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, mode: str,
                    rules: Rules = PRIMARY) -> np.ndarray:
    """``interpolate2D`` of a channels-last ``(H, W, C)`` plane at every (y, x), in float64 (float32
    under ``rules.arithmetic``), with the coordinates clamped to the input (RA-5) whether or not
    they read it: ``interpolate`` replaces the points outside by ``OutOfBoundsInputValue``; the
    precision models read a point outside where rounding could move it inside (``roi_align_bounds``).
    LINEAR is ``a + t * (b - a)`` along Y, then X (``lerp_taps``), or the ``weighted`` reading's sum."""
    height, width, _ = plane.shape
    kind = np.float32 if rules.arithmetic == "float32" else np.float64

    def tap(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return gather(plane, rows, cols).astype(kind)

    if mode == "NEAREST_NEIGHBOR":
        def nearest(coords: np.ndarray, size: int) -> np.ndarray:
            return np.clip(np.floor(coords + 0.5), 0, size - 1).astype(np.int64)

        return tap(nearest(ys, height), nearest(xs, width))
    with np.errstate(invalid="ignore", over="ignore"):
        if rules.interpolation == "weighted":
            y0, y1, wy0, wy1 = edge_taps(ys, height)
            x0, x1, wx0, wx1 = edge_taps(xs, width)
            wx0, wx1 = wx0.astype(kind)[None, :, None], wx1.astype(kind)[None, :, None]
            wy0, wy1 = wy0.astype(kind)[:, None, None], wy1.astype(kind)[:, None, None]
            # ((w1*v1 + w2*v2) + w3*v3) + w4*v4, as ONNX Runtime sums them
            return ((tap(y0, x0) * (wy0 * wx0) + tap(y0, x1) * (wy0 * wx1)) + tap(y1, x0) * (wy1 * wx0)) \
                + tap(y1, x1) * (wy1 * wx1)
        y0, y1, ty = lerp_taps(ys, height)
        x0, x1, tx = lerp_taps(xs, width)
        ty, tx = ty.astype(kind)[:, None, None], tx.astype(kind)[None, :, None]
        left, right = tap(y0, x0), tap(y0, x1)
        left = left + ty * (tap(y1, x0) - left)
        right = right + ty * (tap(y1, x1) - right)
        return left + tx * (right - left)


def execute_desc(desc: AnyRoiAlign, tensors: dict[str, np.ndarray], rules: Rules = PRIMARY) -> dict[str, np.ndarray]:
    """The registry's ``execute``: ``roi_align`` on arrays keyed by DML member name (under
    ``rules``: a reading, ``reference/readings.py``)."""
    return roi_align(desc, tensors["InputTensor"], tensors["ROITensor"], tensors["BatchIndicesTensor"], rules)


def select_regions(desc: AnyRoiAlign, arrays: dict[str, np.ndarray],
                   rows: np.ndarray) -> tuple[AnyRoiAlign, dict[str, np.ndarray]]:
    """The desc and inputs of the regions ``rows`` alone (the registry's ``regions``): each output
    row is computed from its own ROI and batch index only, so row ``i`` of their outputs, bounds
    and alternatives is row ``rows[i]`` of the whole desc's, bit for bit. Strides are kept as
    given: they change no result (DECISIONS.md)."""
    rows = np.asarray(rows, dtype=np.intp)
    count = len(rows)
    roi_sizes = desc.roi_tensor.sizes[:-2] + (count, 4)
    batch_sizes = desc.batch_indices_tensor.sizes[:-1] + (count,)
    part = dataclasses.replace(
        desc, roi_tensor=dataclasses.replace(desc.roi_tensor, sizes=roi_sizes),
        batch_indices_tensor=dataclasses.replace(desc.batch_indices_tensor, sizes=batch_sizes),
        output_tensor=dataclasses.replace(desc.output_tensor, sizes=(count, *desc.output_tensor.sizes[1:])))
    rois = np.asarray(arrays["ROITensor"]).reshape(-1, 4)[rows].reshape(roi_sizes)
    ids = np.asarray(arrays["BatchIndicesTensor"]).reshape(-1)[rows].reshape(batch_sizes)
    return part, {**arrays, "ROITensor": rois, "BatchIndicesTensor": ids}


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
              batch_indices_tensor: np.ndarray, rules: Rules = PRIMARY) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    return {"OutputTensor": compute(kernel_input(desc, input_tensor, roi_tensor, batch_indices_tensor, rules))}


@dataclass
class KernelInput:
    """A validated desc's regions and input, checked and laid out once: what the kernel
    (``compute``) reads, and what the precision models (``roi_align_bounds``) read beside it."""

    desc: RoiAlign1Desc
    rois: np.ndarray           # (NumROIs, 4) float64, [x1, y1, x2, y2]
    batch_indices: np.ndarray  # (NumROIs,)
    planes: np.ndarray         # (BatchCount, H, W, C): channels last; FLOAT16 widened to float32 (exact)
    dtype: np.dtype            # the input's and the output's
    rules: Rules = PRIMARY     # the reading computed (``Rules``)
    _finite: dict[int, bool] = field(default_factory=dict)

    def plane(self, row: int) -> np.ndarray:
        """The channels-last ``(H, W, C)`` image region ``row`` reads."""
        return self.planes[int(self.batch_indices[row])]

    def separable(self, row: int) -> bool:
        """Whether region ``row`` is computed by ``average_linear`` (AVERAGE of LINEAR samples
        of a finite image)."""
        d = self.desc
        if d.reduction_function != "AVERAGE" or d.interpolation_mode != "LINEAR" or not self.rules.fast():
            return False
        batch = int(self.batch_indices[row])
        if batch not in self._finite:
            self._finite[batch] = bool(np.isfinite(self.planes[batch]).all())
        return self._finite[batch]


def kernel_input(desc: AnyRoiAlign, input_tensor: np.ndarray, roi_tensor: np.ndarray,
                 batch_indices_tensor: np.ndarray, rules: Rules = PRIMARY) -> KernelInput:
    """The regions, refused where the page leaves them undefined (ERR-1), and the input laid
    out channels last, so that each sample point reads its channels as one contiguous row;
    ``rules``: the reading to compute (DescError for a rule value the kernel lacks)."""
    check_rules(rules, RULE_VALUES, desc.TYPE)
    if (rules.max_start == "mlas-x86") != (rules.max_nan == "mlas-x86"):
        raise DescError("<rules>.max_start/<rules>.max_nan", (rules.max_start, rules.max_nan), "both 'mlas-x86' "
                        "(MLAS's fold decides where a max starts and whether a NaN wins together) or neither", desc.TYPE)
    rois, batch_indices = regions(desc, input_tensor, roi_tensor, batch_indices_tensor)
    return KernelInput(as_roi_align1(desc), rois, batch_indices, channels_last(input_tensor), input_tensor.dtype,
                       rules)


#: Bytes of input that ``channels_last`` copies in one worker task.
CHANNELS_LAST_CHUNK_BYTES = 2**22


def channels_last(input_tensor: np.ndarray) -> np.ndarray:
    """The ``(N, C, H, W)`` input as ``(N, H, W, C)``, contiguous, FLOAT16 widened to float32 (exact
    in float32, which converts to float64 several times faster): copied a few image rows at a
    time (each block's transpose stays in the cache), the blocks in worker threads."""
    batch, channels, height, width = input_tensor.shape
    planes = np.empty((batch, height, width, channels), dtype=np.float32 if input_tensor.dtype == np.float16
                      else input_tensor.dtype)
    step = max(1, CHANNELS_LAST_CHUNK_BYTES // max(1, channels * width * planes.itemsize))
    with Workers(1 if batch * height <= step else None) as pool:
        for n in range(batch):
            for h in range(0, height, step):
                pool.submit(functools.partial(np.copyto, planes[n, h:h + step],
                                              np.moveaxis(input_tensor[n, :, h:h + step], 0, -1)))
    return planes


def compute(p: KernelInput, alongside: Optional[Callable[[int, np.ndarray], None]] = None,
            beside_chunk: Optional[Callable[[np.ndarray, np.ndarray], None]] = None) -> np.ndarray:
    """The kernel: the ``(NumROIs, C, OutputHeight, OutputWidth)`` output, each element computed
    in float64 and rounded once to the output type (FP-1). ``execute`` and every precision model
    take their outputs from here. ``alongside(row, values)``, when given, runs after the output is
    complete, region by region in order, with each region's elements as the output holds them
    (``(OutputHeight, OutputWidth, C)``, read-only). ``beside_chunk(rows, output)``, when given,
    runs in the worker thread that computed each chunk of separable regions, once their values
    are in ``output`` (the precision models compute those regions' bounds there, chunk by chunk
    beside the values); it must write nothing but those rows of its own arrays.

    The regions the separable AVERAGE computes (``KernelInput.separable``) are taken many at a
    time, in chunks of regions of one input plane and one sample count (``SeparableChunks``), in
    worker threads (``workers``); every other region alone, by ``region_value``. Both give the same
    numbers, bit for bit, as computing every region alone."""
    _, _, out_h, out_w = p.desc.output_tensor.sizes
    # Written region by region in the output's layout: a transposed copy of the whole output
    # would be one more array of its size.
    output = np.empty((p.rois.shape[0], p.planes.shape[-1], out_h, out_w), dtype=p.dtype)
    # an output of one chunk or less starts no thread, however its regions fall into chunks
    with Workers(1 if output.size * 8 <= SEPARABLE_CHUNK_BYTES else None) as pool:
        chunks = SeparableChunks(p, output, pool, beside_chunk)
        for r, roi in enumerate(p.rois):
            ys, xs, n_y, n_x = region_samples(p.desc, r, roi, p.rules)
            if n_y and n_x and p.separable(r):
                chunks.add(r, ys, xs, n_y, n_x)
            else:
                output[r] = region_value(p, r, ys, xs, n_y, n_x).transpose(2, 0, 1)  # channels first
        chunks.flush()
    if alongside is not None:
        for r in range(p.rois.shape[0]):
            values = output[r].transpose(1, 2, 0)
            values.flags.writeable = False
            alongside(r, values)
    return output


#: Bytes of float64 elements of one chunk of the separable AVERAGE's regions: a worker task holds
#: its chunk's elements, and one region's taps at a time (in float32 and in float64).
SEPARABLE_CHUNK_BYTES = 2**22


class SeparableChunks:
    """Regions of the separable AVERAGE, collected into chunks of regions of one input plane and
    one sample count, each chunk computed by ``average_linear`` in a worker task once it holds
    about ``SEPARABLE_CHUNK_BYTES`` of elements (``flush``: the rest) and written into ``output``."""

    def __init__(self, p: KernelInput, output: np.ndarray, pool: Workers,
                 beside: Optional[Callable[[np.ndarray, np.ndarray], None]] = None):
        self.p, self.output, self.pool, self.beside = p, output, pool, beside
        self.pending: dict[tuple[int, int, int], tuple[list[int], list[np.ndarray], list[np.ndarray]]] = {}

    def add(self, row: int, ys: np.ndarray, xs: np.ndarray, n_y: int, n_x: int) -> None:
        """Region ``row``, its sample coordinates and counts."""
        key = (int(self.p.batch_indices[row]), n_y, n_x)
        rows, all_ys, all_xs = self.pending.setdefault(key, ([], [], []))
        rows.append(row)
        all_ys.append(ys)
        all_xs.append(xs)
        _, _, out_h, out_w = self.output.shape
        if len(rows) * out_h * out_w * self.p.planes.shape[-1] * 8 >= SEPARABLE_CHUNK_BYTES:
            self._submit(key)

    def flush(self) -> None:
        """Submit every chunk not yet submitted."""
        for key in list(self.pending):
            self._submit(key)

    def _submit(self, key: tuple[int, int, int]) -> None:
        rows, all_ys, all_xs = self.pending.pop(key)
        batch, n_y, n_x = key
        plane, output, oob, rules = self.p.planes[batch], self.output, self.p.desc.out_of_bounds_input_value, self.p.rules
        index, beside = np.array(rows), self.beside

        def task() -> None:
            average_linear(plane, np.stack(all_ys), np.stack(all_xs), n_y, n_x, oob, rules, into=(output, index))
            if beside is not None:
                beside(index, output)

        self.pool.submit(task)


def region_value(p: KernelInput, row: int, ys: np.ndarray, xs: np.ndarray, n_y: int, n_x: int) -> np.ndarray:
    """Region ``row``'s elements ``(OutputHeight, OutputWidth, C)`` in float64, from its sample
    coordinates ``ys`` / ``xs`` at ``n_y x n_x`` samples per element (none: 0, the ``onnx``
    count's empty region), under ``p.rules``."""
    d, plane, rules = p.desc, p.plane(row), p.rules
    _, _, out_h, out_w = d.output_tensor.sizes
    if n_y == 0 or n_x == 0:
        return no_sample_value(d, plane.shape[-1])
    if p.separable(row):
        value = average_linear(plane, ys, xs, n_y, n_x, d.out_of_bounds_input_value, rules)
        assert value is not None  # returned, not stored
        return value
    corners = d.reduction_function == "MAX" and rules.max_of == "corner-terms"
    samples = (corner_terms if corners else functools.partial(interpolate, mode=d.interpolation_mode))(
        plane, ys, xs, out_of_bounds=d.out_of_bounds_input_value, rules=rules)
    # (OutputHeight, OutputWidth, C, samples), each element's samples in the kernels' order (Y outer)
    grid = samples.reshape(out_h, n_y, out_w, n_x, plane.shape[-1]).transpose(0, 2, 4, 1, 3).reshape(
        out_h, out_w, plane.shape[-1], n_y * n_x)
    if d.reduction_function == "AVERAGE":
        if rules.arithmetic == "float32":  # a running float32 sum, as ONNX Runtime adds its samples
            with np.errstate(over="ignore", invalid="ignore"):
                return np.add.accumulate(grid, axis=-1)[..., -1] / np.float32(n_y * n_x)
        return grid.mean(axis=-1)
    if corners:
        return running_std_max(grid)
    if rules.max_start == "mlas-x86":
        return mlas_sample_max(grid, n_y, n_x)
    return sample_max(grid, rules, float(LOWEST))


def no_sample_value(d: RoiAlign1Desc, channels: int) -> np.ndarray:
    """The ``(OutputHeight, OutputWidth, C)`` elements, in float64, of a region that takes no sample
    (the ``onnx-adaptive-count`` reading of an empty or inverted region): OutOfBoundsInputValue,
    as float32. No sample reads the input, so the share of its samples inside is 0; ONNX's own
    RoiAlign outputs 0 there, which is this with OutOfBoundsInputValue 0, and the graph that adds
    OutOfBoundsInputValue to ONNX's RoiAlign (``RoiAlign(X) + v * (1 - RoiAlign(ones))``) gives
    exactly ``v``."""
    _, _, out_h, out_w = d.output_tensor.sizes
    return np.full((out_h, out_w, channels), float(np.float32(d.out_of_bounds_input_value)))


def mlas_sample_max(grid: np.ndarray, n_y: int, n_x: int) -> np.ndarray:
    """The ``mlas-x86-fold`` reading's MAX of each element's samples (``grid``: ``(OutputHeight,
    OutputWidth, C, n_y * n_x)``, Y outer): what MaxPool(``n_y x n_x``, stride ``n_y x n_x``) without
    Indices computes on ONNX Runtime's CPU EP (x86-64) over the samples laid out as its input,
    ``(OutputHeight * n_y, OutputWidth * n_x)`` (``max_pooling2.mlas_x86_fold``, with the kernel
    MLAS picks for that shape; its start is float32's lowest finite value, for a FLOAT16 desc too:
    the MaxPool runs in float32 there). One sample is its own max (the mapper adds no MaxPool)."""
    if n_y * n_x == 1:
        return grid[..., 0]
    out_w = grid.shape[1]
    width = out_w * n_x
    kernel = mlas_kernel((n_y, n_x), (n_y, n_x), (0, 0), (0, 0), (grid.shape[0] * n_y, width))
    columns = (np.arange(out_w) * n_x)[None, :, None]  # each element's first input column, per output column
    every_sample = np.ones((1, 1, 1), dtype=bool)  # the MaxPool's input has no padding
    value, _ = mlas_x86_fold(lambda offset: grid[..., offset[0] * n_x + offset[1]], (n_y, n_x), kernel,
                             lambda jx: columns + jx < 4 * (width // 4), lambda offset: every_sample,
                             grid.dtype.type(LOWEST))
    return value


#: Where a MAX of samples that starts from float32's lowest finite value starts: DirectML's and
#: ONNX Runtime's MaxPool of samples, for a FLOAT16 desc too (composed in float32), where -FLT_MAX
#: then rounds to -inf in the float16 output.
LOWEST = np.float32(np.finfo(np.float32).min)


def max_start(rules: Rules, samples: int) -> Optional[float]:
    """The value a MAX of ``samples`` samples starts from under ``rules`` (``max_start``), so that
    no output of it lies below that value: None (its first sample), ``LOWEST``, -inf or 0; the
    ``mlas-x86`` fold starts from ``LOWEST`` over more than one sample (one sample is its own max:
    no MaxPool runs)."""
    if rules.max_start == "mlas-x86":
        return float(LOWEST) if samples > 1 else None
    return {"first": None, "lowest": float(LOWEST), "minus-inf": -np.inf, "zero": 0.0}[rules.max_start]


def sample_max(grid: np.ndarray, rules: Rules, lowest: float) -> np.ndarray:
    """The MAX of each element's samples (last axis) under ``rules``: NaN losing to any number
    (NAN-1) or winning (``max_nan``), starting from the first sample, ``lowest`` or 0 (``max_start``)."""
    with np.errstate(invalid="ignore"):
        value = np.fmax.reduce(grid, axis=-1) if rules.max_nan == "ignore" else np.max(grid, axis=-1)
        start = lowest if rules.max_start == "lowest" else max_start(rules, grid.shape[-1])
        if start is None:
            return value
        fold = np.fmax if rules.max_nan == "ignore" else np.maximum
        return fold(value, value.dtype.type(start))


def _std_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++'s ``std::max(a, b)``: ``b`` where ``a < b``, else ``a`` (a NaN ``a`` wins, a NaN ``b`` loses)."""
    with np.errstate(invalid="ignore"):
        return np.where(a < b, b, a)


def corner_terms(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, out_of_bounds: float, rules: Rules) -> np.ndarray:
    """Per sample point ``(len(ys), len(xs), C)``, the ``corner-term-max`` reading's value
    (``clamped_corner_terms``); a sample outside the input reads ``outside_value``."""
    height, width, _ = plane.shape
    term = clamped_corner_terms(plane, ys, xs, rules)
    inside = (reads_input(ys, height, rules)[:, None] & reads_input(xs, width, rules)[None, :])[:, :, None]
    return np.where(inside, term, outside_value(plane, out_of_bounds, rules, term.dtype.type))


def clamped_corner_terms(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, rules: Rules = PRIMARY) -> np.ndarray:
    """Per sample point ``(len(ys), len(xs), C)``, its largest weighted corner term ``std::max(
    std::max(std::max(w1*v1, w2*v2), w3*v3), w4*v4)`` with ONNX Runtime's taps (``edge_taps``),
    whether or not the point reads the input (``clamped_samples``' counterpart for the
    ``corner-term-max`` reading), in float64 (float32 under ``rules.arithmetic``)."""
    height, width, _ = plane.shape
    kind = np.float32 if rules.arithmetic == "float32" else np.float64
    y0, y1, wy0, wy1 = edge_taps(ys, height)
    x0, x1, wx0, wx1 = edge_taps(xs, width)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = [gather(plane, r, c).astype(kind) * (wy[:, None, None] * wx[None, :, None]).astype(kind)
                 for r, wy in ((y0, wy0), (y1, wy1)) for c, wx in ((x0, wx0), (x1, wx1))]
        return _std_max(_std_max(_std_max(terms[0], terms[1]), terms[2]), terms[3])


def reduced_samples(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, reduction: str, rules: Rules = PRIMARY
                    ) -> np.ndarray:
    """What each LINEAR sample point ``(len(ys), len(xs), C)`` gives its element's ``reduction``
    under ``rules``, whether or not it reads the input: its largest weighted corner term for MAX
    under the ``corner-term-max`` reading (``clamped_corner_terms``, what ``region_value`` folds),
    else its interpolated value (``clamped_samples``). The precision models' knife-edge ranges read
    these, so that an alternative decision is computed under the reading's own rules."""
    if reduction == "MAX" and rules.max_of == "corner-terms":
        return clamped_corner_terms(plane, ys, xs, rules)
    return clamped_samples(plane, ys, xs, "LINEAR", rules)


def running_std_max(grid: np.ndarray) -> np.ndarray:
    """``std::max`` folded over the last axis from its first element, in order (ONNX Runtime's MAX)."""
    value = grid[..., 0]
    for k in range(1, grid.shape[-1]):
        value = _std_max(value, grid[..., k])
    return value


def outside_value(plane: np.ndarray, out_of_bounds: float, rules: Rules, kind: type) -> np.ndarray:
    """What a sample outside the input reads, per channel: OutOfBoundsInputValue, plus ``0 * X[b, c,
    0, 0]`` under the ``zero-times-corner`` reading."""
    value: np.ndarray = np.full(plane.shape[-1], np.float32(out_of_bounds), dtype=kind)
    if rules.outside == "value-plus-zero-corner":
        with np.errstate(invalid="ignore"):
            value = value + kind(0) * plane[0, 0].astype(kind)
    return value


def axis_weights(coords: np.ndarray, size: int, samples: int,
                 rules: Rules = PRIMARY) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One axis of the separable AVERAGE of LINEAR samples: ``(weights, taps, inside)`` where
    ``weights[o, k]`` sums the LINEAR weights that output element ``o``'s samples put on input
    index ``taps[k]`` (samples outside the input put none), and ``inside[o]`` counts its samples
    that read the input (RA-5). On a finite input both interpolation rules give the same weights.
    One region's ``AxisWeights``."""
    a = AxisWeights.of(coords[None], size, samples, rules)
    return a.weights.reshape(a.outputs, a.taps.size), a.taps, a.inside[0]


@dataclass
class AxisWeights:
    """One axis of the separable AVERAGE of several regions (``axis_weights`` of each, side by
    side): region ``r``'s taps are ``taps[start[r]:start[r + 1]]`` (ascending input indices) and its
    ``(outputs, taps)`` weights ``weights[outputs * start[r]:outputs * start[r + 1]]``;
    ``inside[r, o]`` counts output ``o``'s samples that read the input."""

    weights: np.ndarray
    taps: np.ndarray
    start: np.ndarray
    inside: np.ndarray
    outputs: int

    @staticmethod
    def of(coords: np.ndarray, size: int, samples: int, rules: Rules = PRIMARY) -> "AxisWeights":
        """The weights of the regions whose sample coordinates are the rows of ``coords``."""
        regions, count = coords.shape
        outputs = count // samples
        low, high, w_low, w_high = edge_taps(coords, size)
        inside = reads_input(coords, size, rules)
        region = np.repeat(np.arange(regions, dtype=np.int64), count)
        owner = np.tile(np.arange(count, dtype=np.int64) // samples, regions)
        low, high, w_low, w_high = (a.reshape(-1) for a in (low, high, w_low, w_high))
        if not inside.all():
            kept = inside.reshape(-1)
            low, high, w_low, w_high, region, owner = (a[kept] for a in (low, high, w_low, w_high, region, owner))
        # Each region's taps are told apart by an offset of ``size`` per region; the low taps of
        # every region, then the high ones, so that one bincount adds each cell's low weights,
        # then its high ones, in sample order: the order of accumulating them one by one.
        region2, owner2 = np.concatenate([region, region]), np.concatenate([owner, owner])
        both = region2 * size + np.concatenate([low, high])
        keys = np.unique(both)
        start = np.searchsorted(keys, np.arange(regions + 1, dtype=np.int64) * size)
        taps = keys - np.repeat(np.arange(regions, dtype=np.int64), np.diff(start)) * size
        first = start[region2]
        cells = outputs * first + owner2 * (start[region2 + 1] - first) + np.searchsorted(keys, both) - first
        weights = np.bincount(cells, weights=np.concatenate([w_low, w_high]), minlength=outputs * keys.size)
        return AxisWeights(weights, taps, start, inside.reshape(regions, outputs, samples).sum(axis=2), outputs)

    def of_region(self, r: int) -> np.ndarray:
        """Region ``r``'s ``(outputs, taps)`` weights."""
        first, last = self.start[r], self.start[r + 1]
        return self.weights[self.outputs * first:self.outputs * last].reshape(self.outputs, last - first)


def average_linear(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, n_y: int, n_x: int,
                   out_of_bounds: float, rules: Rules = PRIMARY,
                   into: Optional[tuple[np.ndarray, np.ndarray]] = None) -> Optional[np.ndarray]:
    """The AVERAGE of LINEAR samples of one region over a finite ``(H, W, C)`` plane, computed as
    ``Ay . P . Ax^T`` over the input rows and columns the samples touch: bilinear weights are a
    product of a Y and an X weight, and a sample reads the input only when both its coordinates
    do, so the mean of ``interpolate``'s samples factors by axis. Equal to the sample-by-sample
    form up to float64 rounding; it reads each touched input pixel once instead of four times
    per sample, which is where large regions spent their time. (A NaN or infinity times a zero
    weight would not vanish, so ``roi_align`` uses it only on finite planes.)

    ``ys``, ``xs`` 1-D: one region, ``(OutputHeight, OutputWidth, C)``. ``ys (R, Sy)``, ``xs (R,
    Sx)``: the ``R`` regions of those rows, all at ``n_y x n_x`` samples, ``(R, OutputHeight,
    OutputWidth, C)``: their weights and the cells they read worked out together (``AxisWeights``),
    then region by region its block gathered and its two products computed as for one region
    alone (the same BLAS calls on the same shapes, which keeps every sum's rounding). Where the
    compiled loops are built (``native``), a float32 plane's products are computed there instead,
    from the same weights without the gathered block: equal within float64 rounding.

    ``into=(output, rows)``: the ``R`` regions' elements are stored into ``output[rows]`` (an
    ``(NumROIs, C, OutputHeight, OutputWidth)`` output, rounded to its type) instead of returned
    (None is returned); the compiled loop writes a float32 output itself."""
    if ys.ndim == 1:
        assert into is None, "a single region is returned"
        whole = average_linear(plane, ys[None], xs[None], n_y, n_x, out_of_bounds, rules)
        assert whole is not None
        return whole[0]
    height, width, channels = plane.shape
    wy, wx = AxisWeights.of(ys, height, n_y, rules), AxisWeights.of(xs, width, n_x, rules)
    rows, cols = np.diff(wy.start), np.diff(wx.start)
    rows, cols = np.where(cols > 0, rows, 0), np.where(rows > 0, cols, 0)  # no tap on one axis: none read
    # Samples of each element that read OutOfBoundsInputValue, and what they add: only where some
    # sample reads it (an infinite or NaN value times a count of 0 would make NaN of elements whose
    # samples all read the input).
    outside = n_y * n_x - wy.inside[:, :, None] * wx.inside[:, None, :]
    partly = outside.any(axis=(1, 2))
    added = np.zeros(outside.shape)
    added[outside > 0] = outside[outside > 0] * np.float64(np.float32(out_of_bounds))
    compiled = native.separable_average()
    if compiled is not None and plane.dtype == np.float32 and plane.flags.c_contiguous:
        done, value = _compiled_average(compiled, plane, wy, wx, rows, cols, added if partly.any() else None,
                                        n_y * n_x, into)
        if done:
            return value
        # else its work arrays could not be allocated: NumPy's way below
    total = np.empty((ys.shape[0], wy.outputs, wx.outputs, channels))
    cells = _block_cells(wy, wx, rows, cols, width)
    flat = plane.reshape(height * width, channels)
    largest = int((rows * cols).max(initial=0))
    taken = buffer("average_linear.taken", (largest, channels), plane.dtype)
    wide = buffer("average_linear.wide", (largest, channels), np.float64)
    across = buffer("average_linear.across", (int(rows.max(initial=0)) * wx.outputs * channels,), np.float64)
    at = 0
    # Region by region: its block, in float32 and float64, and its elements stay in the core's cache.
    for r, (height_r, width_r) in enumerate(zip(rows.tolist(), cols.tolist())):
        if height_r:
            size = height_r * width_r
            # mode="clip" (every cell is in range): take buffers its output under the default mode="raise"
            flat.take(cells[at:at + size], axis=0, out=taken[:size], mode="clip")
            at += size
            block = wide[:size].reshape(height_r, width_r, channels)
            np.copyto(block, taken[:size].reshape(block.shape))
            # one (out_w, cols) x (cols, C) product per row, then one (out_h, rows) x (rows, out_w * C)
            step = np.matmul(wx.of_region(r), block, out=across[:height_r * wx.outputs * channels].reshape(
                height_r, wx.outputs, channels))
            np.matmul(wy.of_region(r), step.reshape(height_r, -1), out=total[r].reshape(wy.outputs, -1))
            total[r] += 0.0  # the sums start from 0 as ``np.zeros(...) += product`` did (a -0 product is +0)
        else:
            total[r] = 0.0
        if partly[r]:
            total[r] += added[r][..., None]
        total[r] /= n_y * n_x
    return _stored(total, into)


def _compiled_average(compiled: Callable[..., int], plane: np.ndarray, wy: AxisWeights, wx: AxisWeights,
                      rows: np.ndarray, cols: np.ndarray, added: Optional[np.ndarray], m: int,
                      into: Optional[tuple[np.ndarray, np.ndarray]]) -> tuple[bool, Optional[np.ndarray]]:
    """``average_linear``'s products by the compiled values loop (``native.separable_average``) on a
    float32 plane: whether it ran (False: its work arrays could not be allocated) and what
    ``average_linear`` returns then. ``added``: what OutOfBoundsInputValue adds per element (None:
    nothing anywhere)."""
    _, width, channels = plane.shape
    target = into[0] if into is not None and into[0].dtype == np.float32 and into[0].flags.c_contiguous else None
    total = None if target is not None else np.empty((rows.size, wy.outputs, wx.outputs, channels))
    f64, i64 = (functools.partial(np.ascontiguousarray, dtype=t) for t in (np.float64, np.int64))
    # held here while the loop runs: the call is handed only its address
    target_rows = None if into is None or target is None else i64(into[1])
    # (an axis whose samples all lie outside has no weight: bincount then gives integers)
    done = compiled(plane, width, channels, rows.size, wy.outputs, wx.outputs, f64(wy.weights), i64(wy.taps),
                    i64(wy.start), f64(wx.weights), i64(wx.taps), i64(wx.start), i64(rows), i64(cols),
                    None if added is None else added.ctypes.data, float(m),
                    None if total is None else total.ctypes.data, None if target is None else target.ctypes.data,
                    None if target_rows is None else target_rows.ctypes.data) == 0
    return done, (_stored(total, into) if done else None)


def _stored(total: Optional[np.ndarray], into: Optional[tuple[np.ndarray, np.ndarray]]) -> Optional[np.ndarray]:
    """``total`` (``(R, OutputHeight, OutputWidth, C)``), or None once stored channels first into
    ``into``'s output rows (None: the compiled loop stored them already)."""
    if into is None:
        return total
    if total is not None:
        into[0][into[1]] = total.transpose(0, 3, 1, 2)
    return None


def _block_cells(wy: AxisWeights, wx: AxisWeights, rows: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    """The input cells (indices into the plane viewed as ``(H * W, C)``) each region reads, one
    region after another: region ``r``'s ``rows[r] x cols[r]`` block of its Y taps by its X taps
    (``gather``'s order)."""
    sizes = rows * cols
    region = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    first = np.concatenate([[0], np.cumsum(sizes)])[:-1]
    within = np.arange(region.size, dtype=np.int64) - first[region]
    i, j = np.divmod(within, np.maximum(cols, 1)[region])
    cells: np.ndarray = wy.taps[wy.start[:-1][region] + i] * width + wx.taps[wx.start[:-1][region] + j]
    return cells


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
