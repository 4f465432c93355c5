"""The per-region kernel of ROI_ALIGN / ROI_ALIGN1, frozen: a copy of ``reference/roi_align.py``'s
``compute`` and ``region_value`` as they were before the separable AVERAGE was computed over
many regions at once (its weights, gathers and products per region, one region after another).
Test-only: ``bounds_oracle_roi_align`` takes its outputs from here, so that
``test_bounds_oracle.py`` checks the reference's values bit for bit against it, as it checks the
bounds. Do not edit it to follow the reference's implementation. The non-separable paths (MAX,
NEAREST, non-finite inputs, the float32 readings) and the sample coordinates are the reference's
own (imported): only the separable AVERAGE is frozen here.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ep_testbed.reference import roi_align as ra
from ep_testbed.reference.roi_align import PRIMARY, KernelInput, Rules, edge_taps, gather, reads_input, region_samples


def compute(p: KernelInput, alongside: Optional[Callable[[int, np.ndarray], None]] = None) -> np.ndarray:
    """The ``(NumROIs, C, OutputHeight, OutputWidth)`` output, region by region (``ra.compute``
    as it was); ``alongside(row, values)`` after each region."""
    _, _, out_h, out_w = p.desc.output_tensor.sizes
    output = np.empty((p.rois.shape[0], p.planes.shape[-1], out_h, out_w), dtype=p.dtype)
    for r, roi in enumerate(p.rois):
        ys, xs, n_y, n_x = region_samples(p.desc, r, roi, p.rules)
        output[r] = region_value(p, r, ys, xs, n_y, n_x).transpose(2, 0, 1)
        if alongside is not None:
            values = output[r].transpose(1, 2, 0)
            values.flags.writeable = False
            alongside(r, values)
    return output


def region_value(p: KernelInput, row: int, ys: np.ndarray, xs: np.ndarray, n_y: int, n_x: int) -> np.ndarray:
    """Region ``row``'s elements ``(OutputHeight, OutputWidth, C)`` in float64: the frozen
    separable AVERAGE where ``ra.region_value`` takes it, else ``ra.region_value``."""
    d, plane = p.desc, p.plane(row)
    _, _, out_h, out_w = d.output_tensor.sizes
    if n_y and n_x and p.separable(row):
        return average_linear(plane, ys, xs, n_y, n_x, d.out_of_bounds_input_value, p.rules)
    return ra.region_value(p, row, ys, xs, n_y, n_x)


def axis_weights(coords: np.ndarray, size: int, samples: int,
                 rules: Rules = PRIMARY) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One axis of the separable AVERAGE of LINEAR samples of one region (``ra.axis_weights``
    as it was)."""
    low, high, w_low, w_high = edge_taps(coords, size)
    inside = reads_input(coords, size, rules)
    outputs = coords.size // samples
    owner = np.arange(coords.size) // samples
    if not inside.all():
        low, high, w_low, w_high, owner = (a[inside] for a in (low, high, w_low, w_high, owner))
    both = np.concatenate([low, high])
    taps = np.unique(both)
    cells = np.concatenate([owner, owner]) * taps.size + np.searchsorted(taps, both)
    weights = np.bincount(cells, weights=np.concatenate([w_low, w_high]), minlength=outputs * taps.size)
    return weights.reshape(outputs, taps.size), taps, np.bincount(owner, minlength=outputs)


def average_linear(plane: np.ndarray, ys: np.ndarray, xs: np.ndarray, n_y: int, n_x: int,
                   out_of_bounds: float, rules: Rules = PRIMARY) -> np.ndarray:
    """The AVERAGE of LINEAR samples of one region over a finite plane, ``Ay . P . Ax^T``
    (``ra.average_linear`` as it was)."""
    height, width, _ = plane.shape
    wy, rows, in_y = axis_weights(ys, height, n_y, rules)
    wx, cols, in_x = axis_weights(xs, width, n_x, rules)
    total = np.zeros((wy.shape[0], wx.shape[0], plane.shape[2]))
    if rows.size and cols.size:
        block = gather(plane, rows, cols).astype(np.float64)
        across = np.matmul(wx, block)
        total += (wy @ across.reshape(rows.size, -1)).reshape(total.shape)
    outside = n_y * n_x - np.outer(in_y, in_x)
    if outside.any():
        reads = outside > 0
        added = np.zeros(outside.shape)
        added[reads] = outside[reads] * np.float64(np.float32(out_of_bounds))
        total += added[:, :, None]
    return total / (n_y * n_x)
