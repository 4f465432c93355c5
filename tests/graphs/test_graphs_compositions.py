"""Every composition proven numerically: ORT's CPU EP running ``to_onnx``'s model agrees with the
reference under ONNX Runtime's own readings (``reference.execute_reading``: where ORT's kernels read
the page otherwise than the primary reading, tests/reference/test_readings.py) within the
tolerances of graphs_testkit (stated and justified there). Where a composition replaces a
tempting single node, the single node is shown to differ."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from graphs_testkit import agrees, is_selection, max_abs_error, run_cpu

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import UINT32_MAX, Case
from ep_testbed.graphs.cases.max_pooling2 import max_pooling2_desc
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.graphs.cases.roi_pooling import roi_pooling_desc
from ep_testbed.reference import execute_reading
from ep_testbed.reference.registry import spec_for

#: ONNX Runtime's kernels' readings of the page (the mapper's compositions are exact under them).
ORT_READINGS = {"roi_pooling": ["half-away-rounding", "float32-bins", "std-max-fold"],
                "roi_align": ["closed-edge", "weighted-interpolation", "zero-times-corner", "float32-accumulation"],
                "roi_align1": ["closed-edge", "weighted-interpolation", "zero-times-corner", "float32-accumulation"],
                "max_pooling2": []}


def execute(desc, tensors):
    """The reference's outputs under ONNX Runtime's readings."""
    return execute_reading(desc, tensors, ORT_READINGS[spec_for(desc).name]).outputs


def _check(desc, recipe="random", seed=0, opset=None, expect_kind="composed"):
    case = Case(id=f"test/{recipe}/{desc!r}"[:200], op=desc.TYPE, desc=desc, seed=seed, recipe=recipe)
    mapping = to_onnx(desc, opset)
    assert mapping.kind == expect_kind, [f for f in mapping.flags if f.kind != "exact"]
    tensors = case.inputs()
    assert not mapping.input_flags(tensors)
    expected = execute(desc, tensors)
    actual = run_cpu(mapping, tensors)
    for member in expected:
        err = max_abs_error(expected[member], actual[member])
        assert agrees(expected[member], actual[member], is_selection(desc)), (member, err)
    return mapping, tensors, expected


V1 = lambda **kw: roi_align_desc(True, **kw)  # noqa: E731

ROI_ALIGN_COMPOSITIONS = {
    "scales-x-ne-y": dict(sx=0.25, sy=0.5),
    "scales-x-ne-y-fp16": dict(sx=0.25, sy=0.5, dtype="FLOAT16"),
    "scales-x-ne-y-adaptive": dict(sx=1.0, sy=0.5, samples=(1, UINT32_MAX)),
    "offset0": dict(ipo=0.0),
    "offset0.25": dict(ipo=0.25),
    "offset0.75-adaptive": dict(ipo=0.75, samples=(1, UINT32_MAX)),
    "offset-0.5-n3": dict(ipo=-0.5, samples=(3, 3)),
    "out0": dict(opo=0.0),
    "out-0.25-n3": dict(opo=-0.25, samples=(3, 3)),
    "out0.3-n1": dict(opo=0.3, samples=(1, 1)),
    "corners-n2": dict(corners=True),
    "corners-n1-out1x1": dict(corners=True, samples=(1, 1), out=(1, 1)),
    "corners-n3-offsets": dict(corners=True, samples=(3, 3), ipo=0.0, opo=0.0),
    "oob-avg": dict(oob=1.5),
    "oob-avg-adaptive": dict(oob=-2.0, samples=(1, UINT32_MAX)),
    "oob-max-n2": dict(oob=1.5, reduction="MAX"),
    "max-n1": dict(reduction="MAX", samples=(1, 1)),
    "max-n2": dict(reduction="MAX", samples=(2, 2)),
    "max-n3-fp16": dict(reduction="MAX", samples=(3, 3), dtype="FLOAT16"),
    "uint32-batch-indices-4d-rois-4d": dict(bi_type="UINT32", bi_rank=4, roi_rank=4),
    "uint64-batch-indices-3d-rois-3d": dict(bi_type="UINT64", bi_rank=3, roi_rank=3),
    "everything": dict(reduction="MAX", sx=0.25, sy=0.5, ipo=0.25, opo=-0.25, oob=1.5, samples=(2, 2),
                       corners=True, roi_rank=4, bi_type="UINT32", bi_rank=2),
    "everything-fp16": dict(dtype="FLOAT16", reduction="MAX", sx=0.5, sy=1.0, ipo=0.0, opo=0.0, oob=-1.0,
                            samples=(3, 3), corners=True),
}


RECIPES = ["random", "outside-partly", "outside-wholly", "inverted", "empty", "one-pixel", "whole-image"]
# empty/inverted regions under an adaptive count are a data divergence (test_graphs_diverges)
PARAMS = [(name, recipe) for name in sorted(ROI_ALIGN_COMPOSITIONS) for recipe in RECIPES
          if not (ROI_ALIGN_COMPOSITIONS[name].get("samples") == (1, UINT32_MAX) and recipe in ("inverted", "empty"))]


@pytest.mark.parametrize("name, recipe", PARAMS)
def test_roi_align1_composition_is_exact(name, recipe):
    _check(V1(**ROI_ALIGN_COMPOSITIONS[name]), recipe)


def test_roi_align_v1_uint32_composition():
    _check(roi_align_desc(False, sx=0.5, sy=0.25, reduction="MAX", oob=0.5), "outside-partly")


@pytest.mark.parametrize("dtype", ["INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64"])
@pytest.mark.parametrize("indices", ["UINT32", "UINT64"])
def test_max_pooling2_integer_types_via_float64(dtype, indices):
    opset = 11 if dtype in ("INT8", "UINT8") else None  # int8/uint8 are native only from opset 12
    mapping, tensors, _ = _check(max_pooling2_desc(dtype=dtype, indices=indices, window=3, stride=2, start=1, end=1,
                                                   dilation=1), opset=opset)
    # the host widens and narrows: the model is the MaxPool node alone, pooling float64
    assert [n.op_type for n in mapping.model.graph.node] == ["MaxPool"]
    assert mapping.feeds(tensors)["InputTensor"].dtype == np.float64
    assert [i.type.tensor_type.elem_type for i in mapping.model.graph.input] == [onnx.TensorProto.DOUBLE]


def test_max_pooling2_extreme_integers_survive_the_float64_cast():
    for dtype in ("INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32"):
        native = dtype in ("INT8", "UINT8")  # MaxPool-12 lists them: no Cast needed
        _check(max_pooling2_desc(dtype=dtype, window=2), recipe="extremes", expect_kind="exact" if native else "composed")


def test_max_pooling2_uint32_indices_and_ties():
    _check(max_pooling2_desc(dtype="FLOAT32", indices="UINT32", window=3, stride=1, dims=3), recipe="ties")


def test_roi_pooling_spatial_scale_zero():
    _check(roi_pooling_desc(scale=0.0, pooled=(2, 3)))


def test_roi_pooling_reshape_only():
    _check(roi_pooling_desc(scale=0.25, pooled=(3, 2), dtype="FLOAT16"), recipe="outside-partly")


# --- the single node each composition replaces is not the same -----------------------------

def _single_node_error(desc, recipe, **overrides):
    """Max |reference - ORT| when ``to_onnx``'s RoiAlign attributes are replaced by ``overrides``
    and its ROI-rewrite / MaxPool nodes are left in place (a tempting shortcut)."""
    import onnx

    case = Case(id=f"naive/{recipe}", op=desc.TYPE, desc=desc, seed=0, recipe=recipe)
    mapping = to_onnx(desc)
    model = onnx.ModelProto()
    model.CopyFrom(mapping.model)
    for node in model.graph.node:
        if node.op_type == "RoiAlign":
            for attr in node.attribute:
                if attr.name in overrides:
                    node.attribute.remove(attr)
                    node.attribute.append(onnx.helper.make_attribute(attr.name, overrides[attr.name]))
                    break
    mapping.model = model
    tensors = case.inputs()
    return max_abs_error(execute(desc, tensors)["OutputTensor"], run_cpu(mapping, tensors)["OutputTensor"])


def test_onnx_max_mode_is_not_dml_max():
    """mode="max", sampling_ratio=1: the max of weighted corner terms, not the sample."""
    desc = V1(reduction="MAX", samples=(1, 1))
    assert _single_node_error(desc, "random", mode="max") > 0.1


def test_output_half_pixel_is_not_input_pixel_offset_0():
    """ORT's output_half_pixel clamps a region below one pixel to 1x1; the page does not."""
    desc = V1(ipo=0.0)
    mapping = to_onnx(desc)
    # the composition keeps half_pixel and shifts the ROIs; output_half_pixel without the shift
    # differs on regions smaller than a pixel:
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(mapping.model)
    for node in list(model.graph.node):
        if node.op_type == "Add":
            model.graph.node.remove(node)
            for other in model.graph.node:
                for i, name in enumerate(other.input):
                    if name == node.output[0]:
                        other.input[i] = node.input[0]
        if node.op_type == "RoiAlign":
            for attr in node.attribute:
                if attr.name == "coordinate_transformation_mode":
                    attr.s = b"output_half_pixel"
    mapping.model = model
    case = Case(id="naive/one-pixel-small", op=desc.TYPE, desc=desc, seed=0, recipe="empty")
    tensors = case.inputs()
    err = max_abs_error(execute(desc, tensors)["OutputTensor"], run_cpu(mapping, tensors)["OutputTensor"])
    assert err > 0.05


def test_roi_align_average_nan_and_inf_reach_only_the_outputs_that_sample_them():
    """ORT and the page (under ORT's weighted-interpolation reading) both interpolate per sample: a
    NaN/Inf taints an output element only if one of its samples reads it (X[b, c, 0, 0] is kept
    finite: see input_flags)."""
    for v1 in (True, False):
        desc = roi_align_desc(v1)
        case = Case(id="nan-inf/avg", op=desc.TYPE, desc=desc, seed=0, recipe="nan-inf")
        tensors = case.inputs()
        assert not np.isfinite(tensors["InputTensor"]).all()
        with np.errstate(invalid="ignore"):
            expected = execute(desc, tensors)["OutputTensor"]
        actual = run_cpu(to_onnx(desc), tensors)["OutputTensor"]
        assert 0 < np.isnan(actual).sum() < actual.size
        assert np.isnan(expected).sum() == np.isnan(actual).sum(), "NaN spread differs from ORT's per-sample NaNs"
        assert agrees(expected, actual)


@pytest.mark.parametrize("opset", [None, 10])
@pytest.mark.parametrize("reduction, samples", [("AVERAGE", (1, 1)), ("AVERAGE", (2, 2)), ("AVERAGE", (3, 3)),
                                                ("MAX", (2, 2)), ("MAX", (1, 1))])
def test_an_element_without_an_outside_sample_gets_nothing_added_for_out_of_bounds(reduction, samples, opset):
    """With a fixed sample count, the OutOfBoundsInputValue composition counts the outside samples
    instead of multiplying ``v`` by ``1 - RoiAlign(ones)``: the float32 weights of an inside sample
    sum to 1 only within an ulp or two, and ``v = 65504`` times that slack is 0.004, outside the
    tolerance of an element near 7 (fuzzed case ``roi_align1/fuzz-s1-b7-029``). Regions well inside
    the input, on ORT's CPU EP: the composed model gives, bit for bit, what the model without an
    OutOfBoundsInputValue gives (its RoiAlign node, with the MaxPool of MAX), in RoiAlign-16's
    graph and in RoiAlign-10's (whose opset has no Round)."""
    rng = np.random.default_rng(29)
    x = rng.uniform(-8, 8, (1, 3, 12, 16)).astype(np.float32)
    corner = rng.uniform(1, 6, (40, 2))
    rois = np.concatenate([corner, corner + rng.uniform(0.3, 5, (40, 2))], axis=1).astype(np.float32)
    tensors = {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(40, np.uint32)}
    outputs = {}
    for oob in (0.0, 65504.0):
        desc = roi_align_desc(True, reduction=reduction, sx=1.0, sy=1.0, oob=oob, samples=samples, rois=40,
                              batch=1, channels=3, height=12, width=16, out=(2, 3))
        outputs[oob] = run_cpu(to_onnx(desc, opset), tensors)["OutputTensor"]
    np.testing.assert_array_equal(outputs[65504.0], outputs[0.0])


@pytest.mark.parametrize("n, counted", [(32, True), (33, False)])
def test_the_out_of_bounds_composition_counts_up_to_1024_samples_per_element(n, counted):
    """The count form holds while ``m * RoiAlign(ones)`` stays far within a half of the count
    (``graphs.ops.roi_align.COUNTED_SAMPLES_MAX``): 32 x 32 samples are counted, 33 x 33 take
    ``v * (1 - share)``."""
    desc = roi_align_desc(True, oob=1.5, samples=(n, n))
    ops = [node.op_type for node in to_onnx(desc).model.graph.node]
    assert ("Round" in ops) is counted and ("Sub" in ops) is counted, ops
