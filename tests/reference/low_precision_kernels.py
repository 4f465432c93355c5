"""Independent ROI_ALIGN1 and ROI_POOLING kernels that compute in float32 (or float16): every
coordinate, weight, product and sum is rounded to that type after each operation, as a GPU
kernel computes. They share no code with reference/ (only the desc dataclasses), and are the
oracles of the precision-model property tests (test_bounds.py).

ROI_ALIGN1 coordinates in two evaluation orders: ``"page"`` (the pseudo-code of the DML page)
and ``"onnx"`` (ORT's and torchvision's roi_align: region start and bin size first, then the
sample within the bin; the same coordinates in exact arithmetic when OutputPixelOffset is -0.5
and AlignRegionsToCorners is FALSE). They read the page as the reference's primary reading does
(DECISIONS.md RA-5, RP-1): a ROI_ALIGN1 sample reads the input strictly inside ``(-1, size)`` and
interpolates ``a + t * (b - a)`` along Y, then X, between taps clamped to the input; ROI_POOLING
rounds a halfway product to even and takes the page's integer bins.
"""

from __future__ import annotations

import math

import numpy as np

from ep_testbed.reference.roi_align import as_roi_align1


def axis_coordinates(ct, first, last, scale, out, minimum, maximum, in_offset, out_offset, corners, order):
    """``(coordinates, n)`` of one region's samples along one axis, all arithmetic in ``ct``."""
    f = np.dtype(ct).type
    scale = f(np.float32(scale))  # a FLOAT field: float32, then the kernel's type
    a, b = f(f(first) * scale), f(f(last) * scale)
    size = f(b - a)
    n = int(min(max(math.ceil(float(f(size / f(out)))), minimum), maximum))
    total = out * n
    if order == "onnx":
        start, bin_size = f(a - f(in_offset)), f(size / f(out))
        o = np.repeat(np.arange(out, dtype=ct), n)
        j = np.tile(np.arange(n, dtype=ct), out)
        return start + o * bin_size + (j + f(0.5)) * bin_size / f(n), n
    if corners and total == 1:
        return np.array([f(f(a + f(size / f(2))) - f(in_offset))], dtype=ct), n
    step = f(size / f(total - 1 if corners else total))
    i = np.arange(total, dtype=ct)
    return ((i - f(out_offset)) * step + a) - f(in_offset), n


def _linear(plane, ys, xs, ct):
    """Bilinear values ``(C, len(ys), len(xs))`` in ``ct``: ``a + t * (b - a)`` along Y, then X,
    between the pixels ``floor(c)`` and ``floor(c) + 1``, each clamped to the input."""
    _, height, width = plane.shape

    def taps(c, size):
        base = np.floor(c)
        low = np.clip(base.astype(np.float64), 0, size - 1).astype(np.int64)
        high = np.clip(base.astype(np.float64) + 1, 0, size - 1).astype(np.int64)
        return low, high, (c - base).astype(ct)

    y0, y1, ty = taps(ys, height)
    x0, x1, tx = taps(xs, width)
    ty, tx = ty[:, None], tx[None, :]

    def v(rows, cols):
        return plane[:, rows[:, None], cols[None, :]]

    left = (v(y0, x0) + ty * (v(y1, x0) - v(y0, x0))).astype(ct)
    right = (v(y0, x1) + ty * (v(y1, x1) - v(y0, x1))).astype(ct)
    return (left + tx * (right - left)).astype(ct)


def roi_align(desc, x, rois, batch, ct=np.float32, order="page"):
    """ROI_ALIGN1 ``(NumROIs, C, OutputHeight, OutputWidth)`` computed in ``ct``, rounded to
    the output type at the end."""
    d = as_roi_align1(desc)
    f = np.dtype(ct).type
    _, channels, height, width = x.shape
    _, _, out_h, out_w = d.output_tensor.sizes
    rois = rois.reshape(-1, 4)
    out = np.empty((rois.shape[0], channels, out_h, out_w), dtype=ct)
    for r, (x1, y1, x2, y2) in enumerate(rois.astype(ct)):
        axis = dict(minimum=d.minimum_samples_per_output, maximum=d.maximum_samples_per_output,
                    in_offset=d.input_pixel_offset, out_offset=d.output_pixel_offset,
                    corners=d.align_regions_to_corners, order=order)
        ys, n_y = axis_coordinates(ct, y1, y2, d.spatial_scale_y, out_h, **axis)
        xs, n_x = axis_coordinates(ct, x1, x2, d.spatial_scale_x, out_w, **axis)
        plane = x[int(batch.reshape(-1)[r])].astype(ct)
        if d.interpolation_mode == "LINEAR":
            values = _linear(plane, ys, xs, ct)
        else:
            # floor(c + 0.5) in ``ct``, then clamped as the integer index it is: float16 holds
            # no odd number above 2048, so a clamp to ``width - 1`` in float16 could pass the end.
            iy = np.clip(np.floor(ys + f(0.5)).astype(np.float64), 0, height - 1).astype(np.int64)
            ix = np.clip(np.floor(xs + f(0.5)).astype(np.float64), 0, width - 1).astype(np.int64)
            values = plane[:, iy[:, None], ix[None, :]]
        inside = (((ys > -1) & (ys < height))[:, None] & ((xs > -1) & (xs < width))[None, :])
        values = np.where(inside, values, f(d.out_of_bounds_input_value)).astype(ct)
        out[r] = _reduce(values.reshape(channels, out_h, n_y, out_w, n_x), d.reduction_function, ct)
    return out.astype(x.dtype)


def _reduce(grid, reduction, ct):
    """AVERAGE: a running sum in ``ct`` over the samples, then one division; MAX: the max."""
    f = np.dtype(ct).type
    if reduction == "MAX":
        return grid.max(axis=(2, 4))
    total = np.zeros((grid.shape[0], grid.shape[1], grid.shape[3]), dtype=ct)
    for i in range(grid.shape[2]):
        for j in range(grid.shape[4]):
            total = (total + grid[:, :, i, :, j]).astype(ct)
    return (total / f(grid.shape[2] * grid.shape[4])).astype(ct)


def roi_pooling(desc, x, rois, ct=np.float32):
    """ROI_POOLING with ``round()`` of the product in ``ct`` (halves to even) and the page's
    integer bins."""
    f = np.dtype(ct).type
    _, channels, height, width = x.shape
    ph_count, pw_count = desc.pooled_size.height, desc.pooled_size.width
    rows = rois.reshape(-1, 5)
    out = np.zeros((rows.shape[0], channels, ph_count, pw_count), dtype=x.dtype)
    scale = f(np.float32(desc.spatial_scale))
    for r, row in enumerate(rows):
        products = [float(f(f(v) * scale)) for v in row[1:]]
        x1, y1, x2, y2 = (int(round(p)) for p in products)  # Python's round: halves to even
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for ph in range(ph_count):
            top = min(max(ph * rh // ph_count + y1, 0), height)
            bottom = min(max(-(-(ph + 1) * rh // ph_count) + y1, 0), height)
            for pw in range(pw_count):
                left = min(max(pw * rw // pw_count + x1, 0), width)
                right = min(max(-(-(pw + 1) * rw // pw_count) + x1, 0), width)
                if bottom > top and right > left:
                    out[r, :, ph, pw] = x[int(row[0]), :, top:bottom, left:right].max(axis=(1, 2))
    return out
