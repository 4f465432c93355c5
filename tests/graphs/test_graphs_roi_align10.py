"""RoiAlign-10: what ``to_onnx(desc, opset=10)`` builds, measured against ORT's CPU EP, and the
DirectML EP's reading of the same node (half_pixel, from DmlOperatorRoiAlign.cpp)."""

from __future__ import annotations

import numpy as np
import pytest
from graphs_testkit import max_abs_error, run_cpu

from ep_testbed.graphs import from_onnx, import_node, to_onnx
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.reference import execute


def _tensors(desc, rng, min_size=1.5):
    n, _, h, w = desc.input_tensor.sizes
    rois_n = desc.roi_tensor.sizes[-2]
    scale = np.array([desc.spatial_scale_x, desc.spatial_scale_y] * 2)
    x1 = rng.uniform(-2, w, rois_n), rng.uniform(-2, h, rois_n)
    corners = np.stack([x1[0], x1[1], x1[0] + rng.uniform(min_size, w, rois_n),
                        x1[1] + rng.uniform(min_size, h, rois_n)], 1) / scale
    np_type = np.float32 if desc.input_tensor.data_type == "FLOAT32" else np.float16
    return {"InputTensor": rng.standard_normal(desc.input_tensor.sizes).astype(np_type),
            "ROITensor": corners.astype(np_type).reshape(desc.roi_tensor.sizes),
            "BatchIndicesTensor": rng.integers(0, n, rois_n).astype(np.uint32).reshape(desc.batch_indices_tensor.sizes)}


@pytest.mark.parametrize("ipo", [0.0, 0.5, 0.25])
@pytest.mark.parametrize("reduction,samples", [("AVERAGE", (2, 2)), ("AVERAGE", (1, 2**32 - 1)), ("MAX", (2, 2))])
def test_roi_align_10_agrees_with_the_cpu_ep_on_regions_of_a_pixel_or_more(ipo, reduction, samples):
    """No coordinate_transformation_mode, InputPixelOffset reached by an ROI shift from 0, and a
    `diverges` flag that names the DirectML EP's half_pixel reading."""
    rng = np.random.default_rng(int(ipo * 8) + 3 * len(reduction))
    desc = roi_align_desc(True, ipo=ipo, reduction=reduction, samples=samples, sx=0.5, sy=0.5)
    mapping = to_onnx(desc, 10)
    assert mapping.model.opset_import[0].version == 10
    node = next(n for n in mapping.model.graph.node if n.op_type == "RoiAlign")
    assert "coordinate_transformation_mode" not in {a.name for a in node.attribute}
    flag = next(f for f in mapping.flags if f.field == "InputPixelOffset")
    assert flag.kind == "diverges" and "DirectML EP builds InputPixelOffset 0.5" in flag.reason
    worst = 0.0
    for _ in range(8):
        tensors = _tensors(desc, rng)
        assert mapping.input_flags(tensors) == []
        expected, actual = execute(desc, tensors), run_cpu(mapping, tensors)
        worst = max(worst, max_abs_error(expected["OutputTensor"], actual["OutputTensor"]))
    assert worst < 2e-5, worst


def test_a_sub_pixel_region_is_flagged_and_differs():
    """RoiAlign-10 raises a region under one pixel to 1x1 (ORT CPU, the ONNX reference); the
    page does not: the mapper flags the input, and the outputs differ by more than rounding."""
    desc = roi_align_desc(True, ipo=0.0, samples=(2, 2), sx=1.0, sy=1.0, rois=1)
    mapping = to_onnx(desc, 10)
    rng = np.random.default_rng(5)
    tensors = _tensors(desc, rng)
    tensors["ROITensor"] = np.array([[2.0, 3.0, 2.4, 3.3]], np.float32)
    flags = mapping.input_flags(tensors)
    assert [(f.field, f.kind) for f in flags] == [("ROITensor", "diverges")] and "1x1" in flags[0].reason
    difference = max_abs_error(execute(desc, tensors)["OutputTensor"], run_cpu(mapping, tensors)["OutputTensor"])
    assert difference > 1e-2, difference


def test_the_dml_ep_reads_the_mapped_node_half_a_pixel_off():
    """from_onnx on the node to_onnx built: the spec reading gives back the desc (InputPixelOffset
    0); the DML EP's reading gives 0.5, and the reference shows how far apart the two are."""
    desc = roi_align_desc(True, ipo=0.0, samples=(2, 2), sx=1.0, sy=1.0, bi_type="UINT64")
    mapping = to_onnx(desc, 10)
    assert [n.op_type for n in mapping.model.graph.node] == ["RoiAlign"]
    node = mapping.model.graph.node[0]
    shapes = [list(desc.input_tensor.sizes), list(desc.roi_tensor.sizes), list(desc.batch_indices_tensor.sizes)]
    types = [np.float32, np.float32, np.int64]
    assert import_node(node, shapes, types, "spec", opset=10).desc == desc
    as_dml_ep = from_onnx(node, shapes, types, "dml-ep", opset=10)
    assert as_dml_ep.input_pixel_offset == 0.5
    rng = np.random.default_rng(8)
    tensors = _tensors(desc, rng)
    tensors["BatchIndicesTensor"] = tensors["BatchIndicesTensor"].astype(np.uint64)
    spec_out = execute(desc, tensors)["OutputTensor"]
    ep_tensors = {"InputTensor": tensors["InputTensor"],
                  "ROITensor": tensors["ROITensor"].reshape(as_dml_ep.roi_tensor.sizes),
                  "BatchIndicesTensor": tensors["BatchIndicesTensor"].reshape(as_dml_ep.batch_indices_tensor.sizes)}
    assert np.abs(execute(as_dml_ep, ep_tensors)["OutputTensor"] - spec_out).max() > 1e-2
