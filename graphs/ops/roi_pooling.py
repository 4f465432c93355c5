"""DML_ROI_POOLING <-> ONNX MaxRoiPool: the mapping, the node read back, the input flags.

``to_onnx`` emits ``pooled_shape = [Height, Width]`` as ONNX defines it. ORT's DirectML EP
(``onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorRoiPooling.cpp``)
copies spatial_scale and fills ``PooledSize = { m_pooledSizeH, m_pooledSizeW }`` positionally
into ``DML_SIZE_2D {Width, Height}``: for a non-square pooled_shape the EP hands DirectML
Width = pooled height, which ``import_node(..., mode="dml-ep")`` reproduces.

ORT's CPU kernel (``onnxruntime/core/providers/cpu/nn/roi_pool.cc``) computes bin bounds in
float32, which for some region sizes lands one element off the page's integer division; such
regions are flagged per case (``input_flags``).
"""

from __future__ import annotations

import math
from typing import Mapping as MappingT
from typing import Optional

import numpy as np
import onnx

from ...reference.descs import Size2D, TensorDesc
from ...reference.roi_pooling import RoiPoolingDesc, bin_bounds, scaled_region
from ..builder import GraphBuilder
from ..common import Imported, dtype_of, float_data_type, node_attributes, strides_flag
from ..dml_ep_facts import FLOAT16TO32, DmlEpOp, Registration
from ..flags import Flag
from ..mapping import Mapping, Port

#: The DML EP's MaxRoiPool row (OperatorRegistration.cpp L767; ``graphs.dml_ep_facts``).
DML_EP = {"MaxRoiPool": DmlEpOp(rows=(Registration((7,), {"T": FLOAT16TO32}, "L767"),),
                                operator_file="Operators/DmlOperatorRoiPooling.cpp")}


def to_onnx(desc: RoiPoolingDesc, opset: int) -> Mapping:
    """The MaxRoiPool model of a validated desc, with one flag per field value."""
    d = desc
    dtype = dtype_of(d.input_tensor)
    flags = _flags(d)
    scale = float(np.float32(d.spatial_scale))
    n_rois = d.roi_tensor.sizes[2]
    g = GraphBuilder(desc.TYPE.lower())
    x = g.input("InputTensor", dtype, d.input_tensor.sizes)
    r = g.input("ROITensor", dtype, (n_rois, 5))
    factor = np.array([1, scale, scale, scale, scale], dtype=np.float32) if scale <= 0 else None
    ps = d.pooled_size
    y = g.node("MaxRoiPool", [x, r], role="op", name="MaxRoiPool", pooled_shape=[ps.height, ps.width],
               spatial_scale=1.0 if factor is not None else scale, outputs=["OutputTensor"])[0]
    g.output(y, dtype, d.output_tensor.sizes)
    return Mapping(desc=desc, model=g.model(opset), flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=[Port("InputTensor", x),
                           Port("ROITensor", r, to_onnx=lambda a: host_rois(a, factor, dtype))],
                   output_ports=[Port("OutputTensor", y, from_onnx=lambda a: a.astype(dtype, copy=False))],
                   opset=opset, input_flagger=input_flags)


def host_rois(rois: np.ndarray, factor: Optional[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """The ROI table as the MaxRoiPool node takes it: {NumROIs, 5}, its coordinates multiplied
    by ``factor`` ([1, s, s, s, s] for a SpatialScale ``s`` <= 0, which ORT refuses as an
    attribute; None: unchanged) in float32, the page's product, rounded to ``dtype``."""
    table = np.asarray(rois).reshape(-1, 5)
    if factor is None:
        return table.astype(dtype, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        return (table.astype(np.float32) * factor).astype(dtype)


def _flags(d: RoiPoolingDesc) -> list[Flag]:
    flags: list[Flag] = []
    for member, t in (("InputTensor", d.input_tensor), ("ROITensor", d.roi_tensor), ("OutputTensor", d.output_tensor)):
        flags.append(Flag(f"{member}.DataType", t.data_type, "exact",
                          "MaxRoiPool T holds float32 and float16 (ORT's CPU kernel runs float16 as float32 between "
                          "Casts it inserts)"))
        flags.append(strides_flag(member, t))
    flags.append(Flag("InputTensor.Sizes", list(d.input_tensor.sizes), "exact", "X is {N, C, H, W} as on the page"))
    flags.append(Flag("ROITensor.Sizes", list(d.roi_tensor.sizes), "composed",
                      "the host feeds {1, 1, NumROIs, 5} as ONNX's {NumROIs, 5} (same data order)"))
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
                          "ORT refuses spatial_scale <= 0: the host multiplies the ROI coordinates by it in float32 "
                          "(the product the page rounds) and the node gets spatial_scale=1"))
    return flags


def import_node(node: onnx.NodeProto, shapes: list[tuple[int, ...]], types: list[np.dtype], mode: str,
                opset: Optional[int]) -> Imported:
    """A MaxRoiPool node as the ROI_POOLING desc it means (``mode`` "spec") or the one the DML EP
    builds (``"dml-ep"``: PooledSize filled positionally, module docstring)."""
    a = node_attributes(node)
    x_shape, roi_shape = shapes[:2]
    x_t = float_data_type(types[0], "MaxRoiPool X", mode)
    ph, pw = (int(v) for v in a["pooled_shape"])
    r = roi_shape[0]
    flags = []
    if mode == "dml-ep":
        pooled = Size2D(width=ph, height=pw)
        if ph != pw:
            flags.append(Flag("PooledSize", {"Height": pw, "Width": ph}, "diverges",
                              f"the DML EP fills DML_SIZE_2D {{Width, Height}} positionally from pooled_shape "
                              f"[{ph}, {pw}], so DirectML is told Width={ph}, Height={pw} for a {ph}x{pw} output"))
    else:
        pooled = Size2D(width=pw, height=ph)
    flags.append(Flag("PooledSize", {"Height": pooled.height, "Width": pooled.width}, "exact",
                      "note: ORT's CPU kernel bins in float32, which can move a bin end by one for some region sizes "
                      "(e.g. 29 rows into 11 bins); flagged per case"))
    desc = RoiPoolingDesc(input_tensor=TensorDesc(x_t, tuple(x_shape)), roi_tensor=TensorDesc(x_t, (1, 1, r, 5)),
                          output_tensor=TensorDesc(x_t, (r, x_shape[1], ph, pw)),
                          spatial_scale=float(a.get("spatial_scale", 1.0)), pooled_size=pooled)

    def inputs(arrays):
        return {"InputTensor": np.asarray(arrays[0]), "ROITensor": np.asarray(arrays[1]).reshape(1, 1, r, 5)}

    return Imported(desc, flags, inputs, lambda out: [out["OutputTensor"]])


def input_flags(desc: RoiPoolingDesc, tensors: MappingT[str, np.ndarray], opset: Optional[int] = None) -> list[Flag]:
    """``diverges`` flags for input values ORT treats differently from the page: NaN (its
    ``std::max`` keeps a NaN only when scanned last) and float32 bin ends."""
    flags = []
    x = np.asarray(tensors["InputTensor"])
    if np.isnan(x).any():
        flags.append(Flag("InputTensor", "NaN" if not np.isinf(x).any() else "NaN/Inf", "diverges",
                          "the input holds NaN: the reference ignores NaN in every max; ORT's max kernels let a NaN "
                          "win or lose depending on where it is scanned, so outputs may differ"))
    for row in np.asarray(tensors["ROITensor"]).reshape(-1, 5):
        x1, y1, x2, y2 = scaled_region(row[1:], desc.spatial_scale)
        if (float32_bin_end_differs(y2 - y1 + 1, desc.pooled_size.height)
                or float32_bin_end_differs(x2 - x1 + 1, desc.pooled_size.width)):
            flags.append(Flag("ROITensor", row.astype(np.float64).tolist(), "diverges",
                              "ORT computes this region's bin bounds in float32 and lands one element off the page's "
                              "integer division (roi_pool.cc)"))
            break
    return flags


def float32_bin_end_differs(region: int, pooled: int) -> bool:
    """True if ORT's float32 ``ceil((p+1) * (region/pooled))`` or ``floor(p * ...)`` differs
    from the page's bins (``reference.roi_pooling.bin_bounds``) for some bin ``p`` (roi_pool.cc)."""
    size = np.float32(region) / np.float32(pooled)
    for p in range(pooled):
        start = math.floor(float(np.float32(p) * size))
        end = math.ceil(float(np.float32(p + 1) * size))
        if (start, end) != bin_bounds(p, region, pooled, 0, region):
            return True
    return False
