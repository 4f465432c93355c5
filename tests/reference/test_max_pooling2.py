"""MAX_POOLING2 reference: golden data, hand-worked cases, properties, agreement with ORT CPU."""

from __future__ import annotations

import numpy as np
import ort_oracle
import pytest
from descs_for_tests import max_pooling2
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis_profiles import examples

from ep_testbed.graphs.backend_cases import raw_cases as onnx_backend_cases
from ep_testbed.reference import execute

RNG = np.random.default_rng(99)


def run(desc, x):
    return execute(desc, {"InputTensor": x})


def test_onnx_argmax_precomputed_pads_golden():
    """ONNX test_maxpool_with_argmax_2d_precomputed_pads: 5x5 window, pads 2 everywhere."""
    case = onnx_backend_cases()["test_maxpool_with_argmax_2d_precomputed_pads"]
    (x,), (y, z) = case.data_sets[0]
    out = run(max_pooling2(x.shape, (5, 5), start=[2, 2], end=[2, 2]), x)
    np.testing.assert_array_equal(out["OutputTensor"], y)
    np.testing.assert_array_equal(out["OutputIndicesTensor"], z.astype(np.uint64))


def test_ort_golden_with_index():
    """MP-3: ORT's PoolTest.MaxPool1D_8_With_Index (runs on DML) pools [1, 2, 4] = 1..8 with a
    window of 2, stride 2, expecting indices 1, 3, 5, 7: the channel offset is included. As a 4-D
    DML tensor: {1, 2, 1, 4}."""
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 1, 4)
    out = run(max_pooling2(x.shape, (1, 2), strides=[1, 2], indices="UINT32"), x)
    np.testing.assert_array_equal(out["OutputTensor"].ravel(), [2, 4, 6, 8])
    np.testing.assert_array_equal(out["OutputIndicesTensor"].ravel(), [1, 3, 5, 7])
    assert out["OutputIndicesTensor"].dtype == np.uint32


def test_onnx_dilations_golden():
    """ONNX test_maxpool_3d_dilations / 2d_dilations: dilated windows (MP-1)."""
    for name in ("test_maxpool_2d_dilations", "test_maxpool_3d_dilations"):
        case = onnx_backend_cases()[name]
        (x,), (y,) = case.data_sets[0]
        attrs = {a.name: list(a.ints) for a in case.model.graph.node[0].attribute}
        desc = max_pooling2(x.shape, attrs["kernel_shape"], strides=attrs["strides"], dilations=attrs["dilations"],
                            indices=None)
        np.testing.assert_array_equal(run(desc, x)["OutputTensor"], y)


def test_dilated_output_size():
    """MP-1: 7 wide, window 3, dilation 2 spans 5 -> (7 - 5) / 1 + 1 = 3 outputs (the undilated
    formula would say 5); each reads positions o, o+2, o+4."""
    x = np.array([3, 1, 4, 1, 5, 9, 2], dtype=np.float32).reshape(1, 1, 1, 7)
    out = run(max_pooling2(x.shape, (1, 3), dilations=[1, 2]), x)
    np.testing.assert_array_equal(out["OutputTensor"].ravel(), [5, 9, 5])
    np.testing.assert_array_equal(out["OutputIndicesTensor"].ravel(), [4, 5, 4])


def test_padding_never_wins():
    """MP-2: an all-negative input with padding: padded positions are skipped, so no output is
    0 and every index points inside the input."""
    x = -(1 + RNG.random((1, 2, 4, 4))).astype(np.float32)
    out = run(max_pooling2(x.shape, (3, 3), start=[2, 1], end=[1, 2]), x)
    assert (out["OutputTensor"] < 0).all()
    np.testing.assert_array_equal(x.ravel()[out["OutputIndicesTensor"].astype(np.int64)], out["OutputTensor"])


def test_first_maximum_wins_ties():
    """MP-4: window [[1, 5, 5], [5, 2, 5], [0, 0, 0]]: the first 5 in row-major order is (0, 1)."""
    x = np.array([[1, 5, 5], [5, 2, 5], [0, 0, 0]], dtype=np.float32).reshape(1, 1, 3, 3)
    out = run(max_pooling2(x.shape, (3, 3)), x)
    assert out["OutputIndicesTensor"].item() == 1


def test_nan_is_ignored_unless_all_nan():
    """NAN-1."""
    x = np.array([np.nan, 5, np.nan, np.nan, 0, -1, np.nan, np.nan], dtype=np.float32).reshape(1, 1, 2, 4)
    out = run(max_pooling2(x.shape, (2, 2), strides=[2, 2]), x)
    assert out["OutputTensor"][0, 0, 0, 0] == 5 and out["OutputIndicesTensor"][0, 0, 0, 0] == 1
    assert np.isnan(out["OutputTensor"][0, 0, 0, 1]) and out["OutputIndicesTensor"][0, 0, 0, 1] == 2


def test_minus_infinity_window():
    x = np.full((1, 1, 2, 2), -np.inf, dtype=np.float32)
    out = run(max_pooling2(x.shape, (2, 2)), x)
    assert out["OutputTensor"].item() == -np.inf and out["OutputIndicesTensor"].item() == 0


@pytest.mark.parametrize("dtype", ["INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32", "UINT16", "UINT8", "FLOAT16"])
def test_every_data_type_is_exact(dtype):
    """Every InputTensor type of the FL 5.0 table: the max selects, so the result equals the
    float64 computation of the same values, extremes of the type included."""
    from ep_testbed.reference.dtypes import numpy_dtype

    np_type = numpy_dtype(dtype)
    if np.issubdtype(np_type, np.integer):
        info = np.iinfo(np_type)
        x = RNG.integers(info.min, info.max, (2, 2, 5, 6), dtype=np_type, endpoint=True)
        x.flat[0], x.flat[1] = info.min, info.max
    else:
        x = RNG.standard_normal((2, 2, 5, 6)).astype(np_type)
    desc = max_pooling2(x.shape, (2, 3), strides=[1, 2], start=[1, 0], end=[0, 1], dtype=dtype)
    out = run(desc, x)
    assert out["OutputTensor"].dtype == np_type
    np.testing.assert_array_equal(x.ravel()[out["OutputIndicesTensor"].astype(np.int64)], out["OutputTensor"])
    as_float = run(max_pooling2(x.shape, (2, 3), strides=[1, 2], start=[1, 0], end=[0, 1]), x.astype(np.float64).astype(np.float32)) \
        if dtype in ("INT8", "UINT8", "INT16", "UINT16", "FLOAT16") else None
    if as_float is not None:
        np.testing.assert_array_equal(out["OutputIndicesTensor"], as_float["OutputIndicesTensor"])


def test_five_d():
    x = RNG.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
    out = run(max_pooling2(x.shape, (2, 2, 3), strides=[2, 1, 2], start=[0, 1, 1], end=[1, 0, 1],
                           dilations=[1, 2, 1]), x)
    y, idx = ort_oracle.max_pool(x, kernel_shape=(2, 2, 3), strides=(2, 1, 2), pads=(0, 1, 1, 1, 0, 1),
                                 dilations=(1, 2, 1))
    np.testing.assert_array_equal(out["OutputTensor"], y)
    np.testing.assert_array_equal(out["OutputIndicesTensor"].astype(np.int64), idx)


def test_agrees_with_onnxruntime_cpu_including_ties():
    """MaxPool-12 with Indices (storage_order 0, explicit pads < kernel): values and indices equal
    ORT CPU's, on integer-valued inputs full of ties, fp32, int8 and uint8."""
    rng = np.random.default_rng(5)
    for trial in range(60):
        dims = int(rng.choice([2, 3]))
        spatial = tuple(int(s) for s in rng.integers(3, 8, dims))
        window = tuple(int(k) for k in rng.integers(1, 4, dims))
        strides = tuple(int(s) for s in rng.integers(1, 3, dims))
        dil = tuple(int(d) for d in rng.integers(1, 3, dims))
        start = tuple(int(rng.integers(0, k)) for k in window)
        end = tuple(int(rng.integers(0, k)) for k in window)
        if any(spatial[i] + start[i] + end[i] < (window[i] - 1) * dil[i] + 1 for i in range(dims)):
            continue
        np_type, dml = [(np.float32, "FLOAT32"), (np.int8, "INT8"), (np.uint8, "UINT8")][trial % 3]
        x = rng.integers(0, 4, (2, 2, *spatial)).astype(np_type)  # few distinct values: many ties
        try:
            desc = max_pooling2(x.shape, window, strides=list(strides), start=list(start), end=list(end),
                                dilations=list(dil), dtype=dml)
            out = run(desc, x)
        except ValueError as e:  # a window of padding only is refused (MP-2); ORT would invent a value
            assert "only padding" in str(e) or "would see only padding" in str(e)
            continue
        y, idx = ort_oracle.max_pool(x, kernel_shape=window, strides=strides, pads=start + end, dilations=dil)
        np.testing.assert_array_equal(out["OutputTensor"], y)
        np.testing.assert_array_equal(out["OutputIndicesTensor"].astype(np.int64), idx)


@settings(max_examples=examples(60), deadline=None)
@given(h=st.integers(1, 7), w=st.integers(1, 7), kh=st.integers(1, 3), kw=st.integers(1, 3),
       sh=st.integers(1, 3), sw=st.integers(1, 3), ph=st.integers(0, 2), pw=st.integers(0, 2),
       dh=st.integers(1, 2), dw=st.integers(1, 2), data=st.data())
def test_properties(h, w, kh, kw, sh, sw, ph, pw, dh, dw, data):
    """Shape law, index validity (the value at each index equals the output), the index lies in
    its window, and the output is the maximum over its window."""
    from ep_testbed.reference import DescError, validate

    try:
        desc = max_pooling2((1, 2, h, w), (kh, kw), strides=[sh, sw], start=[ph, pw], end=[pw, ph],
                            dilations=[dh, dw])
        validate(desc)
    except DescError:
        assume(False)  # the window does not fit, or sees only padding: refused by validation
    x = data.draw(arrays(np.float32, (1, 2, h, w), elements=st.integers(-3, 3).map(float)), label="x")
    out = run(desc, x)
    y, idx = out["OutputTensor"], out["OutputIndicesTensor"].astype(np.int64)
    assert y.shape == tuple(desc.output_tensor.sizes) == idx.shape
    np.testing.assert_array_equal(x.ravel()[idx], y)
    plane = idx % (h * w)
    rows, cols = plane // w, plane % w
    for oy in range(y.shape[2]):
        for ox in range(y.shape[3]):
            r, c = rows[0, :, oy, ox], cols[0, :, oy, ox]
            assert ((r + ph - oy * sh) % dh == 0).all() and ((c + pw - ox * sw) % dw == 0).all()
            assert ((r + ph - oy * sh) // dh < kh).all() and ((c + pw - ox * sw) // dw < kw).all()
            window_rows = [oy * sh - ph + i * dh for i in range(kh) if 0 <= oy * sh - ph + i * dh < h]
            window_cols = [ox * sw - pw + j * dw for j in range(kw) if 0 <= ox * sw - pw + j * dw < w]
            expected = x[0][:, window_rows][:, :, window_cols].reshape(2, -1).max(axis=1)
            np.testing.assert_array_equal(y[0, :, oy, ox], expected)


def test_window_contains_matches_the_windows_the_simple_form_gathers():
    """Every index the reference returns lies in its window; shifting it by one column (or
    into another channel) leaves the window unless the window covers that element too."""
    from ep_testbed.reference.max_pooling2 import window_contains

    x = RNG.standard_normal((2, 3, 6, 7)).astype(np.float32)
    desc = max_pooling2(x.shape, (2, 3), strides=[2, 1], start=[1, 0], end=[0, 2], dilations=[1, 2])
    idx = run(desc, x)["OutputIndicesTensor"].astype(np.int64).ravel()
    positions = np.arange(idx.size)
    assert window_contains(desc, positions, idx).all()
    other_channel = idx + 6 * 7
    assert not window_contains(desc, positions, np.where(other_channel < x.size, other_channel, -1)).any()
    assert not window_contains(desc, positions, np.full(idx.size, x.size)).any()


def test_the_layout_copied_in_blocks_equals_one_copy(monkeypatch):
    """``phase_layout`` copies the input a block of rows at a time (every phase of a block before
    the next, for the processor's cache): the outputs of every catalog case and every reading are
    the same, bit for bit, with blocks of one row as with one block for the whole input."""
    from ep_testbed.graphs.catalog import build_catalog
    from ep_testbed.reference import DescError, execute_reading, readings_of
    from ep_testbed.reference import max_pooling2 as kernel

    def outputs(case, names, block):
        monkeypatch.setattr(kernel, "LAYOUT_BLOCK_BYTES", block)
        try:
            return execute_reading(case.desc, case.inputs(), names).outputs
        except DescError as exc:
            return str(exc)

    for case in build_catalog(["max_pooling2"]):
        for names in [[], *[[r.name] for r in readings_of(case.desc)]]:
            whole, rows = outputs(case, names, 2**62), outputs(case, names, 1)
            assert type(whole) is type(rows), case.id
            if isinstance(whole, str):
                assert whole == rows, case.id
                continue
            for member in whole:
                assert whole[member].dtype == rows[member].dtype, (case.id, names, member)
                assert whole[member].tobytes() == rows[member].tobytes(), (case.id, names, member)
