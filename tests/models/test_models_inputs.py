"""Seeded, range-aware inputs from a model's input specs."""

from __future__ import annotations

import numpy as np
import pytest

from ep_testbed.graphs.models import detection_head
from ep_testbed.harness.models.inputs import ShapeError, generate_inputs, input_specs, parse_shapes, resolve_shapes


def test_roi_inputs_are_boxes_inside_the_image_and_indices_inside_the_batch():
    model = detection_head(image_size=32)
    specs = input_specs(model)
    assert [(s.name, s.dims) for s in specs] == [("image", ("batch", 3, 32, 32)), ("rois", ("num_rois", 4)),
                                                 ("batch_indices", ("num_rois",))]
    shapes = resolve_shapes(specs, parse_shapes(["batch=3", "num_rois=200"]))
    feeds = generate_inputs(model, specs, shapes, seed=5)
    rois, bi = feeds["rois"], feeds["batch_indices"]
    assert rois.dtype == np.float32 and bi.dtype == np.int64
    assert (rois[:, 0] < rois[:, 2]).all() and (rois[:, 1] < rois[:, 3]).all()
    assert rois.min() >= 0 and rois.max() <= 31  # image pixels (feature 16 / spatial_scale 0.5)
    assert set(bi.tolist()) == {0, 1, 2}
    again = generate_inputs(model, specs, shapes, seed=5)
    assert all(np.array_equal(feeds[k], again[k]) for k in feeds)
    other = generate_inputs(model, specs, shapes, seed=6)
    assert not np.array_equal(feeds["image"], other["image"])


@pytest.mark.parametrize("item", ["batch", "batch=", "batch=0", "image=1xax3", "=2"])
def test_bad_shape_items_are_refused_with_the_form(item):
    with pytest.raises(ShapeError, match="expected NAME=N"):
        parse_shapes([item])


def test_whole_input_shapes_must_fit_the_model():
    specs = input_specs(detection_head())
    with pytest.raises(ShapeError, match="axis 1 of 'image' is fixed at 3"):
        resolve_shapes(specs, parse_shapes(["image=1x4x32x32"]))
    with pytest.raises(ShapeError, match="symbolic dimension; give one number"):
        resolve_shapes(specs, parse_shapes(["batch=1x2"]))


def test_an_input_without_any_shape_needs_its_whole_shape():
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    specs = input_specs(model)
    assert specs[0].dims is None
    with pytest.raises(ShapeError, match=r"'x' has no shape in the model: give --shape x=AxBx"):
        resolve_shapes(specs, {})
    assert resolve_shapes(specs, parse_shapes(["x=2x3"])) == {"x": (2, 3)}
