"""``graphs.ops.roi_align.onnx_max_mode`` and ``onnx_roi_align`` compute what ONNX RoiAlign's
``mode="max"`` and ``mode="avg"`` mean, as ORT's CPU kernel computes them: checked against that
kernel, run live, bit for bit (NaN equal to NaN), on random inputs with both coordinate
transformations, every sampling ratio, regions inside, outside, inverted, empty and under one
pixel, and NaN/inf at the pixel an outside sample reads."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ep_testbed.graphs.ops.roi_align import onnx_max_mode, onnx_roi_align


def _ort(x, rois, batch_indices, attrs, opset):
    n, c, h, w = (int(v) for v in x.shape)
    r = int(len(rois))
    node = helper.make_node("RoiAlign", ["X", "R", "B"], ["Y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [n, c, h, w]),
                                            helper.make_tensor_value_info("R", TensorProto.FLOAT, [r, 4]),
                                            helper.make_tensor_value_info("B", TensorProto.INT64, [r])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x, "R": rois, "B": batch_indices})[0]


def _draw(rng):
    n, c, h, w = (int(v) for v in (rng.integers(1, 3), rng.integers(1, 4), rng.integers(1, 9), rng.integers(1, 9)))
    r = int(rng.integers(1, 5))
    x = (rng.integers(-8, 9, size=(n, c, h, w)) / rng.choice([1, 4, 8])).astype(np.float32)
    if rng.random() < 0.2:
        x[0, 0, 0, 0] = rng.choice([np.inf, -np.inf, np.nan])
    rois = rng.uniform(-4, 12, size=(r, 4)).astype(np.float32)
    if rng.random() < 0.8:  # mostly regions of positive size, some inverted
        rois[:, 2:] = rois[:, :2] + rng.uniform(0, 6, size=(r, 2)).astype(np.float32)
    if rng.random() < 0.2:  # an empty region: no sample under an adaptive count in half_pixel mode
        rois[0, 2:] = rois[0, :2]
    attrs = dict(mode="max", output_height=int(rng.integers(1, 4)), output_width=int(rng.integers(1, 4)),
                 sampling_ratio=int(rng.choice([0, 0, 1, 2, 3])), spatial_scale=float(rng.choice([1, 0.5, 0.25, 1.7])))
    return x, rois, rng.integers(0, n, size=r).astype(np.int64), attrs


def _against_the_kernel(seed: int, mode: str, half_pixel: bool, rounded: bool = False) -> tuple[int, int]:
    """150 random draws computed by ``onnx_roi_align`` and by ORT's CPU kernel, each asserted
    equal bit for bit (NaN equal to NaN); (draws compared, draws with an empty region under an
    adaptive count in half_pixel mode). ``rounded``: values whose sums round in float32, so the
    order of the additions shows in the last bit."""
    rng = np.random.default_rng(seed)
    compared = empty = 0
    for _ in range(150):
        x, rois, batch_indices, attrs = _draw(rng)
        if rounded:
            x = np.where(np.isfinite(x), rng.standard_normal(x.shape) * 3, x).astype(np.float32)
        attrs["mode"] = mode
        if half_pixel:
            attrs["coordinate_transformation_mode"] = "half_pixel"
        try:
            got = _ort(x, rois, batch_indices, attrs, 16 if half_pixel else 10)
        except Exception:  # ORT >= 1.3x refuses a negative sample grid (an inverted half_pixel region)
            continue
        ours = (onnx_max_mode if mode == "max" else onnx_roi_align)(x, rois, batch_indices, attrs, half_pixel)
        assert np.array_equal(ours, got, equal_nan=True), attrs
        compared += 1
        empty += bool(half_pixel and attrs["sampling_ratio"] == 0 and (rois[:, 2:] == rois[:, :2]).any())
    return compared, empty


@pytest.mark.parametrize("half_pixel", [True, False])
def test_onnx_max_mode_is_what_orts_cpu_kernel_computes(half_pixel):
    compared, _ = _against_the_kernel(7 if half_pixel else 8, "max", half_pixel)
    assert compared >= 120


def test_onnx_max_mode_differs_from_the_max_of_samples():
    # one sample at the centre of a 2x2 image: the page interpolates 0.25*(1+2+3+4) = 2.5; ONNX's
    # max mode takes the largest weighted corner, 0.25*4 = 1
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    out = onnx_max_mode(x, np.array([[0.5, 0.5, 1.5, 1.5]], np.float32), np.zeros(1, np.int64),
                        dict(output_height=1, output_width=1, sampling_ratio=1, spatial_scale=1.0), True)
    assert out.item() == 1.0


def test_onnx_max_mode_refuses_what_the_caps_forbid():
    x = np.zeros((1, 1, 4, 4), np.float32)
    attrs = dict(output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0)
    assert onnx_max_mode(x, np.array([[0, 0, 1e6, 1e6]], np.float32), np.zeros(1, np.int64), attrs, True,
                         limit=10**6) is None


@pytest.mark.parametrize("half_pixel", [True, False])
def test_onnx_roi_align_avg_is_what_orts_cpu_kernel_computes(half_pixel):
    """mode="avg": the adaptive count without a cap, no sample (0) for an empty region in
    half_pixel mode, the 1x1 clamp of output_half_pixel, 0 * X[b, c, 0, 0] for a sample outside."""
    compared, empty = _against_the_kernel(17 if half_pixel else 18, "avg", half_pixel)
    assert compared >= 120 and (empty >= 3 or not half_pixel), (compared, empty)


@pytest.mark.parametrize("half_pixel", [True, False])
def test_onnx_roi_align_avg_adds_its_samples_in_the_kernels_order(half_pixel):
    compared, _ = _against_the_kernel(27 if half_pixel else 28, "avg", half_pixel, rounded=True)
    assert compared >= 120
