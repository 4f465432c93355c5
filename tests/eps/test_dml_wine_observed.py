"""What DirectML itself does where the reference says otherwise, observed on the real DirectML EP
(DirectML.dll 1.15.4, onnxruntime-directml 1.24.4) in its Wine host: the minimal repros behind the
entries of harness/expectations/dml.json and the decisions of reference/DECISIONS.md that cite this
file. Each DirectML fact is shown against a second route that rules the emulation out (ORT's CPU
EP under Wine runs the same model; +inf passing where -inf does not; exact coordinates), and each
artefact of the emulated device (vkd3d on lavapipe) by what the device itself reports.

A test here fails when DirectML, or the emulated device, changes: the matching dml.json entry is
then out of date. Needs `bash tools/dml-wine.sh` (Linux); without it these tests FAIL naming it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from dml_wine_kit import run_windows_program

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
from dml_observed_values import DML_SINGLE_SAMPLES  # noqa: E402  (the same probes, held once)
from onnx import TensorProto, helper

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.graphs.from_onnx import import_node
from ep_testbed.reference import desc_from_dml, execute, execute_reading

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the DirectML host runs under Wine on Linux")

DML, CPU = "DmlExecutionProvider", "CPUExecutionProvider"
FLT_MAX = np.finfo(np.float32).max
INF, NAN = np.float32(np.inf), np.float32(np.nan)


def one_node(op_type, inputs, outputs, *, opset=16, **attrs) -> bytes:
    """A one-node model named ``n``; ``inputs``/``outputs``: (name, TensorProto type, shape)."""
    node = helper.make_node(op_type, [n for n, _, _ in inputs], [n for n, _, _ in outputs], name="n", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


def both_routes(host, model: bytes, feeds) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The model's outputs on DirectML and on ORT's CPU EP in the same Wine host, each proven placed."""
    dml = host.run(model, feeds, shared_device=True)
    cpu = host.run(model, feeds, provider="CPU")
    assert dml.ok and cpu.ok, (dml.error_message, cpu.error_message)
    assert dml.placement(["n"]) == {"n": DML} and cpu.placement(["n"]) == {"n": CPU}
    return dml.outputs, cpu.outputs


def roi_align1(rois: np.ndarray, height: int = 4, width: int = 4) -> object:
    """ROI_ALIGN1 with one sample per output at each region's centre (an empty region: its
    corner), no pixel offsets, OutOfBoundsInputValue 0: the sample lands where the ROI says."""
    return desc_from_dml({
        "Type": "DML_OPERATOR_ROI_ALIGN1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, height, width]},
        "ROITensor": {"DataType": "FLOAT32", "Sizes": [len(rois), 4]},
        "BatchIndicesTensor": {"DataType": "UINT32", "Sizes": [len(rois)]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [len(rois), 1, 1, 1]}, "ReductionFunction": "AVERAGE",
        "InterpolationMode": "LINEAR", "SpatialScaleX": 1.0, "SpatialScaleY": 1.0, "InputPixelOffset": 0.0,
        "OutputPixelOffset": -0.5, "OutOfBoundsInputValue": 0.0, "MinimumSamplesPerOutput": 1,
        "MaximumSamplesPerOutput": 1, "AlignRegionsToCorners": False})


def desc_routes(host, desc, arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reference, DirectML, ORT's CPU EP under Wine) for a desc, through the mapper."""
    mapping = to_onnx(desc)
    feeds = mapping.feeds(arrays)
    out = {}
    for provider in ("DML", "CPU"):
        run = host.run(mapping.model.SerializeToString(), feeds, provider=provider, shared_device=True)
        run.raise_for_error()
        out[provider] = mapping.outputs(run.outputs)["OutputTensor"].ravel()
    return execute(desc, arrays)["OutputTensor"].ravel(), out["DML"], out["CPU"]


def reading(desc, arrays, names) -> np.ndarray:
    """The reference's output under the named readings, flat (``reference.execute_reading``)."""
    return execute_reading(desc, arrays, names).outputs["OutputTensor"].ravel()


def points(pairs) -> np.ndarray:
    """Empty regions at (y, x) pairs, as ROI rows [x1, y1, x2, y2]."""
    return np.array([[x, y, x, y] for y, x in pairs], dtype=np.float32)


# --- DirectML facts ---------------------------------------------------------------------------

def test_directml_starts_max_windows_at_minus_flt_max(host):
    """MP-8: a window of only -inf (or of NaN only) is -FLT_MAX on DirectML, where its maximum is
    -inf (or NaN); +inf passes through, so the device does not flush infinities. MaxRoiPool too."""
    x = np.array([-INF, -INF, INF, 1, NAN, NAN, -INF, 2], dtype=np.float32).reshape(1, 1, 2, 4)
    model = one_node("MaxPool", [("X", TensorProto.FLOAT, [1, 1, 2, 4])], [("Y", TensorProto.FLOAT, [1, 1, 2, 2])],
                     opset=12, kernel_shape=[1, 2], strides=[1, 2])
    dml, _ = both_routes(host, model, {"X": x})
    np.testing.assert_array_equal(dml[0].ravel(), [-FLT_MAX, INF, -FLT_MAX, 2])
    plane = np.full((1, 1, 4, 4), -INF, dtype=np.float32)
    plane[0, 0, 3, 3] = 2
    pool = one_node("MaxRoiPool", [("X", TensorProto.FLOAT, [1, 1, 4, 4]), ("R", TensorProto.FLOAT, [2, 5])],
                    [("Y", TensorProto.FLOAT, [2, 1, 1, 1])], opset=12, pooled_shape=[1, 1])
    dml, _ = both_routes(host, pool, {"X": plane, "R": np.array([[0, 0, 0, 1, 1], [0, 2, 2, 3, 3]], np.float32)})
    np.testing.assert_array_equal(dml[0].ravel(), [-FLT_MAX, 2])


def test_directml_reads_the_input_on_the_open_range(host):
    """RA-5: a sample exactly at -1 or exactly at the input's size reads OutOfBoundsInputValue on
    DirectML, as the reference's primary reading does; ORT's CPU EP (the same model under Wine)
    reads the edge pixel, as the ``closed-edge`` reading does; 1/1024 inside, all agree."""
    e = 2.0 ** -10
    x = (np.arange(16, dtype=np.float32) + 1).reshape(1, 1, 4, 4)
    for rois, edge in ((points([(-1.0, 1.0), (4.0, 1.0), (-1.0 + e, 1.0), (4.0 - e, 1.0)]), [2.0, 14.0]),
                       (points([(1.0, -1.0), (1.0, 4.0), (1.0, -1.0 + e), (1.0, 4.0 - e)]), [5.0, 8.0])):
        arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(4, np.uint32)}
        desc = roi_align1(rois)
        reference, dml, cpu = desc_routes(host, desc, arrays)
        np.testing.assert_array_equal(dml[:2], [0.0, 0.0])
        np.testing.assert_allclose(dml, reference, rtol=1e-6)
        np.testing.assert_array_equal(cpu[:2], edge)
        np.testing.assert_array_equal(cpu, reading(desc, arrays, ["closed-edge"]))


def test_directml_interpolates_a_lerp_per_axis_and_pixel_zero_alone_below_zero(host):
    """RA-5: an infinite tap makes DirectML's sample NaN where the weighted average gives the
    infinity; a sample clamped up from below 0 on both axes reads pixel 0 alone (no 0 * NaN). The
    reference's primary reading is DirectML's; ORT's CPU EP is the ``weighted-interpolation``
    reading."""
    x = np.array([[-INF, 1, INF, 2], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], np.float32).reshape(1, 1, 4, 4)
    rois = points([(0.0, 0.5), (0.0, 1.5), (0.0, 0.0)])
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(3, np.uint32)}
    with np.errstate(invalid="ignore"):
        reference, dml, cpu = desc_routes(host, roi_align1(rois), arrays)
        weighted = reading(roi_align1(rois), arrays, ["weighted-interpolation"])
    assert np.isnan(dml).all() and np.isnan(reference).all()
    np.testing.assert_array_equal(cpu, [-INF, INF, -INF])
    np.testing.assert_array_equal(cpu, weighted)
    x = np.array([[3.375, NAN, 1, 2], [INF, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], np.float32).reshape(1, 1, 4, 4)
    rois = points([(-0.5, -0.5), (0.0, -0.5)])
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(2, np.uint32)}
    with np.errstate(invalid="ignore"):
        reference, dml, cpu = desc_routes(host, roi_align1(rois), arrays)
    assert np.isnan(cpu).all()
    assert dml[0] == np.float32(3.375) and np.isnan(dml[1])  # only when both axes are clamped from below
    np.testing.assert_array_equal(reference, dml)


@pytest.mark.parametrize("image, probe, directml", DML_SINGLE_SAMPLES)
def test_directml_lerps_between_taps_clamped_to_the_input(host, image, probe, directml):
    """RA-5's evidence: single samples around an infinite (or NaN) pixel, on it, on pixel centres,
    clamped from below and from above on one axis and both. DirectML's values are the reference's
    primary reading at every probe (and the values tests/reference/test_roi_align.py holds)."""
    rois = points(probe)
    x = np.array(image, dtype=np.float32).reshape(1, 1, 4, 4)
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(len(probe), np.uint32)}
    with np.errstate(invalid="ignore"):
        reference, dml, _ = desc_routes(host, roi_align1(rois), arrays)
    np.testing.assert_array_equal(dml, np.array(directml, dtype=np.float32))
    np.testing.assert_array_equal(reference, dml)


def test_directml_rounds_roi_pooling_halves_to_even(host):
    """RP-1: ROIs [0, x, 0, x, 0] pool column round(x): to even on DirectML (HLSL's round), the
    reference's primary reading; away from zero on ORT's CPU EP, the ``half-away-rounding`` reading."""
    halves = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5])
    rois = np.stack([np.zeros(6), halves, np.zeros(6), halves, np.zeros(6)], axis=1).astype(np.float32)
    desc = desc_from_dml({"Type": "DML_OPERATOR_ROI_POOLING", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 8]},
                          "ROITensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 6, 5]},
                          "OutputTensor": {"DataType": "FLOAT32", "Sizes": [6, 1, 1, 1]}, "SpatialScale": 1.0,
                          "PooledSize": {"Height": 1, "Width": 1}})
    arrays = {"InputTensor": np.arange(8, dtype=np.float32).reshape(1, 1, 1, 8), "ROITensor": rois.reshape(1, 1, 6, 5)}
    reference, dml, cpu = desc_routes(host, desc, arrays)
    np.testing.assert_array_equal(dml, [0, 2, 2, 4, 4, 6])
    np.testing.assert_array_equal(reference, dml)
    np.testing.assert_array_equal(cpu, [1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(cpu, reading(desc, arrays, ["half-away-rounding"]))


def test_directml_refuses_a_negative_spatial_scale(host):
    """DirectML's operator creation refuses RoiAlign with spatial_scale -1 (E_INVALIDARG), with no
    line of the emulation's own log; 1 and 0 build; ORT's CPU EP runs all three."""
    feeds = {"X": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), "R": np.array([[1, 1, 3, 3]], np.float32),
             "B": np.zeros(1, np.int64)}
    for scale in (1.0, 0.0, -1.0):
        model = one_node("RoiAlign", [("X", TensorProto.FLOAT, [1, 1, 4, 4]), ("R", TensorProto.FLOAT, [1, 4]),
                                      ("B", TensorProto.INT64, [1])], [("Y", TensorProto.FLOAT, [1, 1, 1, 1])],
                         output_height=1, output_width=1, sampling_ratio=1, spatial_scale=scale)
        dml = host.run(model, feeds, shared_device=True)
        assert host.run(model, feeds, provider="CPU").ok
        if scale < 0:
            assert dml.error_stage == "build" and "80070057" in dml.error_message and not dml.emulation_notes
        else:
            assert dml.ok, dml.error_message


def test_non_square_max_roi_pool_is_refused_by_directml(host):
    """The DML EP's transposed PooledSize (dml.json, predicted from DmlOperatorRoiPooling.cpp):
    DirectML refuses pooled_shape [3, 2] at operator creation, and runs [2, 2]."""
    feeds = {"X": np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6), "R": np.array([[0, 0, 0, 5, 5]], np.float32)}
    for pooled, ok in (([3, 2], False), ([2, 2], True)):
        model = one_node("MaxRoiPool", [("X", TensorProto.FLOAT, [1, 1, 6, 6]), ("R", TensorProto.FLOAT, [1, 5])],
                         [("Y", TensorProto.FLOAT, [1, 1, *pooled])], opset=12, pooled_shape=pooled)
        run = host.run(model, feeds, shared_device=True)
        assert run.ok is ok, run.error_message
        if not ok:
            assert "80070057" in run.error_message and not run.emulation_notes


def test_roi_align_10_runs_the_desc_the_dml_ep_builds(host):
    """The predicted RoiAlign-10 divergence for its predicted reason: DirectML's outputs equal the
    reference of the desc ORT's DML EP builds (InputPixelOffset 0.5, reading "dml-ep"), not the
    spec's."""
    case = next(c for c in build_catalog(["roi_align1"]) if c.id == "roi_align1/opset10-avg-fp32")
    mapping = to_onnx(case.desc, opset=case.opset)
    feeds = mapping.feeds(case.inputs())
    run = host.run(mapping.model.SerializeToString(), feeds, shared_device=True).raise_for_error()
    node = mapping.model.graph.node[0]
    arrays = [feeds[name] for name in node.input]
    got = {}
    for reading in ("spec", "dml-ep"):
        imported = import_node(node, [a.shape for a in arrays], [a.dtype for a in arrays], reading, 10)
        expected = imported.outputs(execute(imported.desc, imported.inputs(arrays)))[0]
        got[reading] = float(np.max(np.abs(expected.astype(np.float64) - run.outputs[0])))
    assert got["dml-ep"] < 1e-5 < 0.5 < got["spec"], got



def test_directml_computes_sample_coordinates_in_float32(host):
    """A tap pattern -FLT_MAX, -FLT_MIN over -1, FLT_MAX: along Y the two lerps come to about
    -(1 - t) * FLT_MAX and t * FLT_MAX, whose difference is FLT_MAX give or take a rounding, so
    whether the X lerp is +inf depends on the last bit of t. With the sample's coordinate computed
    by the page's formula in float32, step by step (the ``float32-coordinates`` reading), the four
    regions overflow; with the exact coordinate they do not. DirectML gives +inf, bit for bit the
    reading; ORT's CPU EP (weighted sums) gives finite values."""
    x = np.ones((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1:3] = [-FLT_MAX, -np.finfo(np.float32).tiny]
    x[0, 0, 2, 1:3] = [-1.0, FLT_MAX]
    y = np.array([[1.155910849571228, 1.839146614074707], [0.9720798134803772, 2.0251243114471436],
                  [1.0559157133102417, 1.9298970699310303], [1.1747968196868896, 1.8240059614181519]], np.float32)
    rois = np.stack([np.full(4, 1.0), y[:, 0], np.full(4, 1.25), y[:, 1]], axis=1).astype(np.float32)
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(4, np.uint32)}
    desc = roi_align1(rois)
    with np.errstate(invalid="ignore", over="ignore"):
        _, dml, cpu = desc_routes(host, desc, arrays)
        exact = reading(desc, arrays, ["float32-accumulation"])
        float32 = reading(desc, arrays, ["float32-accumulation", "float32-coordinates"])
    assert np.isfinite(exact).all() and np.isfinite(cpu).all()
    np.testing.assert_array_equal(dml, np.full(4, INF))
    np.testing.assert_array_equal(float32, dml)


def test_directml_counts_an_inverted_region_as_its_upright_twin(host):
    """A row [0, 0, 0, 10, 0, 0, 0, 0] and the region x 0.5..6 as given and inverted (6..0.5), an
    adaptive count (RoiAlign sampling_ratio 0: the DML EP's desc takes at least one sample, no
    upper clamp). The page's pseudo-code clamps the inverted region's negative ratio to its one
    sample, at the centre (7.5); DirectML gives both regions the same six samples, mirrored
    (1.80556): the ``upright-count`` reading, bit for bit in float32."""
    x = np.array([0, 0, 0, 10, 0, 0, 0, 0], np.float32).reshape(1, 1, 1, 8)
    rois = np.array([[0.5, 0.0, 6.0, 0.0], [6.0, 0.0, 0.5, 0.0]], np.float32)
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(2, np.uint32)}
    desc = desc_from_dml({
        "Type": "DML_OPERATOR_ROI_ALIGN1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 8]},
        "ROITensor": {"DataType": "FLOAT32", "Sizes": [2, 4]}, "BatchIndicesTensor": {"DataType": "UINT32", "Sizes": [2]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 1, 1, 1]}, "ReductionFunction": "AVERAGE",
        "InterpolationMode": "LINEAR", "SpatialScaleX": 1.0, "SpatialScaleY": 1.0, "InputPixelOffset": 0.5,
        "OutputPixelOffset": -0.5, "OutOfBoundsInputValue": 0.0, "MinimumSamplesPerOutput": 1,
        "MaximumSamplesPerOutput": 2**32 - 1, "AlignRegionsToCorners": False})
    primary, dml, _ = desc_routes(host, desc, arrays)
    upright = reading(desc, arrays, ["directml-ep-adaptive-count", "upright-count"])
    assert dml[0] == dml[1] and primary[0] != primary[1]
    assert abs(primary[1] - 7.5) < 1e-6 and abs(float(dml[0]) - 65 / 36) < 1e-5
    np.testing.assert_allclose(upright, dml, rtol=1e-6)


def test_a_float16_max_composed_in_float32_reads_minus_inf_where_all_samples_are_nan(host):
    """A FLOAT16 MAX desc whose ROIs the mapper rewrites runs its RoiAlign and MaxPool of samples
    in float32: an element whose samples are all NaN is -FLT_MAX in the model's float32 output
    (DirectML's MaxPool start; a MaxPool whose one window is the whole plane, an output of 1x1,
    gives -inf instead on this DirectML) and -inf once the host rounds it to
    float16. The float16 shader path of the device is not involved: no node is float16. The
    ``lowest-start`` reading (float32's lowest, rounded to the output type) gives the same."""
    desc = desc_from_dml({
        "Type": "DML_OPERATOR_ROI_ALIGN1", "InputTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 4, 4]},
        "ROITensor": {"DataType": "FLOAT16", "Sizes": [2, 4]}, "BatchIndicesTensor": {"DataType": "UINT32", "Sizes": [2]},
        "OutputTensor": {"DataType": "FLOAT16", "Sizes": [2, 1, 1, 2]}, "ReductionFunction": "MAX",
        "InterpolationMode": "LINEAR", "SpatialScaleX": 2.0, "SpatialScaleY": 1.0, "InputPixelOffset": 0.5,
        "OutputPixelOffset": -0.5, "OutOfBoundsInputValue": 0.0, "MinimumSamplesPerOutput": 2,
        "MaximumSamplesPerOutput": 2, "AlignRegionsToCorners": False})
    x = np.ones((1, 1, 4, 4), np.float16)
    x[0, 0, :2, :3] = np.nan
    rois = np.array([[0, 0, 1, 2], [1, 2, 2, 4]], np.float16)  # all NaN samples; all 1
    arrays = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(2, np.uint32)}
    mapping = to_onnx(desc)
    assert {t.type.tensor_type.elem_type for t in mapping.model.graph.output} == {TensorProto.FLOAT}
    feeds = mapping.feeds(arrays)
    run = host.run(mapping.model.SerializeToString(), feeds, shared_device=True).raise_for_error()
    np.testing.assert_array_equal(run.outputs[0].ravel(), [-FLT_MAX, -FLT_MAX, 1.0, 1.0])
    dml = mapping.outputs(run.outputs)["OutputTensor"].ravel()
    np.testing.assert_array_equal(dml, np.array([-np.inf, -np.inf, 1.0, 1.0], np.float16))
    with np.errstate(invalid="ignore"):
        assert np.isnan(execute(desc, arrays)["OutputTensor"].ravel()[:2]).all()
        np.testing.assert_array_equal(reading(desc, arrays, ["lowest-start"]), dml)

# --- the emulated device's -------------------------------------------------------------------

def test_the_emulated_device_reports_no_16_bit_support_and_no_4_gib_buffer(tmp_path):
    """Why float16 nodes are declined and a tensor just over 2 GiB fails here: the device (llvmpipe
    through vkd3d) has no 16-bit shader operations, so DirectML answers FLOAT16 unsupported (the DML
    EP declines such nodes), while float64 and 64-bit integers are supported (MaxPool in float64 is
    declined by the EP's registration, not the device); and it cannot make a 4 GiB buffer, which the
    DML EP's power-of-two allocator asks for a tensor just over 2 GiB."""
    facts = dict(line.split(" ", 1) for line in run_windows_program(
        Path(__file__).with_name("dml_device_probe.c"), tmp_path).splitlines() if " " in line)
    assert facts["d3d12.MinPrecisionSupport"] == "0" and facts["d3d12.Native16BitShaderOpsSupported"] == "0"
    assert facts["dml.tensor.FLOAT16"] == "0" and facts["dml.tensor.FLOAT32"] == "1"
    assert facts["dml.tensor.FLOAT64"] == "1" and facts["dml.tensor.INT64"] == "1"
    assert facts[f"buffer.{2**32 - 2**16}"] == "0x00000000" and facts[f"buffer.{2**32}"] == "0x8007000e"


def test_float16_nodes_leave_the_emulated_device_and_float32_ones_stay(host):
    """A float16 MaxPool is refused with CPU fallback disabled and placed on the CPU EP when it is
    allowed; the same node in float32 runs on DirectML."""
    for dtype, np_type in ((TensorProto.FLOAT16, np.float16), (TensorProto.FLOAT, np.float32)):
        model = one_node("MaxPool", [("X", dtype, [1, 1, 4, 4])], [("Y", dtype, [1, 1, 2, 2])], opset=12,
                         kernel_shape=[2, 2], strides=[2, 2])
        feeds = {"X": np.arange(16, dtype=np_type).reshape(1, 1, 4, 4)}
        strict = host.run(model, feeds, shared_device=True)
        allowed = host.run(model, feeds, shared_device=True, config_entries={
            "ep.dml.disable_graph_fusion": "1", "session.record_ep_graph_assignment_info": "1"})
        if np_type is np.float16:
            assert strict.error_stage == "build" and allowed.ok and allowed.placement(["n"]) == {"n": CPU}
        else:
            assert strict.ok and strict.placement(["n"]) == {"n": DML}


def test_the_emulated_device_refuses_the_out_of_bounds_compositions_vector_shaders(host):
    """roi_align/random-s0-005 (emulation-gap): DirectML's float32 Add and Mul kernels for a
    multiple of 4 elements are refused by vkd3d ("Failed to scan shader bytecode"), which the
    OutOfBoundsInputValue composition's helper nodes hit; the RoiAlign nodes alone run on
    DirectML, and the whole model on ORT's CPU EP under Wine equals the reference."""
    for count, refused in ((3, False), (4, True), (28, True), (29, False)):
        model = one_node("Add", [("A", TensorProto.FLOAT, [count]), ("B", TensorProto.FLOAT, [count])],
                         [("C", TensorProto.FLOAT, [count])], opset=13)
        run = host.run(model, {"A": np.ones(count, np.float32), "B": np.ones(count, np.float32)}, shared_device=True)
        assert (run.error_stage == "build") is refused and bool(run.emulation_notes) is refused, count
    case = next(c for c in build_catalog(["roi_align"]) if c.id == "roi_align/random-s0-005")
    mapping = to_onnx(case.desc, opset=case.opset)
    feeds = mapping.feeds(case.inputs())
    whole = host.run(mapping.model.SerializeToString(), feeds, shared_device=True)
    assert whole.error_stage == "build" and any("Failed to scan shader bytecode" in n for n in whole.emulation_notes)
    cpu = host.run(mapping.model.SerializeToString(), feeds, provider="CPU").raise_for_error()
    np.testing.assert_array_equal(mapping.outputs(cpu.outputs)["OutputTensor"],
                                  execute(case.desc, case.inputs())["OutputTensor"])
    graph = mapping.model.graph
    aligns = [n for n in graph.node if n.op_type == "RoiAlign"]
    alone = helper.make_model(helper.make_graph(aligns, "alone", list(graph.input), [
        helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None) for n in aligns]),
        opset_imports=list(mapping.model.opset_import), ir_version=mapping.model.ir_version)
    run = host.run(alone.SerializeToString(), feeds, shared_device=True).raise_for_error()
    assert run.placement([n.name for n in aligns]) == {n.name: DML for n in aligns}
