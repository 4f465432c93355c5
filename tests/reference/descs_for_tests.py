"""Small builders of DML-spelled desc dicts for the reference tests."""

from __future__ import annotations

import numpy as np

from ep_testbed.reference import desc_from_dml


def roi_align1(x_shape, rois_shape, out_hw, *, dtype="FLOAT32", batch_type="UINT32", batch_shape=None,
               reduction="AVERAGE", interpolation="LINEAR", scale=(1.0, 1.0), offsets=(0.5, -0.5),
               oob=0.0, samples=(2, 2), corners=False, op="DML_OPERATOR_ROI_ALIGN1"):
    n = rois_shape[-2]
    d = {"Type": op,
         "InputTensor": {"DataType": dtype, "Sizes": list(x_shape)},
         "ROITensor": {"DataType": dtype, "Sizes": list(rois_shape)},
         "BatchIndicesTensor": {"DataType": batch_type, "Sizes": list(batch_shape or [n])},
         "OutputTensor": {"DataType": dtype, "Sizes": [n, x_shape[1], *out_hw]},
         "ReductionFunction": reduction, "InterpolationMode": interpolation,
         "SpatialScaleX": scale[0], "SpatialScaleY": scale[1], "OutOfBoundsInputValue": oob,
         "MinimumSamplesPerOutput": samples[0], "MaximumSamplesPerOutput": samples[1]}
    if op == "DML_OPERATOR_ROI_ALIGN1":
        d.update(InputPixelOffset=offsets[0], OutputPixelOffset=offsets[1], AlignRegionsToCorners=corners)
    return desc_from_dml(d)


def roi_pooling(x_shape, num_rois, pooled_hw, *, dtype="FLOAT32", scale=1.0):
    return desc_from_dml({
        "Type": "DML_OPERATOR_ROI_POOLING",
        "InputTensor": {"DataType": dtype, "Sizes": list(x_shape)},
        "ROITensor": {"DataType": dtype, "Sizes": [1, 1, num_rois, 5]},
        "OutputTensor": {"DataType": dtype, "Sizes": [num_rois, x_shape[1], *pooled_hw]},
        "SpatialScale": scale, "PooledSize": {"Height": pooled_hw[0], "Width": pooled_hw[1]}})


def max_pooling2(x_shape, window, *, strides=None, start=None, end=None, dilations=None, dtype="FLOAT32",
                 indices="UINT64"):
    dims = len(window)
    strides = strides or [1] * dims
    start = start or [0] * dims
    end = end or [0] * dims
    dilations = dilations or [1] * dims
    out = list(x_shape[:2])
    for i in range(dims):
        padded = x_shape[i + 2] + start[i] + end[i]
        out.append((padded - ((window[i] - 1) * dilations[i] + 1)) // strides[i] + 1)
    return desc_from_dml({
        "Type": "DML_OPERATOR_MAX_POOLING2",
        "InputTensor": {"DataType": dtype, "Sizes": list(x_shape)},
        "OutputTensor": {"DataType": dtype, "Sizes": out},
        "OutputIndicesTensor": None if indices is None else {"DataType": indices, "Sizes": out},
        "DimensionCount": dims, "Strides": strides, "WindowSize": list(window),
        "StartPadding": start, "EndPadding": end, "Dilations": dilations})


def sample_edge_case():
    """The CPU EP fuzz finding ``roi_align/fuzz-s0-b8-027`` shrunk (``fuzz --ep cpu --seed 0 --replay``):
    a ROI_ALIGN MAX over 3x3 samples whose 13th sample row lies 3.3e-8 below the cell edge y = 1,
    within float32 rounding, beside the -inf at X[0, 0, 2, 3]. ORT computes that coordinate in
    float32 as exactly 1.0: its RoiAlign (weights w1*v1 + ... with the weight of row 2 exactly 0)
    gives NaN (0 * -inf) there and -inf below, and MLAS's MaxPool of them, from -FLT_MAX and
    skipping NaN, gives -FLT_MAX at output [4, 2]; the exact coordinate reads rows 0 and 1 and
    gives 0."""
    from ep_testbed.graphs.cases.roi_align import roi_align_desc

    desc = roi_align_desc(False, reduction="MAX", sx=1.0, sy=0.001, oob=0.0, samples=(3, 3), rois=1, batch=1,
                          channels=1, height=3, width=4, out=(5, 5))
    x = np.zeros((1, 1, 3, 4), np.float32)
    x[0, 0, 0, 1] = x[0, 0, 2, 3] = -np.inf
    rois = np.array([[0.0, 249.99998474121094, 6.4375, 1749.9998779296875]], np.float32)
    return desc, {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(1, np.uint32)}

