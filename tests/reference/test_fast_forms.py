"""The fast reference equals its simple form bit for bit: the simple forms, kept in
this folder, gather every window / loop over every bin exactly as the pages read."""

from __future__ import annotations

import numpy as np
import simple_max_pooling2
import simple_roi_pooling
from descs_for_tests import max_pooling2, roi_pooling
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis_profiles import examples

from ep_testbed.reference import DescError, execute, validate


def _per_dim(draw, dims, lo, hi):
    return [draw(st.integers(lo, hi)) for _ in range(dims)]


@st.composite
def max_pooling_cases(draw):
    """A MaxPool2 desc (2-D or 3-D, any window, stride, padding and dilation that fit) and an
    input of few distinct values (ties), with the extreme integers or NaN/inf/-0 among them."""
    from ep_testbed.reference.dtypes import numpy_dtype

    dims = draw(st.sampled_from([2, 3]))
    dtype = draw(st.sampled_from(["FLOAT32", "FLOAT16", "INT8", "UINT8", "INT32", "UINT64"]))
    spatial, window = _per_dim(draw, dims, 1, 6), _per_dim(draw, dims, 1, 3)
    kw = dict(strides=_per_dim(draw, dims, 1, 2), start=[draw(st.integers(0, k - 1)) for k in window],
              end=[draw(st.integers(0, k - 1)) for k in window], dilations=_per_dim(draw, dims, 1, 2))
    try:
        desc = max_pooling2((1, 2, *spatial), window, dtype=dtype, **kw)
        validate(desc)
    except DescError:  # the dilated window does not fit, or one sees only padding
        assume(False)
    np_type = numpy_dtype(dtype)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        values = st.sampled_from([int(info.min), int(info.min) + 1, 0, 1, int(info.max)])
    else:
        values = st.integers(-2, 2).map(float)
        if draw(st.booleans()):
            values = values | st.sampled_from([np.nan, -np.inf, np.inf, -0.0])
    return desc, draw(arrays(np_type, (1, 2, *spatial), elements=values))


@settings(max_examples=examples(150), deadline=None)
@given(case=max_pooling_cases())
def test_max_pooling2_fast_equals_simple(case):
    desc, x = case
    fast = execute(desc, {"InputTensor": x})
    simple = simple_max_pooling2.max_pooling2(desc, x)
    np.testing.assert_array_equal(fast["OutputTensor"], simple["OutputTensor"])
    assert fast["OutputTensor"].dtype == simple["OutputTensor"].dtype
    np.testing.assert_array_equal(fast["OutputIndicesTensor"], simple["OutputIndicesTensor"])


@st.composite
def roi_pooling_cases(draw):
    """A MaxRoiPool desc and inputs: whole-number values (ties), NaN in half of the draws, and
    regions anywhere from left of the input to past its end, of any size."""
    h, w, ph, pw, r = (draw(st.integers(1, 8)) for _ in range(5))
    values = st.integers(-3, 3).map(float)
    if draw(st.booleans()):
        values = values | st.just(np.nan)
    x = draw(arrays(np.float32, (2, 3, h, w), elements=values))
    scale = draw(st.sampled_from([1.0, 0.5, 0.25]))
    rois = []
    for _ in range(r):
        x1, y1 = draw(st.floats(-4, w + 2)), draw(st.floats(-4, h + 2))
        rois.append([draw(st.integers(0, 1)), x1, y1, x1 + draw(st.floats(0, w)), y1 + draw(st.floats(0, h))])
    rois = (np.array(rois) / np.array([1, scale, scale, scale, scale])).astype(np.float32).reshape(1, 1, r, 5)
    return roi_pooling(x.shape, r, (ph, pw), scale=scale), x, rois


@settings(max_examples=examples(60), deadline=None)
@given(case=roi_pooling_cases())
def test_roi_pooling_fast_equals_simple(case):
    desc, x, rois = case
    fast = execute(desc, {"InputTensor": x, "ROITensor": rois})["OutputTensor"]
    simple = simple_roi_pooling.roi_pooling(desc, x, rois)["OutputTensor"]
    np.testing.assert_array_equal(fast, simple)


@st.composite
def roi_align_cases(draw):
    """A ROI_ALIGN1 desc over every mode, reduction, sample range, offset, out-of-bounds value and
    scale, with values and regions in and around the input."""
    from descs_for_tests import roi_align1

    dtype = draw(st.sampled_from(["FLOAT32", "FLOAT16"]))
    np_type = np.float32 if dtype == "FLOAT32" else np.float16
    width = 32 if dtype == "FLOAT32" else 16
    h, w, oh, ow, r = (draw(st.integers(1, 7)) for _ in range(5))
    x = draw(arrays(np_type, (2, 3, h, w), elements=st.floats(-3, 3, width=width)))
    rois = draw(arrays(np_type, (r, 4), elements=st.floats(-3, max(h, w) + 3, width=width)))
    lo = draw(st.integers(1, 2))
    desc = roi_align1(x.shape, (r, 4), (oh, ow), dtype=dtype,
                      interpolation=draw(st.sampled_from(["LINEAR", "NEAREST_NEIGHBOR"])),
                      reduction=draw(st.sampled_from(["AVERAGE", "MAX"])),
                      samples=(lo, lo + draw(st.integers(0, 2))), corners=draw(st.booleans()),
                      offsets=(draw(st.sampled_from([0.0, 0.5, 0.25])), draw(st.sampled_from([-0.5, 0.0]))),
                      oob=draw(st.sampled_from([0.0, -2.0])), scale=(draw(st.sampled_from([1.0, 0.5])), 1.0))
    batch = draw(arrays(np.uint32, (r,), elements=st.integers(0, 1)))
    return desc, x, rois, batch


@settings(max_examples=examples(60), deadline=None)
@given(case=roi_align_cases())
def test_roi_align_fast_equals_simple(case):
    """Equal up to the order of float64 additions in AVERAGE (the fast form sums channels-last):
    the two float64 means differ by at most a few float64 ulps, so after the one rounding to the
    output type they agree except where that rounding is a near tie (at most 1 ulp of the output)."""
    import simple_roi_align

    desc, x, rois, batch = case
    fast = execute(desc, {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": batch})["OutputTensor"]
    simple = simple_roi_align.roi_align(desc, x, rois, batch)["OutputTensor"]
    assert fast.dtype == simple.dtype
    if desc.reduction_function == "MAX":
        np.testing.assert_array_equal(fast, simple)
    else:
        np.testing.assert_array_max_ulp(fast, simple, maxulp=1)
