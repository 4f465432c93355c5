"""``diverges``: ONNX can express the desc but ONNX Runtime computes something else. Each case
is run on ORT's CPU EP and the measured difference from the reference is asserted."""

from __future__ import annotations

import numpy as np
import pytest
from graphs_testkit import max_abs_error, run_cpu

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import UINT32_MAX, Case
from ep_testbed.graphs.cases.max_pooling2 import max_pooling2_desc
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.graphs.cases.roi_pooling import roi_pooling_desc
from ep_testbed.reference import execute


def _measure(desc, tensors):
    mapping = to_onnx(desc)
    expected = execute(desc, tensors)
    actual = run_cpu(mapping, tensors)
    return mapping, expected, actual


def test_adaptive_max_maps_to_onnx_max_and_differs():
    desc = roi_align_desc(True, reduction="MAX", samples=(1, UINT32_MAX))
    tensors = Case(id="div/max", op=desc.TYPE, desc=desc, seed=0).inputs()
    mapping, expected, actual = _measure(desc, tensors)
    assert [f.kind for f in mapping.flags if f.field == "ReductionFunction"] == ["diverges"]
    assert [n.op_type for n in mapping.model.graph.node if n.name in mapping.op_nodes] == ["RoiAlign"]
    err = max_abs_error(expected["OutputTensor"], actual["OutputTensor"])
    assert err > 0.5, err   # measured 3.08 on this input (weighted-corner max is near 0 for mixed signs)


def test_all_minus_one_input_max_is_minus_zero_in_onnx():
    """ORT issue #6146 (https://github.com/microsoft/onnxruntime/issues/6146; max mode in
    RoiAlignForward, onnxruntime/core/providers/cpu/object_detection/roialign.cc): samples on
    pixel centres of an all -1 input: ORT's corner-term max is -0.0 (the zero-weight corners win),
    the page's max is -1."""
    desc = roi_align_desc(True, reduction="MAX", samples=(1, UINT32_MAX), sx=1.0, sy=1.0, batch=1, channels=1,
                          height=4, width=4, rois=1, out=(4, 4), bi_type="UINT64")
    tensors = {"InputTensor": -np.ones((1, 1, 4, 4), np.float32),
               "ROITensor": np.array([[0, 0, 4, 4]], np.float32), "BatchIndicesTensor": np.zeros(1, np.uint64)}
    _, expected, actual = _measure(desc, tensors)
    np.testing.assert_array_equal(expected["OutputTensor"], -1.0)
    np.testing.assert_array_equal(actual["OutputTensor"], 0.0)


def test_capped_adaptive_count_differs_on_large_regions():
    desc = roi_align_desc(True, samples=(1, 4), sx=1.0, sy=1.0, height=24, width=24, out=(2, 2))
    tensors = Case(id="div/cap", op=desc.TYPE, desc=desc, seed=0, recipe="whole-image").inputs()
    mapping, expected, actual = _measure(desc, tensors)
    assert {f.kind for f in mapping.flags if f.field == "MaximumSamplesPerOutput"} == {"diverges"}
    err = max_abs_error(expected["OutputTensor"], actual["OutputTensor"])
    assert err > 1e-3, err   # 12 samples per axis (ORT) vs 4 (page)


def test_pads_not_smaller_than_kernel_are_refused_by_ort_cpu():
    desc = max_pooling2_desc(window=2, dilation=3, start=2, end=2, stride=2)
    mapping = to_onnx(desc)
    assert {f.kind for f in mapping.flags if f.field in ("StartPadding", "EndPadding")} == {"diverges"}
    tensors = Case(id="div/pads", op=desc.TYPE, desc=desc, seed=0).inputs()
    execute(desc, tensors)  # the page defines it
    with pytest.raises(Exception, match="Pad should be smaller than kernel"):
        run_cpu(mapping, tensors)


def test_roi_pooling_float32_bin_end():
    """29 rows into 11 bins: ORT's float32 bin end (RoiPool<float>::Compute,
    onnxruntime/core/providers/cpu/nn/roi_pool.cc) takes row 29 into the last bin, the page's
    integer formula stops at 28. This test measures it on the installed ORT's CPU EP."""
    desc = roi_pooling_desc(pooled=(11, 1), rois=1, batch=1, channels=1, height=33, width=1)
    tensors = {"InputTensor": np.arange(33, dtype=np.float32).reshape(1, 1, 33, 1),
               "ROITensor": np.array([[0, 0, 0, 0, 28]], np.float32).reshape(1, 1, 1, 5)}
    mapping, expected, actual = _measure(desc, tensors)
    assert [f.kind for f in mapping.input_flags(tensors)] == ["diverges"]
    assert expected["OutputTensor"].ravel().tolist() == [2, 5, 7, 10, 13, 15, 18, 21, 23, 26, 28]
    assert actual["OutputTensor"].ravel().tolist() == [2, 5, 7, 10, 13, 15, 18, 21, 23, 26, 29]


def test_max_pool_first_nan_wins_in_ort():
    """A 2x2 window [nan, 5, 0, 0] with Indices -> ORT's CPU EP gives (NaN, 0), measured by this
    test on the installed ORT (the kernel: onnxruntime/core/providers/cpu/nn/pool_functors.h);
    the reference ignores NaN -> (5, 1)."""
    desc = max_pooling2_desc(window=2, stride=2, batch=1, channels=1, spatial=(2, 2))
    tensors = {"InputTensor": np.array([np.nan, 5, 0, 0], np.float32).reshape(1, 1, 2, 2)}
    mapping, expected, actual = _measure(desc, tensors)
    assert [f.kind for f in mapping.input_flags(tensors)] == ["diverges"]
    assert expected["OutputTensor"].item() == 5 and expected["OutputIndicesTensor"].item() == 1
    assert np.isnan(actual["OutputTensor"].item()) and actual["OutputIndicesTensor"].item() == 0


def test_adaptive_empty_region_takes_no_sample_in_ort():
    """ROI [2,2,2,2] on a 5x5 arange+1, output 2x2, half_pixel, sampling_ratio 0 -> ORT 0
    everywhere: RoiAlignForward (onnxruntime/core/providers/cpu/object_detection/roialign.cc)
    takes ceil(roi_height / output_height) = 0 samples per axis for an empty region in half_pixel
    mode; the page's Minimum 1 samples (1.5, 1.5) = 10."""
    desc = roi_align_desc(True, samples=(1, UINT32_MAX), sx=1.0, sy=1.0, batch=1, channels=1, height=5, width=5,
                          rois=1, out=(2, 2), bi_type="UINT64")
    tensors = {"InputTensor": (np.arange(25, dtype=np.float32) + 1).reshape(1, 1, 5, 5),
               "ROITensor": np.array([[2, 2, 2, 2]], np.float32), "BatchIndicesTensor": np.zeros(1, np.uint64)}
    mapping, expected, actual = _measure(desc, tensors)
    assert [f.kind for f in mapping.input_flags(tensors)] == ["diverges"]
    np.testing.assert_array_equal(expected["OutputTensor"], 10.0)
    np.testing.assert_array_equal(actual["OutputTensor"], 0.0)


def test_uint64_beyond_2_pow_53_collides_in_float64():
    desc = max_pooling2_desc(dtype="UINT64", window=2, stride=2, batch=1, channels=1, spatial=(2, 2))
    big = np.uint64(2**64 - 1)
    tensors = {"InputTensor": np.array([big - np.uint64(1), big, 0, 0], np.uint64).reshape(1, 1, 2, 2)}
    mapping, expected, actual = _measure(desc, tensors)
    # Not an EP difference: the composition itself cannot carry these values, so the case is
    # inexpressible for these inputs (the harness reports it so).
    assert [f.kind for f in mapping.input_flags(tensors)] == ["inexpressible"]
    assert expected["OutputTensor"].item() == 2**64 - 1 and expected["OutputIndicesTensor"].item() == 1
    assert actual["OutputIndicesTensor"].item() == 0   # both round to 2^64 in float64: the first wins


def test_max_pool_all_minus_inf_window_without_indices():
    """harness/expectations/cpu.json (onnxruntime >= 1.29): a float window of only -inf is -inf
    with the Indices output asked for, but -FLT_MAX without it for some shapes (a 1x1 input under
    a 1x1 window; a 3-D 1x1x1 window); a 2x2 input under 1x1 windows keeps -inf. Measured by this test on
    the installed ORT's CPU EP: when it fails, that entry is out of date."""
    import onnxruntime

    from ep_testbed.harness.core.expectations import in_range

    if not in_range(onnxruntime.__version__, ">=1.29"):
        pytest.skip("before onnxruntime 1.29 every such window is -FLT_MAX (the '<1.29' entry of cpu.json)")
    lowest = np.finfo(np.float32).min
    for spatial, window, dims, without in (((1, 1), 1, 2, lowest), ((2, 2, 2), 1, 3, lowest), ((2, 2), 1, 2, -np.inf)):
        for indices, want in ((None, without), ("UINT64", -np.inf)):
            desc = max_pooling2_desc(dims=dims, window=window, indices=indices, batch=1, channels=1, spatial=spatial)
            tensors = {"InputTensor": np.full((1, 1, *spatial), -np.inf, np.float32)}
            _, expected, actual = _measure(desc, tensors)
            assert (expected["OutputTensor"] == -np.inf).all()
            assert (actual["OutputTensor"] == want).all(), (spatial, indices, actual["OutputTensor"])


def test_roi_pooling_nan_resets_the_running_max_in_ort():
    """harness/expectations/cpu.json (roi_pooling/*, inputs holding NaN): MaxRoiPool's
    std::max(x, Y) (onnxruntime/core/providers/cpu/nn/roi_pool.cc) lets a NaN replace the running
    maximum and the next element replace the NaN, so one bin over [0, inf, 0, NaN, 0, 0] is 0 on
    ORT's CPU EP; the reference skips NaN and gives inf. Measured by this test on the installed ORT
    (a fuzzed case, shrunk, found it)."""
    desc = roi_pooling_desc(pooled=(1, 1), rois=1, batch=1, channels=1, height=6, width=1)
    x = np.array([0, np.inf, 0, np.nan, 0, 0], np.float32).reshape(1, 1, 6, 1)
    tensors = {"InputTensor": x, "ROITensor": np.array([[0, 0, 0, 0, 5]], np.float32).reshape(1, 1, 1, 5)}
    _, expected, actual = _measure(desc, tensors)
    assert expected["OutputTensor"].item() == np.inf
    assert actual["OutputTensor"].item() == 0


def test_a_fuzzed_max_pool_whose_window_starts_with_nan_is_the_known_cpu_cause(tmp_path):
    """harness/expectations/cpu.json (max_pooling2/*, inputs holding NaN, NaN came back): a
    fuzzed float16 MaxPool whose windows start with NaN gets NaN from the CPU EP of onnxruntime
    1.29 and later (see test_max_pool_first_nan_wins_in_ort), where the reference gives inf.
    Replayed from its id on the installed onnxruntime, it is judged by that entry, not failed."""
    pytest.importorskip("hypothesis")
    import onnxruntime

    from ep_testbed.harness.cli import main
    from ep_testbed.harness.core.expectations import in_range
    from ep_testbed.harness.core.results import read_run

    case_id = "max_pooling2/fuzz-s0-b0-004"
    assert main(["fuzz", "--ep", "cpu", "--replay", case_id, "--shrink", "none", "--jobs", "1",
                 "--out", str(tmp_path / "r"), "--no-progress"]) in (0, 1)
    line = {line["id"]: line for line in read_run(str(tmp_path / "r"))[1]}[case_id]
    if not in_range(onnxruntime.__version__, ">=1.29"):
        assert line["outcome"] == "pass", line.get("message")
    else:
        assert line["outcome"] == "known", line.get("message")
        assert set(line["expected_outcome"]["explained_by"]) == {"nan-first-wins"}


def test_roi_pooling_all_minus_inf_bin_is_lowest_float():
    """harness/expectations/cpu.json (roi_pooling/*, inputs holding -inf, -inf expected where a
    number came back): MaxRoiPool starts each non-empty bin from the lowest finite float and folds
    it with std::max (onnxruntime/core/providers/cpu/nn/roi_pool.cc, RoiPool<float>::Compute), so
    a bin of only -inf is -FLT_MAX on ORT's CPU EP; the reference's maximum is -inf. A bin that
    also holds a finite number agrees. Measured by this test on the installed ORT."""
    desc = roi_pooling_desc(pooled=(1, 2), rois=1, batch=1, channels=1, height=1, width=2)
    x = np.array([-np.inf, 3], np.float32).reshape(1, 1, 1, 2)
    tensors = {"InputTensor": x, "ROITensor": np.array([[0, 0, 0, 1, 0]], np.float32).reshape(1, 1, 1, 5)}
    _, expected, actual = _measure(desc, tensors)
    np.testing.assert_array_equal(expected["OutputTensor"].ravel(), [-np.inf, 3])
    np.testing.assert_array_equal(actual["OutputTensor"].ravel(), [np.finfo(np.float32).min, 3])


def _replayed(tmp_path, case_id: str) -> dict:
    """The result line of the fuzzed ``case_id``, redrawn from its id and run on the CPU EP."""
    from ep_testbed.harness.cli import main
    from ep_testbed.harness.core.results import read_run

    assert main(["fuzz", "--ep", "cpu", "--replay", case_id, "--shrink", "none", "--jobs", "1",
                 "--out", str(tmp_path / "r"), "--no-progress"]) in (0, 1)
    return {line["id"]: line for line in read_run(str(tmp_path / "r"))[1]}[case_id]


def test_a_fuzzed_roi_pooling_bin_of_minus_inf_is_the_known_cpu_cause(tmp_path):
    """A fuzzed MaxRoiPool whose bins hold only -inf (roi_pooling/fuzz-s0-b0-019: -FLT_MAX came
    back where the reference gives -inf, see test_roi_pooling_all_minus_inf_bin_is_lowest_float),
    replayed from its id on the installed onnxruntime, is judged by that cpu.json entry."""
    pytest.importorskip("hypothesis")
    line = _replayed(tmp_path, "roi_pooling/fuzz-s0-b0-019")
    assert line["outcome"] == "known", line.get("message")
    assert set(line["expected_outcome"]["explained_by"]) == {"std-max-fold"}


def test_roi_align_float32_sum_overflows_in_ort():
    """harness/expectations/cpu.json (roi_align*, inputs of magnitude 2**120 or more): ORT's CPU
    RoiAlign sums its samples in float32 (RoiAlignForward,
    onnxruntime/core/providers/cpu/object_detection/roialign.cc), so two samples of FLT_MAX / 2 and
    two of 0.75 * FLT_MAX overflow the running sum where their mean, 0.625 * FLT_MAX, is finite:
    the reference gives that mean, ORT's CPU EP +inf. Measured by this test on the installed ORT."""
    big = np.float32(2.0**127)
    desc = roi_align_desc(True, samples=(2, 2), sx=1.0, sy=1.0, batch=1, channels=1, height=1, width=4, rois=1,
                          out=(1, 1))
    x = np.array([big, big, big * np.float32(1.5), big * np.float32(1.5)], np.float32).reshape(1, 1, 1, 4)
    tensors = {"InputTensor": x, "ROITensor": np.array([[0, 0, 4, 1]], np.float32),
               "BatchIndicesTensor": np.zeros(1, np.uint32)}
    _, expected, actual = _measure(desc, tensors)
    assert expected["OutputTensor"].item() == np.float32(2.0**127 * 1.25)
    assert actual["OutputTensor"].item() == np.inf


def test_max_pool_of_nan_and_minus_inf_samples_in_ort():
    """harness/expectations/cpu.json (roi_align*, MAX as a MaxPool of samples, inputs holding NaN
    or an infinity): ORT's CPU MaxPool without Indices (onnxruntime/core/providers/cpu/nn/pool.cc)
    gives -FLT_MAX for a float32 3x3 window of only NaN and for one of only -inf; a 2x2 window keeps
    NaN and -inf. The reference's samples of an image of only -inf are NaN (RA-5: a + t * (b - a)
    of -inf taps, as DirectML computes them), so its max is NaN on both channels. Measured by this
    test on the installed ORT, through the mapper's MAX composition of ROI_ALIGN1 (n x n samples,
    then an n x n MaxPool)."""
    for n, lowest in ((3, True), (2, False)):
        desc = roi_align_desc(True, reduction="MAX", samples=(n, n), sx=1.0, sy=1.0, batch=1, channels=2, height=2,
                              width=2, rois=1, out=(1, 1))
        x = np.stack([np.full((2, 2), np.nan, np.float32), np.full((2, 2), -np.inf, np.float32)]).reshape(1, 2, 2, 2)
        tensors = {"InputTensor": x, "ROITensor": np.array([[0.5, 0.5, 1.5, 1.5]], np.float32),
                   "BatchIndicesTensor": np.zeros(1, np.uint32)}
        mapping, expected, actual = _measure(desc, tensors)
        assert [node.op_type for node in mapping.model.graph.node] == ["RoiAlign", "MaxPool"]
        want = expected["OutputTensor"].ravel()
        assert np.isnan(want).all()
        got = actual["OutputTensor"].ravel()
        if lowest:
            assert got.tolist() == [np.finfo(np.float32).min] * 2, got
        else:
            assert np.isnan(got[0]) and got[1] == -np.inf, got


@pytest.mark.parametrize("case_id, cause, since", [
    ("roi_align/fuzz-s0-b0-067", "onnx-adaptive-count", None),
    ("roi_align/fuzz-s0-b0-074", "onnx-adaptive-count", None),
    ("roi_align1/fuzz-s1-b0-056", "zero-times-corner", None),
    ("roi_align1/fuzz-s0-b0-023", "mlas-x86-fold", ">=1.29"),
    ("roi_align1/fuzz-s3-b0-018", "mlas-x86-fold", ">=1.29"),
    ("roi_align1/fuzz-s1-b0-017", "float32-accumulation", None),
    ("roi_align1/fuzz-s3-b0-004", "onnx-1x1-regions", None),
])
def test_a_fuzzed_roi_align_case_is_its_known_cpu_cause(tmp_path, case_id, cause, since):
    """Each fuzzed ROI align failure that ONNX Runtime's kernels' expectations explain
    (harness/expectations/shared.json, roi_align*), replayed from its id on the installed
    onnxruntime, is known by the reading of its cause, which reproduces its failing elements (alone
    or with another): the sample cap, a degenerate region, 0 * X[b, c, 0, 0], ORT's MaxPool of NaN
    samples (MLAS's fold on x86-64), float32 overflow, a RoiAlign-10 graph raising regions under a
    pixel to 1x1 where OutputPixelOffset is not -0.5 (the ROI rewrite moved them first)."""
    pytest.importorskip("hypothesis")
    import onnxruntime

    from ep_testbed.harness.core.expectations import in_range

    if since and not in_range(onnxruntime.__version__, since):
        pytest.skip(f"the entry holds for onnxruntime {since}")
    line = _replayed(tmp_path, case_id)
    assert line["outcome"] == "known", line.get("message")
    assert any(cause in key.split("+") for key in line["expected_outcome"]["explained_by"]), line["readings"]


def test_a_fuzzed_case_near_flt_max_passes_within_the_fp32_bound(tmp_path):
    """roi_align1/fuzz-s0-b0-004: ORT's CPU EP reads 3.8e31 from taps near FLT_MAX where the page
    samples exactly on a cell edge (reference/DECISIONS.md FP-2; tests/reference/test_bounds.py::
    test_slopes_near_flt_max_keep_a_finite_bound); the fp32 bound takes it, so the case passes."""
    pytest.importorskip("hypothesis")
    line = _replayed(tmp_path, "roi_align1/fuzz-s0-b0-004")
    assert line["outcome"] == "pass", line.get("message")


def test_each_meaning_shows_its_own_divergence_alone():
    """``Mapping.meanings`` gives each data ``diverges`` flag the model with that divergence alone
    (graphs/ops/roi_align.py, DATA_MEANINGS): on large regions under a capped adaptive count the
    cap's meaning is what ORT's CPU EP returns and differs from the reference; on an empty region
    (with no cap to reach) the region's meaning is ORT's 0 and the cap's is the reference's."""
    desc = roi_align_desc(True, samples=(1, 4), sx=1.0, sy=1.0, height=24, width=24, out=(2, 2))
    tensors = Case(id="div/cap", op=desc.TYPE, desc=desc, seed=0, recipe="whole-image").inputs()
    mapping, expected, actual = _measure(desc, tensors)
    meant = mapping.meanings(tensors)
    assert set(meant) == {"MinimumSamplesPerOutput", "MaximumSamplesPerOutput"}
    capped = meant["MaximumSamplesPerOutput"]["OutputTensor"]
    assert max_abs_error(capped, actual["OutputTensor"]) < 1e-4 < max_abs_error(capped, expected["OutputTensor"])

    desc = roi_align_desc(True, samples=(1, 4), sx=1.0, sy=1.0, batch=1, channels=1, height=5, width=5, rois=1,
                          out=(2, 2), bi_type="UINT64")
    tensors = {"InputTensor": (np.arange(25, dtype=np.float32) + 1).reshape(1, 1, 5, 5),
               "ROITensor": np.array([[2, 2, 2, 2]], np.float32), "BatchIndicesTensor": np.zeros(1, np.uint64)}
    mapping, expected, actual = _measure(desc, tensors)
    meant = mapping.meanings(tensors)
    np.testing.assert_array_equal(meant["ROITensor"]["OutputTensor"], actual["OutputTensor"])
    np.testing.assert_array_equal(actual["OutputTensor"], 0.0)
    np.testing.assert_array_equal(meant["MaximumSamplesPerOutput"]["OutputTensor"], expected["OutputTensor"])


def test_a_non_finite_first_pixel_is_flagged_under_max_too():
    """Every RoiAlign node the mapper builds gives a sample outside the input 0 * X[b, c, 0, 0]
    (roialign.cc), whatever the reduction: MAX, reached through mode="avg" samples, is flagged
    as AVERAGE is, and ORT's CPU EP returns NaN where the page reads OutOfBoundsInputValue."""
    desc = roi_align_desc(True, reduction="MAX", samples=(1, 1), sx=1.0, sy=1.0, batch=1, channels=1, height=3,
                          width=3, rois=1, out=(1, 1))
    x = np.zeros((1, 1, 3, 3), np.float32)
    x[0, 0, 0, 0] = np.inf
    tensors = {"InputTensor": x, "ROITensor": np.array([[10, 10, 11, 11]], np.float32),
               "BatchIndicesTensor": np.zeros(1, np.uint32)}
    mapping, expected, actual = _measure(desc, tensors)
    assert "InputTensor[:, :, 0, 0]" in [f.field for f in mapping.input_flags(tensors) if f.kind == "diverges"]
    assert expected["OutputTensor"].item() == 0 and np.isnan(actual["OutputTensor"].item())
