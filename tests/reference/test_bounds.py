"""The reference's error bars (DECISIONS.md FP-2, FP-3): per-element rounding bounds and knife-edge
alternatives under a precision model, checked against independent low-precision kernels
(low_precision_kernels.py), ONNX Runtime's CPU EP, and exact arithmetic (fractions)."""

from __future__ import annotations

import math
from fractions import Fraction

import low_precision_kernels as lp
import numpy as np
import ort_oracle
import pytest
from descs_for_tests import max_pooling2, roi_align1, roi_pooling
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis_profiles import examples
from value_strategies import feature_map, finite, uniform

from ep_testbed.reference import MODELS, DescError, execute, execute_reading, execute_with_bounds, precision_model
from ep_testbed.reference.precision import Arithmetic

UINT32_MAX = 2**32 - 1


def tensors(x, rois, batch=None):
    n = rois.reshape(-1, 4).shape[0]
    return {"InputTensor": x, "ROITensor": rois,
            "BatchIndicesTensor": np.zeros(n, np.uint32) if batch is None else batch.astype(np.uint32)}


def outside(expected, actual, name="OutputTensor"):
    """Elements of ``actual`` that neither lie within the bound of the expected value nor within
    the bound of the knife-edge range: what a comparison under the model would flag."""
    e = expected.outputs[name].astype(np.float64)
    a = np.asarray(actual).astype(np.float64)
    bound = expected.bounds.get(name, np.zeros(e.shape)).astype(np.float64)
    ok = np.abs(a - e) <= bound
    if name in expected.alternatives:
        low, high = expected.alternatives[name]
        ok |= (a >= low - bound) & (a <= high + bound)
    return ~ok


# --- the hidden-oracle property: a float32 kernel lies within the bound --------------------------

@st.composite
def roi_align_case(draw, dtypes=("FLOAT32", "FLOAT16")):
    """A random ROI_ALIGN1 desc, feature map (values to a few hundred) and regions, some exact
    (multiples of 1/4), some arbitrary floats. Some maps are wide, so that sample coordinates
    reach the hundreds, where their rounding outweighs the interpolation arithmetic's."""
    h, w, c = draw(st.integers(1, 10)), draw(st.integers(1, 10)), draw(st.integers(1, 3))
    if draw(st.booleans()):
        h, w = draw(st.sampled_from([(h, 200 + w), (150 + h, w)]))
    oh, ow, r = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(dtypes))
    scale = draw(st.sampled_from([1.0, 0.5, 0.25, 1 / 16, 1 / 3, 0.1, 0.7]))
    adaptive = draw(st.booleans())
    k = draw(st.integers(1, 3))
    desc = roi_align1(
        (2, c, h, w), (r, 4), (oh, ow), dtype=dtype, scale=(scale, draw(st.sampled_from([scale, 1.0, 0.3]))),
        offsets=(draw(st.sampled_from([0.5, 0.0, 0.25, -0.5, 0.3])), draw(st.sampled_from([-0.5, 0.0, 0.5, 0.1]))),
        samples=(1, UINT32_MAX) if adaptive else (k, k), corners=draw(st.booleans()),
        interpolation=draw(st.sampled_from(["LINEAR", "NEAREST_NEIGHBOR"])),
        reduction=draw(st.sampled_from(["AVERAGE", "MAX"])), oob=draw(st.sampled_from([0.0, -2.5, 7.0])))
    np_type = np.float32 if dtype == "FLOAT32" else np.float16
    x = feature_map(draw, (2, c, h, w), np_type, 1000.0)
    corner = np.stack([uniform(draw, -2, w + 1, r, "x1"), uniform(draw, -2, h + 1, r, "y1")], axis=1)
    extent = uniform(draw, -1, 12 if adaptive else 14, 2 * r, "extent").reshape(r, 2)
    rois = np.concatenate([corner, corner + extent], axis=1) / scale
    if draw(st.booleans()):
        rois = np.round(rois * 4) / 4
    batch = np.array(draw(st.lists(st.integers(0, 1), min_size=r, max_size=r), label="batch"))
    return desc, x, rois.astype(np_type), batch


def _within_model(desc, x, rois, batch, model, ct, orders):
    try:
        expected = execute_with_bounds(desc, tensors(x, rois, batch), model)
    except DescError:
        assume(False)
    for order in orders:
        kernel = lp.roi_align(desc, x, rois, batch, ct=ct, order=order)
        bad = outside(expected, kernel)
        assert not bad.any(), (order, np.argwhere(bad)[:3], expected.outputs["OutputTensor"][bad][:3], kernel[bad][:3],
                               expected.bounds["OutputTensor"][bad][:3])
    return expected


def _orders(desc):
    d = desc
    onnx_like = d.output_pixel_offset == -0.5 and not d.align_regions_to_corners
    return ("page", "onnx") if onnx_like else ("page",)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(case=roi_align_case())
def test_float32_kernel_lies_within_the_fp32_bound(case):
    """The issue's hidden-oracle property: for random descs, the reference's exact output lies
    within its own fp32 bound (or knife-edge range) of a float32 computation of the same desc,
    in both evaluation orders of the coordinates."""
    desc, x, rois, batch = case
    _within_model(desc, x, rois, batch, "fp32", np.float32, _orders(desc))


@settings(max_examples=examples(150), deadline=None)
@given(case=roi_align_case(dtypes=("FLOAT16",)))
def test_float16_kernel_lies_within_the_tensor_type_bound(case):
    """A kernel computing everything in float16 (torchvision's CUDA roi_align in half) lies within
    the ``tensor-type`` model's bound of a FLOAT16 desc."""
    desc, x, rois, batch = case
    _within_model(desc, x, rois, batch, "tensor-type", np.float16, _orders(desc))


def _detection_case(dtype, seed=0, count=60):
    """A detection-like feature map (1x8x40x56, values to ~700) and FPN-level regions."""
    rng = np.random.default_rng(seed)
    np_type = np.float32 if dtype == "FLOAT32" else np.float16
    x = (rng.standard_normal((1, 8, 40, 56)) * 150).astype(np_type)
    x1, y1 = rng.uniform(0, 56 * 16 * 0.8, count), rng.uniform(0, 40 * 16 * 0.8, count)
    rois = np.stack([x1, y1, x1 + rng.uniform(16, 300, count), y1 + rng.uniform(16, 300, count)], 1).astype(np_type)
    desc = roi_align1(x.shape, rois.shape, (7, 7), dtype=dtype, scale=(1 / 16, 1 / 16), samples=(2, 2))
    return desc, x, rois


def test_fp32_bound_absorbs_float32_rounding_but_not_float16_coordinates():
    """On large feature values the plain fp32 tolerance flags a float32 kernel (the false alarm
    the bound removes); the bound accepts it. A kernel computing coordinates in float16 on a
    FLOAT16 desc stays outside the fp32 bound (a real defect), inside the tensor-type one."""
    desc, x, rois = _detection_case("FLOAT32")
    expected = execute_with_bounds(desc, tensors(x, rois))
    kernel = lp.roi_align(desc, x, rois, np.zeros(len(rois)))
    e = expected.outputs["OutputTensor"].astype(np.float64)
    plain = np.abs(kernel - e) > 1e-5 + 1e-4 * np.abs(e)
    assert plain.sum() > 10 and not outside(expected, kernel).any()

    desc16, x16, rois16 = _detection_case("FLOAT16")
    half = lp.roi_align(desc16, x16, rois16, np.zeros(len(rois16)), ct=np.float16)
    assert outside(execute_with_bounds(desc16, tensors(x16, rois16)), half).mean() > 0.3
    assert not outside(execute_with_bounds(desc16, tensors(x16, rois16), "tensor-type"), half).any()


@pytest.mark.parametrize("sampling_ratio", [2, 0])
def test_onnxruntime_cpu_lies_within_the_fp32_bound(sampling_ratio):
    """ONNX Runtime's CPU EP (RoiAlign-16 half_pixel, float32: torchvision's roi_align bit for bit)
    on a detection-sized feature map: outside the plain fp32 tolerance, inside the bound."""
    desc, x, rois = _detection_case("FLOAT32", seed=3)
    if sampling_ratio == 0:
        desc = roi_align1(x.shape, rois.shape, (7, 7), scale=(1 / 16, 1 / 16), samples=(1, UINT32_MAX))
    expected = execute_with_bounds(desc, tensors(x, rois))
    ort = ort_oracle.roi_align(x, rois, np.zeros(len(rois)), output_height=7, output_width=7,
                               sampling_ratio=sampling_ratio, spatial_scale=1 / 16)
    e = expected.outputs["OutputTensor"].astype(np.float64)
    assert (np.abs(ort - e) > 1e-5 + 1e-4 * np.abs(e)).sum() > 10
    assert not outside(expected, ort).any()


def test_bound_is_tight_enough_to_mean_something():
    """The fp32 bound stays a small multiple of float32 rounding at the values involved: below
    2**-12 of the largest |input| everywhere on the detection case."""
    desc, x, rois = _detection_case("FLOAT32")
    bound = execute_with_bounds(desc, tensors(x, rois)).bounds["OutputTensor"]
    assert bound.max() < np.abs(x).max() * 2**-12
    assert (bound > 0).all()


def test_outputs_equal_execute_bit_for_bit_under_every_model():
    """``execute_with_bounds`` changes no output: the comparison's expected value stays ``execute``'s."""
    desc, x, rois = _detection_case("FLOAT16", count=10)
    plain = execute(desc, tensors(x, rois))["OutputTensor"]
    for model in MODELS:
        np.testing.assert_array_equal(execute_with_bounds(desc, tensors(x, rois), model).outputs["OutputTensor"], plain)


def test_exact_model_has_no_bound_and_no_alternative():
    desc, x, rois = _detection_case("FLOAT32", count=5)
    expected = execute_with_bounds(desc, tensors(x, rois), "exact")
    assert expected.bounds == {} and expected.alternatives == {} and expected.knife_edge_count == 0


def test_selections_have_no_bound():
    """MAX_POOLING2 only selects: exact under every model, no bound (its record has none)."""
    x = (np.random.default_rng(0).standard_normal((1, 2, 6, 6)) * 500).astype(np.float32)
    expected = execute_with_bounds(max_pooling2(x.shape, (3, 3)), {"InputTensor": x})
    assert expected.bounds == {} and expected.alternatives == {}


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match="fp32, tensor-type, exact"):
        precision_model("fp64")


# --- knife edges ------------------------------------------------------------------------------

def _fraction(v):
    return Fraction(float(v))


def test_sample_on_the_input_edge_is_a_knife_edge():
    """Height 4, AlignRegionsToCorners, offsets 0, ROI y from 0.45 to 4, 2 output rows of 2
    samples: the last sample sits at 0.45 + 3 * (3.55 / 3) = 4 exactly (= InputHeight: outside
    the open range DirectML reads, RA-5: OutOfBoundsInputValue), but float32 computes 3.9999998
    (inside: the edge row). The reference keeps the exact decision and offers the edge row."""
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4) * 2.5
    rois = np.array([[0, 0.45, 3, 4]], dtype=np.float32)
    desc = roi_align1(x.shape, rois.shape, (2, 1), offsets=(0.0, 0.0), samples=(2, 2), corners=True, oob=-4.0)
    a = _fraction(np.float32(0.45))
    assert 3 * ((4 - a) / 3) + a == 4                                          # exactly on y = H
    ys, _ = lp.axis_coordinates(np.float32, np.float32(0.45), np.float32(4), 1.0, 2, 2, 2, 0.0, 0.0, True, "page")
    assert ys[-1] == np.float32(3.9999998)                                     # float32: inside
    expected = execute_with_bounds(desc, tensors(x, rois))
    e = expected.outputs["OutputTensor"]
    low, high = expected.alternatives["OutputTensor"]
    kernel = lp.roi_align(desc, x, rois, np.zeros(1))
    assert (kernel[0, 0, 1] > e[0, 0, 1] + 1).all()                            # half the last row's samples read -4
    assert (low[0, 0, 1] == e[0, 0, 1]).all() and (high[0, 0, 1] == kernel[0, 0, 1]).all()
    assert (low[0, 0, :1] == e[0, 0, :1]).all()                                # the other row has no alternative
    assert not outside(expected, kernel).any()
    assert any("sample Y = 4 against the input's edge (-1, 4)" in k.decision and k.exact == "outside"
               for k in expected.knife_edges)
    assert outside(execute_with_bounds(desc, tensors(x, rois), "exact"), kernel).any()


def test_adaptive_sample_count_is_a_knife_edge():
    """The issue's second example. ROI y from 1000 to 1050 at SpatialScale 0.1 (float32
    0.100000001490116): the exact region is 5.0000000745 rows, 6 samples per output; float32
    rounds both scaled corners to 100 and 105, a region of exactly 5, 5 samples. The
    reference notes the count and accepts an output of either."""
    scale = np.float32(0.1)
    size = Fraction(1050) * _fraction(scale) - Fraction(1000) * _fraction(scale)
    assert 5 < size < Fraction(5000001, 1000000)
    assert np.float32(np.float32(1050) * scale) - np.float32(np.float32(1000) * scale) == 5
    x = (np.random.default_rng(5).standard_normal((1, 2, 120, 8)) * 100).astype(np.float32)
    rois = np.array([[0, 1000, 30, 1050]], dtype=np.float32)
    desc = roi_align1(x.shape, rois.shape, (1, 2), scale=(0.1, 0.1), samples=(1, UINT32_MAX))
    expected = execute_with_bounds(desc, tensors(x, rois))
    notes = [k for k in expected.knife_edges if "samples per output along Y" in k.decision]
    assert notes and notes[0].exact == "6" and notes[0].alternative.startswith("5")
    kernel = lp.roi_align(desc, x, rois, np.zeros(1))
    assert np.abs(kernel - expected.outputs["OutputTensor"]).max() > 1e-2     # 5 samples, not 6
    assert not outside(expected, kernel).any()
    assert outside(execute_with_bounds(desc, tensors(x, rois), "exact"), kernel).any()


def test_roi_pooling_round_tie_is_a_knife_edge():
    """ROI_POOLING's ``round(RoiX1 * SpatialScale)``: x1 = 5 at scale 0.7 (float32 0.699999988)
    is exactly 3.49999994 (rounds to 3) but 3.5 as a float32 product (rounds to 4, the
    reference's reading RP-1). The reference offers the exact corner as the alternative."""
    exact = Fraction(5) * _fraction(np.float32(0.7))
    assert exact < Fraction(7, 2) and np.float32(np.float32(5) * np.float32(0.7)) == np.float32(3.5)
    x = np.arange(48, dtype=np.float32).reshape(1, 1, 6, 8)
    x[..., 3] = 100                                                             # only the exact corner reads column 3
    rois = np.array([0, 5, 0, 10, 7], dtype=np.float32).reshape(1, 1, 1, 5)
    desc = roi_pooling(x.shape, 1, (1, 2), scale=0.7)
    expected = execute_with_bounds(desc, {"InputTensor": x, "ROITensor": rois})
    assert any("round(RoiX1" in k.decision and k.exact == "4" and k.alternative == "3" for k in expected.knife_edges)
    low, high = expected.alternatives["OutputTensor"]
    assert (low < high).any()
    kernel = lp.roi_pooling(desc, x, rois, ct=np.float64)                       # exact products: x1 = 3
    assert (kernel != expected.outputs["OutputTensor"]).any() and not outside(expected, kernel).any()


@pytest.mark.parametrize("reading, minus_inf_bin", [(None, -np.inf), ("lowest-start", np.finfo(np.float32).min),
                                                    ("std-max-fold", np.finfo(np.float32).min)])
def test_roi_pooling_knife_edge_range_holds_what_the_readings_fold_gives_the_alternative(reading, minus_inf_bin):
    """A knife-edge range is what the reading's own kernel gives each alternative corner, fold
    included. x1 = x2 = 5 at scale 0.7: the float32 product 3.5 rounds to 4, past a 4-column input,
    so the region's only bin is empty (0, RP-4); the exact product 3.4999999 rounds to 3, whose bin
    is column 3, only -inf: -inf on the page, -FLT_MAX under a fold that starts from the lowest
    float (the readings' summaries). The range must reach that value, and under such a fold no lower."""
    x = np.zeros((1, 1, 2, 4), np.float32)
    x[..., 3] = -np.inf
    rois = np.array([0, 5, 0, 5, 0], np.float32).reshape(1, 1, 1, 5)
    alternative = rois.copy()
    alternative[0, 0, 0, [1, 3]] = np.float32(3 / 0.7)        # round(float32(x * 0.7)) = 3: the exact corners
    assert round(float(np.float32(alternative[0, 0, 0, 1]) * np.float32(0.7))) == 3
    desc = roi_pooling(x.shape, 1, (1, 1), scale=0.7)
    readings = [reading] if reading else []
    expected = execute_reading(desc, {"InputTensor": x, "ROITensor": rois}, readings)
    other = execute_reading(desc, {"InputTensor": x, "ROITensor": alternative}, readings).outputs["OutputTensor"]
    assert expected.outputs["OutputTensor"].item() == 0 and other.item() == minus_inf_bin
    assert "OutputTensor" in expected.alternatives and not outside(expected, other).any()
    if reading:  # and no lower: that kernel never gives -inf there
        assert outside(expected, np.full_like(other, -np.inf)).all()


def test_roi_pooling_halfway_product_rounds_to_even_and_half_away_is_a_reading():
    """RP-1: the page's round leaves a halfway product open; DirectML 1.15.4's own kernel (seen
    under --ep dml-wine) and HLSL's round take the even neighbour, the primary reading. ROIs [0,
    x, 0, x, 0] for x = 0.5 ... 5.5 on a 1x8 input of 0..7 pool columns 0, 2, 2, 4, 4, 6; ONNX
    Runtime's CPU EP and torchvision round away from zero (1 ... 6). An exact halfway product is
    no rounding error, so it has no knife-edge alternative: away from zero lies outside the fp32
    allowance and is the ``half-away-rounding`` reading exactly."""
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 1, 8)
    halves = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5])
    rois = np.stack([np.zeros(6), halves, np.zeros(6), halves, np.zeros(6)], axis=1).astype(np.float32)
    desc = roi_pooling(x.shape, 6, (1, 1))
    arrays = {"InputTensor": x, "ROITensor": rois.reshape(1, 1, 6, 5)}
    expected = execute_with_bounds(desc, arrays)
    np.testing.assert_array_equal(expected.outputs["OutputTensor"].ravel(), [0, 2, 2, 4, 4, 6])
    np.testing.assert_array_equal(execute(desc, arrays)["OutputTensor"], expected.outputs["OutputTensor"])
    assert not expected.alternatives and not expected.knife_edges
    away = np.arange(1, 7, dtype=np.float32).reshape(6, 1, 1, 1)
    assert outside(expected, away).sum() == 3
    reading = execute_reading(desc, arrays, ["half-away-rounding"])
    np.testing.assert_array_equal(reading.outputs["OutputTensor"], away)


def test_roi_pooling_corners_past_int64_keep_their_knife_edges():
    """Corners scaled past 2**63 (ROI values up to FLT_MAX are finite, hence valid): the kernel
    rounds them to Python integers; the bounds once put them in int64 arrays and raised
    OverflowError. Region 1's y1 = -3e38 * 0.7 lies within its product's rounding error of other
    integers (the bins it starts stay clamped at 0: no element changes), and its x2 = 5 * 0.7 is
    3.5 in float32, rounded to even 4, while the exact product 3.4999999 rounds to 3."""
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(2, 1, 6, 6)
    rois = np.array([[0, -1e20, 0.5, 3.3, 4.2], [1, 0, -3e38, 5, 2]], np.float32).reshape(1, 1, 2, 5)
    desc = roi_pooling(x.shape, 2, (2, 2), scale=0.7)
    arrays = {"InputTensor": x, "ROITensor": rois}
    expected = execute_with_bounds(desc, arrays)
    output = expected.outputs["OutputTensor"]
    np.testing.assert_array_equal(output, execute(desc, arrays)["OutputTensor"])
    low, high = expected.alternatives["OutputTensor"]
    narrower = rois.copy()
    narrower[0, 0, 1, 3] = 4  # x2 = round(4 * 0.7) = 3: region 1 one column narrower
    alternative = execute(desc, {"InputTensor": x, "ROITensor": narrower})["OutputTensor"]
    np.testing.assert_array_equal(low, np.minimum(output, alternative))
    np.testing.assert_array_equal(high, output)
    assert (low[1] < output[1]).any()
    decisions = [k.decision for k in expected.knife_edges]
    assert any("RoiY1" in d for d in decisions) and any("RoiX2" in d for d in decisions)


def test_roi_pooling_float32_bin_end_is_the_float32_bins_reading():
    """RP-2's divergence: 29 rows into 11 bins. The page's last bin ends at row 29; ONNX Runtime's
    CPU EP computes ceil(11 * float32(29/11)) = 30. That is a formula of its own, not a rounding of
    the page's: ORT lies outside the fp32 allowance, and the ``float32-bins`` reading is ORT's
    output bit for bit."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 32, 32)).astype(np.float32)
    rois = np.array([0, 0, 0, 28, 28], dtype=np.float32).reshape(1, 1, 1, 5)
    desc = roi_pooling(x.shape, 1, (11, 11))
    arrays = {"InputTensor": x, "ROITensor": rois}
    expected = execute_with_bounds(desc, arrays)
    ort = ort_oracle.max_roi_pool(x, rois.reshape(1, 5), pooled_shape=(11, 11), spatial_scale=1.0)
    assert outside(expected, ort).any()
    np.testing.assert_array_equal(execute_reading(desc, arrays, ["float32-bins"]).outputs["OutputTensor"], ort)


@st.composite
def roi_pooling_case(draw):
    h, w, c = draw(st.integers(1, 12)), draw(st.integers(1, 12)), draw(st.integers(1, 2))
    ph, pw, r = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 4))
    scale = draw(st.sampled_from([1.0, 0.5, 0.1, 1 / 3, 0.7, 1 / 16]))
    x = feature_map(draw, (2, c, h, w), np.float32, 300.0)
    x1, y1 = uniform(draw, -2, w + 1, r, "x1"), uniform(draw, -2, h + 1, r, "y1")
    batch = np.array(draw(st.lists(st.integers(0, 1), min_size=r, max_size=r), label="batch"))
    rois = np.stack([batch, x1, y1, x1 + uniform(draw, 0, w, r, "width"), y1 + uniform(draw, 0, h, r, "height")], 1)
    rois[:, 1:] /= scale
    if draw(st.booleans()):  # regions whose scaled corners sit near halves
        nudge = np.array(draw(st.lists(st.sampled_from([-1e-6, 0, 1e-6]), min_size=4 * r, max_size=4 * r),
                              label="nudge")).reshape(r, 4)
        rois[:, 1:] = (np.round(rois[:, 1:] * scale * 2) / 2 + nudge) / scale
    rois[:, 3] = np.maximum(rois[:, 3], rois[:, 1])
    rois[:, 4] = np.maximum(rois[:, 4], rois[:, 2])
    return roi_pooling(x.shape, r, (ph, pw), scale=scale), x, rois.astype(np.float32).reshape(1, 1, r, 5)


@settings(max_examples=examples(200), deadline=None)
@given(case=roi_pooling_case())
def test_roi_pooling_float32_kernel_lies_within_the_alternatives(case):
    """Hidden-case style: decisions computed in float32 (a float32 product, rounded to even)
    differ from the exact ones only where the reference offers an alternative."""
    desc, x, rois = case
    expected = execute_with_bounds(desc, {"InputTensor": x, "ROITensor": rois})
    kernel = lp.roi_pooling(desc, x, rois)
    assert not outside(expected, kernel).any()


def test_arithmetic_is_exact_where_the_type_holds_every_result():
    """No rounding charged for exact operations (integers, halves), one ulp once a result is not
    representable; exact arithmetic charges nothing."""
    ar = Arithmetic(np.dtype(np.float32))
    three = ar.const(3.0)
    assert ar.div(ar.const(6.0), three).e == 0
    third = ar.div(ar.const(1.0), three)
    assert 0 < third.e <= np.spacing(np.float32(1 / 3))
    assert ar.mul(ar.const(0.0), third).e == 0  # an exact zero makes an exact product
    assert Arithmetic(None).div(ar.const(1.0), three).e == 0


_ROUNDING_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(
    [0.0, -0.0, 65504.0, 65520.0, 3.4028234663852886e38, 3.4028235677973366e38, 2.0**-149, 2.0**-150, 2.0**-24]))


@settings(max_examples=examples(300))
@given(values=st.lists(st.tuples(_ROUNDING_VALUES, st.floats(0, 1e40) | st.just(0.0), st.booleans()),
                       min_size=1, max_size=6),
       dtype=st.sampled_from([np.float32, np.float16]))
def test_one_rounding_is_the_spacing_unless_exact_operands_give_a_representable_result(values, dtype):
    """An operation's own rounding, as every operation charges it: 0 where its operands are exact
    and the exact result is a value of the type, else the spacing of the type at |result| plus
    the propagated error (infinite past the type's range), worked out here element by element on
    Python floats, for NaN, infinities, values past the range and subnormals alike; ``const`` is
    an exact operand with nothing propagated; ``spacing`` and ``representable`` say the same."""
    ar = Arithmetic(np.dtype(dtype))

    def held(r: float) -> bool:
        with np.errstate(over="ignore"):
            return math.isfinite(r) and float(dtype(r)) == r

    def gap(m: float) -> float:
        with np.errstate(over="ignore", invalid="ignore"):
            step = float(np.spacing(dtype(abs(m))))
        return step if math.isfinite(step) else math.inf

    result, propagated, exact = (np.array(c) for c in zip(*values))
    rows = list(zip(result.tolist(), propagated.tolist(), exact.tolist()))
    got = ar._rounding(result, propagated, exact)
    assert got.dtype == np.float64
    assert got.tolist() == [0.0 if x and held(r) else gap(abs(r) + p) for r, p, x in rows]
    assert ar.const(result).e.tolist() == [0.0 if held(r) else gap(r) for r, _, _ in rows]
    assert ar.representable(result).tolist() == [held(r) for r, _, _ in rows]
    assert ar.spacing(result).tolist() == [gap(r) for r, _, _ in rows]
    assert not Arithmetic(None)._rounding(result, propagated, exact).any()


def test_zero_rois_stay_refused():
    """DECISIONS.md RA-11: DirectML refuses a size of 0 in any dimension, so a desc with
    NumROIs = 0 does not exist; the reference names the field (a model run reports such a node
    as an empty output without a DML operator, as ORT's DML EP runs it)."""
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(DescError, match="ROITensor"):
        desc = roi_align1(x.shape, (0, 4), (2, 2))
        execute_with_bounds(desc, tensors(x, np.zeros((0, 4), np.float32)))


@st.composite
def linear_plane(draw):
    """A two-channel plane (values to a few hundred) and 4 x 5 sample coordinates around it."""
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    plane = draw(arrays(np.float32, (h, w, 2), elements=finite(np.float32, 300.0), fill=st.nothing()), label="plane")
    return plane, uniform(draw, -1, h, 4, "ys"), uniform(draw, -1, w, 5, "xs")


@settings(max_examples=examples(200), deadline=None)
@given(case=linear_plane(), error=st.sampled_from([0.0, 1e-6, 1e-3, 0.05, 0.3, 0.7, 2.0]), on_edges=st.booleans())
def test_linear_sample_bound_covers_every_coordinate_within_its_error(case, error, on_edges):
    """FP-2's core claim, without arithmetic: moving a LINEAR sample's coordinates anywhere within
    their errors moves its value by at most the sample bound ``e_x Gx + e_y Gy``, also when the
    move crosses into a neighbouring cell (coordinates on cell edges) or by pixels (large errors)."""
    import simple_roi_align

    from ep_testbed.reference.precision import Approx
    from ep_testbed.reference.roi_align_bounds import _along, _linear_bound

    plane, ys, xs = case
    h, w = plane.shape[:2]
    if on_edges:
        ys, xs = np.round(ys), np.round(xs)
    ey, ex = np.full(4, error), np.full(5, error)
    bound = _linear_bound(plane, _along(Approx(ys, ey), h), _along(Approx(xs, ex), w), 0.0, np.float32)
    chw = np.moveaxis(plane, -1, 0)
    # Every point kept strictly inside (-1, size), where it reads the input (RA-5): a move across
    # that edge is a knife edge, not this bound's business.
    tiny = 2.0**-20
    base = simple_roi_align.interpolate(chw, np.clip(ys, tiny - 1, h - tiny), np.clip(xs, tiny - 1, w - tiny),
                                        "LINEAR", 0.0)
    for dy, dx in [(-1, -1), (-1, 1), (1, -1), (1, 1), (0, 1), (1, 0), (-0.5, 0.25), (0.3, -0.9)]:
        moved = simple_roi_align.interpolate(chw, np.clip(ys + dy * ey, tiny - 1, h - tiny),
                                             np.clip(xs + dx * ex, tiny - 1, w - tiny), "LINEAR", 0.0)
        assert (np.abs(moved - base) <= np.moveaxis(bound, -1, 0) * (1 + 1e-6) + 1e-9).all()


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), error=st.sampled_from([0.0, 1e-3, 0.3, 0.7, 1.03, 1.6, 2.5, 6.0]),
       on_halves=st.booleans())
def test_nearest_range_holds_every_index_within_the_error(seed, error, on_halves):
    """FP-3's NEAREST knife edge, without arithmetic: wherever rounding moves a sample's coordinates
    within their errors, ``floor(c + 0.5)`` picks a value inside the sample's ``[low, high]``; an
    error over one pixel reaches three indices or more, the middle ones included. Up to
    ``MAX_NEAREST_PAIRS`` candidate pairs the range is exactly the candidates' extremes."""
    from ep_testbed.reference.precision import Approx
    from ep_testbed.reference.roi_align_bounds import MAX_NEAREST_PAIRS, _nearest_samples

    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(1, 9)), int(rng.integers(1, 30))
    plane = (rng.standard_normal((h, w, 2)) * 100).astype(np.float16)
    ys, xs = rng.uniform(-1, h, 3), rng.uniform(-1, w, 4)
    if on_halves:
        ys, xs = np.round(ys) + 0.5, np.round(xs) + 0.5
    ey, ex = np.full(3, error / 3), np.full(4, error)
    _, _, low, high, _ = _nearest_samples(plane, Approx(ys, ey), Approx(xs, ex), Arithmetic(None), 0.0)
    offsets = np.linspace(-1, 1, 41)
    picks = [[np.clip(np.floor(c + 0.5 + t * e), 0, size - 1).astype(int) for t in offsets]
             for c, e, size in ((ys, ey, h), (xs, ex, w))]
    seen_low, seen_high = np.full(low.shape, np.inf), np.full(low.shape, -np.inf)
    for iy in picks[0]:
        for ix in picks[1]:
            value = plane[iy[:, None], ix[None, :]].astype(np.float64)
            assert ((low <= value) & (value <= high)).all()
            seen_low, seen_high = np.minimum(seen_low, value), np.maximum(seen_high, value)
    spans = [max(len(set(int(p[i]) for p in axis)) for i in range(len(axis[0]))) for axis in picks]
    if spans[0] * spans[1] <= MAX_NEAREST_PAIRS:
        np.testing.assert_array_equal(low, seen_low)
        np.testing.assert_array_equal(high, seen_high)


def test_float16_nearest_index_two_pixels_over_is_in_the_range():
    """A float16 kernel's NEAREST index that lies two indices above the lowest one rounding can
    reach. FLOAT16 input, ROI [264.8, 0.9326, 274.2, 14.58] (float16 264.75 ... 274.25), scale
    0.7, InputPixelOffset 0.5, OutputPixelOffset 0, 2x2 samples stretched to the corners: the
    last X sample is exactly 274.25 * 0.7 - 0.5 = 191.475 (index 191), which float16 computes
    as 191.5 (scale 0.7002, products near 192 spaced 0.125; index 192). Its error bound exceeds
    one pixel, so rounding reaches indices 190 to 193: the range once held only 190 and 193 and
    missed the float16 kernel's 192. The second Y sample (9.7) lies outside the 2-row input."""
    x = np.zeros((1, 1, 2, 207), np.float16)
    x[0, 0, 0, [184, 185, 190, 191, 192, 193]] = [42, -18.5, 0, 456, -200, 0]
    rois = np.array([[264.8, 0.9326, 274.2, 14.58]], np.float16)
    desc = roi_align1(x.shape, rois.shape, (1, 1), dtype="FLOAT16", scale=(0.7, 0.7), offsets=(0.5, 0.0),
                      interpolation="NEAREST_NEIGHBOR", samples=(2, 2), corners=True)
    assert Fraction(float(rois[0, 2])) * _fraction(np.float32(0.7)) - Fraction(1, 2) < Fraction(383, 2)  # 191.475
    xs, _ = lp.axis_coordinates(np.float16, rois[0, 0], rois[0, 2], 0.7, 1, 2, 2, 0.5, 0.0, True, "page")
    ys, _ = lp.axis_coordinates(np.float16, rois[0, 1], rois[0, 3], 0.7, 1, 2, 2, 0.5, 0.0, True, "page")
    assert xs[1] == 191.5 and ys[1] > 2                                        # index 192; outside
    expected = execute_with_bounds(desc, tensors(x, rois), "tensor-type")
    kernel = lp.roi_align(desc, x, rois, np.zeros(1), ct=np.float16)
    exact = expected.outputs["OutputTensor"]
    assert exact.item() == np.float16((-18.5 + 456) / 4)                       # indices 185 and 191
    assert kernel.item() == np.float16((-18.5 - 200) / 4)                      # indices 185 and 192
    low, high = expected.alternatives["OutputTensor"]
    assert low.item() == kernel.item() and high.item() == np.float16((42 + 456) / 4)
    assert not outside(expected, kernel).any()
    assert any("nearest index of sample X" in k.decision for k in expected.knife_edges)


def test_slopes_near_flt_max_keep_a_finite_bound():
    """Taps 2**127 and -FLT_MAX side by side differ by more than FLT_MAX: taken in float32 the
    slope is infinite and the element is left without a bound. A sample the page puts exactly on
    the row below them (y = 4, within float32 rounding of that cell edge) is 0; ORT's CPU EP,
    which computes the coordinate in another float32 order, lands just above it and reads a
    sliver of those taps (a fuzzed case, shrunk). Taken in float64 the slope stays finite and
    ORT's result lies within the fp32 bound."""
    x = np.zeros((1, 1, 6, 16), np.float32)
    x[0, 0, 3, 4], x[0, 0, 3, 5] = 2.0**127, np.finfo(np.float32).min
    rois = np.array([[0, 2.75, 8.875, 6.25]], np.float32)
    desc = roi_align1(x.shape, rois.shape, (3, 1), samples=(1, 1))
    expected = execute_with_bounds(desc, tensors(x, rois))
    bound = expected.bounds["OutputTensor"].ravel()
    assert expected.outputs["OutputTensor"].ravel()[1] == 0
    assert np.isfinite(bound).all() and bound[1] > 0
    ort = ort_oracle.roi_align(x, rois - np.float32(0.5), np.zeros(1), output_height=3, output_width=1,
                               sampling_ratio=1, spatial_scale=1.0, opset=10)
    assert ort.ravel()[1] != 0
    assert not outside(expected, ort).any()
