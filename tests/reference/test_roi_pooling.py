"""ROI_POOLING reference: ORT's golden test, hand-worked bins, and the known float-bin divergence."""

from __future__ import annotations

import numpy as np
import ort_oracle
import pytest
from descs_for_tests import roi_pooling

from ep_testbed.reference import execute, execute_reading
from ep_testbed.reference.roi_pooling import bin_bounds, round_half_away_from_zero, scaled_region

RNG = np.random.default_rng(2024)


def run(desc, x, rois):
    return execute(desc, {"InputTensor": x, "ROITensor": rois.reshape(desc.roi_tensor.sizes)})["OutputTensor"]


def test_ort_maxroipool_golden():
    """RP-3: ORT's RoIPoolTest.MaxRoiPool (max_roi_pool_op_test.cc; runs on the DML EP): X[i] = i/10
    on (1, 3, 6, 6), three ROIs [0, 1, 1, 2, 3], pooled 1x1 -> 2.0, 5.6, 9.2 per ROI."""
    x = (np.arange(108, dtype=np.float32) / 10).reshape(1, 3, 6, 6)
    rois = np.array([[0, 1, 1, 2, 3]] * 3, dtype=np.float32)
    y = run(roi_pooling(x.shape, 3, (1, 1)), x, rois)
    np.testing.assert_allclose(y.ravel(), [2.0, 5.6, 9.2] * 3, rtol=1e-6)


def test_bins_hand_worked():
    """Region rows 0..4 (RegionHeight 5) in 2 bins: Start = (0*5)/2 = 0, End = (1*5+1)/2 = 3;
    Start = (1*5)/2 = 2, End = (2*5+1)/2 = 5: the bins [0, 3) and [2, 5) overlap on row 2."""
    assert bin_bounds(0, 5, 2, 0, 100) == (0, 3)
    assert bin_bounds(1, 5, 2, 0, 100) == (2, 5)
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5, 1)
    y = run(roi_pooling(x.shape, 1, (2, 1)), x, np.array([[0, 0, 0, 0, 4]], dtype=np.float32))
    np.testing.assert_array_equal(y.ravel(), [2, 4])


def test_round_halves_to_even():
    """RP-1: halves go to the even neighbour (HLSL's round, DirectML's own kernel: the observation
    is tests/eps/test_dml_wine_observed.py::test_directml_rounds_roi_pooling_halves_to_even)."""
    x = np.arange(72, dtype=np.float32).reshape(2, 1, 6, 6)
    # x1 = round(0.5) = 0, x2 = round(2.5) = 2: columns 0..2 of row 0, whose max is 2
    assert run(roi_pooling(x.shape, 1, (1, 1)), x, np.array([[0, 0.5, 0, 2.5, 0]], np.float32)).item() == 2.0
    assert scaled_region(np.array([0.5, 1.5, 2.5, 3.5], np.float32), 1.0) == (0, 2, 2, 4)


def test_the_half_away_reading_is_c_roundf():
    """The ``half-away-rounding`` reading (RP-1): C's roundf, what ONNX Runtime's CPU EP computes
    (std::round in RoiPool<float>::Compute, onnxruntime/core/providers/cpu/nn/roi_pool.cc)."""
    np.testing.assert_array_equal(round_half_away_from_zero(np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49])),
                                  [1, 2, 3, -1, -2, 0])
    x = np.arange(72, dtype=np.float32).reshape(2, 1, 6, 6)
    desc, rois = roi_pooling(x.shape, 1, (1, 1)), np.array([[0, 0.5, 0, 2.5, 0]], np.float32)
    arrays = {"InputTensor": x, "ROITensor": rois.reshape(1, 1, 1, 5)}
    assert execute_reading(desc, arrays, ["half-away-rounding"]).outputs["OutputTensor"].item() == 3.0
    ort = ort_oracle.max_roi_pool(x, rois, pooled_shape=(1, 1), spatial_scale=1.0)
    assert ort.item() == 3.0


def test_scale_product_is_float32():
    """FP-1: 0.3 * 5 is 1.5 in float32 but 1.4999999999999998 in float64; the float32 product
    rounds to 2."""
    assert scaled_region(np.array([0.3, 0.3, 0.3, 0.3], np.float32), 5.0)[0] == 2


def test_clamped_and_empty_bins():
    """RP-4: ROI [-3, -3, 1, 1] on a 6x6 ramp, 2x2 bins: region 5x5 from -3; bin rows [-3, 0)
    clamps empty -> 0; [-1, 2) -> [0, 2). Only the last bin sees input: max of X[0:2, 0:2] = 7."""
    x = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    y = run(roi_pooling(x.shape, 2, (2, 2)), x, np.array([[0, -3, -3, 1, 1], [0, 10, 10, 12, 12]], np.float32))
    np.testing.assert_array_equal(y[0].ravel(), [0, 0, 0, 7])
    np.testing.assert_array_equal(y[1], 0)


def test_nan_in_bin():
    """NAN-1: a NaN in a bin is ignored; a bin of NaN only is NaN."""
    x = np.array([[np.nan, 1], [np.nan, np.nan]], dtype=np.float32).reshape(1, 1, 2, 2)
    y = run(roi_pooling(x.shape, 1, (2, 1)), x, np.array([[0, 0, 0, 1, 1]], np.float32))
    assert y[0, 0, 0, 0] == 1 and np.isnan(y[0, 0, 1, 0])


def test_integer_bins_differ_from_ort_float_bins():
    """RP-2: ORT computes bins in float32: RegionHeight 29 in 11 bins ends the last bin at
    ceil(11 * (29/11)f) = 30, the page's integer formula at 29. On X = arange(33) the last output
    is 29 on ORT and 28 here; the other ten agree."""
    x = np.arange(33, dtype=np.float32).reshape(1, 1, 33, 1)
    rois = np.array([[0, 0, 0, 0, 28]], dtype=np.float32)
    ours = run(roi_pooling(x.shape, 1, (11, 1)), x, rois).ravel()
    ort = ort_oracle.max_roi_pool(x, rois, pooled_shape=(11, 1), spatial_scale=1.0).ravel()
    np.testing.assert_array_equal(ours[:10], ort[:10])
    assert (ours[10], ort[10]) == (28.0, 29.0)


def float_bins_agree(region, pooled):
    """True when ORT's float32 bin arithmetic gives the page's integer bins for this size."""
    size = np.float32(region) / np.float32(pooled)
    for i in range(pooled):
        start = int(np.floor(np.float32(i) * size))
        end = int(np.ceil(np.float32(i + 1) * size))
        if (start, end) != ((i * region) // pooled, ((i + 1) * region + pooled - 1) // pooled):
            return False
    return True


def test_agrees_with_onnxruntime_cpu():
    """MaxRoiPool on random ROIs (partly outside the input, both batches, scales 1 and 1/4),
    restricted to region sizes where ORT's float bins equal the integer ones (RP-2) and to
    scaled coordinates away from .5 rounding ties: identical outputs."""
    rng = np.random.default_rng(11)
    compared = 0
    for _ in range(80):
        h, w, ph, pw = int(rng.integers(3, 14)), int(rng.integers(3, 14)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
        scale = float(rng.choice([1.0, 0.25]))
        x = rng.standard_normal((2, 2, h, w)).astype(np.float32)
        x1, y1 = rng.integers(-3, w), rng.integers(-3, h)
        x2, y2 = x1 + rng.integers(0, w), y1 + rng.integers(0, h)
        corners = (np.array([x1, y1, x2, y2]) + rng.uniform(-0.3, 0.3, 4)) / scale
        roi = np.array([[int(rng.integers(0, 2)), *corners]], dtype=np.float32)
        sx1, sy1, sx2, sy2 = scaled_region(roi[0, 1:], scale)
        if roi[0, 3] < roi[0, 1] or roi[0, 4] < roi[0, 2]:
            continue  # inverted by the jitter: refused (RP-5)
        if abs(np.modf(np.abs(roi[0, 1:] * np.float32(scale)))[0] - 0.5).min() < 1e-3:
            continue  # a rounding tie: covered by test_round_half_away_from_zero
        if sx2 < sx1 or sy2 < sy1 or not (float_bins_agree(sy2 - sy1 + 1, ph) and float_bins_agree(sx2 - sx1 + 1, pw)):
            continue
        ours = run(roi_pooling(x.shape, 1, (ph, pw), scale=scale), x, roi)
        ort = ort_oracle.max_roi_pool(x, roi, pooled_shape=(ph, pw), spatial_scale=scale)
        np.testing.assert_array_equal(ours, ort)
        compared += 1
    assert compared >= 40


def test_fp16():
    """FLOAT16 selects exactly: the fp16 result is the fp32 result of the same values."""
    x = RNG.standard_normal((1, 2, 7, 7)).astype(np.float16)
    rois = np.array([[0, 1, 2, 5, 6], [0, 0, 0, 6, 6]], dtype=np.float16)
    y16 = run(roi_pooling(x.shape, 2, (3, 2), dtype="FLOAT16"), x, rois)
    y32 = run(roi_pooling(x.shape, 2, (3, 2)), x.astype(np.float32), rois.astype(np.float32))
    np.testing.assert_array_equal(y16.astype(np.float32), y32)


@pytest.mark.parametrize("roi", [[0, 2, 3, 2, 3], [1, 0, 0, 0, 0]])
def test_one_pixel_region(roi):
    """x1 = x2, y1 = y2: RegionHeight = RegionWidth = 1, every bin is that one pixel."""
    x = RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)
    y = run(roi_pooling(x.shape, 1, (2, 3)), x, np.array([roi], np.float32))
    b, px, py = roi[0], roi[1], roi[2]
    np.testing.assert_array_equal(y[0], np.broadcast_to(x[b, :, py, px][:, None, None], (3, 2, 3)))
