"""The fast reference equals its simple form bit for bit: the simple forms, kept in
this folder, gather every window / loop over every bin exactly as the pages read."""

from __future__ import annotations

import numpy as np
import simple_max_pooling2
import simple_roi_pooling
from descs_for_tests import max_pooling2, roi_pooling
from hypothesis import given, settings
from hypothesis import strategies as st

from ep_testbed.reference import DescError, execute


@settings(max_examples=150, deadline=None)
@given(dims=st.sampled_from([2, 3]), seed=st.integers(0, 2**31), dtype=st.sampled_from(
    ["FLOAT32", "FLOAT16", "INT8", "UINT8", "INT32", "UINT64"]), specials=st.booleans())
def test_max_pooling2_fast_equals_simple(dims, seed, dtype, specials):
    from ep_testbed.reference.dtypes import numpy_dtype

    rng = np.random.default_rng(seed)
    spatial = tuple(int(v) for v in rng.integers(1, 7, dims))
    window = tuple(int(v) for v in rng.integers(1, 4, dims))
    kw = dict(strides=[int(v) for v in rng.integers(1, 3, dims)], start=[int(rng.integers(0, k)) for k in window],
              end=[int(rng.integers(0, k)) for k in window], dilations=[int(v) for v in rng.integers(1, 3, dims)])
    np_type = numpy_dtype(dtype)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        x = rng.choice(np.array([info.min, info.min + 1, 0, 1, info.max], dtype=np_type), (2, 2, *spatial))
    else:
        x = rng.integers(-2, 3, (2, 2, *spatial)).astype(np_type)
        if specials:
            x.flat[rng.integers(0, x.size, 1 + x.size // 3)] = rng.choice([np.nan, -np.inf, np.inf, -0.0])
    try:
        desc = max_pooling2(x.shape, window, dtype=dtype, **kw)
        fast = execute(desc, {"InputTensor": x})
    except DescError:
        return
    simple = simple_max_pooling2.max_pooling2(desc, x)
    np.testing.assert_array_equal(fast["OutputTensor"], simple["OutputTensor"])
    assert fast["OutputTensor"].dtype == simple["OutputTensor"].dtype
    np.testing.assert_array_equal(fast["OutputIndicesTensor"], simple["OutputIndicesTensor"])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), nan=st.booleans())
def test_roi_pooling_fast_equals_simple(seed, nan):
    rng = np.random.default_rng(seed)
    h, w, ph, pw, r = (int(v) for v in rng.integers(1, 9, 5))
    x = rng.integers(-3, 4, (2, 3, h, w)).astype(np.float32)
    if nan:
        x.flat[rng.integers(0, x.size, x.size // 2)] = np.nan
    scale = float(rng.choice([1.0, 0.5, 0.25]))
    x1, y1 = rng.uniform(-4, w + 2, r), rng.uniform(-4, h + 2, r)
    rois = np.stack([rng.integers(0, 2, r), x1, y1, x1 + rng.uniform(0, w, r), y1 + rng.uniform(0, h, r)], 1) / \
        np.array([1, scale, scale, scale, scale])
    desc = roi_pooling(x.shape, r, (ph, pw), scale=scale)
    tensors = {"InputTensor": x, "ROITensor": rois.astype(np.float32).reshape(1, 1, r, 5)}
    fast = execute(desc, tensors)["OutputTensor"]
    simple = simple_roi_pooling.roi_pooling(desc, x, tensors["ROITensor"])["OutputTensor"]
    np.testing.assert_array_equal(fast, simple)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), dtype=st.sampled_from(["FLOAT32", "FLOAT16"]),
       mode=st.sampled_from(["LINEAR", "NEAREST_NEIGHBOR"]), reduction=st.sampled_from(["AVERAGE", "MAX"]),
       corners=st.booleans())
def test_roi_align_fast_equals_simple(seed, dtype, mode, reduction, corners):
    """Equal up to the order of float64 additions in AVERAGE (the fast form sums channels-last):
    the two float64 means differ by at most a few float64 ulps, so after the one rounding to the
    output type they agree except where that rounding is a near tie (at most 1 ulp of the output)."""
    import simple_roi_align
    from descs_for_tests import roi_align1

    rng = np.random.default_rng(seed)
    np_type = np.float32 if dtype == "FLOAT32" else np.float16
    h, w, oh, ow, r = (int(v) for v in rng.integers(1, 8, 5))
    x = rng.standard_normal((2, 3, h, w)).astype(np_type)
    rois = rng.uniform(-3, max(h, w) + 3, (r, 4)).astype(np_type)
    lo = int(rng.integers(1, 3))
    desc = roi_align1(x.shape, (r, 4), (oh, ow), dtype=dtype, interpolation=mode, reduction=reduction,
                      samples=(lo, lo + int(rng.integers(0, 3))), corners=corners,
                      offsets=(float(rng.choice([0.0, 0.5, 0.25])), float(rng.choice([-0.5, 0.0]))),
                      oob=float(rng.choice([0.0, -2.0])), scale=(float(rng.choice([1.0, 0.5])), 1.0))
    batch = rng.integers(0, 2, r).astype(np.uint32)
    fast = execute(desc, {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": batch})["OutputTensor"]
    simple = simple_roi_align.roi_align(desc, x, rois, batch)["OutputTensor"]
    assert fast.dtype == simple.dtype
    if reduction == "MAX":
        np.testing.assert_array_equal(fast, simple)
    else:
        np.testing.assert_array_max_ulp(fast, simple, maxulp=1)
