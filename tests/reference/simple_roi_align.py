"""The simple form of ROI_ALIGN1 (channels first, one region at a time): the oracle that the
fast reference in reference/ is checked against (issue 7). Same semantics, same DECISIONS.md.
"""

from __future__ import annotations

import math

import numpy as np

from reference.descs import RoiAlign1Desc, RoiAlignDesc, as_roi_align1
from reference.errors import DescError
from reference.nan_rules import nan_ignoring_max

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
    """``interpolate2D`` of a ``(C, H, W)`` plane at every (y, x) of the two axes' grids, in float64:
    ``(C, len(ys), len(xs))``; points outside the input read ``OutOfBoundsInputValue``."""
    _, height, width = plane.shape
    if mode == "NEAREST_NEIGHBOR":
        iy, in_y = nearest_tap(ys, height)
        ix, in_x = nearest_tap(xs, width)
        values = plane[:, iy[:, None], ix[None, :]].astype(np.float64)
    else:
        y0, y1, wy0, wy1, in_y = linear_taps(ys, height)
        x0, x1, wx0, wx1, in_x = linear_taps(xs, width)
        def tap(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
            return plane[:, rows[:, None], cols[None, :]].astype(np.float64)

        top = tap(y0, x0) * wx0 + tap(y0, x1) * wx1
        bottom = tap(y1, x0) * wx0 + tap(y1, x1) * wx1
        values = top * wy0[:, None] + bottom * wy1[:, None]
    return np.where(in_y[:, None] & in_x[None, :], values, np.float64(np.float32(out_of_bounds)))


def roi_align(desc: RoiAlignDesc | RoiAlign1Desc, input_tensor: np.ndarray, roi_tensor: np.ndarray,
              batch_indices_tensor: np.ndarray) -> dict[str, np.ndarray]:
    """``{"OutputTensor": ...}`` for a validated desc and matching arrays."""
    d = as_roi_align1(desc)
    batch_count, channels, _, _ = input_tensor.shape
    _, _, out_h, out_w = d.output_tensor.sizes
    rois = roi_tensor.reshape(-1, 4).astype(np.float64)
    batch_indices = batch_indices_tensor.reshape(-1)
    _check_regions(desc, rois, batch_indices, batch_count)
    scale_x, scale_y = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    in_offset, out_offset = float(np.float32(d.input_pixel_offset)), float(np.float32(d.output_pixel_offset))

    output = np.empty((rois.shape[0], channels, out_h, out_w), dtype=np.float64)
    for r, (x1, y1, x2, y2) in enumerate(rois):
        start_x, start_y = x1 * scale_x, y1 * scale_y
        size_x, size_y = x2 * scale_x - start_x, y2 * scale_y - start_y
        n_x = samples_per_output(size_x, out_w, d.minimum_samples_per_output, d.maximum_samples_per_output)
        n_y = samples_per_output(size_y, out_h, d.minimum_samples_per_output, d.maximum_samples_per_output)
        if n_x * out_w * n_y * out_h > MAX_SAMPLE_POINTS_PER_REGION:
            raise DescError(f"ROITensor row {r}", [x1, y1, x2, y2],
                            f"this region needs {n_y}x{n_x} samples per output element ({n_y * out_h}x{n_x * out_w} "
                            f"points); the reference computes at most {MAX_SAMPLE_POINTS_PER_REGION} points per region "
                            "(lower MaximumSamplesPerOutput)", desc.TYPE)
        xs = sample_coordinates(start_x, size_x, out_w, n_x, in_offset, out_offset, d.align_regions_to_corners)
        ys = sample_coordinates(start_y, size_y, out_h, n_y, in_offset, out_offset, d.align_regions_to_corners)
        plane = input_tensor[int(batch_indices[r])]
        samples = interpolate(plane, ys, xs, d.interpolation_mode, d.out_of_bounds_input_value)
        samples = samples.reshape(channels, out_h, n_y, out_w, n_x)
        if d.reduction_function == "AVERAGE":
            output[r] = samples.mean(axis=(2, 4))
        else:
            output[r] = nan_ignoring_max(samples, axis=(2, 4))
    return {"OutputTensor": output.astype(input_tensor.dtype)}


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
