"""DML_ROI_ALIGN / DML_ROI_ALIGN1 -> ONNX RoiAlign-16 or RoiAlign-10 (plus the nodes that make it exact).

RoiAlign-16's ``half_pixel`` samples with an input offset of 0.5; RoiAlign-10 has no
``coordinate_transformation_mode`` and, as the ONNX spec and ORT's CPU kernel read it, no input
offset (``output_half_pixel``), but it also raises every region smaller than one pixel to 1x1,
which the page never does (flagged per input, ``input_flags``), and ORT's DirectML EP builds it
as half_pixel anyway (``DmlOperatorRoiAlign.cpp``: the attribute's default "half_pixel" is used
when it is absent), so on the DML EP a RoiAlign-10 model is half a pixel off the ONNX spec.
Everything below holds for both, with ``base`` = the node's own input offset (0.5 or 0).

How each field reaches ONNX (the DML EP's own mapping, from ORT's
``onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorRoiAlign.cpp``,
current version, read with the read_file tool; see from_onnx.py: it sets SpatialScaleX = SpatialScaleY = spatial_scale,
OutOfBoundsInputValue = 0, Minimum/MaximumSamplesPerOutput = (1, UINT32_MAX) for
sampling_ratio 0 and (k, k) otherwise, LINEAR, InputPixelOffset 0.5 for "half_pixel" and 0 for
"output_half_pixel", OutputPixelOffset -0.5, AlignRegionsToCorners FALSE), so every other value
needs a composition or cannot be reached:

* ROI rewrite. ORT's RoiAlign with ``spatial_scale = 1`` samples
  ``x = x1' - base + (k + 0.5) * (x2' - x1') / N`` for sample ``k`` of ``N = OutputWidth * n``.
  The page samples ``x = (k - OutputPixelOffset) * size / D + x1 * SpatialScaleX - InputPixelOffset``
  with ``size = (x2 - x1) * SpatialScaleX`` and ``D = N`` (``N - 1`` with AlignRegionsToCorners).
  Both are affine in k; equating them gives ROIs ``x1', x2'`` affine in ``x1, x2``, i.e. one
  Mul (diagonal case: scales and InputPixelOffset only) or MatMul plus an Add on the ROI table.
  With an adaptive sample count (Min 1, Max UINT32_MAX) N varies per ROI, so only the diagonal
  rewrite (scales, InputPixelOffset) is exact there.
* DML MAX = max over interpolated samples; ORT's ``mode="max"`` is the max of the four
  weighted corner terms (``roialign.cc``), not that. With a fixed n: RoiAlign(avg,
  sampling_ratio=1, n-times larger output) yields every sample; MaxPool(n, stride n) takes
  their max.
* OutOfBoundsInputValue v: ORT gives an out-of-range sample weight 0, and the four bilinear
  weights of an in-range sample sum to 1, so ``RoiAlign(ones)`` is the in-range fraction and
  ``RoiAlign(X) + v * (1 - RoiAlign(ones))`` is the page's value (per sample before the MaxPool
  of MAX, per output element for AVERAGE).
* FLOAT16 with any of the above runs the arithmetic in float32 (Cast in, Cast out): a float16
  Mul on ROI coordinates would round them.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ep_testbed.reference.descs import RoiAlign1Desc, RoiAlignDesc, as_roi_align1
from ep_testbed.reference.dtypes import numpy_dtype

from .builder import GraphBuilder
from .common import OpsetError, dtype_of, strides_flag
from .flags import Flag
from .mapping import Mapping, Port

UINT32_MAX = 2**32 - 1
ADAPTIVE_REASON = ("sampling_ratio=0: ONNX's count ceil(size/output) per axis, equal to the page's clamp(ceil(size/"
                   "output), 1, UINT32_MAX) for every region of positive size (ORT takes no sample for an empty or "
                   "inverted region where the page takes one: that is input data, flagged per case)")


def base_input_offset(opset: int) -> float:
    """The input offset ONNX's RoiAlign node itself applies: 0.5 (RoiAlign-16 half_pixel, which
    the mapper always writes) or 0 (RoiAlign-10, read as the ONNX spec and ORT's CPU kernel do)."""
    return 0.5 if opset >= 16 else 0.0


def rewritten_region_sizes(d: RoiAlign1Desc, opset: int, rois: np.ndarray) -> np.ndarray:
    """``(NumROIs, 2)``: the width and height, after the mapper's ROI rewrite, of the regions ONNX's
    node sees (what RoiAlign-10 raises to at least 1)."""
    n, _ = _plan_samples(d)
    _, _, out_h, out_w = d.output_tensor.sizes
    ipo, opo = float(np.float32(d.input_pixel_offset)), float(np.float32(d.output_pixel_offset))
    base = base_input_offset(opset)
    sizes = []
    for scale, out, (i1, i2) in ((float(np.float32(d.spatial_scale_x)), out_w, (0, 2)),
                                 (float(np.float32(d.spatial_scale_y)), out_h, (1, 3))):
        a11, a12, a21, a22, _ = roi_affine(scale, out, n, ipo, opo, d.align_regions_to_corners, base)
        r = rois.reshape(-1, 4).astype(np.float64)
        sizes.append((a21 - a11) * r[:, i1] + (a22 - a12) * r[:, i2])
    return np.stack(sizes, axis=1)


def plan_samples(d: RoiAlign1Desc) -> tuple[Optional[int], list[Flag]]:
    """The fixed sample count n (or None for ONNX's adaptive count) and the flags of the pair
    (one per field, same kind and reason: the two only mean something together)."""
    n, flag = _plan_samples(d)
    return n, [Flag("MinimumSamplesPerOutput", d.minimum_samples_per_output, flag.kind, flag.reason),
               Flag("MaximumSamplesPerOutput", d.maximum_samples_per_output, flag.kind, flag.reason)]


def _plan_samples(d: RoiAlign1Desc) -> tuple[Optional[int], Flag]:
    lo, hi = d.minimum_samples_per_output, d.maximum_samples_per_output
    value = [lo, hi]
    field = "MinimumSamplesPerOutput/MaximumSamplesPerOutput"
    if lo == hi:
        return lo, Flag(field, value, "exact", f"sampling_ratio={lo}: a fixed {lo}x{lo} grid of samples per output element")
    if lo == 1 and hi == UINT32_MAX:
        return None, Flag(field, value, "exact", ADAPTIVE_REASON)
    if lo == 1:
        return None, Flag(field, value, "diverges", f"sampling_ratio=0 counts ceil(size/output) samples with no upper "
                          f"bound; the page caps it at {hi}, so regions larger than {hi} samples per output differ")
    return None, Flag(field, value, "inexpressible", f"ONNX RoiAlign has a fixed count (sampling_ratio>0) or an "
                      f"unbounded adaptive one (0); a count clamped to [{lo}, {hi}] is neither")


def roi_affine(scale: float, out: int, n: Optional[int], ipo: float, opo: float, corners: bool,
               base: float = 0.5) -> tuple[float, float, float, float, float]:
    """Coefficients ``(a11, a12, a21, a22, c)`` of ``x1' = a11 x1 + a12 x2 + c``,
    ``x2' = a21 x1 + a22 x2 + c`` that make ORT's sampling (input offset ``base``: 0.5 for
    half_pixel, 0 for RoiAlign-10) equal the page's (module docstring). ``n`` None = adaptive
    (only the diagonal case is possible)."""
    c = base - ipo
    if n is None:
        return scale, 0.0, 0.0, scale, c
    samples = out * n
    if corners and samples == 1:
        # one sample, stretched to both corners: the reference takes the region's centre
        return scale / 2, scale / 2, scale / 2, scale / 2, c
    denom = samples - 1 if corners else samples
    a = (opo + 0.5) / denom
    b = samples / denom
    return scale * (1 + a), -scale * a, scale * (1 + a - b), scale * (b - a), c


def map_roi_align(desc: RoiAlignDesc | RoiAlign1Desc, opset: int) -> Mapping:
    d = as_roi_align1(desc)
    is_v1 = isinstance(desc, RoiAlign1Desc)
    flags: list[Flag] = []
    x_dtype = dtype_of(d.input_tensor)
    n_rois = d.roi_tensor.sizes[-2]
    _, _, out_h, out_w = d.output_tensor.sizes

    if opset < 10:
        raise OpsetError(opset, "RoiAlign exists from opset 10")
    base = base_input_offset(opset)

    # --- tensors ---------------------------------------------------------------------------
    for member, t in (("InputTensor", d.input_tensor), ("ROITensor", d.roi_tensor), ("OutputTensor", d.output_tensor)):
        flags.append(Flag(f"{member}.DataType", t.data_type, "exact",
                          "RoiAlign T1 holds float32 and float16 (ORT's CPU kernel runs float16 as float32 between "
                          "Casts it inserts)"))
    flags.append(Flag("InputTensor.Sizes", list(d.input_tensor.sizes), "exact", "X is {N, C, H, W} as on the page"))
    if d.roi_tensor.dimension_count == 2:
        flags.append(Flag("ROITensor.Sizes", list(d.roi_tensor.sizes), "exact", "rois is {NumROIs, 4}"))
    else:
        flags.append(Flag("ROITensor.Sizes", list(d.roi_tensor.sizes), "composed",
                          "a Reshape to {NumROIs, 4}, the only shape ONNX's rois takes (same data order)"))
    bi = d.batch_indices_tensor
    if bi.data_type == "UINT64":
        flags.append(Flag("BatchIndicesTensor.DataType", "UINT64", "exact",
                          "batch_indices is int64; the DML EP reinterprets it as UINT64 (ForceUnsignedDataType), "
                          "equal for indices < 2^63"))
    else:
        flags.append(Flag("BatchIndicesTensor.DataType", bi.data_type, "composed",
                          "a Cast to int64, ONNX RoiAlign's only batch_indices type"))
    if bi.dimension_count == 1:
        flags.append(Flag("BatchIndicesTensor.Sizes", list(bi.sizes), "exact", "batch_indices is {NumROIs}"))
    else:
        flags.append(Flag("BatchIndicesTensor.Sizes", list(bi.sizes), "composed", "a Reshape to {NumROIs}"))
    flags.append(Flag("OutputTensor.Sizes", list(d.output_tensor.sizes), "exact",
                      f"output_height={out_h}, output_width={out_w}"))
    for member, t in (("InputTensor", d.input_tensor), ("ROITensor", d.roi_tensor),
                      ("BatchIndicesTensor", bi), ("OutputTensor", d.output_tensor)):
        flags.append(strides_flag(member, t))

    # --- scalar fields ---------------------------------------------------------------------
    n, sample_flag = plan_samples(d)
    fixed = n is not None
    reduction_max = d.reduction_function == "MAX"
    max_kind = None
    if not reduction_max:
        flags.append(Flag("ReductionFunction", "AVERAGE", "exact", 'mode="avg": the mean of the samples of each '
                          "output element"))
    elif fixed and n == 1:
        max_kind = "single"
        flags.append(Flag("ReductionFunction", "MAX", "composed", 'mode="avg" with sampling_ratio=1: the max of '
                          "one interpolated sample is that sample (ORT's mode=\"max\" would take the max of its four "
                          "weighted corner terms instead)"))
    elif fixed:
        max_kind = "pool"
        flags.append(Flag("ReductionFunction", "MAX", "composed", f'RoiAlign(mode="avg", sampling_ratio=1) at a {n}x '
                          f"larger output yields every interpolated sample, then MaxPool({n}x{n}, stride {n}) takes "
                          "their max (ORT's mode=\"max\" is the max of weighted corner terms, not of samples)"))
    else:
        max_kind = "onnx-max"
        flags.append(Flag("ReductionFunction", "MAX", "diverges", 'mode="max": ONNX Runtime (CPU, CUDA, and '
                          "onnx.reference) takes the max of the four weighted corner terms max(w1*v1, ..., w4*v4), "
                          "not of interpolated samples; the exact composition needs a fixed sample count"))
    flags.extend(sample_flag)

    if d.interpolation_mode == "LINEAR":
        flags.append(Flag("InterpolationMode", "LINEAR", "exact", "ONNX RoiAlign interpolates bilinearly"))
    else:
        flags.append(Flag("InterpolationMode", d.interpolation_mode, "inexpressible",
                          "ONNX RoiAlign has no nearest-neighbour mode, and the page does not define the rounding a "
                          "Gather-based emulation would need"))

    sx, sy = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    ipo, opo = float(np.float32(d.input_pixel_offset)), float(np.float32(d.output_pixel_offset))
    corners = d.align_regions_to_corners
    rewrite = sx != sy or ipo != base or opo != -0.5 or corners
    if sx == sy:
        for name, v in (("SpatialScaleX", d.spatial_scale_x), ("SpatialScaleY", d.spatial_scale_y)):
            flags.append(Flag(name, v, "exact" if not rewrite else "composed",
                              f"spatial_scale={sx}" if not rewrite else
                              "folded into the ROI rewrite (a Mul/MatMul on the ROIs, spatial_scale=1)"))
    else:
        for name, v in (("SpatialScaleX", d.spatial_scale_x), ("SpatialScaleY", d.spatial_scale_y)):
            flags.append(Flag(name, v, "composed", "ONNX has one spatial_scale: the ROIs are multiplied by "
                              "[SpatialScaleX, SpatialScaleY, SpatialScaleX, SpatialScaleY] and spatial_scale=1"))
    if opset < 16:
        flags.append(Flag("InputPixelOffset" if is_v1 else "Type", d.input_pixel_offset if is_v1 else desc.TYPE, "diverges",
                          "RoiAlign-10 has no coordinate_transformation_mode: the ONNX spec and ORT's CPU kernel sample "
                          "with no input offset (every ROI coordinate shifted by "
                          f"{base - ipo:g} after scaling to match the page), but ORT's DirectML EP builds "
                          "InputPixelOffset 0.5 for it, half a pixel off (DmlOperatorRoiAlign.cpp)"))
    elif is_v1:
        if ipo == 0.5:
            flags.append(Flag("InputPixelOffset", d.input_pixel_offset, "exact", 'coordinate_transformation_mode="half_pixel"'))
        else:
            flags.append(Flag("InputPixelOffset", d.input_pixel_offset, "composed",
                              f"half_pixel with every ROI coordinate shifted by 0.5 - {ipo} after scaling "
                              "(output_half_pixel is not 0: ORT clamps regions to at least 1x1 there)"))
    if is_v1:
        if opo == -0.5:
            flags.append(Flag("OutputPixelOffset", d.output_pixel_offset, "exact", "both ONNX modes place samples at "
                              "(k + 0.5) / n of a bin, i.e. OutputPixelOffset -0.5"))
        elif fixed:
            flags.append(Flag("OutputPixelOffset", d.output_pixel_offset, "composed",
                              "an ROI rewrite that moves both corners by -(OutputPixelOffset + 0.5) sample spacings "
                              "(a MatMul on the ROIs, exact for a fixed sample count)"))
        else:
            flags.append(Flag("OutputPixelOffset", d.output_pixel_offset, "inexpressible",
                              "the shift is a fraction of a sample spacing, which depends on ONNX's per-region adaptive "
                              "count; only a fixed count (Minimum = Maximum) can be composed"))
        if not corners:
            flags.append(Flag("AlignRegionsToCorners", False, "exact", "ONNX spreads samples evenly within the region"))
        elif fixed:
            flags.append(Flag("AlignRegionsToCorners", True, "composed",
                              "samples stretched to the corners (spacing size/(N-1), reference RA-6) as an ROI "
                              "rewrite that widens each region by N/(N-1) (a MatMul on the ROIs)"))
        else:
            flags.append(Flag("AlignRegionsToCorners", True, "inexpressible",
                              "stretching samples to the corners depends on the per-region adaptive count; only a "
                              "fixed count (Minimum = Maximum) can be composed"))

    oob = float(np.float32(d.out_of_bounds_input_value))
    if oob == 0.0:
        flags.append(Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "exact",
                          "ORT gives samples outside [-1, size] weight 0, i.e. they read 0"))
    elif max_kind == "onnx-max":
        flags.append(Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "inexpressible",
                          "with ONNX's corner-term max no per-sample correction exists; needs a fixed sample count"))
    else:
        flags.append(Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "composed",
                          "RoiAlign(X) + v * (1 - RoiAlign(ones)): ORT gives an outside sample weight 0 and an inside "
                          "one weights summing to 1"))

    if any(f.kind == "inexpressible" for f in flags):
        return Mapping(desc=desc, model=None, flags=flags, opset=opset)

    # --- graph -----------------------------------------------------------------------------
    compute_dtype = np.dtype(np.float32) if (x_dtype == np.float16 and (rewrite or oob != 0.0)) else x_dtype
    if compute_dtype != x_dtype:
        for f_index, f in enumerate(flags):
            if f.field == "InputTensor.DataType":
                flags[f_index] = Flag(f.field, f.value, "composed", "float16 with an ROI rewrite or an "
                                      "OutOfBoundsInputValue: computed in float32 between Casts (a float16 Mul would "
                                      "round ROI coordinates); the EP's float16 RoiAlign is not exercised")
    g = GraphBuilder(f"{desc.TYPE.lower()}")
    b_onnx_dtype = np.dtype(np.int64) if bi.data_type == "UINT64" else numpy_dtype(bi.data_type)
    x = g.input("InputTensor", x_dtype, d.input_tensor.sizes)
    r = g.input("ROITensor", x_dtype, d.roi_tensor.sizes)
    bidx = g.input("BatchIndicesTensor", b_onnx_dtype, bi.sizes)
    inputs = [Port("InputTensor", x), Port("ROITensor", r),
              Port("BatchIndicesTensor", bidx, to_onnx=(lambda a: a.astype(np.int64)) if bi.data_type == "UINT64"
                   else (lambda a: a))]
    if d.roi_tensor.dimension_count != 2:
        r = g.reshape(r, [n_rois, 4], hint="Reshape_ROITensor")
    if bi.dimension_count != 1:
        bidx = g.reshape(bidx, [n_rois], hint="Reshape_BatchIndicesTensor")
    if bi.data_type != "UINT64":
        bidx = g.cast(bidx, np.int64, hint="Cast_BatchIndicesTensor")
    if compute_dtype != x_dtype:
        x = g.cast(x, compute_dtype, hint="Cast_InputTensor")
        r = g.cast(r, compute_dtype, hint="Cast_ROITensor")

    spatial_scale = sx
    if rewrite:
        spatial_scale = 1.0
        ax = roi_affine(sx, out_w, n, ipo, opo, corners, base)
        ay = roi_affine(sy, out_h, n, ipo, opo, corners, base)
        w = np.zeros((4, 4), dtype=np.float64)
        for (a11, a12, a21, a22, _), (i1, i2) in ((ax, (0, 2)), (ay, (1, 3))):
            w[i1, i1], w[i2, i1], w[i1, i2], w[i2, i2] = a11, a12, a21, a22
        shift = np.array([ax[4], ay[4], ax[4], ay[4]], dtype=compute_dtype)
        if np.count_nonzero(w - np.diag(np.diag(w))) == 0:
            if not np.all(np.diag(w) == 1.0):
                r = g.node("Mul", [r, g.const("roi_scale", np.diag(w).astype(compute_dtype))], role="helper",
                           name="Mul_ROIScale")[0]
        else:
            r = g.node("MatMul", [r, g.const("roi_affine", w.astype(compute_dtype))], role="helper",
                       name="MatMul_ROIRewrite")[0]
        if np.any(shift != 0):
            r = g.node("Add", [r, g.const("roi_shift", shift)], role="helper", name="Add_ROIShift")[0]

    attrs = dict(spatial_scale=spatial_scale)
    if opset >= 16:
        attrs["coordinate_transformation_mode"] = "half_pixel"
    if max_kind == "pool":
        attrs.update(mode="avg", sampling_ratio=1, output_height=out_h * n, output_width=out_w * n)
    elif max_kind == "single":
        attrs.update(mode="avg", sampling_ratio=1, output_height=out_h, output_width=out_w)
    elif max_kind == "onnx-max":
        attrs.update(mode="max", sampling_ratio=0, output_height=out_h, output_width=out_w)
    else:
        attrs.update(mode="avg", sampling_ratio=n if fixed else 0, output_height=out_h, output_width=out_w)
    y = g.node("RoiAlign", [x, r, bidx], role="op", name="RoiAlign", **attrs)[0]

    if oob != 0.0:
        n_batch, _, height, width = d.input_tensor.sizes
        ones = g.node("ConstantOfShape", [g.const("ones_shape", np.array([n_batch, 1, height, width], np.int64))],
                      role="helper", name="ConstantOfShape_ones",
                      value=_scalar_tensor(1.0, compute_dtype))[0]
        coverage = g.node("RoiAlign", [ones, r, bidx], role="op", name="RoiAlign_coverage", **attrs)[0]
        outside = g.node("Mul", [coverage, g.const("minus_oob", np.array(-oob, dtype=compute_dtype))], role="helper",
                         name="Mul_OutOfBounds")[0]
        outside = g.node("Add", [outside, g.const("oob", np.array(oob, dtype=compute_dtype))], role="helper",
                         name="Add_OutOfBounds")[0]
        y = g.node("Add", [y, outside], role="helper", name="Add_OutOfBoundsValue")[0]
    if max_kind == "pool":
        y = g.node("MaxPool", [y], role="op", name="MaxPool_SampleMax", kernel_shape=[n, n], strides=[n, n])[0]
    if compute_dtype != x_dtype:
        y = g.cast(y, x_dtype, hint="Cast_OutputTensor")
    g.rename(y, "OutputTensor")
    g.output("OutputTensor", x_dtype, d.output_tensor.sizes)
    model = g.model(opset)
    return Mapping(desc=desc, model=model, flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=inputs, output_ports=[Port("OutputTensor", "OutputTensor",
                                                     from_onnx=lambda a: a.astype(x_dtype, copy=False))],
                   opset=opset)


def _scalar_tensor(value: float, dtype: np.dtype):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array([value], dtype=dtype), "value")
