"""DML_MAX_POOLING2 <-> ONNX MaxPool with the Indices output: the mapping, the node read back,
the input flags.

Fields map one to one (explicit ``pads``, never ``auto_pad``; ``ceil_mode`` 0 gives the
page's floor formula; ``storage_order`` 0 gives the page's row-major indices that include
batch and channel). The model is the MaxPool node alone; every type conversion is done on the
host (``Mapping.feeds`` / ``Mapping.outputs``), so that an EP without a kernel for a Cast
cannot decide whether the operator is tested. Types ONNX's MaxPool does not list are pooled
in float64: the host widens the input and narrows the output back (a max only selects, and
float64 holds every 8/16/32-bit integer exactly, 64-bit ones only while |x| <= 2^53). UINT32
indices are ONNX's int64 ones narrowed on the host (the values are flat positions in the
input, below 2^32 whenever the page allows UINT32 indices at all).

ORT's DirectML EP, in ``onnxruntime/core/providers/dml/DmlExecutionProvider/src/``:

- ``Operators/DmlOperatorPooling.cpp`` builds DML_MAX_POOLING2 only when the node requests
  Indices or has a dilation != 1 (otherwise DML_MAX_POOLING, v1); it throws E_NOTIMPL for
  ``storage_order != 0``; a 1-D window is shifted right into ``{1, k}`` over the rank-4 input;
- ``OperatorAuthorHelper/OperatorHelper.cpp`` (InitializeKernelOutputDimensions) sizes a
  ``ceil_mode`` output as ``1 + floor(num / s) + (num % s != 0)``, without ONNX's "last window
  starts inside" reduction;
- ``DmlOperator.h`` left-pads every tensor with 1s to rank 4 (a 1-D MaxPool's ``{N, C, L}``
  becomes ``{1, N, C, L}``);
- ``OperatorRegistration.cpp`` registers MaxPool for float and float16, and for int8 and uint8
  from opset 12 (``import_node(..., mode="dml-ep")`` refuses other types).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional
from typing import Mapping as MappingT

import numpy as np
import onnx

from ...reference.descs import TensorDesc
from ...reference.dtypes import dml_data_type
from ...reference.max_pooling2 import MaxPooling2Desc
from ..builder import GraphBuilder
from ..common import (
    Imported,
    OnnxImportError,
    OpsetError,
    dtype_of,
    node_attributes,
    strides_flag,
)
from ..dml_ep_facts import FLOAT16TO32, INTS8BIT, DmlEpOp, Registration
from ..flags import Flag
from ..mapping import Mapping, Port

#: Data type -> the first MaxPool opset that lists it (others are composed through float64).
NATIVE = {"FLOAT32": 8, "FLOAT16": 8, "INT8": 12, "UINT8": 12}
#: What ORT's DML EP registers MaxPool for (OperatorRegistration.cpp): type -> first opset.
DML_EP_TYPES = {np.dtype(np.float32): 7, np.dtype(np.float16): 7, np.dtype(np.int8): 12, np.dtype(np.uint8): 12}
#: The oldest opset this mapper's models need (the testbed builds no older one for any operator).
OLDEST_OPSET = (8, "MaxPool's Indices output appears in opset 8")
#: The DML EP's MaxPool rows (OperatorRegistration.cpp; ``graphs.dml_ep_facts``): float only at
#: opset 7 (L756); from opset 8 on int8/uint8 too, with the int64 Indices (L757-760, L600).
DML_EP = {"MaxPool": DmlEpOp(
    rows=(Registration((7,), {"T": FLOAT16TO32}, "L756"),
          Registration((8, 10, 11, 12), {"T": FLOAT16TO32 | INTS8BIT, "I": frozenset({onnx.TensorProto.INT64})},
                       "L757-760, L600")),
    operator_file="Operators/DmlOperatorPooling.cpp")}


# --- DML -> ONNX -------------------------------------------------------------------------------

def to_onnx(desc: MaxPooling2Desc, opset: int) -> Mapping:
    """The MaxPool model of a validated desc, with one flag per field value."""
    d = desc
    if any(v != 1 for v in d.dilations) and opset < 10:
        raise OpsetError(opset, f"Dilations {list(d.dilations)}: MaxPool has no dilations attribute before opset 10")
    native = d.input_tensor.data_type in NATIVE and opset >= NATIVE[d.input_tensor.data_type]
    flags = _type_flags(d, opset, native) + _window_flags(d) + _indices_flags(d)
    g = GraphBuilder(desc.TYPE.lower())
    dtype = dtype_of(d.input_tensor)
    pooled = dtype if native else np.dtype(np.float64)
    x = g.input("InputTensor", pooled, d.input_tensor.sizes)
    attrs: dict[str, Any] = dict(kernel_shape=list(d.window_size), strides=list(d.strides),
                 pads=list(d.start_padding) + list(d.end_padding))
    if opset >= 10:
        attrs["dilations"] = list(d.dilations)
    oi = d.output_indices_tensor
    outs = g.node("MaxPool", [x], role="op", name="MaxPool", outputs=["OutputTensor", "OutputIndicesTensor"][
        :2 if oi is not None else 1], **attrs)
    g.output("OutputTensor", pooled, d.output_tensor.sizes)
    ports = [Port("OutputTensor", outs[0], from_onnx=lambda a: _narrow(a, dtype))]
    if oi is not None:
        idx_dtype = dtype_of(oi)
        g.output("OutputIndicesTensor", np.int64, oi.sizes)
        ports.append(Port("OutputIndicesTensor", outs[1], from_onnx=lambda a: a.astype(idx_dtype, copy=False)))
    return Mapping(desc=desc, model=g.model(opset), flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=[Port("InputTensor", "InputTensor", to_onnx=lambda a: a.astype(pooled, copy=False))],
                   output_ports=ports, opset=opset, input_flagger=input_flags)


def _narrow(pooled: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The pooled output in the desc's type: exact for what the float64 pool carries exactly (a
    64-bit integer beyond 2^53 is flagged inexpressible per case, and may land anywhere)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return pooled.astype(dtype, copy=False)


def _type_flags(d: MaxPooling2Desc, opset: int, native: bool) -> list[Flag]:
    data_type, dtype = d.input_tensor.data_type, dtype_of(d.input_tensor)
    if native:
        flag = Flag("InputTensor.DataType", data_type, "exact", f"MaxPool-{opset} lists {data_type.lower()} as T")
    elif data_type in ("INT64", "UINT64"):
        flag = Flag("InputTensor.DataType", data_type, "composed",
                    f"MaxPool-{opset} has no {dtype} kernel: the host widens the input to float64, MaxPool pools "
                    "it, the host narrows the output back; exact while |x| <= 2^53 (larger values may collide, "
                    "flagged per case)")
    else:
        flag = Flag("InputTensor.DataType", data_type, "composed",
                    f"MaxPool-{opset} has no {dtype} kernel: the host widens the input to float64 (exact for every "
                    "value), MaxPool pools it, the host narrows the output back; a max only selects, so nothing "
                    "rounds")
    return [flag, Flag("OutputTensor.DataType", d.output_tensor.data_type, flag.kind, "the same type as InputTensor"),
            Flag("InputTensor.Sizes", list(d.input_tensor.sizes), "exact",
                 f"X is {d.input_tensor.dimension_count}-D: {{N, C, spatial...}} as the page's"),
            Flag("OutputTensor.Sizes", list(d.output_tensor.sizes), "exact",
                 "ceil_mode=0: ONNX's floor formula with the dilated window, as the reference reads the page")]


def _window_flags(d: MaxPooling2Desc) -> list[Flag]:
    flags = [Flag("DimensionCount", d.dimension_count, "exact", f"len(kernel_shape) = {d.dimension_count}"),
             Flag("Strides", list(d.strides), "exact", f"strides={list(d.strides)}, one per spatial axis"),
             Flag("WindowSize", list(d.window_size), "exact", f"kernel_shape={list(d.window_size)}")]
    big_pads = any(d.start_padding[i] >= d.window_size[i] or d.end_padding[i] >= d.window_size[i]
                   for i in range(d.dimension_count))
    for name, pads in (("StartPadding", d.start_padding), ("EndPadding", d.end_padding)):
        if big_pads:
            flags.append(Flag(name, list(pads), "diverges",
                              "pads >= kernel_shape: ONNX allows it, but ONNX Runtime's CPU kernel refuses the model "
                              "(\"Pad should be smaller than kernel\", pool_attributes.h)"))
        else:
            flags.append(Flag(name, list(pads), "exact", "explicit pads = StartPadding + EndPadding, auto_pad=NOTSET; "
                              "ONNX never selects a padding element"))
    if any(v != 1 for v in d.dilations):
        flags.append(Flag("Dilations", list(d.dilations), "exact", f"dilations={list(d.dilations)} (opset >= 10)"))
    else:
        flags.append(Flag("Dilations", list(d.dilations), "exact", "dilations of 1, ONNX's default"))
    return flags


def _indices_flags(d: MaxPooling2Desc) -> list[Flag]:
    """The OutputIndicesTensor flags, with every tensor's Strides flag among them (page order)."""
    oi = d.output_indices_tensor
    strides = [strides_flag("InputTensor", d.input_tensor), strides_flag("OutputTensor", d.output_tensor)]
    if oi is None:
        return [Flag("OutputIndicesTensor", None, "exact",
                     "no Indices output (note: without Indices or a dilation the DML EP builds DML_MAX_POOLING, "
                     "not MAX_POOLING2)")] + strides
    if oi.data_type == "UINT64":
        flag = Flag("OutputIndicesTensor.DataType", "UINT64", "exact",
                    "Indices (int64, storage_order=0: flat row-major over the whole input, batch and channel "
                    "included); the DML EP reads it as UINT64")
    else:
        flag = Flag("OutputIndicesTensor.DataType", oi.data_type, "composed",
                    "ONNX's int64 Indices (storage_order=0) narrowed to uint32 on the host (flat positions in the "
                    "input, below 2^32 wherever the page allows UINT32 indices)")
    return [flag, *strides, strides_flag("OutputIndicesTensor", oi),
            Flag("OutputIndicesTensor.Sizes", list(oi.sizes), "exact", "the same sizes as OutputTensor")]


# --- per-case input flags ------------------------------------------------------------------

def input_flags(desc: MaxPooling2Desc, tensors: MappingT[str, np.ndarray], opset: Optional[int] = None) -> list[Flag]:
    """Flags raised by input values: NaN (``diverges``: ORT lets a NaN win where it is scanned
    first) and 64-bit integers beyond 2^53 (``inexpressible`` through the float64 composition)."""
    x = np.asarray(tensors["InputTensor"])
    flags = []
    if np.issubdtype(x.dtype, np.floating) and np.isnan(x).any():
        flags.append(Flag("InputTensor", "NaN" if not np.isinf(x).any() else "NaN/Inf", "diverges",
                          "the input holds NaN: the reference ignores NaN in every max; ORT's max kernels let a NaN "
                          "win or lose depending on where it is scanned, so outputs may differ"))
    if x.dtype in (np.int64, np.uint64) and np.abs(x.astype(np.float64)).max(initial=0) > 2**53:
        flags.append(Flag("InputTensor", "|x| > 2^53", "inexpressible", "ONNX MaxPool has no 64-bit integer type, "
                          "and 64-bit integers beyond 2^53 collide in the float64 the composition pools in"))
    return flags


# --- ONNX -> DML ---------------------------------------------------------------------------

@dataclass
class _Pool:
    """A MaxPool node's geometry with auto_pad and ceil_mode resolved to explicit pads."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    start: list[int]
    end: list[int]
    out: list[int]


def import_node(node: onnx.NodeProto, shapes: list[tuple[int, ...]], types: list[np.dtype], mode: str,
                opset: Optional[int]) -> Imported:
    """A MaxPool node as the MAX_POOLING2 desc it means (``mode`` "spec") or the one the DML EP
    builds (``"dml-ep"``, module docstring)."""
    a = node_attributes(node)
    x_shape, x_t = shapes[0], types[0]
    data_type = _import_type(x_t, mode, opset)
    storage_order = int(a.get("storage_order", 0))
    has_indices = len(node.output) > 1 and node.output[1] != ""
    flags: list[Flag] = []
    if mode == "dml-ep" and storage_order != 0:
        raise OnnxImportError("storage_order = 1: the DML EP declines the node (QueryMaxPool, E_NOTIMPL); it runs on CPU")
    if mode == "dml-ep" and not has_indices and all(d == 1 for d in a.get("dilations", [])):
        flags.append(Flag("OutputIndicesTensor", None, "exact", "without Indices or a dilation the DML EP builds "
                          "DML_MAX_POOLING (v1), not MAX_POOLING2; same semantics"))
    pool = _geometry(a, list(x_shape[2:]), mode, flags)
    # A CPU-kernel refusal (pool_attributes.h); the DML EP's sources have no such check.
    if mode == "spec" and any(p >= k for p, k in zip(pool.start + pool.end, pool.kernel * 2)):
        flags.append(Flag("StartPadding", pool.start, "diverges", "pads >= kernel_shape: ORT's CPU kernel refuses the node"))
    if storage_order == 1:
        flags.append(Flag("OutputIndicesTensor", "storage_order=1", "composed",
                          "pooling the input with its spatial axes reversed (Transposes) gives ONNX's column-major "
                          "indices as DML's row-major ones; ties resolve in the transposed scan order"))
    return _imported(pool, tuple(x_shape), data_type, has_indices, storage_order, mode, flags)


def _import_type(x_t: np.dtype, mode: str, opset: Optional[int]) -> str:
    if mode == "dml-ep":
        first = DML_EP_TYPES.get(np.dtype(x_t))
        if first is None or (opset is not None and opset < first):
            raise OnnxImportError(f"X of type {x_t}" + (f" at opset {opset}" if first else "") + ": the DML EP "
                                  "registers MaxPool for float and float16, and int8/uint8 from opset 12 only "
                                  "(OperatorRegistration.cpp)")
    try:
        return dml_data_type(x_t)
    except KeyError:
        raise OnnxImportError(f"X of type {x_t}: no DML data type holds it") from None


def _geometry(a: dict, spatial: list[int], mode: str, flags: list[Flag]) -> _Pool:
    kernel = [int(k) for k in a["kernel_shape"]]
    k = len(kernel)
    strides = [int(s) for s in a.get("strides", [1] * k)]
    dilations = [int(s) for s in a.get("dilations", [1] * k)]
    pads = [int(p) for p in a.get("pads", [0] * 2 * k)]
    auto_pad = a.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(auto_pad, kernel, strides, dilations, spatial, flags)
    elif auto_pad == "VALID":
        pads = [0] * 2 * k
    pool = _Pool(kernel, strides, dilations, pads[:k], pads[k:], [])
    for i in range(k):
        pool.out.append(_output_size(pool, i, spatial[i], int(a.get("ceil_mode", 0)), mode, flags))
    return pool


def _same_pads(auto_pad: str, kernel, strides, dilations, spatial, flags: list[Flag]) -> list[int]:
    """ONNX shape inference and the DML EP (OperatorHelper.cpp ResolveAutoPadding) size SAME
    padding with the dilated window; ORT's CPU kernel (pool_attributes.h) does not."""
    starts, ends = [], []
    for i in range(len(kernel)):
        eff = (kernel[i] - 1) * dilations[i] + 1
        total = max(0, (math.ceil(spatial[i] / strides[i]) - 1) * strides[i] + eff - spatial[i])
        head = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
        starts.append(head)
        ends.append(total - head)
    if any(d != 1 for d in dilations):
        flags.append(Flag("StartPadding", starts, "diverges", f"auto_pad={auto_pad} with dilations: ORT's CPU "
                          "kernel sizes the padding with the undilated window (ONNX and the DML EP dilate it)"))
    return starts + ends


def _output_size(pool: _Pool, i: int, size: int, ceil_mode: int, mode: str, flags: list[Flag]) -> int:
    """Output size along axis ``i``; under ``ceil_mode`` in "spec" reading, the end padding grows
    so that the page's floor formula gives the same size."""
    eff = (pool.kernel[i] - 1) * pool.dilations[i] + 1
    num = size + pool.start[i] + pool.end[i] - eff
    floor_out = num // pool.strides[i] + 1
    if not ceil_mode:
        return floor_out
    if mode == "spec":  # ORT CPU and ONNX >= 22 (onnx PR #5741): the last window must start inside
        o = -(-num // pool.strides[i]) + 1
        if (o - 1) * pool.strides[i] >= size + pool.start[i]:
            o -= 1
        if o != floor_out:
            pool.end[i] += (o - 1) * pool.strides[i] + eff - (size + pool.start[i] + pool.end[i])
        return o
    o = floor_out + (1 if num % pool.strides[i] else 0)  # OperatorHelper.cpp: no "starts inside" rule
    if o != floor_out:
        flags.append(Flag("OutputTensor.Sizes", o, "diverges", f"ceil_mode: the DML EP sizes spatial dim {i} "
                          f"as {o} without ONNX's 'last window starts inside' rule and hands DirectML an "
                          f"OutputTensor larger than the page's formula allows ({floor_out})"))
    return o


def _imported(pool: _Pool, x_shape: tuple[int, ...], data_type: str, has_indices: bool, storage_order: int,
              mode: str, flags: list[Flag]) -> Imported:
    """The desc and the array adapters. Column-major indices (storage_order 1) are the
    row-major indices of the input with its spatial axes reversed, so that input is pooled.
    DML pools 2-D or 3-D: a 1-D pool is a 2-D one over ``{N, C, 1, L}`` ("spec") or, as the DML
    EP pads ranks, ``{1, N, C, L}`` with the window shifted onto the last axis ("dml-ep")."""
    k = len(pool.kernel)
    order = list(range(k))[::-1] if storage_order == 1 else list(range(k))
    x_sizes: tuple[int, ...]
    out_sizes: tuple[int, ...]
    if k == 1:
        x_sizes = (x_shape[0], x_shape[1], 1, x_shape[2]) if mode == "spec" else (1, x_shape[0], x_shape[1], x_shape[2])
        fields = [[fill] + list(v) for v, fill in ((pool.kernel, 1), (pool.strides, 1), (pool.start, 0),
                                                   (pool.end, 0), (pool.dilations, 1))]
        out_sizes = (*x_sizes[:3], pool.out[0])
    else:
        x_sizes = (x_shape[0], x_shape[1], *(x_shape[2 + i] for i in order))
        fields = [[v[i] for i in order] for v in (pool.kernel, pool.strides, pool.start, pool.end, pool.dilations)]
        out_sizes = (x_shape[0], x_shape[1], *(pool.out[i] for i in order))
    kernel, strides, start, end, dilations = (tuple(f) for f in fields)
    desc = MaxPooling2Desc(
        input_tensor=TensorDesc(data_type, tuple(x_sizes)), output_tensor=TensorDesc(data_type, tuple(out_sizes)),
        output_indices_tensor=TensorDesc("UINT64", tuple(out_sizes)) if has_indices else None,
        dimension_count=len(kernel), strides=strides, window_size=kernel, start_padding=start, end_padding=end,
        dilations=dilations)
    axes = [0, 1] + [2 + i for i in order]
    inverse = list(np.argsort(axes))
    onnx_out_shape = (x_shape[0], x_shape[1], *pool.out)

    def inputs(arrays):
        x = np.asarray(arrays[0])
        return {"InputTensor": x.reshape(x_sizes) if k == 1 else np.transpose(x, axes)}

    def outputs(res):
        arrs = [res["OutputTensor"]] + ([res["OutputIndicesTensor"].astype(np.int64)] if has_indices else [])
        return [a.reshape(onnx_out_shape) if k == 1 else np.transpose(a, inverse) for a in arrs]

    return Imported(desc, flags, inputs, outputs)
