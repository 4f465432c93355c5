"""The real DirectML EP through the Wine host (harness/eps/dml_wine): outputs, placement, refusals,
crashes and timeouts.

Needs `bash tools/dml-wine.sh` (Linux). Without it these tests are skipped naming that command,
and fail under CI (``dml_wine_kit.needs_host``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from dml_wine_kit import needs_host
from onnx import TensorProto, helper

from ep_testbed.harness.eps.dml_wine import host as dml_host
from ep_testbed.harness.eps.dml_wine.host import (
    SETUP_COMMAND,
    DmlWineHost,
    HostCrashed,
    HostSetupError,
    HostTimeout,
    dtype_of,
    onnx_type_of,
)

DML = "DmlExecutionProvider"
RNG = np.random.default_rng(20261125)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the DirectML host runs under Wine on Linux "
                                "(on Windows the DirectML tests use onnxruntime-directml itself)")


def model(nodes, inputs, outputs, *, opset=16, ir_version=8) -> bytes:
    """A model of ``nodes`` at an IR version ONNX Runtime 1.24 loads (<= 13); every op input a
    graph input."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=ir_version).SerializeToString()


def linux_cpu(model_bytes: bytes, feeds) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_on_dml(run, nodes) -> None:
    """Each node has its own kernel event in the returned profile, naming the DML EP (graph
    fusion off), and the assignment info agrees."""
    assert run.ok, run.error_message
    traced = {e["name"][: -len("_kernel_time")]: e["args"]["provider"] for e in run.profile_events
              if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")}
    assert {n: traced.get(n) for n in nodes} == {n: DML for n in nodes}
    assert run.placement(nodes) == {n: DML for n in nodes}
    if run.assignment is not None:
        assert {n: run.assignment.get(n) for n in nodes} == {n: DML for n in nodes}


# ---------------------------------------------------------------------------------------------

def test_dtype_codes_round_trip():
    for dtype, code in [(np.float32, 1), (np.uint8, 2), (np.int8, 3), (np.int32, 6), (np.int64, 7), (np.bool_, 9),
                        (np.float16, 10), (np.float64, 11), (np.uint32, 12), (np.uint64, 13)]:
        assert onnx_type_of(dtype) == code and dtype_of(code) == np.dtype(dtype)
    with pytest.raises(ValueError):
        onnx_type_of(np.complex64)


def test_a_missing_home_folder_names_the_piece_and_the_set_up_command(tmp_path):
    with pytest.raises(HostSetupError) as info:
        DmlWineHost(home=tmp_path)
    assert SETUP_COMMAND in str(info.value) and "host.json" in str(info.value)


def test_hello_names_onnx_runtime_directml_and_the_device(host):
    hello = host.hello()
    assert hello["onnxruntime_version"] == "1.24.4"
    assert hello["directml_dll"]["file_version"].startswith("1.15.")
    assert hello["adapters"] and hello["d3d12"]["error"] is None
    assert hello["d3d12"]["meta_commands_workaround"].startswith(("applied", "not needed"))


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3]),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[2, 2], dilations=[2, 2]),
], ids=["plain", "pads", "ceil", "dilations"])
def test_max_pool_with_indices_is_bit_exact_with_the_cpu_ep(host, attrs):
    x = RNG.standard_normal((2, 3, 12, 10)).astype(np.float32)
    m = model([helper.make_node("MaxPool", ["X"], ["Y", "I"], name="pool", **attrs)],
              [("X", TensorProto.FLOAT, list(x.shape))], [("Y", TensorProto.FLOAT), ("I", TensorProto.INT64)],
              opset=12, ir_version=8)
    run = host.run(m, {"X": x})
    assert_on_dml(run, ["pool"])
    expected = linux_cpu(m, {"X": x})
    assert run.output_names == ["Y", "I"]
    for got, want in zip(run.outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("pooled", [[2, 2], [3, 3]])
def test_max_roi_pool_matches_the_cpu_ep(host, pooled):
    x = RNG.standard_normal((2, 3, 12, 10)).astype(np.float32)
    rois = np.array([[0, 1, 1, 8, 9], [1, 0, 2, 15, 20], [0, 3.3, 2.7, 7.9, 11.2], [1, 0, 0, 9, 11]], np.float32)
    m = model([helper.make_node("MaxRoiPool", ["X", "rois"], ["Y"], name="mrp", pooled_shape=pooled, spatial_scale=1.0)],
              [("X", TensorProto.FLOAT, list(x.shape)), ("rois", TensorProto.FLOAT, [4, 5])], [("Y", TensorProto.FLOAT)],
              ir_version=9)
    run = host.run(m, {"X": x, "rois": rois})
    assert_on_dml(run, ["mrp"])
    np.testing.assert_allclose(run.outputs[0], linux_cpu(m, {"X": x, "rois": rois})[0], rtol=0, atol=1e-5)


def roi_align_samples(x, rois, batch, out_h, out_w, ratio, scale, half_pixel, mode):
    """RoiAlign as the ONNX page states it, with max = the largest bilinear sample (what DirectML
    computes; ONNX Runtime's CPU EP takes the largest weighted corner instead). Regions here are
    larger than one pixel, so the output_half_pixel 1x1 clamp never applies."""
    _, channels, height, width = x.shape
    out = np.zeros((len(rois), channels, out_h, out_w), np.float64)
    offset = 0.5 if half_pixel else 0.0
    for r, (x1, y1, x2, y2) in enumerate(rois.astype(np.float64) * scale - offset):
        bin_h, bin_w = (y2 - y1) / out_h, (x2 - x1) / out_w
        grid_h = ratio or int(np.ceil((y2 - y1) / out_h))
        grid_w = ratio or int(np.ceil((x2 - x1) / out_w))
        plane = x[batch[r]].astype(np.float64)
        for ph in range(out_h):
            for pw in range(out_w):
                samples = [bilinear(plane, y1 + ph * bin_h + (iy + 0.5) * bin_h / grid_h,
                                    x1 + pw * bin_w + (ix + 0.5) * bin_w / grid_w, height, width)
                           for iy in range(grid_h) for ix in range(grid_w)]
                out[r, :, ph, pw] = np.max(samples, axis=0) if mode == "max" else np.mean(samples, axis=0)
    return out


def bilinear(plane, y, x, height, width):
    if y < -1 or y > height or x < -1 or x > width:
        return np.zeros(plane.shape[0])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = min(int(y), height - 1), min(int(x), width - 1)
    y1, x1 = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
    y = y0 if y0 >= height - 1 else y
    x = x0 if x0 >= width - 1 else x
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * plane[:, y0, x0] + (1 - ly) * lx * plane[:, y0, x1]
            + ly * (1 - lx) * plane[:, y1, x0] + ly * lx * plane[:, y1, x1])


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_16_runs_on_directml(host, mode, transform, ratio):
    x = RNG.standard_normal((1, 2, 10, 10)).astype(np.float32)
    rois = np.array([[0.5, 0.5, 6.2, 7.1], [1.0, 2.0, 9.0, 8.5], [2.2, 0.3, 4.4, 3.3]], np.float32)
    batch = np.zeros(3, np.int64)
    m = model([helper.make_node("RoiAlign", ["X", "rois", "B"], ["Y"], name="align", mode=mode, output_height=3,
                                output_width=4, sampling_ratio=ratio, spatial_scale=1.0,
                                coordinate_transformation_mode=transform)],
              [("X", TensorProto.FLOAT, [1, 2, 10, 10]), ("rois", TensorProto.FLOAT, [3, 4]),
               ("B", TensorProto.INT64, [3])], [("Y", TensorProto.FLOAT)], ir_version=10)
    feeds = {"X": x, "rois": rois, "B": batch}
    run = host.run(m, feeds)
    assert_on_dml(run, ["align"])
    want = roi_align_samples(x, rois, batch, 3, 4, ratio, 1.0, transform == "half_pixel", mode)
    np.testing.assert_allclose(run.outputs[0], want, rtol=0, atol=1e-5)
    if mode == "avg":
        np.testing.assert_allclose(run.outputs[0], linux_cpu(m, feeds)[0], rtol=0, atol=1e-5)


def test_the_cpu_ep_under_wine_is_the_second_route(host):
    x = RNG.standard_normal((1, 2, 7, 7)).astype(np.float32)
    m = model([helper.make_node("MaxPool", ["X"], ["Y"], name="pool", kernel_shape=[3, 3])],
              [("X", TensorProto.FLOAT, list(x.shape))], [("Y", TensorProto.FLOAT)])
    run = host.run(m, {"X": x}, provider="CPU")
    assert run.ok and run.placement(["pool"]) == {"pool": "CPUExecutionProvider"}
    np.testing.assert_array_equal(run.outputs[0], linux_cpu(m, {"X": x})[0])


def test_a_node_directml_lacks_is_refused_at_build_with_ort_text(host):
    m = model([helper.make_node("Det", ["X"], ["Y"], name="det")], [("X", TensorProto.FLOAT, [2, 3, 3])],
              [("Y", TensorProto.FLOAT)])
    run = host.run(m, {"X": RNG.standard_normal((2, 3, 3)).astype(np.float32)})
    assert run.error_stage == "build" and run.outputs == []
    assert "fallback to CPU EP has been explicitly disabled" in run.error_message
    # ORT wrote a profiling trace for the session that never was; the host removed it
    pid = host.info["process_id"]
    assert not list(Path(host.setup["prefix"], "drive_c", "users").glob(f"*/Temp/ep-testbed-host-{pid}-*"))
    # the same host goes on serving
    assert host.hello()["onnxruntime_version"] == "1.24.4"


def test_an_emulation_failure_is_told_from_directml_by_its_stderr(host):
    # vkd3d 1.14 cannot read the DXBC of DirectML's vectorised element-wise kernels (Add of 4 or
    # 8 float32 elements): session creation fails 0x80004005, fusion on or off. The request's
    # own stderr carries vkd3d's reason; the next request's does not.
    x = np.arange(8, dtype=np.float32)
    m = model([helper.make_node("Add", ["X", "X"], ["Y"], name="add")], [("X", TensorProto.FLOAT, [8])],
              [("Y", TensorProto.FLOAT)])
    run = host.run(m, {"X": x})
    if run.ok:  # a vkd3d that reads these shaders: then the answer must be right
        np.testing.assert_array_equal(run.outputs[0], x + x)
    else:
        assert run.error_stage == "build" and "80004005" in run.error_message
        assert any("Invalid shader" in note for note in run.emulation_notes), run.stderr
    pool = model([helper.make_node("MaxPool", ["X"], ["Y"], name="pool", kernel_shape=[2, 2])],
                 [("X", TensorProto.FLOAT, [1, 1, 4, 4])], [("Y", TensorProto.FLOAT)])
    after = host.run(pool, {"X": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)})
    assert after.ok and after.emulation_notes == []


def test_the_shared_directml_device_gives_the_same_bits_and_survives_a_refused_session(host):
    x = RNG.standard_normal((1, 3, 9, 9)).astype(np.float32)
    m = model([helper.make_node("MaxPool", ["X"], ["Y", "I"], name="pool", kernel_shape=[3, 3], strides=[2, 2])],
              [("X", TensorProto.FLOAT, list(x.shape))], [("Y", TensorProto.FLOAT), ("I", TensorProto.INT64)])
    own = host.run(m, {"X": x})
    shared = host.run(m, {"X": x}, shared_device=True)
    assert_on_dml(shared, ["pool"])
    for a, b in zip(own.outputs, shared.outputs):
        np.testing.assert_array_equal(a, b)
    det = model([helper.make_node("Det", ["X"], ["Y"], name="det")], [("X", TensorProto.FLOAT, [3, 3])],
                [("Y", TensorProto.FLOAT)])
    assert host.run(det, {"X": np.eye(3, dtype=np.float32)}, shared_device=True).error_stage == "build"
    again = host.run(m, {"X": x}, shared_device=True)
    np.testing.assert_array_equal(again.outputs[0], own.outputs[0])


def test_a_malformed_request_is_answered_and_the_host_goes_on(host):
    _, stage, message = host._call(dml_host._frame(2, b"\x01\x00"), None)  # a RUN cut short
    assert (stage, message) == ("request", "malformed RUN request")
    assert host.hello()["host_protocol"] == dml_host.HOST_PROTOCOL


def test_a_crash_raises_host_crashed_and_a_new_host_works():
    needs_host()
    doomed = DmlWineHost()
    try:
        with pytest.raises(HostCrashed) as info:
            doomed._test_abort()
        assert not doomed.alive and "died mid-request" in str(info.value)
        with pytest.raises(HostCrashed):
            doomed.hello()
    finally:
        doomed.close()
    with DmlWineHost() as fresh:
        assert fresh.hello()["onnxruntime_version"] == "1.24.4"


def test_a_request_past_its_timeout_kills_the_host():
    needs_host()
    slow = DmlWineHost()
    try:
        pid = slow.pid
        with pytest.raises(HostTimeout):
            slow._test_stall(60_000, timeout=1.0)
        assert not slow.alive
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # reaped, not only signalled
    finally:
        slow.close()
