"""A LINEAR sample on a cell edge beside an infinite tap is a knife edge (DECISIONS.md FP-3).

Bilinear interpolation is continuous across a cell edge only while the taps are finite. At an
exact integer ``x = 4`` the taps are 4 and 5 with weights 1 and 0, and ``0 * -inf`` is NaN; a
float32 kernel that computes 3.9999998 reads taps 3 and 4 and gives a number or an infinity
instead. The reference keeps its exact value and offers the others: ``[low, high]`` for the
numbers and infinities, ``nan_alternatives`` for NaN.
"""

from __future__ import annotations

import low_precision_kernels as lp
import numpy as np
import pytest
from descs_for_tests import roi_align1
from test_bounds import outside, tensors

from ep_testbed.reference import execute_reading, execute_with_bounds
from ep_testbed.reference.precision import Arithmetic

#: ROI x from 3.5 to 4.5, one output column of 3 samples at (i + 0.5) / 3 + 3.5: the middle one is
#: 4 exactly, but 1/3 is no float32, so its error bound is not 0 (a kernel may compute 3.9999998).
ROIS = np.array([[3.5, 0.0, 4.5, 1.0]], dtype=np.float32)


def _case(column_five: float, reading: list[str] | None = None, model: str = "fp32"):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 2, 8)
    x[..., 5] = column_five
    desc = roi_align1(x.shape, ROIS.shape, (1, 1), offsets=(0.0, -0.5), samples=(3, 3))
    return desc, x, execute_reading(desc, tensors(x, ROIS), reading or [], model)


def test_the_middle_sample_is_exactly_on_a_cell_edge_with_an_error_bound():
    ar = Arithmetic(np.dtype(np.float32))
    step = ar.div(ar.const(1.0), ar.const(3.0))
    middle = ar.add(ar.mul(ar.const(1.5), step), ar.const(3.5))
    assert middle.v == 4.0 and 0 < middle.e < 1e-5
    # the float32 kernel's own coordinate; either side of 4 is within the bound
    xs, _ = lp.axis_coordinates(np.float32, np.float32(3.5), np.float32(4.5), 1.0, 1, 3, 3, 0.0, -0.5, False, "page")
    assert abs(float(xs[1]) - 4.0) <= middle.e


def test_an_infinite_tap_beside_an_exact_cell_edge_admits_minus_inf_and_nan():
    """ONNX Runtime's weighted sum (the ``weighted-interpolation`` reading). Column 5 is -inf: at
    x = 4 its weight is 0 and the sample is NaN, so the element (a mean) is NaN; with x just below
    4 the sample reads columns 3 and 4 (a number), just above it columns 4 and 5 (-inf), and the
    third sample (x = 4.33) is -inf: the element is -inf."""
    _, _, expected = _case(-np.inf, ["weighted-interpolation"])
    out = expected.outputs["OutputTensor"]
    assert np.isnan(out[0, 0, 0, 0])
    low, high = expected.alternatives["OutputTensor"]
    assert low[0, 0, 0, 0] == -np.inf and high[0, 0, 0, 0] == -np.inf        # -inf is an alternative
    assert expected.nan_alternatives["OutputTensor"][0, 0, 0, 0]            # and so is NaN
    assert any("on the cell edge 4 beside an infinite or NaN input value" in k.decision
               for k in expected.knife_edges), [k.text() for k in expected.knife_edges]


def test_under_the_primary_reading_the_element_is_nan_whichever_cell():
    """``a + t * (b - a)`` makes NaN of the third sample's column of -inf (``-inf - -inf``) on
    every side: the knife edge is noted, NaN offered, and no infinity (the range of an element
    of NaN samples is empty, ``low > high``)."""
    _, _, expected = _case(-np.inf)
    assert np.isnan(expected.outputs["OutputTensor"][0, 0, 0, 0])
    low, high = expected.alternatives["OutputTensor"]
    assert not low[0, 0, 0, 0] <= high[0, 0, 0, 0]
    assert expected.nan_alternatives["OutputTensor"][0, 0, 0, 0]
    assert any("on the cell edge 4" in k.decision for k in expected.knife_edges)


def test_exact_model_offers_no_alternative():
    _, _, expected = _case(-np.inf, model="exact")
    assert not expected.alternatives and not expected.nan_alternatives and not expected.knife_edges


def test_a_finite_neighbourhood_near_a_cell_edge_gains_no_alternative():
    """The same region on finite taps: the slope bound covers the move into the next cell, and
    nothing else changes (no range, no NaN flag, no note)."""
    _, _, expected = _case(7.0)
    assert np.isfinite(expected.outputs["OutputTensor"]).all()
    assert not expected.alternatives and not expected.nan_alternatives and not expected.knife_edges
    assert expected.bounds["OutputTensor"][0, 0, 0, 0] > 0


def test_the_float32_kernel_gives_one_of_the_offered_values():
    """An independent float32 kernel, in both coordinate orders, lands on the reference's value
    or one of its alternatives at the knife-edge element."""
    desc, x, expected = _case(-np.inf, ["weighted-interpolation"])
    low, high = expected.alternatives["OutputTensor"]
    for order in ("page", "onnx"):
        got = lp.roi_align(desc, x, ROIS, np.zeros(1), order=order)[0, 0, 0, 0]
        assert np.isnan(got) or got == low[0, 0, 0, 0] or got == high[0, 0, 0, 0], (order, got)


def test_bounded_outputs_stay_execute_bit_for_bit():
    desc, x, expected = _case(-np.inf)
    plain = execute_with_bounds(desc, tensors(x, ROIS), "exact").outputs["OutputTensor"]
    np.testing.assert_array_equal(expected.outputs["OutputTensor"], plain, strict=True)


# --- MAX: a sample that a cell-edge decision turns into NaN drops out of the max -------------------

#: One column (width 1) of the fuzzed case ``roi_align1/fuzz-s2-b2-033`` (region 8, channel 2): +inf
#: at rows 2 and 5. The region's samples lie at rows 3.0000001, 3.9999999 and 4.9999997 (output
#: row 0): the first two each within their error of a cell edge beside an infinity.
MAX_COLUMN = np.array([-4.375, -2.625, np.inf, 2.5, 7.125, np.inf, -8.0, 6.125, 7.75], dtype=np.float32)
MAX_ROIS = np.array([[8.0, 3.5, 8.0, 8.499999]], dtype=np.float32)


def _max_case():
    x = MAX_COLUMN.reshape(1, 1, -1, 1)
    desc = roi_align1(x.shape, MAX_ROIS.shape, (2, 1), reduction="MAX", scale=(0.0625, 1.0), offsets=(0.0, 0.5),
                      samples=(3, 3), corners=True)
    return desc, x


def _ort_max_in_float32(rois: np.ndarray, x: np.ndarray, out_h: int, n: int) -> np.ndarray:
    """What the mapper's graph computes on ONNX Runtime's CPU EP, output row by output row, one
    float32 operation at a time: ``RoiAlign(mode="avg", sampling_ratio=1, half_pixel,
    spatial_scale=1)`` at an ``n``-times taller output gives every sample
    (``onnxruntime/core/providers/cpu/object_detection/roialign.cc``: ``RoiAlign<T>::Compute``
    takes ``roi_start = rois * spatial_scale - 0.5``, ``bin_size = (roi_end - roi_start) /
    pooled``; ``pre_calc_for_bilinear_interpolate``: ``yy = roi_start + ph * bin_size + (iy + .5f) *
    bin_size / roi_bin_grid``, ``y_low = (int)y`` clamped at ``height - 1`` with ``y = y_low``,
    ``ly = y - y_low``, ``hy = 1 - ly``, ``w1 = hy * hx`` ... ``w4 = ly * lx``; ``RoiAlignForward``:
    ``output_val += w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4``, then ``/= count``), then
    MaxPool(n x 1) takes the largest sample that is a number (a NaN sample loses, as ONNX
    Runtime's MaxPool gave on the fuzzed case). Width 1: ``x_low = x_high = 0``, ``lx = 0``."""
    f = np.float32
    half, one = f(0.5), f(1.0)
    height = x.shape[2]
    column = x[0, 0, :, 0]
    start, end = rois[0, 1] * one - half, rois[0, 3] * one - half
    bin_size = (end - start) / f(out_h * n)
    samples = []
    with np.errstate(invalid="ignore"):
        for ph in range(out_h * n):
            y = (start + f(ph) * bin_size) + f(0.5) * bin_size / f(1)
            y = max(y, f(0))
            y_low = int(y)
            if y_low >= height - 1:
                y_low = y_high = height - 1
                y = f(y_low)
            else:
                y_high = y_low + 1
            ly = y - f(y_low)
            hy, lx, hx = one - ly, f(0), one
            w1, w2, w3, w4 = hy * hx, hy * lx, ly * hx, ly * lx
            v1 = v2 = column[y_low]
            v3 = v4 = column[y_high]
            value = f(0) + (((w1 * v1 + w2 * v2) + w3 * v3) + w4 * v4)
            samples.append(value / f(1))
    grid = np.array(samples, dtype=np.float32).reshape(out_h, n)
    return np.fmax.reduce(grid, axis=1)


def test_a_max_sample_that_a_cell_edge_turns_nan_drops_out_of_the_max():
    """The exact middle sample, 3.9999999, reads rows 3 and 4 (7.1249995, the element's maximum);
    ONNX Runtime's float32 computes 4 exactly, reads rows 4 and 5 with a weight of 0 on +inf and
    gets NaN (``0 * inf``), and its third sample is NaN too: the max of the samples that are
    numbers is the first one, 2.5000012. The reference offers NaN for those samples; under MAX a
    NaN sample loses (NAN-1), so the element's range must reach the max of the others."""
    pytest.importorskip("onnx")
    from ep_testbed.graphs import to_onnx

    desc, x = _max_case()
    mapping = to_onnx(desc)
    feeds = mapping.feeds(tensors(x, MAX_ROIS))
    rois = next(a for a in feeds.values() if a.shape == (1, 4))
    got = _ort_max_in_float32(rois, x, 2, 3)
    expected = execute_with_bounds(desc, tensors(x, MAX_ROIS), "fp32")
    value = expected.outputs["OutputTensor"][0, 0, :, 0]
    assert value[0] == np.float32(7.1249995) and got[0] == np.float32(2.5000012), (value, got)
    assert expected.bounds["OutputTensor"][0, 0, 0, 0] == 0  # an infinite slope: no bound, only the knife edge
    assert any("on the cell edge 4 beside an infinite or NaN input value" in k.decision or
               "on the cell edge 3 beside" in k.decision for k in expected.knife_edges)
    assert not outside(expected, got.reshape(1, 1, 2, 1)).any(), (expected.alternatives["OutputTensor"], got)


def test_the_float32_steps_are_what_onnx_runtime_computes():
    """The step-by-step computation above is ONNX Runtime's own, bit for bit, on the mapper's graph."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from ep_testbed.graphs import to_onnx

    desc, x = _max_case()
    mapping = to_onnx(desc)
    feeds = mapping.feeds(tensors(x, MAX_ROIS))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(mapping.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    actual = mapping.outputs(session.run(None, feeds))["OutputTensor"][0, 0, :, 0]
    rois = next(a for a in feeds.values() if a.shape == (1, 4))
    np.testing.assert_array_equal(actual, _ort_max_in_float32(rois, x, 2, 3), strict=True)
