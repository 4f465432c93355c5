"""Readings (DECISIONS.md READ-1): each a switch of the primary kernel, and each reproducing the
kernel it names where that kernel runs here (ONNX Runtime's CPU EP, ``ort_oracle``).

The oracle is independent of the reference (one-node models on ONNX Runtime); a reading matches it
element for element only if the reading names exactly what that kernel does differently."""

from __future__ import annotations

import dataclasses
import platform

import numpy as np
import onnxruntime
import ort_oracle
import pytest
from descs_for_tests import max_pooling2, roi_align1, roi_pooling, sample_edge_case
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from value_strategies import feature_map, uniform

from ep_testbed.reference import ReadingError, execute_reading, execute_with_bounds, spec_named, specs
from ep_testbed.reference.readings import combine, named

UINT32_MAX = 2**32 - 1
ORT = tuple(int(p) for p in onnxruntime.__version__.split(".")[:2])
#: MLAS folds with SSE's _mm_max_ps on x86-64; ARM's vmaxq_f32 propagates NaN (another fold).
X86_64 = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                            reason=f"the mlas-x86-fold reading is MLAS's x86-64 fold; this machine is "
                                   f"{platform.machine()}, whose MLAS folds NaN otherwise")


def test_a_reading_is_the_primary_kernel_with_one_switch():
    """Every reading of every operator changes exactly the rules it names, nothing else; no reading
    is the primary reading; names are unique per operator; an unknown name and two readings that
    set one rule differently are refused, naming what is allowed."""
    for spec in specs():
        if not spec.readings:
            continue
        fields = {f.name for f in dataclasses.fields(spec.rules)}
        for r in spec.readings:
            changed = combine(spec.rules, [r])
            differs = {f for f in fields if getattr(changed, f) != getattr(spec.rules, f)}
            assert differs == {k for k, _ in r.changes} and differs, (spec.name, r.name)
            assert r.summary and r.held_by and r.source
    with pytest.raises(ReadingError, match="roi_align1 has no reading 'no-such'.*closed-edge"):
        named(spec_named("roi_align1").readings, "no-such", "roi_align1")
    desc = roi_align1((1, 1, 4, 4), (1, 4), (1, 1), reduction="MAX")
    arrays = {"InputTensor": np.zeros((1, 1, 4, 4), np.float32), "ROITensor": np.array([[0, 0, 2, 2]], np.float32),
              "BatchIndicesTensor": np.zeros(1, np.uint32)}
    with pytest.raises(ReadingError, match="max_start"):
        execute_reading(desc, arrays, ["lowest-start", "max-from-zero"])
    np.testing.assert_array_equal(execute_reading(desc, arrays, []).outputs["OutputTensor"],
                                  execute_with_bounds(desc, arrays).outputs["OutputTensor"])


def _sprinkle(draw, x: np.ndarray, label: str) -> np.ndarray:
    """``x`` with a few elements set to NaN, +inf or -inf (none when the draw says so)."""
    flat = x.reshape(-1).copy()
    count = draw(st.integers(0, min(4, flat.size)), label=f"{label} specials")
    for _ in range(count):
        i = draw(st.integers(0, flat.size - 1), label=f"{label} position")
        flat[i] = draw(st.sampled_from([np.nan, np.inf, -np.inf]), label=f"{label} value")
    return flat.reshape(x.shape)


@st.composite
def roi_pool_case(draw):
    h, w, c = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 2))
    ph, pw, r = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    scale = draw(st.sampled_from([1.0, 0.5, 1 / 16, 0.7]))
    x = _sprinkle(draw, feature_map(draw, (1, c, h, w), np.float32, 50.0), "x")
    x1, y1 = uniform(draw, -1, w, r, "x1"), uniform(draw, -1, h, r, "y1")
    rois = np.stack([np.zeros(r), x1, y1, x1 + uniform(draw, 0, w, r, "w"), y1 + uniform(draw, 0, h, r, "h")], 1)
    if draw(st.booleans()):  # corners on halves: ties
        rois[:, 1:] = np.round(rois[:, 1:] * 2) / 2
    rois[:, 1:] /= scale
    return roi_pooling(x.shape, r, (ph, pw), scale=scale), x, rois.astype(np.float32)


@settings(max_examples=examples(150), deadline=None)
@given(case=roi_pool_case())
def test_onnxruntime_maxroipool_is_its_three_readings(case):
    """ONNX Runtime's CPU MaxRoiPool is the reference with ``half-away-rounding``, ``float32-bins``
    and ``std-max-fold``, bit for bit, NaN and infinities included."""
    desc, x, rois = case
    arrays = {"InputTensor": x, "ROITensor": rois.reshape(1, 1, -1, 5)}
    with np.errstate(invalid="ignore"):
        ort = ort_oracle.max_roi_pool(x, rois, pooled_shape=(desc.pooled_size.height, desc.pooled_size.width),
                                      spatial_scale=desc.spatial_scale)
    reading = execute_reading(desc, arrays, ["half-away-rounding", "float32-bins", "std-max-fold"])
    np.testing.assert_array_equal(reading.outputs["OutputTensor"], ort)


@st.composite
def max_pool_case(draw):
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, min(3, h))), draw(st.integers(1, min(3, w)))
    x = _sprinkle(draw, feature_map(draw, (1, c, h, w), np.float32, 20.0), "x")
    if draw(st.booleans()):  # whole windows of -inf
        x[..., : kh, : kw] = -np.inf
    return max_pooling2(x.shape, (kh, kw), strides=[1, 1]), x


@settings(max_examples=examples(150), deadline=None)
@given(case=max_pool_case())
def test_onnxruntime_maxpool_with_indices_is_its_reading(case):
    """ONNX Runtime's CPU MaxPool with Indices is the reference with ``nan-first-wins`` (1.29 and
    later) or ``lowest-start-index-minus-one`` (before), bit for bit, indices included."""
    desc, x = case
    window = list(desc.window_size)
    values, indices = ort_oracle.max_pool(x, kernel_shape=window, strides=[1, 1], pads=[0, 0, 0, 0],
                                          dilations=[1, 1])
    name = "nan-first-wins" if ORT >= (1, 29) else "lowest-start-index-minus-one"
    reading = execute_reading(desc, {"InputTensor": x}, [name]).outputs
    np.testing.assert_array_equal(reading["OutputTensor"], values)
    np.testing.assert_array_equal(reading["OutputIndicesTensor"].astype(np.int64), indices)


def _same_bits(reading: np.ndarray, ort: np.ndarray) -> None:
    """``reading`` equals ``ort`` bit for bit (signed zeros and infinities included), NaN where ORT
    has NaN (any payload)."""
    assert reading.dtype == ort.dtype and reading.shape == ort.shape, (reading.dtype, ort.dtype, reading.shape)
    nan = np.isnan(ort)
    np.testing.assert_array_equal(np.isnan(reading), nan)
    unsigned = np.dtype(f"u{reading.dtype.itemsize}")
    wrong = np.flatnonzero((reading.view(unsigned) != ort.view(unsigned)) & ~nan)
    assert wrong.size == 0, (wrong[:5], reading.ravel()[wrong[:5]], ort.ravel()[wrong[:5]])


def _ort_max_pool(x: np.ndarray, window, strides, start, end) -> np.ndarray:
    """ORT's CPU MaxPool without Indices (the MLAS path: no Indices output, no dilations)."""
    return ort_oracle.run_node("MaxPool", {"X": x}, ["Y"], 12, kernel_shape=list(window), strides=list(strides),
                               pads=list(start) + list(end))[0]


@st.composite
def max_pool_without_indices_case(draw):
    """A 2-D or 3-D MaxPool of float32 or float16 over NaN, -inf and +inf at drawn positions:
    windows over the whole input (MLAS's global kernel), strides of 1 to 3 with padding (its
    vectorised kernel for a last stride <= 2, with the columns past the last group of four, and
    its generic one), and windows of only NaN or -inf."""
    dims = draw(st.sampled_from([2, 2, 3]), label="dims")
    window = [draw(st.integers(1, 4), label="window") for _ in range(dims)]
    if draw(st.integers(0, 5), label="whole input") == 0:
        spatial, strides, start, end = list(window), [1] * dims, [0] * dims, [0] * dims
    else:
        strides = [draw(st.integers(1, 3), label="stride") for _ in range(dims)]
        start = [draw(st.integers(0, k - 1), label="start") for k in window]
        end = [draw(st.integers(0, k - 1), label="end") for k in window]
        spatial = [draw(st.integers(max(1, k - a - b), k + 7), label="size") for k, a, b in zip(window, start, end)]
    channels = draw(st.integers(1, 2), label="channels")
    depth = spatial[0] if dims == 3 else 1
    x = feature_map(draw, (1, channels * depth, *spatial[-2:]), np.float32, 20.0).reshape(1, channels, *spatial)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="special positions"))
    density = draw(st.sampled_from([0.0, 0.1, 0.3, 0.7]), label="density")
    specials = rng.random(x.shape) < density
    x[specials] = rng.choice(np.array([np.nan, np.nan, -np.inf, np.inf], np.float32), size=int(specials.sum()))
    if draw(st.booleans(), label="a window of one kind"):
        x[(..., *(slice(0, k) for k in window))] = draw(st.sampled_from([np.nan, -np.inf]), label="kind")
    dtype = draw(st.sampled_from(["FLOAT32", "FLOAT16"]), label="dtype")
    x = x.astype(np.float16 if dtype == "FLOAT16" else np.float32)
    desc = max_pooling2(x.shape, window, strides=strides, start=start, end=end, dtype=dtype, indices=None)
    return desc, x


@X86_64
@settings(max_examples=examples(300), deadline=None)
@given(case=max_pool_without_indices_case())
def test_onnxruntime_maxpool_without_indices_is_its_reading(case):
    """ONNX Runtime's CPU MaxPool without Indices (MLAS; float16 runs as float32) is the reference
    with ``mlas-x86-fold``, bit for bit: NaN where ORT gives NaN, -FLT_MAX (float16: -inf) where
    MLAS's start shows, the sign of each zero."""
    desc, x = case
    ort = _ort_max_pool(x, desc.window_size, desc.strides, desc.start_padding, desc.end_padding)
    reading = execute_reading(desc, {"InputTensor": x}, ["mlas-x86-fold"]).outputs["OutputTensor"]
    _same_bits(reading, ort)


@X86_64
@pytest.mark.parametrize("window, value", [
    ([[np.nan, 3], [4, 2]], 3.0), ([[5, np.nan], [3, 2]], np.nan), ([[5, 4], [np.nan, 2]], 5.0),
    ([[5, 4], [3, np.nan]], 5.0)])
def test_where_a_nan_sits_decides_a_2x2_window(window, value):
    """A 2x2 window, stride 2 (MLAS's vectorised kernel; both columns past a group of four): each
    column folds down with std::max, which keeps a NaN it holds and drops one that comes, then the
    columns fold across with _mm_max_ps, which gives its second operand when either is NaN. The
    values ONNX Runtime gives, measured here, are the reading's; the primary reading ignores NaN."""
    x = np.array(window, np.float32).reshape(1, 1, 2, 2)
    desc = max_pooling2(x.shape, (2, 2), strides=[2, 2], indices=None)
    ort = _ort_max_pool(x, (2, 2), (2, 2), (0, 0), (0, 0))
    np.testing.assert_array_equal(ort.ravel(), [value])
    np.testing.assert_array_equal(execute_reading(desc, {"InputTensor": x}, ["mlas-x86-fold"]).outputs[
        "OutputTensor"].ravel(), [value])
    assert execute_reading(desc, {"InputTensor": x}, []).outputs["OutputTensor"].item() == np.nanmax(x)


@X86_64
@pytest.mark.parametrize("window, strides, width", [((2, 33), (1, 1), 40), ((2, 2), (1, 2), 2046), ((2, 2), (1, 3), 9)])
def test_outside_the_vectorised_kernel_mlas_starts_from_the_lowest_float(window, strides, width):
    """A side above 32, a width that overflows MLAS's reduction buffer (2048 - 3 elements) or a
    last stride above 2 takes MLAS's generic kernel: every window starts from -FLT_MAX and skips
    NaN, so a window of only NaN or -inf gives -FLT_MAX, as the reading computes."""
    x = np.full((1, 1, 2, width), np.nan, np.float32)
    x[0, 0, 1, ::2] = -np.inf
    x[0, 0, 0, 5] = 7.0
    desc = max_pooling2(x.shape, window, strides=list(strides), indices=None)
    ort = _ort_max_pool(x, window, strides, (0, 0), (0, 0))
    assert (ort == np.finfo(np.float32).min).any()
    _same_bits(execute_reading(desc, {"InputTensor": x}, ["mlas-x86-fold"]).outputs["OutputTensor"], ort)


def _ort_composed_max(x, rois, n, out_hw, scale):
    """The mapper's composition of a MAX over a fixed n x n grid of samples (graphs/ops/roi_align.py):
    RoiAlign(mode="avg", sampling_ratio=1) at an n times larger output gives every sample, then
    MaxPool(n x n, stride n) without Indices takes their max, on ORT's CPU EP."""
    samples = ort_oracle.roi_align(x, rois, np.zeros(len(rois)), output_height=out_hw[0] * n,
                                   output_width=out_hw[1] * n, sampling_ratio=1, spatial_scale=scale)
    return _ort_max_pool(samples, (n, n), (n, n), (0, 0), (0, 0))


@st.composite
def composed_max_case(draw):
    h, w, c = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 2))
    oh, ow, r = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 3))
    n = draw(st.sampled_from([2, 2, 3]), label="samples per axis")
    x = feature_map(draw, (1, c, h, w), np.float32, 50.0)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="special positions"))
    specials = rng.random(x.shape) < draw(st.sampled_from([0.1, 0.3, 0.6]), label="density")
    x[specials] = rng.choice(np.array([np.nan, np.nan, -np.inf, np.inf], np.float32), size=int(specials.sum()))
    # Corners on quarter pixels and a sample step of a quarter pixel's multiple: every sample
    # coordinate is exact in float32 too, so ORT's samples are the reading's (an infinite tap next
    # to a sample on a pixel would otherwise give 0 * inf or inf by ORT's float32 rounding) and
    # what differs is how the samples are folded.
    corner = np.round(np.stack([uniform(draw, -1, w, r, "x1"), uniform(draw, -1, h, r, "y1")], axis=1) * 4) / 4
    step = np.array(draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 1.25]), min_size=2 * r,
                                  max_size=2 * r), label="sample step")).reshape(r, 2)
    rois = np.concatenate([corner, corner + step * [ow * n, oh * n]], axis=1)
    return (h, w, c, oh, ow, r, n), x, rois.astype(np.float32)


@X86_64
@settings(max_examples=examples(200), deadline=None)
@given(case=composed_max_case())
def test_onnxruntime_composed_max_is_its_reading(case):
    """A MAX over n x n samples as the mapper composes it on ORT's CPU EP (every sample by RoiAlign,
    then MLAS's MaxPool of them) is the reference with ONNX Runtime's RoiAlign readings
    (``ORT_ROI_ALIGN``) and ``mlas-x86-fold``: NaN and infinities where ORT has them, finite
    elements within the reading's bounds (ORT computes coordinates in float32)."""
    (h, w, c, oh, ow, r, n), x, rois = case
    desc = roi_align1((1, c, h, w), (r, 4), (oh, ow), samples=(n, n), reduction="MAX")
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(r, np.uint32)}
    with np.errstate(invalid="ignore", over="ignore"):
        ort = _ort_composed_max(x, rois, n, (oh, ow), 1.0)
        reading = execute_reading(desc, arrays, ORT_ROI_ALIGN + ["mlas-x86-fold"])
    e = reading.outputs["OutputTensor"].astype(np.float64)
    a = ort.astype(np.float64)
    special = ~np.isfinite(e) | ~np.isfinite(a)
    np.testing.assert_array_equal(np.where(special, a, 0), np.where(special, e, 0))
    bound = reading.bounds["OutputTensor"].astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where both are the same infinity (special above)
        ok = np.abs(a - e) <= bound + 1e-5 + 1e-4 * np.abs(e)
    if "OutputTensor" in reading.alternatives:
        low, high = reading.alternatives["OutputTensor"]
        ok |= (a >= low - bound - 1e-5) & (a <= high + bound + 1e-5)
    assert (ok | special).all(), (np.argwhere(~(ok | special))[:3], e[~(ok | special)][:3], a[~(ok | special)][:3])


@st.composite
def roi_align_case(draw):
    h, w, c = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 2))
    oh, ow, r = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    scale = draw(st.sampled_from([1.0, 0.5, 0.25]))
    x = _sprinkle(draw, feature_map(draw, (1, c, h, w), np.float32, 50.0), "x")
    corner = np.stack([uniform(draw, -2, w + 1, r, "x1"), uniform(draw, -2, h + 1, r, "y1")], axis=1)
    kind = draw(st.sampled_from(["avg", "avg-adaptive", "max-adaptive", "opset10"]))
    # ORT's adaptive count of an inverted region is negative, which its kernel refuses (SafeInt overflow);
    # and it counts from float32 corners shifted by the pixel offset, which can round a region a few ulps
    # wide to 0 (no sample) where the page's quantities keep it: an order of evaluation, kept out here
    extent = uniform(draw, 0 if "adaptive" in kind else -1, 8, 2 * r, "extent").reshape(r, 2)
    if "adaptive" in kind:
        extent = np.where(extent < 1e-3, 0.0, extent)
    rois = np.concatenate([corner, corner + extent], axis=1)
    if draw(st.booleans()):  # corners on quarter pixels: samples land on edges and pixel centres
        rois = np.round(rois * 4) / 4
    return kind, (h, w, c, oh, ow, r, scale), x, (rois / scale).astype(np.float32)


#: The readings that make the reference ONNX Runtime's CPU RoiAlign, per kind of node.
ORT_ROI_ALIGN = ["closed-edge", "weighted-interpolation", "zero-times-corner", "float32-accumulation"]


@settings(max_examples=examples(200), deadline=None)
@given(case=roi_align_case())
def test_onnxruntime_roialign_is_its_readings(case):
    """ONNX Runtime's CPU RoiAlign (half_pixel, fixed or adaptive sampling, avg or max, and
    RoiAlign-10's output_half_pixel) lies within the bounds of the reference under its readings
    (``ORT_ROI_ALIGN`` plus ``onnx-adaptive-count``, ``corner-term-max``, ``onnx-1x1-regions`` as
    the node asks), NaN and infinities where they are: ORT computes coordinates in float32, the
    reading in float64, so finite elements may differ by the rounding the bounds hold."""
    kind, (h, w, c, oh, ow, r, scale), x, rois = case
    readings = list(ORT_ROI_ALIGN)
    adaptive = kind != "avg"
    samples = (1, UINT32_MAX) if adaptive else (2, 2)
    offsets = (0.0, -0.5) if kind == "opset10" else (0.5, -0.5)
    if adaptive:
        readings.append("onnx-adaptive-count")
    if kind == "max-adaptive":
        readings.append("corner-term-max")
    if kind == "opset10":
        readings.append("onnx-1x1-regions")
    desc = roi_align1((1, c, h, w), (r, 4), (oh, ow), scale=(scale, scale), offsets=offsets, samples=samples,
                      reduction="MAX" if kind == "max-adaptive" else "AVERAGE")
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(r, np.uint32)}
    with np.errstate(invalid="ignore", over="ignore"):
        ort = ort_oracle.roi_align(x, rois, np.zeros(r), output_height=oh, output_width=ow,
                                   sampling_ratio=0 if adaptive else 2, spatial_scale=scale,
                                   mode="max" if kind == "max-adaptive" else "avg",
                                   opset=10 if kind == "opset10" else 16)
        reading = execute_reading(desc, arrays, readings)
    e = reading.outputs["OutputTensor"].astype(np.float64)
    a = ort.astype(np.float64)
    bound = reading.bounds["OutputTensor"].astype(np.float64)
    # a knife edge (a sample count, a cell edge) may hand the element another decision's value,
    # a number where the reading's own decision gives NaN or the other way round
    alternative = np.zeros(e.shape, bool)
    if "OutputTensor" in reading.alternatives:
        low, high = reading.alternatives["OutputTensor"]
        alternative = (a >= low - bound - 1e-5) & (a <= high + bound + 1e-5)
    nan_flag = reading.nan_alternatives.get("OutputTensor")
    if nan_flag is not None:
        alternative |= np.isnan(a) & nan_flag
    special = (~np.isfinite(e) | ~np.isfinite(a)) & ~alternative
    np.testing.assert_array_equal(np.where(special, a, 0), np.where(special, e, 0))
    ok = (np.abs(a - e) <= bound + 1e-5 + 1e-4 * np.abs(e)) | alternative
    assert (ok | special).all(), (kind, np.argwhere(~(ok | special))[:3], e[~(ok | special)][:3], a[~(ok | special)][:3])


def test_every_reading_runs_on_catalog_cases_with_and_without_bounds():
    """A reading whose switch the kernel does not take would explain nothing in a run (the harness
    records it under ``could_not``): each reading of each operator computes, with its bounds, on
    the first catalog cases of its operator."""
    from ep_testbed.graphs.catalog import build_catalog

    for spec in specs():
        cases = build_catalog([spec.name])[:6]
        for r in spec.readings:
            for case in cases:
                with np.errstate(all="ignore"):
                    bounded = execute_reading(case.desc, case.inputs(), [r.name], "fp32")
                    plain = execute_reading(case.desc, case.inputs(), [r.name])
                assert set(bounded.outputs) == set(plain.outputs), (spec.name, r.name, case.id)


def test_the_directml_ep_adaptive_count_is_at_least_one_and_never_capped():
    """RoiAlign sampling_ratio=0 as the DirectML EP builds it (DmlOperatorRoiAlign.cpp L47-L48:
    MinimumSamplesPerOutput 1, MaximumSamplesPerOutput UINT32_MAX): a region 5 pixels wide over a
    1-pixel input, one output, takes 5 samples at x = 0, 1, 2, 3, 4 (step 1, OutputPixelOffset
    -0.5, InputPixelOffset 0.5) of which only x = 0 lies in the open range (-1, 1): -3 / 5. The
    page's clamp to 4 samples (x = 0.125, 1.375, 2.625, 3.875) gives -3 / 4; ONNX's count, which
    takes no sample on an empty region, outputs 0 there where this reading takes one."""
    desc = roi_align1((1, 1, 1, 1), (1, 4), (1, 1), scale=(1.0, 1.0), offsets=(0.5, -0.5), samples=(1, 4))
    arrays = {"InputTensor": np.full((1, 1, 1, 1), -3.0, np.float32),
              "ROITensor": np.array([[0, 0, 5, 1]], np.float32), "BatchIndicesTensor": np.zeros(1, np.uint32)}
    assert execute_reading(desc, arrays, []).outputs["OutputTensor"].item() == np.float32(-0.75)
    assert execute_reading(desc, arrays, ["directml-ep-adaptive-count"]).outputs["OutputTensor"].item() == \
        np.float32(-0.6)
    empty = dict(arrays, ROITensor=np.array([[0, 0, 0, 0]], np.float32))
    assert execute_reading(desc, empty, ["onnx-adaptive-count"]).outputs["OutputTensor"].item() == 0.0
    assert execute_reading(desc, empty, ["directml-ep-adaptive-count"]).outputs["OutputTensor"].item() == -3.0
    # no sample reads the input, so the element is OutOfBoundsInputValue (0 above)
    filled = roi_align1((1, 1, 1, 1), (1, 4), (1, 1), scale=(1.0, 1.0), offsets=(0.5, -0.5), samples=(1, 4), oob=1.5)
    for model in ("exact", "fp32"):
        assert execute_reading(filled, empty, ["onnx-adaptive-count"], model).outputs["OutputTensor"].item() == 1.5


@st.composite
def mapped_roi_align10_case(draw):
    """A ROI_ALIGN1 desc over a fixed n x n grid that the mapper builds as a RoiAlign-10 graph with an
    ROI rewrite (OutputPixelOffset other than -0.5, AlignRegionsToCorners, scales apart), and regions
    around a pixel wide, empty and inverted among them: the 1x1 clamp acts on the rewritten ROIs."""
    h, w, c = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 2))
    oh, ow, r = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n = draw(st.sampled_from([1, 2, 3]), label="samples per axis")
    scale = (draw(st.sampled_from([1.0, 0.5, 0.25])), draw(st.sampled_from([1.0, 0.5, 0.0625])))
    offsets = (draw(st.sampled_from([0.0, 0.5, 0.25])), draw(st.sampled_from([-0.5, -0.25, 0.0, 0.3, -1.0])))
    corners = draw(st.booleans(), label="AlignRegionsToCorners")
    reduction = draw(st.sampled_from(["AVERAGE", "MAX"]))
    x = feature_map(draw, (1, c, h, w), np.float32, 50.0)
    corner = np.stack([uniform(draw, -2, w + 1, r, "x1"), uniform(draw, -2, h + 1, r, "y1")], axis=1)
    extent = uniform(draw, -1.5, 2.5, 2 * r, "extent").reshape(r, 2)
    rois = np.concatenate([corner, corner + extent], axis=1) / np.array(scale * 2)
    desc = roi_align1((1, c, h, w), (r, 4), (oh, ow), scale=scale, offsets=offsets, samples=(n, n),
                      corners=corners, reduction=reduction)
    return desc, x, rois.astype(np.float32)


@settings(max_examples=examples(200), deadline=None)
@given(case=mapped_roi_align10_case())
def test_onnxruntime_runs_the_mapped_roialign10_graph_as_its_readings(case):
    """The RoiAlign-10 graph the mapper builds (``to_onnx(desc, 10)``: the page's offsets, corners
    and scales as a rewrite of the ROIs, MAX as the MaxPool of every sample), run on ONNX Runtime's
    CPU EP, lies within the bounds of the reference under ORT's RoiAlign readings and
    ``onnx-1x1-regions``: ORT raises the *rewritten* region under a pixel to 1x1, so the reading's
    clamp must act on the span the samples tile, not on the page's region."""
    desc, x, rois = case
    ok, e, ort = mapped_graph_within_readings(desc, x, rois, ORT_ROI_ALIGN + ["onnx-1x1-regions"], 10)
    bad = np.argwhere(~ok)[:3]
    assert ok.all(), (desc.output_pixel_offset, desc.align_regions_to_corners, rois.tolist(), bad,
                      e[~ok][:3], ort[~ok][:3])


def mapped_graph_within_readings(desc, x, rois, readings, opset=None):
    """``(ok, expected, ort)``: the mapper's graph of ``desc`` (``to_onnx(desc, opset)``) run on ONNX
    Runtime's CPU EP over one image ``x`` and ``rois``, and per element whether it lies within the
    bounds (or a knife-edge range) of the reference under ``readings``."""
    from ep_testbed.graphs import to_onnx

    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(len(rois), np.uint32)}
    mapping = to_onnx(desc, opset)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(mapping.model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    ort = mapping.outputs(session.run(None, mapping.feeds(arrays)))["OutputTensor"].astype(np.float64)
    reading = execute_reading(desc, arrays, readings)
    e = reading.outputs["OutputTensor"].astype(np.float64)
    bound = reading.bounds["OutputTensor"].astype(np.float64)
    ok = np.abs(ort - e) <= bound + 1e-5 + 1e-4 * np.abs(e)
    if "OutputTensor" in reading.alternatives:
        low, high = reading.alternatives["OutputTensor"]
        ok |= (ort >= low - bound - 1e-5) & (ort <= high + bound + 1e-5)
    return ok, e, ort


@st.composite
def mapped_adaptive_oob_case(draw):
    """A ROI_ALIGN1 AVERAGE desc with ONNX's adaptive count (Minimum 1, Maximum UINT32_MAX: the
    mapper's RoiAlign sampling_ratio=0), an OutOfBoundsInputValue the mapper composes, and regions
    on quarter pixels, empty along one axis or both among them."""
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 2))
    oh, ow, r = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    oob = draw(st.sampled_from([1.5, -7.0, 1e4]), label="OutOfBoundsInputValue")
    x = feature_map(draw, (1, c, h, w), np.float32, 50.0)
    corner = np.round(np.stack([uniform(draw, -2, w + 1, r, "x1"), uniform(draw, -2, h + 1, r, "y1")], axis=1) * 4) / 4
    extent = np.round(uniform(draw, 0, 4, 2 * r, "extent").reshape(r, 2) * 4) / 4
    extent *= np.array(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=2 * r, max_size=2 * r),
                            label="empty axes")).reshape(r, 2)
    desc = roi_align1((1, c, h, w), (r, 4), (oh, ow), scale=(1.0, 1.0), offsets=(0.5, -0.5),
                      samples=(1, UINT32_MAX), oob=oob)
    return desc, x, np.concatenate([corner, corner + extent], axis=1).astype(np.float32)


@settings(max_examples=examples(100), deadline=None)
@given(case=mapped_adaptive_oob_case())
def test_onnxruntime_runs_the_mapped_adaptive_graph_with_an_out_of_bounds_value_as_its_readings(case):
    """The graph the mapper builds for an adaptive count and an OutOfBoundsInputValue ``v``
    (RoiAlign sampling_ratio=0, then ``+ v * (1 - RoiAlign(ones))``), run on ONNX Runtime's CPU EP,
    lies within the bounds of the reference under ORT's readings and ``onnx-adaptive-count``:
    where ORT's count gives a region no sample, both RoiAlign nodes output 0 and the graph gives
    exactly ``v``, which the reading must give too (a reading that outputs 0 there fails)."""
    desc, x, rois = case
    ok, e, ort = mapped_graph_within_readings(desc, x, rois, ORT_ROI_ALIGN + ["onnx-adaptive-count"])
    assert ok.all(), (rois.tolist(), np.argwhere(~ok)[:3], e[~ok][:3], ort[~ok][:3])


def test_one_sample_stretched_to_both_corners_is_a_region_of_no_width_to_roialign10():
    """AlignRegionsToCorners with one sample per output and one output: the page's sample is the
    region's centre (RA-6), which the mapper's ROI rewrite gives RoiAlign-10 as a region of width 0
    at that centre; ORT raises it to one pixel and samples its middle, half a pixel past the centre,
    however wide the page's region is. ``onnx-1x1-regions`` computes that (and says it can show),
    the primary reading does not."""
    from ep_testbed.graphs import to_onnx

    desc = roi_align1((1, 1, 1, 8), (1, 4), (1, 1), scale=(1.0, 1.0), offsets=(0.0, -0.5), samples=(1, 1),
                      corners=True)
    arrays = {"InputTensor": np.arange(8, dtype=np.float32).reshape(1, 1, 1, 8),
              "ROITensor": np.array([[1.0, 0.0, 4.0, 0.0]], np.float32), "BatchIndicesTensor": np.zeros(1, np.uint32)}
    mapping = to_onnx(desc, 10)
    session = onnxruntime.InferenceSession(mapping.model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort = mapping.outputs(session.run(None, mapping.feeds(arrays)))["OutputTensor"].item()
    assert ort == 3.0  # x = 2.5 + 0.5 (y = 0 + 0.5 reads the one row)
    assert execute_reading(desc, arrays, []).outputs["OutputTensor"].item() == 2.5
    assert execute_reading(desc, arrays, ["onnx-1x1-regions"]).outputs["OutputTensor"].item() == 3.0
    assert named(spec_named("roi_align1").readings, "onnx-1x1-regions", "roi_align1").can_show(desc, arrays)


@pytest.mark.parametrize("dtype, lowest", [("FLOAT32", -np.finfo(np.float32).max), ("FLOAT16", -np.inf)])
def test_roi_align_lowest_start_is_float32_lowest_rounded_to_the_output(dtype, lowest):
    """``lowest-start`` starts a MAX at float32's lowest finite value whatever the output type (the
    MaxPool of samples runs in float32, a FLOAT16 desc's too), so an element whose samples are all
    NaN is -FLT_MAX, which FLOAT16 rounds to -inf (never float16's -65504)."""
    kind = np.float16 if dtype == "FLOAT16" else np.float32
    desc = roi_align1((1, 1, 4, 4), (2, 4), (1, 1), dtype=dtype, reduction="MAX")
    x = np.ones((1, 1, 4, 4), kind)
    x[0, 0, :2, :2] = np.nan
    arrays = {"InputTensor": x, "ROITensor": np.array([[0, 0, 1, 1], [2, 2, 3, 3]], kind),
              "BatchIndicesTensor": np.zeros(2, np.uint32)}
    with np.errstate(invalid="ignore"):
        out = execute_reading(desc, arrays, ["lowest-start"]).outputs["OutputTensor"].ravel()
    np.testing.assert_array_equal(out, np.array([lowest, 1.0], kind))


def _page_coordinate_float32(y1, y2, n, k, in_offset, out_offset):
    """Sample ``k`` of ``n`` along one axis, the page's formula evaluated in float32 step by step."""
    f = np.float32
    start = f(y1) * f(1.0)
    size = f(f(y2) * f(1.0)) - start
    return float((f(k) - f(out_offset)) * (size / f(n)) + start - f(in_offset))


def test_float32_coordinates_is_the_page_formula_in_float32_and_decides_an_overflow():
    """``float32-coordinates``: each sample coordinate is the page's formula rounded to float32 at
    every step (checked against that formula evaluated by hand), which near FLT_MAX decides whether
    a lerp's difference overflows: over the taps -FLT_MAX, -FLT_MIN / -1, FLT_MAX the sample is +inf
    with it and finite with the exact coordinate (DirectML's +inf: tests/eps/test_dml_wine_observed.py).
    ``lowest-start`` shows on huge values alone, where float32 lerps make NaN and infinite samples."""
    from ep_testbed.reference.roi_align import READINGS, Rules, as_roi_align1, region_samples

    flt_max = np.finfo(np.float32).max
    desc = roi_align1((1, 1, 4, 4), (1, 4), (1, 1), offsets=(0.0, -0.5), samples=(1, 1))
    roi = np.array([[1.0, 1.155910849571228, 1.25, 1.839146614074707]], np.float32)
    ys, xs, _, _ = region_samples(as_roi_align1(desc), 0, roi[0].astype(np.float64), Rules(coordinates="float32"))
    assert ys.tolist() == [_page_coordinate_float32(roi[0, 1], roi[0, 3], 1, 0, 0.0, -0.5)]
    assert xs.tolist() == [_page_coordinate_float32(roi[0, 0], roi[0, 2], 1, 0, 0.0, -0.5)]
    exact_ys, _, _, _ = region_samples(as_roi_align1(desc), 0, roi[0].astype(np.float64))
    assert exact_ys[0] != ys[0]
    x = np.ones((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1:3] = [-flt_max, -np.finfo(np.float32).tiny]
    x[0, 0, 2, 1:3] = [-1.0, flt_max]
    arrays = {"InputTensor": x, "ROITensor": roi, "BatchIndicesTensor": np.zeros(1, np.uint32)}
    with np.errstate(invalid="ignore", over="ignore"):
        exact = execute_reading(desc, arrays, ["float32-accumulation"]).outputs["OutputTensor"].ravel()
        rounded = execute_reading(desc, arrays, ["float32-accumulation", "float32-coordinates"]).outputs["OutputTensor"]
    assert np.isfinite(exact).all()
    np.testing.assert_array_equal(rounded.ravel(), [np.inf])
    huge = {"InputTensor": np.full((1, 1, 4, 4), flt_max, np.float32), "ROITensor": roi,
            "BatchIndicesTensor": np.zeros(1, np.uint32)}
    max_desc = roi_align1((1, 1, 4, 4), (1, 4), (1, 1), reduction="MAX")
    assert named(READINGS, "lowest-start", "roi_align1").can_show(max_desc, huge)


@pytest.mark.parametrize("samples", [(1, 8), (2, 3)])
def test_upright_count_gives_an_inverted_region_its_upright_twins_samples_mirrored(samples):
    """``upright-count``: an inverted region takes the count of the same region upright,
    clamp(ceil(|size| / output), Minimum, Maximum), and its outputs are the upright region's in
    mirrored order (samples still run backwards); the primary reading clamps the negative ratio
    to Minimum, so the two differ where the upright count exceeds Minimum, and the reading says
    it can show only there."""
    from ep_testbed.reference import desc_from_dml, execute

    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 3, 9)).astype(np.float32)
    upright, inverted = [0.5, 0.25, 7.75, 1.5], [7.75, 0.25, 0.5, 1.5]
    base = roi_align1((1, 2, 3, 9), (1, 4), (1, 3), samples=samples)
    desc = desc_from_dml(base) if isinstance(base, dict) else base
    arrays = {"BatchIndicesTensor": np.zeros(1, np.uint32), "InputTensor": x}
    up = execute(desc, {**arrays, "ROITensor": np.array([upright], np.float32)})["OutputTensor"]
    inv = {**arrays, "ROITensor": np.array([inverted], np.float32)}
    read = execute_reading(desc, inv, ["upright-count"]).outputs["OutputTensor"]
    primary = execute(desc, inv)["OutputTensor"]
    np.testing.assert_allclose(read, up[..., ::-1], rtol=1e-6, atol=1e-6)  # the upright twin, mirrored
    assert not np.allclose(primary, read)  # 7.25 / 3 along X: 3 samples upright, Minimum inverted
    shows = named(spec_named("roi_align1").readings, "upright-count", "roi_align1").can_show
    assert shows(desc, inv) and not shows(desc, {**arrays, "ROITensor": np.array([upright], np.float32)})


@X86_64
def test_a_max_that_starts_from_the_lowest_float_ranges_no_lower_than_it():
    """A knife-edge range of a MAX under a reading whose MAX starts from a value holds what that
    kernel outputs: where the alternative leaves only NaN and -inf samples, the max that starts
    from -FLT_MAX and skips NaN is -FLT_MAX (ORT's output here), not -inf; nowhere below the start."""
    from ep_testbed.graphs import to_onnx

    desc, arrays = sample_edge_case()
    mapping = to_onnx(desc, 10)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(mapping.model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    ort = mapping.outputs(session.run(None, mapping.feeds(arrays)))["OutputTensor"]
    lowest = np.finfo(np.float32).min
    assert ort[0, 0, 4, 2] == lowest  # the external fact this reading must hold
    with np.errstate(invalid="ignore", over="ignore"):
        reading = execute_reading(desc, arrays, ["weighted-interpolation", "mlas-x86-fold"], "fp32")
        low, high = reading.alternatives["OutputTensor"]
        assert reading.outputs["OutputTensor"][0, 0, 4, 2] == 0.0 and low[0, 0, 4, 2] == lowest <= high[0, 0, 4, 2]
        for names, start in ((["lowest-start"], lowest), (["max-from-zero"], 0.0), (["mlas-x86-fold"], lowest)):
            low, high = execute_reading(desc, arrays, names, "fp32").alternatives["OutputTensor"]
            assert ((low >= start) | np.isposinf(low)).all() and (high >= start).all(), names
