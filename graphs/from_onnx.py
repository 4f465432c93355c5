"""``from_onnx(node, input_shapes, input_types, mode)``: an ONNX node read back as a DML desc.

Two readings:

* ``"spec"``: what the ONNX spec (and ONNX Runtime's CPU kernel, where the spec is silent)
  means, as the nearest DML desc. Where no desc means the same, the desc is the nearest one and
  a ``diverges`` flag says what differs (``import_node`` returns the flags).
* ``"dml-ep"``: the desc ORT's DirectML EP actually builds, quirks included. Learned by reading
  microsoft/onnxruntime with the ``read_file``/``find_string`` tools (versions as stored there;
  semantics.md cites the same code at 735e69a3 with line numbers),
  ``onnxruntime/core/providers/dml/``:

  - ``DmlExecutionProvider/src/Operators/DmlOperatorRoiAlign.cpp``, current version: builds
    DML_ROI_ALIGN1 with ``GetOptionalAttribute(CoordinateTransformationMode, "half_pixel")`` -
    RoiAlign-10 has no such attribute, so the EP uses the default and sets InputPixelOffset 0.5
    where ONNX-10 means output_half_pixel; "output_half_pixel" gives 0.0 without ONNX's >= 1 region
    clamp; any other string fails ("Unsupported RoiAlign coordinate_transformation_mode.");
    OutputPixelOffset always -0.5; mode strings map exactly ("avg"/"max", case-sensitive);
    sampling_ratio 0 -> (1, UINT32_MAX), k -> (k, k); SpatialScaleX = SpatialScaleY =
    spatial_scale; OutOfBoundsInputValue 0; LINEAR; batch indices ``ForceUnsignedDataType``
    (int64 -> UINT64, int32 -> UINT32). The older version (stored at 9090d651) built
    DML_ROI_ALIGN (v1, i.e. pixel offsets 0.5/-0.5) for RoiAlign-10 only, with
    ``Remap64bitDmlDataTypesTo32bit`` (UINT32 batch indices): the same half_pixel reading.
  - ``.../Operators/DmlOperatorRoiPooling.cpp``: ``PooledSize = { m_pooledSizeH, m_pooledSizeW }``
    fills ``DML_SIZE_2D {Width, Height}`` positionally, so Width = pooled_shape[0] (the height).
  - ``.../Operators/DmlOperatorPooling.cpp``: ``ORT_THROW_HR_IF(E_NOTIMPL, storageOrder != 0)``;
    DML_MAX_POOLING2 only with Indices or a dilation != 1 (else DML_MAX_POOLING v1); a 1-D
    window is shifted right into {1, k} over the rank-4 padded input.
  - ``OperatorAuthorHelper/OperatorHelper.cpp`` (InitializeKernelOutputDimensions): with
    ceil_mode the output is ``1 + floor(num / s) + (num % s != 0)``, without ONNX's "last window
    starts inside" reduction; ``kernelLength <= paddedLength`` is required.
  - ``DmlOperator.h``: every tensor is left-padded with 1s to rank 4 (rois {R,4} -> {1,1,R,4},
    batch_indices {R} -> {1,1,1,R}, 1-D MaxPool X {N,C,L} -> {1,N,C,L}).

Where the two readings differ for a node, that is a predicted EP divergence
(``predicted_divergences``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np
import onnx
from onnx import helper

from ep_testbed.reference.descs import MaxPooling2Desc, RoiAlign1Desc, RoiPoolingDesc, Size2D, TensorDesc
from ep_testbed.reference.dtypes import dml_data_type

from .flags import Flag

MODES = ("spec", "dml-ep")
UINT32_MAX = 2**32 - 1


class OnnxImportError(ValueError):
    """An ONNX node that has no DML desc in the requested reading; the message says why."""


@dataclass
class Imported:
    """A node read as a desc, plus what it takes to run the desc on the node's own data.

    ``inputs(onnx_arrays)`` turns the node's input arrays (in node input order) into the DML
    tensors ``reference.execute`` takes; ``outputs(dml_outputs)`` turns its results back into
    the node's output arrays (in node output order). ``flags`` say where the desc's meaning
    differs from the node's."""

    desc: Any
    flags: list[Flag] = field(default_factory=list)
    inputs: Callable[[Sequence[np.ndarray]], dict] = lambda arrays: {}
    outputs: Callable[[dict], list] = lambda out: []


def _np_dtype(t: Any) -> np.dtype:
    if isinstance(t, int) and not isinstance(t, bool):
        return np.dtype(helper.tensor_dtype_to_np_dtype(t))
    return np.dtype(t)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def from_onnx(node: onnx.NodeProto, input_shapes: Sequence[Sequence[int]], input_types: Sequence[Any],
              mode: str = "spec", opset: Optional[int] = None):
    """The DML desc an ONNX ``RoiAlign`` / ``MaxRoiPool`` / ``MaxPool`` node means.

    ``input_shapes`` / ``input_types`` (NumPy dtypes or ``onnx.TensorProto`` codes) follow the
    node's inputs. ``opset`` is the model's default-domain opset (None: the newest reading,
    e.g. RoiAlign-16). ``mode`` is ``"spec"`` or ``"dml-ep"`` (module docstring). Raises
    ``ValueError`` for a node with no desc in that reading (e.g. a node the DML EP refuses).
    """
    return import_node(node, input_shapes, input_types, mode, opset).desc


def import_node(node: onnx.NodeProto, input_shapes: Sequence[Sequence[int]], input_types: Sequence[Any],
                mode: str = "spec", opset: Optional[int] = None) -> Imported:
    """``from_onnx`` with the flags and the array adapters (see ``Imported``)."""
    if mode not in MODES:
        raise ValueError(f"mode = {mode!r}: one of {', '.join(MODES)}")
    shapes = [tuple(int(s) for s in shape) for shape in input_shapes]
    types = [_np_dtype(t) for t in input_types]
    if node.op_type == "RoiAlign":
        return _roi_align(node, shapes, types, mode, opset)
    if node.op_type == "MaxRoiPool":
        return _max_roi_pool(node, shapes, types, mode)
    if node.op_type == "MaxPool":
        return _max_pool(node, shapes, types, mode, opset)
    raise OnnxImportError(f"op_type = {node.op_type!r}: one of RoiAlign, MaxRoiPool, MaxPool")


def predicted_divergences(node: onnx.NodeProto, input_shapes, input_types, opset: Optional[int] = None) -> list[Flag]:
    """Fields where the DML EP's desc differs from the spec's: a predicted EP divergence each."""
    spec = import_node(node, input_shapes, input_types, "spec", opset)
    try:
        ep = import_node(node, input_shapes, input_types, "dml-ep", opset)
    except ValueError as e:
        return [Flag(node.op_type, node.name, "diverges", f"the DML EP does not build this node: {e}")]
    flags = []
    from ep_testbed.reference.descs import dml_fields

    if type(spec.desc) is not type(ep.desc):
        return [Flag("Type", ep.desc.TYPE, "diverges", f"spec means {spec.desc.TYPE}, the EP builds {ep.desc.TYPE}")]
    for name, dml, _ in dml_fields(type(spec.desc)):
        a, b = getattr(spec.desc, name), getattr(ep.desc, name)
        if isinstance(a, TensorDesc) and isinstance(b, TensorDesc):
            # rank padding with leading 1s is the same tensor
            if a.data_type == b.data_type and _squeeze(a.sizes) == _squeeze(b.sizes):
                continue
        if a != b:
            flags.append(Flag(dml, _plain(b), "diverges", f"the ONNX spec means {_plain(a)}, the DML EP builds {_plain(b)}"))
    flags.extend(f for f in ep.flags if f.kind == "diverges")
    return flags


def _squeeze(sizes):
    sizes = tuple(sizes)
    while len(sizes) > 1 and sizes[0] == 1:
        sizes = sizes[1:]
    return sizes


def _plain(v):
    if isinstance(v, TensorDesc):
        return {"DataType": v.data_type, "Sizes": list(v.sizes)}
    if isinstance(v, Size2D):
        return {"Height": v.height, "Width": v.width}
    if isinstance(v, tuple):
        return list(v)
    return v


def _float_type(t: np.dtype, what: str, mode: str) -> str:
    if t not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise OnnxImportError(f"{what} of type {t}: DML's desc takes FLOAT32 or FLOAT16"
                           + (" (the DML EP registers float and float16 only)" if mode == "dml-ep" else ""))
    return dml_data_type(t)


# --- RoiAlign ------------------------------------------------------------------------------

def _roi_align(node, shapes, types, mode, opset) -> Imported:
    a = _attrs(node)
    flags: list[Flag] = []
    x_shape, roi_shape, bi_shape = shapes[:3]
    x_t = _float_type(types[0], "RoiAlign X", mode)
    r = roi_shape[0]
    onnx_mode = a.get("mode", "avg")
    if mode == "dml-ep":
        if onnx_mode not in ("avg", "max"):  # exact string match in DmlOperatorRoiAlign.cpp
            raise OnnxImportError(f'mode = "{onnx_mode}": the DML EP matches "avg"/"max" exactly and fails kernel creation')
    elif onnx_mode.lower() not in ("avg", "max"):
        raise OnnxImportError(f'mode = "{onnx_mode}": ONNX allows "avg" or "max"')
    reduction = "AVERAGE" if onnx_mode.lower() == "avg" else "MAX"
    if reduction == "MAX" and mode == "spec":
        flags.append(Flag("ReductionFunction", "MAX", "diverges", 'ONNX\'s mode="max" (as ORT and onnx.reference '
                          "compute it) is the max of the four weighted corner terms, not DML's max of interpolated "
                          "samples; the desc is the nearest DML one"))
    sr = int(a.get("sampling_ratio", 0))
    lo, hi = (1, UINT32_MAX) if sr == 0 else (sr, sr)
    if sr == 0:
        flags.append(Flag("MinimumSamplesPerOutput", 1, "exact", "ONNX's adaptive count; empty/inverted regions take "
                          "no sample in ORT and one in DML (input data, flagged per case)"))
    ctm_present = "coordinate_transformation_mode" in a
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    opset_now = opset if opset is not None else 16
    if mode == "spec":
        half = (opset_now >= 16) and ctm == "half_pixel"
        ipo = 0.5 if half else 0.0
        if not half:
            flags.append(Flag("InputPixelOffset", 0.0, "diverges",
                              ("RoiAlign-10 (no coordinate_transformation_mode) means" if opset_now < 16 else
                               f'coordinate_transformation_mode="{ctm}" means') +
                              " output_half_pixel, which clamps every region to at least 1x1 before sampling; the "
                              "page's InputPixelOffset 0 never clamps (regions smaller than a pixel differ)"))
    else:
        if ctm not in ("half_pixel", "output_half_pixel"):
            raise OnnxImportError(f'coordinate_transformation_mode = "{ctm}": the DML EP accepts only half_pixel and '
                               "output_half_pixel (\"Unsupported RoiAlign coordinate_transformation_mode.\")")
        ipo = 0.5 if ctm == "half_pixel" else 0.0
        if opset_now < 16 and not ctm_present:
            flags.append(Flag("InputPixelOffset", 0.5, "diverges",
                              "RoiAlign-10 has no coordinate_transformation_mode; the DML EP reads the default "
                              '"half_pixel" (InputPixelOffset 0.5) where ONNX-10 means output_half_pixel'))
    scale = float(a.get("spatial_scale", 1.0))
    oh, ow = int(a.get("output_height", 1)), int(a.get("output_width", 1))
    bi_t = types[2]
    if bi_t == np.int64:
        bi_dml = "UINT64"
    elif bi_t == np.int32 and mode == "dml-ep":
        bi_dml = "UINT32"
    else:
        raise OnnxImportError(f"batch_indices of type {bi_t}: ONNX RoiAlign takes int64"
                           + (" (the DML EP also int32)" if mode == "dml-ep" else ""))
    if mode == "dml-ep":  # DmlOperator.h: rank padded to 4
        roi_sizes, bi_sizes = (1, 1, r, 4), (1, 1, 1, r)
    else:
        roi_sizes, bi_sizes = (r, 4), (r,)
    desc = RoiAlign1Desc(
        input_tensor=TensorDesc(x_t, tuple(x_shape)), roi_tensor=TensorDesc(x_t, roi_sizes),
        batch_indices_tensor=TensorDesc(bi_dml, bi_sizes),
        output_tensor=TensorDesc(x_t, (r, x_shape[1], oh, ow)),
        reduction_function=reduction, interpolation_mode="LINEAR", spatial_scale_x=scale, spatial_scale_y=scale,
        input_pixel_offset=ipo, output_pixel_offset=-0.5, out_of_bounds_input_value=0.0,
        minimum_samples_per_output=lo, maximum_samples_per_output=hi, align_regions_to_corners=False)
    bi_np = np.uint64 if bi_dml == "UINT64" else np.uint32

    def inputs(arrays):
        x, rois, bidx = arrays[:3]
        return {"InputTensor": np.asarray(x), "ROITensor": np.asarray(rois).reshape(roi_sizes),
                "BatchIndicesTensor": np.asarray(bidx).astype(bi_np).reshape(bi_sizes)}

    return Imported(desc, flags, inputs, lambda out: [out["OutputTensor"]])


# --- MaxRoiPool ----------------------------------------------------------------------------

def _max_roi_pool(node, shapes, types, mode) -> Imported:
    a = _attrs(node)
    x_shape, roi_shape = shapes[:2]
    x_t = _float_type(types[0], "MaxRoiPool X", mode)
    ph, pw = (int(v) for v in a["pooled_shape"])
    scale = float(a.get("spatial_scale", 1.0))
    r = roi_shape[0]
    flags = []
    if mode == "dml-ep":
        # DmlOperatorRoiPooling.cpp: PooledSize = { m_outputSizeH, m_outputSizeW } into {Width, Height}
        pooled = Size2D(width=ph, height=pw)
        if ph != pw:
            flags.append(Flag("PooledSize", {"Height": pw, "Width": ph}, "diverges",
                              f"the DML EP fills DML_SIZE_2D {{Width, Height}} positionally from pooled_shape "
                              f"[{ph}, {pw}], so DirectML is told Width={ph}, Height={pw} for a {ph}x{pw} output"))
    else:
        pooled = Size2D(width=pw, height=ph)
    flags.append(Flag("PooledSize", _plain(pooled), "exact",
                      "note: ORT's CPU kernel bins in float32, which can move a bin end by one for some region sizes "
                      "(e.g. 29 rows into 11 bins); flagged per case"))
    desc = RoiPoolingDesc(input_tensor=TensorDesc(x_t, tuple(x_shape)), roi_tensor=TensorDesc(x_t, (1, 1, r, 5)),
                          output_tensor=TensorDesc(x_t, (r, x_shape[1], ph, pw)), spatial_scale=scale,
                          pooled_size=pooled)

    def inputs(arrays):
        return {"InputTensor": np.asarray(arrays[0]), "ROITensor": np.asarray(arrays[1]).reshape(1, 1, r, 5)}

    return Imported(desc, flags, inputs, lambda out: [out["OutputTensor"]])


# --- MaxPool -------------------------------------------------------------------------------

def _max_pool(node, shapes, types, mode, opset) -> Imported:
    a = _attrs(node)
    flags: list[Flag] = []
    x_shape = shapes[0]
    x_t = types[0]
    if mode == "dml-ep" and x_t not in [np.dtype(t) for t in (np.float32, np.float16, np.int8, np.uint8)]:
        raise OnnxImportError(f"X of type {x_t}: the DML EP registers MaxPool for float, float16, int8, uint8 only")
    try:
        data_type = dml_data_type(x_t)
    except KeyError:
        raise OnnxImportError(f"X of type {x_t}: no DML data type holds it") from None
    kernel = [int(k) for k in a["kernel_shape"]]
    k = len(kernel)
    strides = [int(s) for s in a.get("strides", [1] * k)]
    dilations = [int(s) for s in a.get("dilations", [1] * k)]
    pads = [int(p) for p in a.get("pads", [0] * 2 * k)]
    auto_pad = a.get("auto_pad", "NOTSET") or "NOTSET"
    ceil_mode = int(a.get("ceil_mode", 0))
    storage_order = int(a.get("storage_order", 0))
    has_indices = len(node.output) > 1 and node.output[1] != ""
    spatial = list(x_shape[2:])

    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX shape inference and the DML EP (OperatorHelper.cpp ResolveAutoPadding) use the dilated window;
        # ORT's CPU kernel does not (pool_attributes.h), which differs once a dilation is > 1.
        starts, ends = [], []
        for i in range(k):
            eff = (kernel[i] - 1) * dilations[i] + 1
            total = max(0, (math.ceil(spatial[i] / strides[i]) - 1) * strides[i] + eff - spatial[i])
            head = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
            starts.append(head)
            ends.append(total - head)
        pads = starts + ends
        if any(d != 1 for d in dilations):
            flags.append(Flag("StartPadding", starts, "diverges", f"auto_pad={auto_pad} with dilations: ORT's CPU "
                              "kernel sizes the padding with the undilated window (ONNX and the DML EP dilate it)"))
    elif auto_pad == "VALID":
        pads = [0] * 2 * k
    start, end = pads[:k], pads[k:]

    if mode == "dml-ep" and storage_order != 0:
        raise OnnxImportError("storage_order = 1: the DML EP declines the node (QueryMaxPool, E_NOTIMPL); it runs on CPU")
    if mode == "dml-ep" and not has_indices and all(d == 1 for d in dilations):
        flags.append(Flag("OutputIndicesTensor", None, "exact", "without Indices or a dilation the DML EP builds "
                          "DML_MAX_POOLING (v1), not MAX_POOLING2; same semantics"))

    # output sizes and the end padding that gives them under the page's floor formula
    out = []
    for i in range(k):
        eff = (kernel[i] - 1) * dilations[i] + 1
        num = spatial[i] + start[i] + end[i] - eff
        floor_out = num // strides[i] + 1
        if not ceil_mode:
            out.append(floor_out)
            continue
        if mode == "spec":  # ORT CPU and ONNX >= 22 (onnx PR #5741): the last window must start inside
            o = -(-num // strides[i]) + 1
            if (o - 1) * strides[i] >= spatial[i] + start[i]:
                o -= 1
        else:  # OperatorHelper.cpp: 1 + floor + (remainder != 0), no reduction
            o = floor_out + (1 if num % strides[i] else 0)
        out.append(o)
        if o != floor_out:
            if mode == "spec":
                end[i] += (o - 1) * strides[i] + eff - (spatial[i] + start[i] + end[i])
            else:
                flags.append(Flag("OutputTensor.Sizes", o, "diverges", f"ceil_mode: the DML EP sizes spatial dim {i} "
                                  f"as {o} without ONNX's 'last window starts inside' rule and hands DirectML an "
                                  f"OutputTensor larger than the page's formula allows ({floor_out})"))

    order = list(range(k))
    if storage_order == 1:
        # Column-major indices = row-major indices of the input with its spatial axes reversed
        # (2-D: h + w*H; 3-D: h + w*H + d*H*W): pool the transposed input, indices need no remap.
        order = order[::-1]
        flags.append(Flag("OutputIndicesTensor", "storage_order=1", "composed",
                          "pooling the input with its spatial axes reversed (Transposes) gives ONNX's column-major "
                          "indices as DML's row-major ones; ties resolve in the transposed scan order"))

    def perm(seq):
        return [seq[i] for i in order]

    if k == 1:  # DML pools 2-D or 3-D: a 1-D pool is a 2-D one over {N, C, 1, L}
        x_sizes = (x_shape[0], x_shape[1], 1, spatial[0]) if mode == "spec" else (1, x_shape[0], x_shape[1], spatial[0])
        lift = lambda v, fill: [fill] + list(v)  # noqa: E731
        kernel_d, strides_d, start_d, end_d, dil_d = (lift(kernel, 1), lift(strides, 1), lift(start, 0),
                                                      lift(end, 0), lift(dilations, 1))
        out_sizes = (*x_sizes[:2], 1, out[0])
    else:
        x_sizes = (x_shape[0], x_shape[1], *perm(spatial))
        kernel_d, strides_d, start_d, end_d, dil_d = perm(kernel), perm(strides), perm(start), perm(end), perm(dilations)
        out_sizes = (x_shape[0], x_shape[1], *perm(out))
    desc = MaxPooling2Desc(
        input_tensor=TensorDesc(data_type, tuple(x_sizes)), output_tensor=TensorDesc(data_type, tuple(out_sizes)),
        output_indices_tensor=TensorDesc("UINT64", tuple(out_sizes)) if has_indices else None,
        dimension_count=len(kernel_d), strides=tuple(strides_d), window_size=tuple(kernel_d),
        start_padding=tuple(start_d), end_padding=tuple(end_d), dilations=tuple(dil_d))
    if any(p >= kk for p, kk in zip(start + end, kernel + kernel)):
        flags.append(Flag("StartPadding", start, "diverges", "pads >= kernel_shape: ORT's CPU kernel refuses the node"))
    axes = [0, 1] + [2 + i for i in order]
    inverse = list(np.argsort(axes))

    def inputs(arrays):
        x = np.asarray(arrays[0])
        if k == 1:
            return {"InputTensor": x.reshape(x_sizes)}
        return {"InputTensor": np.transpose(x, axes)}

    def outputs(res):
        onnx_out_shape = (x_shape[0], x_shape[1], *out)
        arrs = [res["OutputTensor"]] + ([res["OutputIndicesTensor"].astype(np.int64)] if has_indices else [])
        if k == 1:
            return [a.reshape(onnx_out_shape) for a in arrs]
        return [np.transpose(a, inverse) for a in arrs]

    return Imported(desc, flags, inputs, outputs)
