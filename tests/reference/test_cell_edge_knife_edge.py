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
from descs_for_tests import roi_align1
from test_bounds import tensors

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
