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

import numpy as np

from .descs import RoiAlign1Desc, RoiAlignDesc, as_roi_align1
from .errors import DescError
from .nan_rules import nan_ignoring_max

#: The reference refuses regions that need more sample points than this per channel (a
#: guard against a hang on absurd ROIs, not a DirectML rule).
MAX_SAMPLE_POINTS_PER_REGION = 2**24


def samples_per_output(scaled_size: float, output_size: int, minimum: int, maximum: int) -> int:
    """``clamp(scaledRegionSize / outputSize, Minimum, Maximum)``, a fraction rounded up (RA-3)."""
    return int(min(max(math.ceil(scaled_size / output_size), minimum), maximum))


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
    if n_x * out_w * n_y * out_h > MAX_SAMPLE_POINTS_PER_REGION:
        raise DescError(f"ROITensor row {row}", [x1, y1, x2, y2],
                        f"this region needs {n_y}x{n_x} samples per output element ({n_y * out_h}x{n_x * out_w} "
                        f"points); the reference computes at most {MAX_SAMPLE_POINTS_PER_REGION} points per region "
                        "(lower MaximumSamplesPerOutput)", d.TYPE)
    xs = sample_coordinates(start_x, size_x, out_w, n_x, in_offset, out_offset, d.align_regions_to_corners)
    ys = sample_coordinates(start_y, size_y, out_h, n_y, in_offset, out_offset, d.align_regions_to_corners)
    return ys, xs, n_y, n_x


def linear_taps(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate: the two neighbouring input indices, their weights, and whether the
    coordinate reads the input at all (RA-5: within ``[-1, size]``; [-1, 0) and (size-1, size]
    clamp to the edge pixel)."""
    inside = (coords >= -1.0) & (coords <= size)
    c = np.clip(coords, 0.0, None)
    low = np.floor(c).astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    frac = np.where(at_end, 0.0, c - low)
    low = np.where(inside, low, 0)
    high = np.where(inside, high, 0)
    return low, high, 1.0 - frac, frac, inside


def nearest_tap(coords: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per coordinate: the nearest input index (halves round up) and whether it reads the input
    (the same ``[-1, size]`` range as LINEAR, RA-5)."""
    inside = (coords >= -1.0) & (coords <= size)
    index = np.clip(np.floor(coords + 0.5), 0, size - 1).astype(np.int64)
    return np.where(inside, index, 0), inside


def interpolate(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, mode: str, out_of_bounds: float) -> np.ndarray:
    """``interpolate2D`` of a channels-last ``(H, W, C)`` plane at every (y, x) of the two axes'
    grids, in float64: ``(len(ys), len(xs), C)``; points outside the input read
    ``OutOfBoundsInputValue``."""
    height, width, _ = plane.shape

    def tap(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return plane[rows[:, None], cols[None, :]].astype(np.float64)

    if mode == "NEAREST_NEIGHBOR":
        iy, in_y = nearest_tap(ys, height)
        ix, in_x = nearest_tap(xs, width)
        values = tap(iy, ix)
    else:
        y0, y1, wy0, wy1, in_y = linear_taps(ys, height)
        x0, x1, wx0, wx1, in_x = linear_taps(xs, width)
        wx0, wx1 = wx0[None, :, None], wx1[None, :, None]
        top = tap(y0, x0) * wx0 + tap(y0, x1) * wx1
        bottom = tap(y1, x0) * wx0 + tap(y1, x1) * wx1
        values = top * wy0[:, None, None] + bottom * wy1[:, None, None]
    inside = (in_y[:, None] & in_x[None, :])[:, :, None]
    return np.where(inside, values, np.float64(np.float32(out_of_bounds)))


def roi_align(desc: RoiAlignDesc | RoiAlign1Desc, input_tensor: np.ndarray, roi_tensor: np.ndarray,
              batch_indices_tensor: np.ndarray) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    d = as_roi_align1(desc)
    _, channels, _, _ = input_tensor.shape
    _, _, out_h, out_w = d.output_tensor.sizes
    rois, batch_indices = regions(desc, input_tensor, roi_tensor, batch_indices_tensor)
    # Channels last, so that each sample point reads its channels as one contiguous row.
    channels_last = np.ascontiguousarray(np.moveaxis(input_tensor, 1, -1))

    output = np.empty((rois.shape[0], out_h, out_w, channels), dtype=input_tensor.dtype)
    for r, roi in enumerate(rois):
        ys, xs, n_y, n_x = region_samples(d, r, roi)
        samples = interpolate(channels_last[int(batch_indices[r])], ys, xs, d.interpolation_mode,
                              d.out_of_bounds_input_value).reshape(out_h, n_y, out_w, n_x, channels)
        if d.reduction_function == "AVERAGE":
            output[r] = samples.mean(axis=(1, 3))
        else:
            output[r] = nan_ignoring_max(samples, axis=(1, 3))
    return {"OutputTensor": np.ascontiguousarray(np.moveaxis(output, -1, 1))}


def regions(desc: RoiAlignDesc | RoiAlign1Desc, input_tensor: np.ndarray, roi_tensor: np.ndarray,
            batch_indices_tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ROI rows ``(NumROIs, 4)`` in float64 and the batch index of each (RA-8), refused where
    the page leaves them undefined (ERR-1)."""
    rois = roi_tensor.reshape(-1, 4).astype(np.float64)
    batch_indices = batch_indices_tensor.reshape(-1)
    _check_regions(desc, rois, batch_indices, input_tensor.shape[0])
    return rois, batch_indices


def _check_regions(desc: RoiAlignDesc | RoiAlign1Desc, rois: np.ndarray, batch_indices: np.ndarray,
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
