"""Readings (DECISIONS.md READ-1): each a switch of the primary kernel, and each reproducing the
kernel it names where that kernel runs here (ONNX Runtime's CPU EP, ``ort_oracle``).

The oracle is independent of the reference (one-node models on ONNX Runtime); a reading matches it
element for element only if the reading names exactly what that kernel does differently."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime
import ort_oracle
import pytest
from descs_for_tests import max_pooling2, roi_align1, roi_pooling
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from value_strategies import feature_map, uniform

from ep_testbed.reference import ReadingError, execute_reading, execute_with_bounds, spec_named, specs
from ep_testbed.reference.readings import combine, named

UINT32_MAX = 2**32 - 1
ORT = tuple(int(p) for p in onnxruntime.__version__.split(".")[:2])


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
    special = ~np.isfinite(e) | ~np.isfinite(a)
    np.testing.assert_array_equal(np.where(special, a, 0), np.where(special, e, 0))
    bound = reading.bounds["OutputTensor"].astype(np.float64)
    ok = np.abs(a - e) <= bound + 1e-5 + 1e-4 * np.abs(e)
    if "OutputTensor" in reading.alternatives:
        low, high = reading.alternatives["OutputTensor"]
        ok |= (a >= low - bound - 1e-5) & (a <= high + bound + 1e-5)
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
