"""DML_MAX_POOLING2 -> ONNX MaxPool (opset 8-12 semantics) with the Indices output.

Fields map one to one (explicit ``pads``, never ``auto_pad``; ``ceil_mode`` 0 gives the
page's floor formula; ``storage_order`` 0 gives the page's row-major indices that include
batch and channel). Types ONNX's MaxPool does not list go through a Cast to float64 and back:
a max only selects, and float64 holds every 8/16/32-bit integer exactly (64-bit ones only
while |x| <= 2^53). UINT32 indices are a Cast of ONNX's int64 ones.

ORT's DML EP (``DmlOperatorPooling.cpp``, see from_onnx.py) builds
DML_MAX_POOLING2 only when the node requests Indices or has a dilation != 1; otherwise it
builds DML_MAX_POOLING (v1). It throws E_NOTIMPL for storage_order != 0.
"""

from __future__ import annotations

import numpy as np

from ep_testbed.reference.descs import MaxPooling2Desc

from .builder import GraphBuilder
from .common import OpsetError, dtype_of, strides_flag
from .flags import Flag
from .mapping import Mapping, Port

NATIVE = {"FLOAT32": 8, "FLOAT16": 8, "INT8": 12, "UINT8": 12}  # data type -> first MaxPool opset listing it


def map_max_pooling2(desc: MaxPooling2Desc, opset: int) -> Mapping:
    d = desc
    flags: list[Flag] = []
    dtype = dtype_of(d.input_tensor)
    has_dilation = any(v != 1 for v in d.dilations)
    if has_dilation and opset < 10:
        raise OpsetError(opset, f"Dilations {list(d.dilations)}: MaxPool has no dilations attribute before opset 10")

    native = d.input_tensor.data_type in NATIVE and opset >= NATIVE[d.input_tensor.data_type]
    if native:
        flags.append(Flag("InputTensor.DataType", d.input_tensor.data_type, "exact",
                          f"MaxPool-{opset} lists {d.input_tensor.data_type.lower()} as T"))
    elif d.input_tensor.data_type in ("INT64", "UINT64"):
        flags.append(Flag("InputTensor.DataType", d.input_tensor.data_type, "composed",
                          f"MaxPool-{opset} has no {dtype} kernel: Cast to float64, MaxPool, Cast back; exact while "
                          "|x| <= 2^53 (larger values may collide, flagged per case)"))
    else:
        flags.append(Flag("InputTensor.DataType", d.input_tensor.data_type, "composed",
                          f"MaxPool-{opset} has no {dtype} kernel: Cast to float64 (exact for every value), MaxPool, "
                          "Cast back; a max only selects, so nothing rounds"))
    flags.append(Flag("OutputTensor.DataType", d.output_tensor.data_type, flags[-1].kind, "the same type as InputTensor"))
    flags.append(Flag("InputTensor.Sizes", list(d.input_tensor.sizes), "exact",
                      f"X is {d.input_tensor.dimension_count}-D: {{N, C, spatial...}} as the page's"))
    flags.append(Flag("OutputTensor.Sizes", list(d.output_tensor.sizes), "exact",
                      "ceil_mode=0: ONNX's floor formula with the dilated window, as the reference reads the page"))
    flags.append(Flag("DimensionCount", d.dimension_count, "exact", f"len(kernel_shape) = {d.dimension_count}"))
    flags.append(Flag("Strides", list(d.strides), "exact", f"strides={list(d.strides)}, one per spatial axis"))
    flags.append(Flag("WindowSize", list(d.window_size), "exact", f"kernel_shape={list(d.window_size)}"))
    big_pads = [i for i in range(d.dimension_count)
                if d.start_padding[i] >= d.window_size[i] or d.end_padding[i] >= d.window_size[i]]
    for name, pads in (("StartPadding", d.start_padding), ("EndPadding", d.end_padding)):
        if big_pads:
            flags.append(Flag(name, list(pads), "diverges",
                              "pads >= kernel_shape: ONNX allows it, but ONNX Runtime's CPU kernel refuses the model "
                              "(\"Pad should be smaller than kernel\", pool_attributes.h)"))
        else:
            flags.append(Flag(name, list(pads), "exact", "explicit pads = StartPadding + EndPadding, auto_pad=NOTSET; "
                              "ONNX never selects a padding element"))
    if has_dilation:
        flags.append(Flag("Dilations", list(d.dilations), "exact", f"dilations={list(d.dilations)} (opset >= 10)"))
    else:
        flags.append(Flag("Dilations", list(d.dilations), "exact", "dilations of 1, ONNX's default"))
    oi = d.output_indices_tensor
    if oi is None:
        flags.append(Flag("OutputIndicesTensor", None, "exact",
                          "no Indices output (note: without Indices or a dilation the DML EP builds DML_MAX_POOLING, "
                          "not MAX_POOLING2)"))
    elif oi.data_type == "UINT64":
        flags.append(Flag("OutputIndicesTensor.DataType", "UINT64", "exact",
                          "Indices (int64, storage_order=0: flat row-major over the whole input, batch and channel "
                          "included); the DML EP reads it as UINT64"))
    else:
        flags.append(Flag("OutputIndicesTensor.DataType", oi.data_type, "composed",
                          "a Cast of ONNX's int64 Indices (storage_order=0) to uint32"))
    for member, t in (("InputTensor", d.input_tensor), ("OutputTensor", d.output_tensor),
                      ("OutputIndicesTensor", oi)):
        if t is not None:
            flags.append(strides_flag(member, t))
    if oi is not None:
        flags.append(Flag("OutputIndicesTensor.Sizes", list(oi.sizes), "exact", "the same sizes as OutputTensor"))

    g = GraphBuilder(desc.TYPE.lower())
    x = g.input("InputTensor", dtype, d.input_tensor.sizes)
    if not native:
        x = g.cast(x, np.float64, hint="Cast_InputTensor")
    attrs = dict(kernel_shape=list(d.window_size), strides=list(d.strides),
                 pads=list(d.start_padding) + list(d.end_padding))
    if opset >= 10:
        attrs["dilations"] = list(d.dilations)
    n_out = 2 if oi is not None else 1
    outs = g.node("MaxPool", [x], role="op", name="MaxPool", n_out=n_out, **attrs)
    y = outs[0]
    if not native:
        y = g.cast(y, dtype, hint="Cast_OutputTensor")
    g.rename(y, "OutputTensor")
    g.output("OutputTensor", dtype, d.output_tensor.sizes)
    ports = [Port("OutputTensor", "OutputTensor", from_onnx=lambda a: a.astype(dtype, copy=False))]
    if oi is not None:
        idx = outs[1]
        idx_dtype = dtype_of(oi)
        if oi.data_type == "UINT32":
            idx = g.cast(idx, np.uint32, hint="Cast_OutputIndicesTensor")
        g.rename(idx, "OutputIndicesTensor")
        g.output("OutputIndicesTensor", np.uint32 if oi.data_type == "UINT32" else np.int64, oi.sizes)
        ports.append(Port("OutputIndicesTensor", "OutputIndicesTensor",
                          from_onnx=lambda a: a.astype(idx_dtype, copy=False)))
    model = g.model(opset)
    return Mapping(desc=desc, model=model, flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=[Port("InputTensor", "InputTensor")], output_ports=ports, opset=opset)
