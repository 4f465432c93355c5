"""DML_ROI_POOLING -> ONNX MaxRoiPool.

ORT's DML EP (``DmlOperatorRoiPooling.cpp``, see from_onnx.py) copies
spatial_scale and fills ``PooledSize = { m_pooledSizeH, m_pooledSizeW }`` positionally
into ``DML_SIZE_2D {Width, Height}``: for a non-square pooled_shape the EP hands DirectML
Width = pooled height (see ``from_onnx`` mode "dml-ep"). We emit ``pooled_shape = [Height, Width]``
as ONNX defines it.
"""

from __future__ import annotations

import numpy as np

from ep_testbed.reference.descs import RoiPoolingDesc

from .builder import GraphBuilder
from .common import dtype_of, strides_flag
from .flags import Flag
from .mapping import Mapping, Port


def map_roi_pooling(desc: RoiPoolingDesc, opset: int) -> Mapping:
    d = desc
    flags: list[Flag] = []
    dtype = dtype_of(d.input_tensor)
    n_rois = d.roi_tensor.sizes[2]
    for member, t in (("InputTensor", d.input_tensor), ("ROITensor", d.roi_tensor), ("OutputTensor", d.output_tensor)):
        flags.append(Flag(f"{member}.DataType", t.data_type, "exact",
                          "MaxRoiPool T holds float32 and float16 (ORT's CPU kernel runs float16 as float32 between "
                          "Casts it inserts)"))
        flags.append(strides_flag(member, t))
    flags.append(Flag("InputTensor.Sizes", list(d.input_tensor.sizes), "exact", "X is {N, C, H, W} as on the page"))
    flags.append(Flag("ROITensor.Sizes", list(d.roi_tensor.sizes), "composed",
                      "a Reshape of {1, 1, NumROIs, 5} to ONNX's {NumROIs, 5} (same data order)"))
    flags.append(Flag("OutputTensor.Sizes", list(d.output_tensor.sizes), "exact", "Y is {NumROIs, C, PH, PW}"))
    ps = d.pooled_size
    flags.append(Flag("PooledSize", {"Height": ps.height, "Width": ps.width}, "exact",
                      f"pooled_shape=[{ps.height}, {ps.width}] (ORT bins in float32 arithmetic; the rare regions "
                      "where that moves a bin end by one are flagged per case)"))
    scale = float(np.float32(d.spatial_scale))
    if scale > 0:
        flags.append(Flag("SpatialScale", d.spatial_scale, "exact", f"spatial_scale={scale}"))
    else:
        flags.append(Flag("SpatialScale", d.spatial_scale, "composed",
                          "ORT refuses spatial_scale <= 0: the ROI coordinates are multiplied by 0 (a Mul) and "
                          "spatial_scale=1, the same float32 product the page rounds"))

    g = GraphBuilder(desc.TYPE.lower())
    x = g.input("InputTensor", dtype, d.input_tensor.sizes)
    r = g.input("ROITensor", dtype, d.roi_tensor.sizes)
    r = g.reshape(r, [n_rois, 5], hint="Reshape_ROITensor")
    if scale <= 0:
        r = g.node("Mul", [r, g.const("roi_scale", np.array([1, scale, scale, scale, scale], dtype=dtype))],
                   role="helper", name="Mul_ROIScale")[0]
        scale = 1.0
    y = g.node("MaxRoiPool", [x, r], role="op", name="MaxRoiPool", pooled_shape=[ps.height, ps.width],
               spatial_scale=scale)[0]
    g.rename(y, "OutputTensor")
    g.output("OutputTensor", dtype, d.output_tensor.sizes)
    return Mapping(desc=desc, model=g.model(opset), flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=[Port("InputTensor", "InputTensor"), Port("ROITensor", "ROITensor")],
                   output_ports=[Port("OutputTensor", "OutputTensor", from_onnx=lambda a: a.astype(dtype, copy=False))],
                   opset=opset)
