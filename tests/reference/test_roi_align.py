"""ROI_ALIGN1 / ROI_ALIGN reference: golden data from public tests, hand-worked cases from the
page's pseudo-code, properties, and agreement with ONNX Runtime's CPU EP where ONNX can say the
same thing. Each test names the DECISIONS.md entry it pins."""

from __future__ import annotations

import numpy as np
import ort_oracle
import pytest
from descs_for_tests import roi_align1
from dml_observed_values import DML_SINGLE_SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis_profiles import examples

from ep_testbed.graphs.backend_cases import raw_cases as onnx_backend_cases
from ep_testbed.reference import execute, execute_reading
from ep_testbed.reference.roi_align import samples_per_output

RNG = np.random.default_rng(1234)


def run(desc, x, rois, batch=None):
    n = desc.roi_tensor.sizes[-2]
    if batch is None:
        batch = np.zeros(n, dtype=np.uint32)
    batch = batch.reshape(desc.batch_indices_tensor.sizes)
    return execute(desc, {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": batch})["OutputTensor"]


# --- golden data from ONNX Runtime's and ONNX's own tests -------------------------------------

# onnxruntime/test/providers/cpu/object_detection/roialign_test.cc, RoiAlignTest.AvgModePositive:
# X = arange(75) as (1, 3, 5, 5), these ROIs, spatial_scale 1/16, 3x4 output, sampling_ratio 2.
ORT_AVG_ROIS = np.array([7, 5, 7, 5, -15, -15, -15, -15, -10, 21, -10, 21, 13, 8, 13, 8, -14, 19, -14, 19],
                        dtype=np.float32).reshape(5, 4)
ORT_AVG_X = np.arange(75, dtype=np.float32).reshape(1, 3, 5, 5)


def test_ort_dml_correct_outputs_golden():
    """RA-5: ORT's test keeps the outputs of the DML EP for RoiAlign-16 output_half_pixel in a
    comment ("DML has the correct outputs"); the EP builds InputPixelOffset 0, OutputPixelOffset
    -0.5, Min = Max = 2. Per ROI, each channel plane is constant: 2/27/52, 0/25/50,
    6.5625/31.5625/56.5625, 3.3125/28.3125/53.3125, 5.9375/30.9375/55.9375."""
    desc = roi_align1((1, 3, 5, 5), (5, 4), (3, 4), scale=(1 / 16, 1 / 16), offsets=(0.0, -0.5))
    y = run(desc, ORT_AVG_X, ORT_AVG_ROIS)
    per_roi = np.array([2.0, 0.0, 6.5625, 3.3125, 5.9375])
    expected = per_roi[:, None] + 25.0 * np.arange(3)[None, :]
    np.testing.assert_allclose(y, np.broadcast_to(expected[:, :, None, None], y.shape), atol=1e-5)


def test_ort_avg_mode_positive_half_pixel_golden():
    """RA-5: ORT's AvgModePositive_half_pixel (runs on the DML EP, not skipped) expects, per ROI,
    planes 0/25/50, then zeros, zeros, 0.3125/25.3125/50.3125, zeros."""
    desc = roi_align1((1, 3, 5, 5), (5, 4), (3, 4), scale=(1 / 16, 1 / 16), offsets=(0.5, -0.5))
    y = run(desc, ORT_AVG_X, ORT_AVG_ROIS)
    expected = np.zeros((5, 3))
    expected[0] = [0, 25, 50]
    expected[3] = [0.3125, 25.3125, 50.3125]
    np.testing.assert_allclose(y, np.broadcast_to(expected[:, :, None, None], y.shape), atol=1e-5)


def onnx_backend_case(name):
    case = onnx_backend_cases()[name]
    inputs, outputs = case.data_sets[0]
    return case, inputs, outputs[0]


def test_onnx_aligned_true_golden():
    """RA-7: ONNX's test_roialign_aligned_true (half_pixel, sampling_ratio 2) is the DML desc
    InputPixelOffset 0.5, OutputPixelOffset -0.5, Min = Max = 2 (expected values printed to 4 digits)."""
    _, (x, rois, batch), expected = onnx_backend_case("test_roialign_aligned_true")
    desc = roi_align1(x.shape, rois.shape, expected.shape[2:], samples=(2, 2))
    np.testing.assert_allclose(run(desc, x, rois, batch.astype(np.uint32)), expected, atol=1e-4)


def test_reproduces_ort_dml_skip_message():
    """RA-2: ORT skips RoiAlignTest.OnnxTest on DML with "The difference between expected[i] and
    output[i] is 0.051382988691329956". Its data is ONNX's test_roialign_aligned_false; the EP
    runs that opset-10 node as InputPixelOffset 0.5. With exclusive sample loops the first element
    off by more than ORT's 1e-4 tolerance is off by exactly that much; inclusive loops (n + 1
    samples) give another number."""
    _, (x, rois, batch), expected = onnx_backend_case("test_roialign_aligned_false")
    desc = roi_align1(x.shape, rois.shape, expected.shape[2:], samples=(2, 2), offsets=(0.5, -0.5))
    y = run(desc, x, rois, batch.astype(np.uint32)).ravel()
    diff = np.abs(expected.ravel().astype(np.float32) - y)
    first = np.flatnonzero(diff > 1e-4)[0]
    assert diff[first] == pytest.approx(0.051382988691329956, abs=2e-6)


# --- hand-worked from the pseudo-code ---------------------------------------------------------

def test_nearest_neighbor_hand_worked():
    """ROI [0, 0, 4, 4], 2x2 output, one sample each, offsets 0.5 / -0.5: sample k sits at
    (k + 0.5) * 4/2 + 0 - 0.5 = 0.5 and 2.5; nearest (halves up) is 1 and 3."""
    x = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    desc = roi_align1((1, 1, 6, 6), (1, 4), (2, 2), interpolation="NEAREST_NEIGHBOR", samples=(1, 1))
    y = run(desc, x, np.array([[0, 0, 4, 4]], dtype=np.float32))
    np.testing.assert_array_equal(y[0, 0], x[0, 0][np.ix_([1, 3], [1, 3])])


def test_linear_hand_worked():
    """ROI [0, 0, 2, 2] on a 3x3 ramp x + 10 y, one 1x1 output, one sample: the sample is at
    (0 + 0.5) * 2 - 0.5 = 0.5 per axis; bilinear on a linear ramp gives 0.5 + 10 * 0.5 = 5.5."""
    x = (np.arange(3)[None, :] + 10 * np.arange(3)[:, None]).astype(np.float32).reshape(1, 1, 3, 3)
    desc = roi_align1((1, 1, 3, 3), (1, 4), (1, 1), samples=(1, 1))
    assert run(desc, x, np.array([[0, 0, 2, 2]], dtype=np.float32))[0, 0, 0, 0] == pytest.approx(5.5)


def test_empty_region_reads_one_point():
    """RA-10: an empty region [2.5, 1.5, 2.5, 1.5] puts every sample at (2.5 - 0.5, 1.5 - 0.5),
    a pixel centre, so every output is X[1, 2]."""
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    desc = roi_align1((1, 2, 4, 4), (1, 4), (3, 2), samples=(1, 4))
    y = run(desc, x, np.array([[2.5, 1.5, 2.5, 1.5]], dtype=np.float32))
    np.testing.assert_allclose(y[0], np.broadcast_to(x[0, :, 1, 2][:, None, None], (2, 3, 2)), rtol=1e-6)


def test_inverted_region_is_mirrored():
    """RA-10: [4, 4, 0, 0] samples [0, 0, 4, 4]'s points in reverse order along both axes, so with
    a fixed sample count the output is the flipped output of the upright region."""
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    desc = roi_align1((1, 2, 5, 5), (2, 4), (3, 4), samples=(2, 2))
    y = run(desc, x, np.array([[0, 0, 4, 4], [4, 4, 0, 0]], dtype=np.float32))
    np.testing.assert_allclose(y[1], y[0][:, ::-1, ::-1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y[1], ort_oracle.roi_align(
        x, np.array([[4, 4, 0, 0]], np.float32), np.zeros(1), output_height=3, output_width=4,
        sampling_ratio=2, spatial_scale=1.0)[0], atol=1e-5)


def test_out_of_bounds_value():
    """RA-5: a region far outside the input reads OutOfBoundsInputValue at every sample, so both
    reductions give exactly that value."""
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    for reduction in ("AVERAGE", "MAX"):
        desc = roi_align1((1, 1, 4, 4), (1, 4), (2, 2), oob=7.5, reduction=reduction)
        y = run(desc, x, np.array([[10, 10, 14, 12]], dtype=np.float32))
        np.testing.assert_array_equal(y, 7.5)


@pytest.mark.parametrize("oob", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("interpolation", ["LINEAR", "NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("reduction", ["AVERAGE", "MAX"])
def test_a_non_finite_out_of_bounds_value_reaches_only_elements_with_a_sample_outside(oob, interpolation,
                                                                                        reduction):
    """RA-5: OutOfBoundsInputValue is what a sample outside the input reads, as a whole sample.
    Along X the samples of the three output elements lie at -0.5, 0.5 | 1.5, 2.5 | 3.5, 4.5 on a
    4-wide input: the first two elements never read the value, even an infinite or NaN one, and
    equal the same desc with a finite value bit for bit; the third has one sample outside (x = 4.5)."""
    x = (np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) - 5) / 8
    rois = np.array([[-0.5, 0, 5.5, 4]], dtype=np.float32)
    y = run(roi_align1((1, 1, 4, 4), (1, 4), (2, 3), oob=oob, interpolation=interpolation, reduction=reduction),
            x, rois)
    finite = run(roi_align1((1, 1, 4, 4), (1, 4), (2, 3), oob=0.0, interpolation=interpolation, reduction=reduction),
                 x, rois)
    np.testing.assert_array_equal(y[..., :2], finite[..., :2])
    if reduction == "MAX" and oob == -np.inf:
        np.testing.assert_array_equal(y[..., 2], finite[..., 2])  # the sample inside is larger
    elif reduction == "MAX" and np.isnan(oob):
        np.testing.assert_array_equal(y[..., 2], finite[..., 2])  # NAN-1: a max ignores NaN
    else:
        np.testing.assert_array_equal(y[..., 2], oob)


def test_edge_band_clamps_to_edge_pixel():
    """RA-5: a point sample at x = -0.75 (within [-1, 0)) reads the edge column exactly, at
    x = -1.25 it reads OutOfBoundsInputValue."""
    x = RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)
    desc = roi_align1((1, 1, 3, 3), (2, 4), (1, 1), samples=(1, 1), offsets=(0.0, -0.5), oob=-9.0)
    y = run(desc, x, np.array([[-0.75, 1, -0.75, 1], [-1.25, 1, -1.25, 1]], dtype=np.float32))
    assert y[0, 0, 0, 0] == pytest.approx(x[0, 0, 1, 0])
    assert y[1, 0, 0, 0] == -9.0


def test_max_is_over_interpolated_samples():
    """RA-4: on an all -1 input with every sample on a pixel centre, each interpolated sample is
    -1, so DML MAX gives -1. ONNX Runtime's RoiAlign mode=max takes the max of the four weighted
    corner terms and gives -0.0 (ORT issue #6146): a divergence of exactly 1."""
    x = -np.ones((1, 1, 4, 4), dtype=np.float32)
    rois = np.array([[0, 0, 4, 4]], dtype=np.float32)
    desc = roi_align1((1, 1, 4, 4), (1, 4), (4, 4), reduction="MAX", samples=(1, 1))
    y = run(desc, x, rois)
    np.testing.assert_array_equal(y, -1.0)
    ort = ort_oracle.roi_align(x, rois, np.zeros(1), output_height=4, output_width=4, sampling_ratio=1,
                               spatial_scale=1.0, mode="max")
    assert np.abs(ort - y).max() == pytest.approx(1.0)


def test_max_starts_from_first_sample():
    """RA-4: with negative inputs a literal `outputValue = 0` start would give 0; MAX gives the
    largest (still negative) sample."""
    x = -(1 + RNG.random((1, 1, 4, 4))).astype(np.float32)
    desc = roi_align1((1, 1, 4, 4), (1, 4), (2, 2), reduction="MAX")
    assert (run(desc, x, np.array([[0, 0, 3, 3]], dtype=np.float32)) < -1).all()


def test_y_scale_uses_y_sizes():
    """RA-1: on a region four times wider than tall, the page's literal Y line would spread the Y
    samples over the X size; the reading with Y sizes agrees with ONNX Runtime (half_pixel)."""
    x = RNG.standard_normal((1, 1, 8, 8)).astype(np.float32)
    rois = np.array([[0, 2, 8, 4]], dtype=np.float32)
    desc = roi_align1((1, 1, 8, 8), (1, 4), (2, 2), samples=(2, 2))
    ort = ort_oracle.roi_align(x, rois, np.zeros(1), output_height=2, output_width=2, sampling_ratio=2, spatial_scale=1.0)
    np.testing.assert_allclose(run(desc, x, rois), ort, atol=1e-5)


def test_adaptive_sample_count_is_ceil():
    """RA-3: a fractional count rounds up, a negative one clamps to the minimum."""
    assert samples_per_output(5.0, 2, 1, 2**32 - 1) == 3
    assert samples_per_output(4.0, 2, 1, 2**32 - 1) == 2
    assert samples_per_output(5.0, 2, 1, 2) == 2
    assert samples_per_output(-6.0, 2, 2, 5) == 2
    assert samples_per_output(0.0, 2, 1, 5) == 1


def test_adaptive_mode_agrees_with_onnx_sampling_ratio_0():
    """RA-3: Min 1 / Max UINT32_MAX (what ORT's DML EP builds for sampling_ratio 0) equals
    ONNX's adaptive ceil(size / output) on regions of positive size."""
    x = RNG.standard_normal((1, 2, 12, 12)).astype(np.float32)
    rois = np.array([[0, 0, 11, 7], [1.5, 2.25, 9.75, 10.5], [3, 3, 4.5, 8]], dtype=np.float32)
    desc = roi_align1((1, 2, 12, 12), (3, 4), (3, 2), samples=(1, 2**32 - 1))
    ort = ort_oracle.roi_align(x, rois, np.zeros(3), output_height=3, output_width=2, sampling_ratio=0, spatial_scale=1.0)
    np.testing.assert_allclose(run(desc, x, rois), ort, atol=1e-5)


def tf_crop_and_resize(image, box, crop_h, crop_w):
    """TensorFlow's documented crop_and_resize sampling (boxes [y1, x1, y2, x2], normalized),
    bilinear, for boxes inside the image."""
    _, _, h, w = image.shape
    y1, x1, y2, x2 = box

    def coords(a1, a2, size, crop):
        if crop == 1:
            return np.array([0.5 * (a1 + a2) * (size - 1)])
        return a1 * (size - 1) + np.arange(crop) * (a2 - a1) * (size - 1) / (crop - 1)

    ys, xs = coords(y1, y2, h, crop_h), coords(x1, x2, w, crop_w)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1i, x1i = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    ly, lx = (ys - y0)[:, None], (xs - x0)[None, :]
    p = image[0].astype(np.float64)
    top = p[:, y0][:, :, x0] * (1 - lx) + p[:, y0][:, :, x1i] * lx
    bottom = p[:, y1i][:, :, x0] * (1 - lx) + p[:, y1i][:, :, x1i] * lx
    return top * (1 - ly) + bottom * ly


@pytest.mark.parametrize("crop", [(5, 3), (1, 4), (1, 1)])
def test_align_to_corners_is_tensorflow_crop_and_resize(crop):
    """RA-6: tensorflow-directml-plugin runs CropAndResize as ROI_ALIGN with
    AlignRegionsToCorners TRUE, SpatialScale (H-1, W-1), offsets 0, one sample; that must give
    TensorFlow's sampling (centre for a crop of 1)."""
    x = RNG.standard_normal((1, 2, 7, 9)).astype(np.float32)
    box_tf = (0.1, 0.2, 0.8, 0.65)  # y1, x1, y2, x2
    rois = np.array([[box_tf[1], box_tf[0], box_tf[3], box_tf[2]]], dtype=np.float32)
    desc = roi_align1((1, 2, 7, 9), (1, 4), crop, scale=(8.0, 6.0), offsets=(0.0, 0.0), samples=(1, 1), corners=True)
    expected = tf_crop_and_resize(x, rois[0][[1, 0, 3, 2]].astype(np.float64), *crop)
    np.testing.assert_allclose(run(desc, x, rois)[0], expected, rtol=1e-5, atol=1e-5)


def test_roi_align_is_roi_align1_with_fixed_offsets():
    """RA-7."""
    x = RNG.standard_normal((2, 3, 6, 7)).astype(np.float32)
    rois = RNG.uniform(-2, 8, (4, 4)).astype(np.float32)
    batch = np.array([0, 1, 1, 0], dtype=np.uint32)
    v0 = roi_align1((2, 3, 6, 7), (4, 4), (2, 3), samples=(1, 3), op="DML_OPERATOR_ROI_ALIGN", oob=0.5)
    v1 = roi_align1((2, 3, 6, 7), (4, 4), (2, 3), samples=(1, 3), offsets=(0.5, -0.5), oob=0.5)
    np.testing.assert_array_equal(run(v0, x, rois, batch), run(v1, x, rois, batch))


def test_separate_scales_equal_prescaled_rois():
    """SpatialScaleX != SpatialScaleY is the same as scaling the ROI columns (exact for powers of 2)."""
    x = RNG.standard_normal((1, 2, 9, 9)).astype(np.float32)
    rois = RNG.uniform(0, 16, (3, 4)).astype(np.float32)
    scaled = rois * np.array([0.5, 0.25, 0.5, 0.25], dtype=np.float32)
    a = roi_align1((1, 2, 9, 9), (3, 4), (2, 2), scale=(0.5, 0.25))
    b = roi_align1((1, 2, 9, 9), (3, 4), (2, 2), scale=(1.0, 1.0))
    np.testing.assert_array_equal(run(a, x, rois), run(b, x, scaled))


def test_fp16_rounds_once():
    """FP-1: an fp16 desc gives the float64 result rounded once to fp16, i.e. within half an fp16
    ulp of the fp32 desc's result on the same (fp16-exact) values."""
    x = (RNG.integers(-64, 64, (1, 2, 8, 8)) / 16).astype(np.float16)
    rois = (RNG.integers(0, 28, (4, 4)) / 4).astype(np.float16)
    d16 = roi_align1((1, 2, 8, 8), (4, 4), (3, 3), dtype="FLOAT16", samples=(3, 3))
    d32 = roi_align1((1, 2, 8, 8), (4, 4), (3, 3), samples=(3, 3))
    y16 = run(d16, x, rois).astype(np.float64)
    y32 = run(d32, x.astype(np.float32), rois.astype(np.float32)).astype(np.float64)
    half_ulp = np.spacing(np.abs(y32).astype(np.float16)).astype(np.float64) / 2
    assert (np.abs(y16 - y32) <= half_ulp + 1e-7).all()


def test_roi_and_batch_tensor_shapes_are_equivalent():
    """RA-8: {N,4}, {1,N,4}, {1,1,N,4} ROIs and {N}..{1,1,1,N} batch indices read the same rows."""
    x = RNG.standard_normal((2, 1, 5, 5)).astype(np.float32)
    rois = RNG.uniform(0, 5, (3, 4)).astype(np.float32)
    batch = np.array([1, 0, 1], dtype=np.uint64)
    results = []
    for rois_shape, batch_shape in [((3, 4), (3,)), ((1, 3, 4), (1, 3)), ((1, 1, 3, 4), (1, 1, 1, 3))]:
        desc = roi_align1((2, 1, 5, 5), rois_shape, (2, 2), batch_type="UINT64", batch_shape=batch_shape)
        results.append(run(desc, x, rois.reshape(rois_shape), batch))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


# --- agreement with ONNX Runtime's CPU EP on what ONNX can express ----------------------------

def random_case(rng, mode):
    n, c, h, w = 2, int(rng.integers(1, 4)), int(rng.integers(2, 13)), int(rng.integers(2, 13))
    r, oh, ow, sr = int(rng.integers(1, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    scale = float(rng.choice([1.0, 0.5, 0.25, 0.125]))
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    x1 = rng.uniform(-3, w + 1, r)
    y1 = rng.uniform(-3, h + 1, r)
    grow = 1.0 if mode == "output_half_pixel" else 0.0  # output_half_pixel: ORT clamps sizes < 1
    rois = np.stack([x1, y1, x1 + grow + rng.uniform(0, w, r), y1 + grow + rng.uniform(0, h, r)], 1) / scale
    return x, rois.astype(np.float32), rng.integers(0, n, r), (oh, ow), sr, scale


@pytest.mark.parametrize("mode,input_offset", [("half_pixel", 0.5), ("output_half_pixel", 0.0)])
def test_agrees_with_onnxruntime_cpu(mode, input_offset):
    """RoiAlign-16 avg with sampling_ratio k equals the DML desc {offset, -0.5, Min = Max = k,
    AVERAGE, LINEAR, OOB 0}, including ROIs partly or wholly outside the input, both batches."""
    rng = np.random.default_rng(7 if mode == "half_pixel" else 8)
    worst = 0.0
    for _ in range(60):
        x, rois, batch, (oh, ow), sr, scale = random_case(rng, mode)
        desc = roi_align1(x.shape, rois.shape, (oh, ow), scale=(scale, scale), offsets=(input_offset, -0.5),
                          samples=(sr, sr))
        ours = run(desc, x, rois, batch.astype(np.uint32))
        ort = ort_oracle.roi_align(x, rois, batch, output_height=oh, output_width=ow, sampling_ratio=sr,
                                   spatial_scale=scale, coordinate_transformation_mode=mode)
        worst = max(worst, float(np.abs(ours - ort).max()))
    assert worst < 1e-5, worst


def test_opset10_is_output_half_pixel_on_cpu_but_not_dml():
    """ORT's CPU EP computes RoiAlign-10 as output_half_pixel (RoiAlignBase in
    onnxruntime/core/providers/cpu/object_detection/roialign.h sets half_pixel only from a
    coordinate_transformation_mode attribute, which opset 10 lacks); ORT's DML EP builds
    InputPixelOffset 0.5 for it (the DmlOperatorRegionOfInterestAlign constructor in
    onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorRoiAlign.cpp
    treats the missing attribute as half_pixel). On a generic case the two differ by much more than
    rounding; the reference with offset 0 matches the CPU."""
    rng = np.random.default_rng(3)
    x, rois, batch, (oh, ow), sr, scale = random_case(rng, "output_half_pixel")
    ort10 = ort_oracle.roi_align(x, rois, batch, output_height=oh, output_width=ow, sampling_ratio=sr,
                                 spatial_scale=scale, opset=10)
    as_dml_ep = roi_align1(x.shape, rois.shape, (oh, ow), scale=(scale, scale), offsets=(0.5, -0.5), samples=(sr, sr))
    as_spec = roi_align1(x.shape, rois.shape, (oh, ow), scale=(scale, scale), offsets=(0.0, -0.5), samples=(sr, sr))
    np.testing.assert_allclose(run(as_spec, x, rois, batch.astype(np.uint32)), ort10, atol=1e-5)
    assert np.abs(run(as_dml_ep, x, rois, batch.astype(np.uint32)) - ort10).max() > 1e-2


# --- properties -------------------------------------------------------------------------------

@settings(max_examples=examples(40), deadline=None)
@given(h=st.integers(2, 9), w=st.integers(2, 9), oh=st.integers(1, 4), ow=st.integers(1, 4),
       n=st.integers(1, 3), value=st.floats(-8, 8, width=32), mode=st.sampled_from(["LINEAR", "NEAREST_NEIGHBOR"]),
       reduction=st.sampled_from(["AVERAGE", "MAX"]), data=st.data())
def test_constant_input_gives_constant_output(h, w, oh, ow, n, value, mode, reduction, data):
    """Every sample inside the input reads the constant, whatever the interpolation and reduction."""
    x = np.full((1, 2, h, w), value, dtype=np.float32)
    x1, y1 = data.draw(st.floats(0, w - 1), label="x1"), data.draw(st.floats(0, h - 1), label="y1")
    x2, y2 = data.draw(st.floats(x1, w - 1), label="x2"), data.draw(st.floats(y1, h - 1), label="y2")
    rois = np.array([[x1, y1, x2, y2]], dtype=np.float32)
    desc = roi_align1((1, 2, h, w), (1, 4), (oh, ow), interpolation=mode, reduction=reduction, samples=(n, n))
    y = run(desc, x, rois)
    assert y.shape == (1, 2, oh, ow)
    np.testing.assert_allclose(y, value, rtol=1e-6, atol=1e-6)


@settings(max_examples=examples(30), deadline=None)
@given(x=arrays(np.float32, (1, 1, 6, 6), elements=st.floats(-4, 4, width=32)),
       rois=arrays(np.float32, (2, 4), elements=st.floats(-1, 7, width=32, allow_subnormal=False)),
       k=st.sampled_from([0.5, 2.0, 4.0]))
def test_scale_invariance(x, rois, k):
    """ROIs times k with SpatialScale / k sample the same points (exact: k is a power of 2)."""
    a = roi_align1((1, 1, 6, 6), (2, 4), (2, 3), scale=(1.0, 1.0), samples=(1, 3))
    b = roi_align1((1, 1, 6, 6), (2, 4), (2, 3), scale=(1 / k, 1 / k), samples=(1, 3))
    np.testing.assert_array_equal(run(a, x, rois), run(b, x, (rois * k).astype(np.float32)))


def single_samples(points, height=4, width=4):
    """ROI_ALIGN1 with one sample per region, at each (y, x) of ``points`` (empty regions, no
    pixel offsets): the desc and its ROI rows."""
    rois = np.array([[x, y, x, y] for y, x in points], dtype=np.float32)
    desc = roi_align1((1, 1, height, width), (len(points), 4), (1, 1), offsets=(0.0, -0.5), samples=(1, 1))
    return desc, rois


@pytest.mark.parametrize("image, points, directml", DML_SINGLE_SAMPLES)
def test_open_range_and_lerp_between_clamped_taps(image, points, directml):
    """RA-5: each sample is ``a + t * (b - a)`` along Y, then X, between taps clamped to the input,
    so an infinite tap makes NaN (``inf - inf``, ``0 * inf``) unless both taps of an axis are one
    finite pixel; the primary reading equals DirectML.dll's values at every probe, and the
    ``weighted-interpolation`` reading (ONNX Runtime's) differs from them at some."""
    desc, rois = single_samples(points)
    x = np.array(image, dtype=np.float32).reshape(1, 1, 4, 4)
    with np.errstate(invalid="ignore"):
        got = run(desc, x, rois).ravel()
        weighted = execute_reading(desc, {"InputTensor": x, "ROITensor": rois,
                                          "BatchIndicesTensor": np.zeros(len(points), np.uint32)},
                                   ["weighted-interpolation"]).outputs["OutputTensor"].ravel()
    np.testing.assert_array_equal(got, np.array(directml, dtype=np.float32))
    if np.isinf(x).any():
        assert not np.array_equal(weighted, got, equal_nan=True)


def test_samples_on_minus_one_and_on_the_size_read_out_of_bounds():
    """RA-5: a sample exactly at -1 or exactly at the input's width (height) reads
    OutOfBoundsInputValue; 1/1024 inside, the edge pixel (DirectML.dll 1.15.4, observed:
    tests/eps/test_dml_wine_observed.py::test_directml_reads_the_input_on_the_open_range); the
    ``closed-edge`` reading reads the edge pixel at -1 and at the size."""
    e = 2.0 ** -10
    x = (np.arange(16, dtype=np.float32) + 1).reshape(1, 1, 4, 4)
    desc, rois = single_samples([(-1.0, 1.0), (4.0, 1.0), (-1.0 + e, 1.0), (4.0 - e, 1.0)])
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(4, np.uint32)}
    np.testing.assert_array_equal(run(desc, x, rois).ravel(), [0.0, 0.0, 2.0, 14.0])
    closed = execute_reading(desc, arrays, ["closed-edge"]).outputs["OutputTensor"].ravel()
    np.testing.assert_array_equal(closed, [2.0, 14.0, 2.0, 14.0])
