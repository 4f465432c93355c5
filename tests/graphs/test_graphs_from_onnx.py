"""``from_onnx``: the round trip, the ONNX-spec reading, and the DML EP's quirks (each learned
from ORT's DML EP source, cited in graphs/from_onnx.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from graphs_testkit import max_abs_error
from onnx import helper

from ep_testbed.graphs import from_onnx, import_node, predicted_divergences, to_onnx
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import execute


def _node_io(model):
    op_node = next(n for n in model.graph.node if n.op_type in ("RoiAlign", "MaxPool", "MaxRoiPool"))
    shapes, types = [], []
    values = {v.name: v for v in list(model.graph.input) + list(model.graph.value_info)}
    inferred = onnx.shape_inference.infer_shapes(model)
    values.update({v.name: v for v in inferred.graph.value_info})
    for name in op_node.input:
        t = values[name].type.tensor_type
        shapes.append([d.dim_value for d in t.shape.dim])
        types.append(t.elem_type)
    return op_node, shapes, types


def test_round_trip_for_every_exactly_expressible_catalog_desc():
    count = 0
    for case in build_catalog():
        mapping = to_onnx(case.desc, case.opset)
        if mapping.kind != "exact":
            continue
        node, shapes, types = _node_io(mapping.model)
        assert from_onnx(node, shapes, types, "spec", mapping.opset) == case.desc, case.id
        count += 1
    assert count >= 20, count


def test_round_trip_of_roi_pooling_through_its_reshape():
    for case in build_catalog(["roi_pooling"]):
        if case.desc.spatial_scale == 0:
            continue  # composed as a Mul: the node sees spatial_scale 1 and pre-scaled ROIs
        node, shapes, types = _node_io(to_onnx(case.desc).model)
        assert from_onnx(node, shapes, types) == case.desc, case.id


def _roi_align_node(**attrs):
    return helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], **attrs)


SHAPES = [[1, 1, 10, 10], [3, 4], [3]]


def test_roi_align_10_is_half_pixel_on_the_dml_ep():
    node = _roi_align_node(output_height=5, output_width=5, sampling_ratio=2)
    spec = import_node(node, SHAPES, [np.float32, np.float32, np.int64], "spec", opset=10)
    ep = from_onnx(node, SHAPES, [np.float32, np.float32, np.int64], "dml-ep", opset=10)
    assert spec.desc.input_pixel_offset == 0.0 and any(f.kind == "diverges" for f in spec.flags)
    assert ep.input_pixel_offset == 0.5
    assert ep.roi_tensor.sizes == (1, 1, 3, 4) and ep.batch_indices_tensor.sizes == (1, 1, 1, 3)
    fields = [f.field for f in predicted_divergences(node, SHAPES, [np.float32, np.float32, np.int64], opset=10)]
    assert "InputPixelOffset" in fields


def test_output_half_pixel_has_no_region_clamp_in_dml():
    node = _roi_align_node(coordinate_transformation_mode="output_half_pixel", sampling_ratio=2)
    spec = import_node(node, SHAPES, [np.float32, np.float32, np.int64], "spec", opset=16)
    assert spec.desc.input_pixel_offset == 0.0
    assert [f.field for f in spec.flags if f.kind == "diverges"] == ["InputPixelOffset"]
    assert from_onnx(node, SHAPES, [np.float32, np.float32, np.int64], "dml-ep", 16).input_pixel_offset == 0.0


def test_dml_ep_accepts_int32_batch_indices_and_refuses_what_it_does_not_register():
    types32 = [np.float32, np.float32, np.int32]
    assert from_onnx(_roi_align_node(), SHAPES, types32, "dml-ep").batch_indices_tensor.data_type == "UINT32"
    with pytest.raises(ValueError, match="int64"):
        from_onnx(_roi_align_node(), SHAPES, types32, "spec")
    with pytest.raises(ValueError, match="exactly"):
        from_onnx(_roi_align_node(mode="MAX"), SHAPES, [np.float32, np.float32, np.int64], "dml-ep")
    assert from_onnx(_roi_align_node(mode="MAX"), SHAPES, [np.float32, np.float32, np.int64]).reduction_function == "MAX"
    with pytest.raises(ValueError, match="FLOAT32 or FLOAT16"):
        from_onnx(_roi_align_node(), SHAPES, [np.float64, np.float64, np.int64], "dml-ep")
    with pytest.raises(ValueError, match="Unsupported"):
        from_onnx(_roi_align_node(coordinate_transformation_mode="align_corners"), SHAPES,
                  [np.float32, np.float32, np.int64], "dml-ep")


def test_max_roi_pool_pooled_size_is_filled_positionally_by_the_dml_ep():
    node = helper.make_node("MaxRoiPool", ["X", "rois"], ["Y"], pooled_shape=[2, 3])
    shapes, types = [[2, 1, 6, 6], [1, 5]], [np.float32, np.float32]
    spec = from_onnx(node, shapes, types, "spec")
    ep = from_onnx(node, shapes, types, "dml-ep")
    assert (spec.pooled_size.height, spec.pooled_size.width) == (2, 3)
    assert (ep.pooled_size.height, ep.pooled_size.width) == (3, 2)
    assert spec.output_tensor.sizes == ep.output_tensor.sizes == (1, 1, 2, 3)
    assert [f.field for f in predicted_divergences(node, shapes, types) if f.field == "PooledSize"]


def _maxpool_node(n_out=2, **attrs):
    return helper.make_node("MaxPool", ["X"], ["Y", "I"][:n_out], **attrs)


def _ort_maxpool(node, x, opset):
    import onnxruntime as ort

    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT if o == "Y" else onnx.TensorProto.INT64, None)
            for o in node.output]
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, x.shape)], outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})


@pytest.mark.parametrize("shape, kernel", [((2, 3, 7, 9), [2, 3]), ((1, 2, 4, 5, 6), [2, 2, 3])])
def test_storage_order_1_through_transposes_matches_ort(shape, kernel):
    """ONNX storage_order=1 = DML pooling of the spatially reversed input; distinct values so
    that the transposed scan order cannot change a tie."""
    rng = np.random.default_rng(0)
    x = (rng.permutation(int(np.prod(shape))) / 8).astype(np.float32).reshape(shape)
    node = _maxpool_node(kernel_shape=kernel, strides=[2] * len(kernel), pads=[1] * 2 * len(kernel), storage_order=1)
    imported = import_node(node, [shape], [np.float32], "spec", opset=12)
    assert any(f.kind == "composed" for f in imported.flags)
    ours = imported.outputs(execute(imported.desc, imported.inputs([x])))
    theirs = _ort_maxpool(node, x, 12)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and max_abs_error(a, b) == 0.0
    with pytest.raises(ValueError, match="storage_order"):
        from_onnx(node, [shape], [np.float32], "dml-ep")


def test_one_d_maxpool_matches_ort_golden():
    """ORT's MaxPool1D_8_WithIndexTest (onnxruntime/test/providers/cpu/nn/pool_op_test.cc):
    [1..8] as (1,2,4), k=2, s=2."""
    node = _maxpool_node(kernel_shape=[2], strides=[2])
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 4)
    imported = import_node(node, [x.shape], [np.float32], "spec", opset=8)
    assert imported.desc.input_tensor.sizes == (1, 2, 1, 4)
    y, i = imported.outputs(execute(imported.desc, imported.inputs([x])))
    assert y.ravel().tolist() == [2, 4, 6, 8] and i.ravel().tolist() == [1, 3, 5, 7]
    assert from_onnx(node, [x.shape], [np.float32], "dml-ep").input_tensor.sizes == (1, 1, 2, 4)


def test_ceil_mode_reduce_by_one_spec_and_dml_ep_output_sizes():
    """onnx test_maxpool_2d_ceil_output_size_reduce_by_one (export_maxpool_2d_ceil_output_size_reduce_by_one
    in onnx/backend/test/case/node/maxpool.py, added by https://github.com/onnx/onnx/pull/5741):
    spec 1x1, the DML EP sizes it 2x2 (InitializeKernelOutputDimensions in
    onnxruntime/core/providers/dml/OperatorAuthorHelper/OperatorHelper.cpp adds one for ceil_mode
    with no 'last window starts inside' rule)."""
    node = _maxpool_node(n_out=1, kernel_shape=[1, 1], strides=[2, 2], ceil_mode=1)
    spec = import_node(node, [[1, 1, 2, 2]], [np.float32], "spec")
    ep = import_node(node, [[1, 1, 2, 2]], [np.float32], "dml-ep")
    assert spec.desc.output_tensor.sizes == (1, 1, 1, 1)
    assert ep.desc.output_tensor.sizes == (1, 1, 2, 2)
    assert any(f.field == "OutputTensor.Sizes" and f.kind == "diverges" for f in ep.flags)
    assert any(f.field == "OutputIndicesTensor" for f in ep.flags)   # no Indices, no dilation: v1 on the EP


def test_same_upper_with_dilation_is_flagged():
    node = _maxpool_node(kernel_shape=[2], dilations=[2], auto_pad="SAME_UPPER")
    imported = import_node(node, [[1, 1, 5]], [np.float32], "spec", opset=12)
    assert imported.desc.output_tensor.sizes[-1] == 5
    assert any(f.kind == "diverges" for f in imported.flags)
