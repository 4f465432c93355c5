"""Independent ROI_ALIGN1 and ROI_POOLING kernels that compute in float32 (or float16): every
coordinate, weight, product and sum is rounded to that type after each operation, as a GPU
kernel computes. They share no code with reference/ (only the desc dataclasses), and are the
oracles of the precision-model property tests (test_bounds.py).

ROI_ALIGN1 coordinates in two evaluation orders: ``"page"`` (the pseudo-code of the DML page)
and ``"onnx"`` (ORT's and torchvision's roi_align: region start and bin size first, then the
sample within the bin; the same coordinates in exact arithmetic when OutputPixelOffset is -0.5
and AlignRegionsToCorners is FALSE). ROI_POOLING bins in ORT's float form
(``floor(ph * (RegionHeight / PooledHeight))``, ``ceil((ph + 1) * ...)``), which the page's
integer formula equals in exact arithmetic.
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
    """Bilinear values ``(C, len(ys), len(xs))`` in ``ct``, the input clamped to its edge."""
    f = np.dtype(ct).type
    _, height, width = plane.shape

    def taps(c, size):
        c = np.clip(c, f(0), f(size - 1))
        low = np.floor(c).astype(np.int64)
        end = low >= size - 1
        low = np.where(end, size - 1, low)
        frac = np.where(end, f(0), (c - low.astype(ct)).astype(ct)).astype(ct)
        return low, np.where(end, size - 1, low + 1), (f(1) - frac).astype(ct), frac

    y0, y1, hy, ly = taps(ys, height)
    x0, x1, hx, lx = taps(xs, width)
    w = [(hy[:, None] * hx[None, :]), (hy[:, None] * lx[None, :]), (ly[:, None] * hx[None, :]),
         (ly[:, None] * lx[None, :])]
    v = [plane[:, y0[:, None], x0[None, :]], plane[:, y0[:, None], x1[None, :]],
         plane[:, y1[:, None], x0[None, :]], plane[:, y1[:, None], x1[None, :]]]
    return ((w[0] * v[0] + w[1] * v[1]) + w[2] * v[2]) + w[3] * v[3]


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
        inside = (((ys >= -1) & (ys <= height))[:, None] & ((xs >= -1) & (xs <= width))[None, :])
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
    """ROI_POOLING with ``round()`` of the product in ``ct`` and ORT's float bins."""
    f = np.dtype(ct).type
    _, channels, height, width = x.shape
    ph_count, pw_count = desc.pooled_size.height, desc.pooled_size.width
    rows = rois.reshape(-1, 5)
    out = np.zeros((rows.shape[0], channels, ph_count, pw_count), dtype=x.dtype)
    scale = f(np.float32(desc.spatial_scale))
    for r, row in enumerate(rows):
        products = [float(f(f(v) * scale)) for v in row[1:]]
        x1, y1, x2, y2 = (int(math.copysign(math.floor(abs(p) + 0.5), p)) for p in products)
        bin_h = f(f(max(y2 - y1 + 1, 1)) / f(ph_count))
        bin_w = f(f(max(x2 - x1 + 1, 1)) / f(pw_count))
        for ph in range(ph_count):
            top = min(max(math.floor(float(f(f(ph) * bin_h))) + y1, 0), height)
            bottom = min(max(math.ceil(float(f(f(ph + 1) * bin_h))) + y1, 0), height)
            for pw in range(pw_count):
                left = min(max(math.floor(float(f(f(pw) * bin_w))) + x1, 0), width)
                right = min(max(math.ceil(float(f(f(pw + 1) * bin_w))) + x1, 0), width)
                if bottom > top and right > left:
                    out[r, :, ph, pw] = x[int(row[0]), :, top:bottom, left:right].max(axis=(1, 2))
    return out
