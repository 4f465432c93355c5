"""DML_ROI_ALIGN / DML_ROI_ALIGN1 <-> ONNX RoiAlign-16 or RoiAlign-10: the mapping (plus the
nodes that make it exact), the node read back, the input flags.

RoiAlign-16's ``half_pixel`` samples with an input offset of 0.5; RoiAlign-10 has no
``coordinate_transformation_mode`` and, as the ONNX spec and ORT's CPU kernel read it, no input
offset (``output_half_pixel``), but it also raises every region smaller than one pixel to 1x1,
which the page never does (flagged per input, ``input_flags``). Below, ``base`` = the node's
own input offset (0.5 or 0).

What ORT's DirectML EP builds from a RoiAlign node
(``onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorRoiAlign.cpp``):
DML_ROI_ALIGN1 with ``GetOptionalAttribute(CoordinateTransformationMode, "half_pixel")``, so a
RoiAlign-10 node, which has no such attribute, gets InputPixelOffset 0.5 where ONNX-10 means
output_half_pixel; "output_half_pixel" gives 0 without ONNX's >= 1 region clamp; any other
string fails ("Unsupported RoiAlign coordinate_transformation_mode."); OutputPixelOffset is
always -0.5; mode strings match "avg"/"max" exactly; sampling_ratio 0 -> (1, UINT32_MAX), k ->
(k, k); SpatialScaleX = SpatialScaleY = spatial_scale; OutOfBoundsInputValue 0; LINEAR; batch
indices ``ForceUnsignedDataType`` (int64 -> UINT64, int32 -> UINT32); ``DmlOperator.h`` pads
ranks to 4 (rois {R,4} -> {1,1,R,4}, batch_indices {R} -> {1,1,1,R}). So every other field
value needs a composition or cannot be reached:

* ROI rewrite. ORT's RoiAlign with ``spatial_scale = 1`` samples
  ``x = x1' - base + (k + 0.5) * (x2' - x1') / N`` for sample ``k`` of ``N = OutputWidth * n``.
  The page samples ``x = (k - OutputPixelOffset) * size / D + x1 * SpatialScaleX - InputPixelOffset``
  with ``size = (x2 - x1) * SpatialScaleX`` and ``D = N`` (``N - 1`` with AlignRegionsToCorners).
  Both are affine in k; equating them gives ROIs ``x1', x2'`` affine in ``x1, x2``: a diagonal
  scale (scales and InputPixelOffset only) or a 2x2 mix per axis, plus a shift. The host does
  that rewrite (``Mapping.feeds``: float64, rounded once to the node's type) and feeds the
  RoiAlign node the rewritten table as a graph input: an in-graph MatMul would let the EP
  round the coordinates as it likes (the CUDA EP runs a float32 MatMul in TF32, 10 mantissa
  bits, by default on Ampere and later), and the case would judge that rounding, not the
  operator. With an adaptive sample count (Min 1, Max UINT32_MAX) N varies per ROI, so only
  the diagonal rewrite (scales, InputPixelOffset) is exact there.
* DML MAX = max over interpolated samples; ORT's ``mode="max"`` is the max of the four
  weighted corner terms (``onnxruntime/core/providers/cpu/object_detection/roialign.cc``), not
  that. With a fixed n: RoiAlign(avg, sampling_ratio=1, n-times larger output) yields every
  sample; MaxPool(n, stride n) takes their max.
* OutOfBoundsInputValue v: ORT gives an out-of-range sample weight 0, and the four bilinear
  weights of an in-range sample sum to 1, so ``RoiAlign(ones)`` is the in-range fraction and
  ``RoiAlign(X) + v * (1 - RoiAlign(ones))`` is the page's value (per sample before the MaxPool
  of MAX, per output element for AVERAGE). Where the node's samples per element ``m`` are fixed,
  ``m * RoiAlign(ones)`` is a count of inside samples, rounded to it: ``RoiAlign(X) + (m -
  Round(m * RoiAlign(ones))) * (v / m)``, so the float32 slack of the ones' weights (an ulp or two
  of 1) is not multiplied by ``v`` into elements without an outside sample (``_out_of_bounds``).
* FLOAT16 with any of the above runs the node in float32: the host widens X and the ROIs
  (exact) and rounds the output back to float16 (round to nearest even, as ONNX's Cast); a
  float16 ROI table would round the rewritten coordinates.

Everything else around the node is done on the host too (``Mapping.feeds`` / ``Mapping.outputs``):
the ROI and batch-index reshapes, batch indices widened to int64, the ones the
OutOfBoundsInputValue composition samples. What stays in the graph is the operator's own
nodes (RoiAlign; for MAX with n > 1 the MaxPool that takes the max of the samples) and, for an
OutOfBoundsInputValue, a few float32 elementwise nodes (Mul, Add; Round and Sub of the count):
IEEE-754 correctly rounded arithmetic on every EP (no EP runs an elementwise op in reduced
precision), a count exact, two or three roundings the tolerance covers, and checked node by node
when a case fails (``harness.run.attribution``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence
from typing import Mapping as MappingT

import numpy as np
import onnx

from ...reference.checks import max_elements
from ...reference.descs import TensorDesc
from ...reference.nan_rules import nan_ignoring_max
from ...reference.roi_align import (
    AnyRoiAlign,
    RoiAlign1Desc,
    as_roi_align1,
    roi_count,
)
from ..builder import GraphBuilder
from ..common import (
    UINT32_MAX,
    Alternative,
    Imported,
    OnnxImportError,
    OpsetError,
    dtype_of,
    float_data_type,
    node_attributes,
    strides_flag,
)
from ..dml_ep_facts import FLOAT16TO32, DmlEpOp, Registration
from ..flags import Flag
from ..mapping import Mapping, Port

#: The DML EP's RoiAlign rows (OperatorRegistration.cpp L768-769 for opsets 10 and 16, batch
#: indices int32 or int64 per L628; ``graphs.dml_ep_facts``).
DML_EP = {"RoiAlign": DmlEpOp(
    rows=(Registration((10, 16), {"T1": FLOAT16TO32, "T2": frozenset({onnx.TensorProto.INT32, onnx.TensorProto.INT64})},
                       "L768-769, L628"),),
    operator_file="Operators/DmlOperatorRoiAlign.cpp")}

#: ONNX backend cases where ONNX's meaning and the nearest DML desc differ, and why
#: (``graphs.backend_cases``).
ONNX_BACKEND_DIFFERENCES = {
    "test_roialign_mode_max": "ONNX's RoiAlign mode=\"max\" (its reference implementation and ORT) takes the max "
                              "of the four weighted corner terms of each bilinear sample, DML's MAX the max of the "
                              "interpolated samples (https://github.com/onnx/onnx/issues/4764)",
}

ADAPTIVE_REASON = ("sampling_ratio=0: ONNX's count ceil(size/output) per axis, equal to the page's clamp(ceil(size/"
                   "output), 1, UINT32_MAX) for every region of positive size (ORT takes no sample for an empty or "
                   "inverted region where the page takes one: that is input data, flagged per case)")


def base_input_offset(opset: int) -> float:
    """The input offset ONNX's RoiAlign node itself applies: 0.5 (RoiAlign-16 half_pixel, which
    the mapper always writes) or 0 (RoiAlign-10, read as the ONNX spec and ORT's CPU kernel do)."""
    return 0.5 if opset >= 16 else 0.0


@dataclass
class _Plan:
    """The decisions ``to_onnx`` takes from the desc's fields before building the graph."""

    n: Optional[int]          # fixed samples per output element per axis; None: ONNX's adaptive count
    max_kind: Optional[str]   # None (AVERAGE), "single", "pool" or "onnx-max": how DML's MAX is reached
    rewrite: bool             # the ROIs need an affine rewrite (scales, offsets, corners)
    oob: float                # OutOfBoundsInputValue as float32
    base: float               # the RoiAlign node's own input offset


# --- DML -> ONNX -------------------------------------------------------------------------------

def to_onnx(desc: AnyRoiAlign, opset: int) -> Mapping:
    """The RoiAlign model of a validated desc, with one flag per field value; no model when a
    flag is ``inexpressible``."""
    if opset < 10:
        raise OpsetError(opset, "RoiAlign exists from opset 10")
    d = as_roi_align1(desc)
    n, sample_flags = plan_samples(d)
    max_kind, reduction_flag = _reduction(d, n)
    plan = _Plan(n, max_kind, False, float(np.float32(d.out_of_bounds_input_value)), base_input_offset(opset))
    offset_flags = _geometry_flags(desc, d, plan, opset)
    flags = (_tensor_flags(d) + [reduction_flag] + sample_flags + [_interpolation_flag(d)] + offset_flags
             + [_oob_flag(d, plan)])
    if any(f.kind == "inexpressible" for f in flags):
        return Mapping(desc=desc, model=None, flags=flags, opset=opset, input_flagger=input_flags)
    compute_dtype = _compute_dtype(d, plan, flags)
    return _build(desc, d, plan, compute_dtype, flags, opset)


def _tensor_flags(d: RoiAlign1Desc) -> list[Flag]:
    flags = [Flag(f"{member}.DataType", t.data_type, "exact",
                  "RoiAlign T1 holds float32 and float16 (ORT's CPU kernel runs float16 as float32 between Casts it "
                  "inserts)") for member, t in (("InputTensor", d.input_tensor), ("ROITensor", d.roi_tensor),
                                               ("OutputTensor", d.output_tensor))]
    flags.append(Flag("InputTensor.Sizes", list(d.input_tensor.sizes), "exact", "X is {N, C, H, W} as on the page"))
    if d.roi_tensor.dimension_count == 2:
        flags.append(Flag("ROITensor.Sizes", list(d.roi_tensor.sizes), "exact", "rois is {NumROIs, 4}"))
    else:
        flags.append(Flag("ROITensor.Sizes", list(d.roi_tensor.sizes), "composed",
                          "the host feeds the table as {NumROIs, 4}, the only shape ONNX's rois takes (same data "
                          "order)"))
    bi = d.batch_indices_tensor
    if bi.data_type == "UINT64":
        flags.append(Flag("BatchIndicesTensor.DataType", "UINT64", "exact",
                          "batch_indices is int64; the DML EP reinterprets it as UINT64 (ForceUnsignedDataType), "
                          "equal for indices < 2^63"))
    else:
        flags.append(Flag("BatchIndicesTensor.DataType", bi.data_type, "composed",
                          "the host widens the indices to int64 (exact), ONNX RoiAlign's only batch_indices type"))
    if bi.dimension_count == 1:
        flags.append(Flag("BatchIndicesTensor.Sizes", list(bi.sizes), "exact", "batch_indices is {NumROIs}"))
    else:
        flags.append(Flag("BatchIndicesTensor.Sizes", list(bi.sizes), "composed",
                          "the host feeds the indices as {NumROIs} (same data order)"))
    _, _, out_h, out_w = d.output_tensor.sizes
    flags.append(Flag("OutputTensor.Sizes", list(d.output_tensor.sizes), "exact",
                      f"output_height={out_h}, output_width={out_w}"))
    for member, t in (("InputTensor", d.input_tensor), ("ROITensor", d.roi_tensor),
                      ("BatchIndicesTensor", bi), ("OutputTensor", d.output_tensor)):
        flags.append(strides_flag(member, t))
    return flags


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


def _reduction(d: RoiAlign1Desc, n: Optional[int]) -> tuple[Optional[str], Flag]:
    """How ReductionFunction is reached: ``mode="avg"`` for AVERAGE; for MAX one sample, an
    avg RoiAlign of every sample then a MaxPool, or ONNX's own (divergent) ``mode="max"``."""
    if d.reduction_function != "MAX":
        return None, Flag("ReductionFunction", "AVERAGE", "exact", 'mode="avg": the mean of the samples of each '
                          "output element")
    if n == 1:
        return "single", Flag("ReductionFunction", "MAX", "composed", 'mode="avg" with sampling_ratio=1: the max of '
                              "one interpolated sample is that sample (ORT's mode=\"max\" would take the max of its "
                              "four weighted corner terms instead)")
    if n is not None:
        return "pool", Flag("ReductionFunction", "MAX", "composed", f'RoiAlign(mode="avg", sampling_ratio=1) at a '
                            f"{n}x larger output yields every interpolated sample, then MaxPool({n}x{n}, stride {n}) "
                            "takes their max (ORT's mode=\"max\" is the max of weighted corner terms, not of samples)")
    return "onnx-max", Flag("ReductionFunction", "MAX", "diverges", 'mode="max": ONNX Runtime (CPU, CUDA, and '
                            "onnx.reference) takes the max of the four weighted corner terms max(w1*v1, ..., w4*v4), "
                            "not of interpolated samples; the exact composition needs a fixed sample count")


def _interpolation_flag(d: RoiAlign1Desc) -> Flag:
    if d.interpolation_mode == "LINEAR":
        return Flag("InterpolationMode", "LINEAR", "exact", "ONNX RoiAlign interpolates bilinearly")
    return Flag("InterpolationMode", d.interpolation_mode, "inexpressible",
                "ONNX RoiAlign has no nearest-neighbour mode, and the page does not define the rounding a "
                "Gather-based emulation would need")


def _geometry_flags(desc: AnyRoiAlign, d: RoiAlign1Desc, plan: _Plan, opset: int) -> list[Flag]:
    """Flags of the fields the ROI rewrite absorbs (scales, pixel offsets, corners); sets
    ``plan.rewrite``."""
    sx, sy = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    ipo, opo = float(np.float32(d.input_pixel_offset)), float(np.float32(d.output_pixel_offset))
    plan.rewrite = sx != sy or ipo != plan.base or opo != -0.5 or d.align_regions_to_corners
    flags = []
    for name, v in (("SpatialScaleX", d.spatial_scale_x), ("SpatialScaleY", d.spatial_scale_y)):
        if sx != sy:
            flags.append(Flag(name, v, "composed", "ONNX has one spatial_scale: the ROIs are multiplied by "
                              "[SpatialScaleX, SpatialScaleY, SpatialScaleX, SpatialScaleY] and spatial_scale=1"))
        elif plan.rewrite:
            flags.append(Flag(name, v, "composed", "folded into the ROI rewrite (done on the host, in float64; "
                              "spatial_scale=1)"))
        else:
            flags.append(Flag(name, v, "exact", f"spatial_scale={sx}"))
    is_v1 = type(desc) is RoiAlign1Desc
    if opset < 16:
        flags.append(Flag("InputPixelOffset" if is_v1 else "Type", d.input_pixel_offset if is_v1 else desc.TYPE,
                          "diverges", "RoiAlign-10 has no coordinate_transformation_mode: the ONNX spec and ORT's CPU "
                          "kernel sample with no input offset (every ROI coordinate shifted by "
                          f"{plan.base - ipo:g} after scaling to match the page), but ORT's DirectML EP builds "
                          "InputPixelOffset 0.5 for it, half a pixel off (DmlOperatorRoiAlign.cpp)"))
    elif is_v1 and ipo == 0.5:
        flags.append(Flag("InputPixelOffset", d.input_pixel_offset, "exact", 'coordinate_transformation_mode="half_pixel"'))
    elif is_v1:
        flags.append(Flag("InputPixelOffset", d.input_pixel_offset, "composed",
                          f"half_pixel with every ROI coordinate shifted by 0.5 - {ipo} after scaling "
                          "(output_half_pixel is not 0: ORT clamps regions to at least 1x1 there)"))
    if is_v1:
        flags += _output_offset_flags(d, opo, plan.n is not None)
    return flags


def _output_offset_flags(d: RoiAlign1Desc, opo: float, fixed: bool) -> list[Flag]:
    if opo == -0.5:
        flags = [Flag("OutputPixelOffset", d.output_pixel_offset, "exact", "both ONNX modes place samples at "
                      "(k + 0.5) / n of a bin, i.e. OutputPixelOffset -0.5")]
    elif fixed:
        flags = [Flag("OutputPixelOffset", d.output_pixel_offset, "composed",
                      "an ROI rewrite that moves both corners by -(OutputPixelOffset + 0.5) sample spacings "
                      "(the host's ROI rewrite, exact for a fixed sample count)")]
    else:
        flags = [Flag("OutputPixelOffset", d.output_pixel_offset, "inexpressible",
                      "the shift is a fraction of a sample spacing, which depends on ONNX's per-region adaptive "
                      "count; only a fixed count (Minimum = Maximum) can be composed")]
    if not d.align_regions_to_corners:
        flags.append(Flag("AlignRegionsToCorners", False, "exact", "ONNX spreads samples evenly within the region"))
    elif fixed:
        flags.append(Flag("AlignRegionsToCorners", True, "composed",
                          "samples stretched to the corners (spacing size/(N-1), reference RA-6) as an ROI rewrite "
                          "that widens each region by N/(N-1) (the host's ROI rewrite)"))
    else:
        flags.append(Flag("AlignRegionsToCorners", True, "inexpressible",
                          "stretching samples to the corners depends on the per-region adaptive count; only a fixed "
                          "count (Minimum = Maximum) can be composed"))
    return flags


def _oob_flag(d: RoiAlign1Desc, plan: _Plan) -> Flag:
    """The OutOfBoundsInputValue flag: exact for 0 (ORT's outside samples read 0), composed for
    another finite value, inexpressible for a non-finite one or under ONNX's corner-term max."""
    if not np.isfinite(plan.oob):
        return Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "inexpressible",
                    "a non-finite value: the composition's v * (1 - RoiAlign(ones)) multiplies it by the share of "
                    "samples outside, which is 0 where every sample is inside (inf * 0 = NaN, where the page reads "
                    "no v at all) and which float32 rounding can leave a hair above 0 there (inf * tiny = inf)")
    if plan.oob == 0.0:
        return Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "exact",
                    "ORT gives samples outside [-1, size] weight 0, i.e. they read 0")
    if plan.max_kind == "onnx-max":
        return Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "inexpressible",
                    "with ONNX's corner-term max no per-sample correction exists; needs a fixed sample count")
    if counted_samples(plan) is None:
        return Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "composed",
                    "RoiAlign(X) + v * (1 - RoiAlign(ones)): ORT gives an outside sample weight 0 and an inside one "
                    "weights summing to 1")
    return Flag("OutOfBoundsInputValue", d.out_of_bounds_input_value, "composed",
                "RoiAlign(X) + (m - Round(m * RoiAlign(ones))) * v / m for m samples per element: ORT gives an "
                "outside sample weight 0 and an inside one weights summing to 1, so the rounded product counts the "
                "inside samples")


def _compute_dtype(d: RoiAlign1Desc, plan: _Plan, flags: list[Flag]) -> np.dtype:
    """float32 for a float16 desc whose ROIs are rewritten or corrected (a float16 Mul would
    round ROI coordinates); the InputTensor.DataType flag then says so."""
    x_dtype = dtype_of(d.input_tensor)
    if x_dtype != np.float16 or not (plan.rewrite or plan.oob != 0.0):
        return x_dtype
    for i, f in enumerate(flags):
        if f.field == "InputTensor.DataType":
            flags[i] = Flag(f.field, f.value, "composed", "float16 with an ROI rewrite or an OutOfBoundsInputValue: "
                            "the node runs in float32, the host widening X and the ROIs (exact) and rounding the "
                            "output to float16 (a float16 ROI table would round the rewritten coordinates); the EP's "
                            "float16 RoiAlign is not exercised")
    return np.dtype(np.float32)


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


def _affine_matrix(d: RoiAlign1Desc, plan: _Plan) -> tuple[np.ndarray, np.ndarray]:
    """The ROI rewrite as ``rois @ w + shift`` over ``[x1, y1, x2, y2]`` columns."""
    _, _, out_h, out_w = d.output_tensor.sizes
    ipo, opo = float(np.float32(d.input_pixel_offset)), float(np.float32(d.output_pixel_offset))
    ax = roi_affine(float(np.float32(d.spatial_scale_x)), out_w, plan.n, ipo, opo, d.align_regions_to_corners,
                    plan.base)
    ay = roi_affine(float(np.float32(d.spatial_scale_y)), out_h, plan.n, ipo, opo, d.align_regions_to_corners,
                    plan.base)
    w = np.zeros((4, 4), dtype=np.float64)
    for (a11, a12, a21, a22, _), (i1, i2) in ((ax, (0, 2)), (ay, (1, 3))):
        w[i1, i1], w[i2, i1], w[i1, i2], w[i2, i2] = a11, a12, a21, a22
    return w, np.array([ax[4], ay[4], ax[4], ay[4]])


def rewritten_region_sizes(d: RoiAlign1Desc, opset: int, rois: np.ndarray) -> np.ndarray:
    """``(NumROIs, 2)``: the width and height, after the mapper's ROI rewrite, of the regions ONNX's
    node sees (what RoiAlign-10 raises to at least 1)."""
    n, _ = _plan_samples(d)
    w, _ = _affine_matrix(d, _Plan(n, None, True, 0.0, base_input_offset(opset)))
    r = rois.reshape(-1, 4).astype(np.float64) @ w
    return np.stack([r[:, 2] - r[:, 0], r[:, 3] - r[:, 1]], axis=1)


# --- the graph ---------------------------------------------------------------------------------

def _build(desc: AnyRoiAlign, d: RoiAlign1Desc, plan: _Plan, compute_dtype: np.dtype, flags: list[Flag],
           opset: int) -> Mapping:
    """The graph: the RoiAlign node fed straight from graph inputs (the host reshapes, widens and
    rewrites them: ``_graph_inputs``), the OutOfBoundsInputValue correction and the MaxPool of
    MAX when the plan needs them; the host rounds a float32 result back to float16."""
    x_dtype = dtype_of(d.input_tensor)
    g = GraphBuilder(desc.TYPE.lower())
    x, r, bidx, inputs = _graph_inputs(g, d, plan, compute_dtype)
    spatial_scale = 1.0 if plan.rewrite else float(np.float32(d.spatial_scale_x))
    attrs = _roi_align_attributes(d, plan, spatial_scale, opset)
    y = g.node("RoiAlign", [x, r, bidx], role="op", name="RoiAlign", **attrs)[0]
    if plan.oob != 0.0:
        inputs.append(_ones_port(g, d, compute_dtype))
        y = _out_of_bounds(g, plan, y, r, bidx, attrs, compute_dtype, opset)
    if plan.max_kind == "pool":
        y = g.node("MaxPool", [y], role="op", name="MaxPool_SampleMax", kernel_shape=[plan.n, plan.n],
                   strides=[plan.n, plan.n])[0]
    g.rename(y, "OutputTensor")
    g.output("OutputTensor", compute_dtype, d.output_tensor.sizes)
    return Mapping(desc=desc, model=g.model(opset), flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=inputs, output_ports=[Port("OutputTensor", "OutputTensor",
                                                     from_onnx=lambda a: a.astype(x_dtype, copy=False))],
                   opset=opset, input_flagger=input_flags, meaning=_meaning(plan, attrs, x_dtype, opset, _cap(d, plan)))


def _graph_inputs(g: GraphBuilder, d: RoiAlign1Desc, plan: _Plan, compute_dtype: np.dtype
                  ) -> tuple[str, str, str, list[Port]]:
    """X, rois and batch_indices as graph inputs in the shapes and types ONNX's node takes; the
    host converts the DML tensors (``Port.to_onnx``): X widened to the compute type, the ROI
    table reshaped to {NumROIs, 4} and rewritten (``host_roi_rewrite``), the batch indices
    reshaped to {NumROIs} and widened to int64. All exact but the rewrite's one rounding."""
    n_rois = roi_count(d.roi_tensor.sizes)
    x = g.input("InputTensor", compute_dtype, d.input_tensor.sizes)
    r = g.input("ROITensor", compute_dtype, (n_rois, 4))
    bidx = g.input("BatchIndicesTensor", np.int64, (n_rois,))
    rewrite = _affine_matrix(d, plan) if plan.rewrite else None
    ports = [Port("InputTensor", x, to_onnx=lambda a: a.astype(compute_dtype, copy=False)),
             Port("ROITensor", r, to_onnx=lambda a: host_roi_rewrite(a, rewrite, compute_dtype)),
             Port("BatchIndicesTensor", bidx, to_onnx=lambda a: a.reshape(n_rois).astype(np.int64))]
    return x, r, bidx, ports


def host_roi_rewrite(rois: np.ndarray, rewrite: Optional[tuple[np.ndarray, np.ndarray]],
                     dtype: np.dtype) -> np.ndarray:
    """The ROI table as the RoiAlign node takes it: {NumROIs, 4} in ``dtype``, rewritten by
    ``rewrite = (w, shift)`` (``rois @ w + shift``, module docstring) in float64 and rounded once.
    A term whose coefficient is 0 is left out rather than multiplied, so an infinite coordinate
    reaches only the columns that read it (a MatMul would spread 0 * inf = NaN)."""
    table = np.asarray(rois).reshape(-1, 4)
    if rewrite is None:
        return table.astype(dtype)
    w, shift = rewrite
    wide = table.astype(np.float64)
    out = np.empty_like(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(4):
            column = np.full(len(wide), shift[j])
            for i in np.flatnonzero(w[:, j]):
                column = column + wide[:, i] * w[i, j]
            out[:, j] = column
        return out.astype(dtype)


def _ones_port(g: GraphBuilder, d: RoiAlign1Desc, compute_dtype: np.dtype) -> Port:
    """The image of ones the OutOfBoundsInputValue composition samples: a graph input the host
    fills, so that no helper node feeds an op node."""
    n_batch, _, height, width = d.input_tensor.sizes
    shape = (n_batch, 1, height, width)
    name = g.input("OnesTensor", compute_dtype, shape)
    return Port("InputTensor", name, to_onnx=lambda a: np.ones(shape, compute_dtype))


def _roi_align_attributes(d: RoiAlign1Desc, plan: _Plan, spatial_scale: float, opset: int) -> dict:
    _, _, out_h, out_w = d.output_tensor.sizes
    attrs: dict = dict(spatial_scale=spatial_scale)
    if opset >= 16:
        attrs["coordinate_transformation_mode"] = "half_pixel"
    if plan.max_kind == "pool":
        assert plan.n is not None, "a MaxPool of samples has a fixed count"  # _plan gives "pool" only then
        attrs.update(mode="avg", sampling_ratio=1, output_height=out_h * plan.n, output_width=out_w * plan.n)
    elif plan.max_kind == "single":
        attrs.update(mode="avg", sampling_ratio=1, output_height=out_h, output_width=out_w)
    elif plan.max_kind == "onnx-max":
        attrs.update(mode="max", sampling_ratio=0, output_height=out_h, output_width=out_w)
    else:
        attrs.update(mode="avg", sampling_ratio=plan.n or 0, output_height=out_h, output_width=out_w)
    return attrs


#: The most samples per element the OutOfBoundsInputValue composition counts: a float32 mean of
#: ``m`` weights each within an ulp or two of 1, times ``m``, stays far within a half of the count
#: (``m**2`` ulps of 1 at worst: 0.06 for 1024).
COUNTED_SAMPLES_MAX = 1024


def counted_samples(plan: _Plan) -> Optional[int]:
    """The samples per element of the RoiAlign node that the OutOfBoundsInputValue composition
    counts: 1 for a MAX (the node yields every sample alone), ``n * n`` for AVERAGE with a fixed
    ``n``; None for ONNX's adaptive count, which varies per region, and above
    ``COUNTED_SAMPLES_MAX``."""
    if plan.max_kind in ("pool", "single"):
        return 1
    m = plan.n * plan.n if plan.n is not None and plan.max_kind is None else None
    return m if m is not None and m <= COUNTED_SAMPLES_MAX else None


def _out_of_bounds(g: GraphBuilder, plan: _Plan, y: str, r: str, bidx: str, attrs: dict,
                   compute_dtype: np.dtype, opset: int) -> str:
    """``y + v * (1 - RoiAlign(ones))``: the in-range share of each sample read from a RoiAlign
    of ones (graph input ``OnesTensor``), the rest given OutOfBoundsInputValue ``v``. With ``m``
    samples per element fixed (``counted_samples``) the share is a count: ``y + (m -
    Round(m * RoiAlign(ones))) * (v / m)``. The EP's float32 weights of an inside sample sum to 1
    within an ulp or two, and ``v`` times that slack (0.004 for v = 65504) would show in every
    element of a region wholly inside; the count removes it, so an element without an outside
    sample gets exactly 0 added. The adaptive count keeps ``v * (1 - share)`` (module docstring).
    Before opset 11, which has no Round, the count is ``Floor(m * RoiAlign(ones) + 0.5)``: the
    same integer for a product within far less than a half of it."""
    coverage = g.node("RoiAlign", ["OnesTensor", r, bidx], role="op", name="RoiAlign_coverage", **attrs)[0]
    m = counted_samples(plan)
    if m is None:
        outside = g.node("Mul", [coverage, g.const("minus_oob", np.array(-plan.oob, dtype=compute_dtype))],
                         role="helper", name="Mul_OutOfBounds")[0]
        outside = g.node("Add", [outside, g.const("oob", np.array(plan.oob, dtype=compute_dtype))], role="helper",
                         name="Add_OutOfBounds")[0]
        return g.node("Add", [y, outside], role="helper", name="Add_OutOfBoundsValue")[0]
    if m > 1:
        coverage = g.node("Mul", [coverage, g.const("samples", np.array(m, dtype=compute_dtype))], role="helper",
                          name="Mul_OutOfBoundsCount")[0]
    if opset >= 11:
        inside = g.node("Round", [coverage], role="helper", name="Round_OutOfBoundsCount")[0]
    else:
        half = g.node("Add", [coverage, g.const("half", np.array(0.5, dtype=compute_dtype))], role="helper",
                      name="Add_OutOfBoundsHalf")[0]
        inside = g.node("Floor", [half], role="helper", name="Floor_OutOfBoundsCount")[0]
    outside = g.node("Sub", [g.const("all_samples", np.array(m, dtype=compute_dtype)), inside], role="helper",
                     name="Sub_OutOfBoundsCount")[0]
    share = np.array(np.float32(plan.oob) / np.float32(m), dtype=compute_dtype)
    outside = g.node("Mul", [outside, g.const("oob_share", share)], role="helper", name="Mul_OutOfBounds")[0]
    return g.node("Add", [y, outside], role="helper", name="Add_OutOfBoundsValue")[0]


# --- what the model means, as ORT's CPU kernel computes it ---------------------------------

#: The ``diverges`` fields whose meaning the plans built on ``mode="avg"`` compute, each with the
#: ``PageRule`` that leaves that field's divergence alone: the adaptive count without the page's
#: cap; what ORT does with a degenerate region (no sample for an empty or inverted one, RoiAlign-10's
#: 1x1 clamp, its float32 ceil); a non-finite ``X[b, c, 0, 0]`` that an outside sample reads.
DATA_MEANINGS = {
    "MinimumSamplesPerOutput": dict(one_sample=True, no_clamp=True, outside_zero=True),
    "MaximumSamplesPerOutput": dict(one_sample=True, no_clamp=True, outside_zero=True),
    "ROITensor": dict(outside_zero=True, capped=True),
    "InputTensor[:, :, 0, 0]": dict(one_sample=True, no_clamp=True, capped=True),
}


def _meaning(plan: _Plan, attrs: dict, x_dtype: np.dtype, opset: int, cap: Optional[int]
             ) -> Optional[Callable[[MappingT[str, np.ndarray]], Optional[dict]]]:
    """The function from the model's feeds to ``{field: {"OutputTensor": ...}}``: for the
    ``onnx-max`` plan, under "ReductionFunction", what the model means as ORT's CPU kernel
    computes it (``onnx_roi_align``); for every plan built on ``mode="avg"`` (AVERAGE, one-sample
    MAX, the MaxPool of samples), under each field of ``DATA_MEANINGS``, the model with that
    field's divergence alone (the page's reading of the others, in float64; ``_composed``).
    ``cap``: the desc's MaximumSamplesPerOutput when it bounds an adaptive count."""
    half_pixel = base_input_offset(opset) == 0.5

    def node(x: np.ndarray, feeds: MappingT[str, np.ndarray], rule: Optional[PageRule]) -> Optional[np.ndarray]:
        return onnx_roi_align(x, feeds["ROITensor"], feeds["BatchIndicesTensor"], attrs, half_pixel, rule=rule)

    def meaning(feeds: MappingT[str, np.ndarray]) -> Optional[dict]:
        """What the model gives for these feeds, in the desc's type (None: too large)."""
        if plan.max_kind == "onnx-max":
            out = node(feeds["InputTensor"], feeds, None)
            return None if out is None else {"ReductionFunction": {"OutputTensor": out.astype(x_dtype)}}
        found = {}
        for field, options in DATA_MEANINGS.items():
            options = dict(options)
            rule = PageRule(cap=cap if options.pop("capped", False) else None, wide=True, **options)
            out = node(feeds["InputTensor"], feeds, rule)
            if out is not None:
                out = _composed(plan, out, lambda: node(feeds["OnesTensor"], feeds, rule))
            if out is not None:
                found[field] = {"OutputTensor": out.astype(x_dtype)}
        return found

    return meaning


def _cap(d: RoiAlign1Desc, plan: _Plan) -> Optional[int]:
    """The page's MaximumSamplesPerOutput where it bounds the adaptive count the node takes."""
    return d.maximum_samples_per_output if plan.n is None and d.maximum_samples_per_output != UINT32_MAX else None


def _composed(plan: _Plan, y: np.ndarray, coverage: Callable[[], Optional[np.ndarray]]) -> Optional[np.ndarray]:
    """The nodes after the RoiAlign node, in ``y``'s type: ``y + (coverage * -v + v)`` for an
    OutOfBoundsInputValue ``v`` (``_out_of_bounds``), then the n x n max of MAX as the page reads a
    max (NaN ignored unless every sample is NaN, reference/DECISIONS.md NAN-1: ORT's MaxPool orders
    NaN its own way, a divergence of its own)."""
    oob = y.dtype.type(np.float32(plan.oob))
    m = counted_samples(plan)
    with np.errstate(all="ignore"):
        if plan.oob != 0.0:
            ones = coverage()
            if ones is None:
                return None
            if m is None:
                y = y + (ones * -oob + oob)
            else:
                y = y + (m - np.round(ones * m)) * (oob / m)
        if plan.max_kind == "pool":
            r, c, h, w = y.shape
            n = int(plan.n or 1)
            blocks = y.reshape(r, c, h // n, n, w // n, n).transpose(0, 1, 2, 4, 3, 5).reshape(r, c, h // n, w // n, -1)
            y = nan_ignoring_max(blocks, axis=-1)
    return y


def _std_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++'s ``std::max(a, b)``: ``b`` where ``a < b``, else ``a`` (so a NaN ``a`` wins, a NaN ``b`` loses)."""
    return np.where(a < b, b, a)


def _axis_samples(start: np.float32, size: np.float32, bins: int, grid: int, limit: int):
    """ORT's sample positions along one axis (``bins`` x ``grid``, float32 as its kernel computes
    them), whether each is inside ``[-1, limit]``, its low and high pixel and its two weights."""
    f32 = np.float32
    bin_size = f32(size / f32(bins))
    k, i = np.meshgrid(np.arange(bins, dtype=np.float32), np.arange(grid, dtype=np.float32), indexing="ij")
    pos = (start + k * bin_size + (i + f32(0.5)) * bin_size / f32(grid)).astype(np.float32)
    inside = ~((pos < -1.0) | (pos > limit))
    pos = np.where(pos <= 0, f32(0), pos)
    low = np.where(inside, pos, 0).astype(np.int64)
    edge = low >= limit - 1
    low = np.where(edge, limit - 1, low)
    high = np.where(edge, low, low + 1)
    pos = np.where(edge, low.astype(np.float32), pos)
    lo_w = (pos - low.astype(np.float32)).astype(np.float32)
    return inside, low, high, (f32(1) - lo_w).astype(np.float32), lo_w


def onnx_max_mode(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, attrs: dict, half_pixel: bool,
                  limit: Optional[int] = None) -> Optional[np.ndarray]:
    """ONNX RoiAlign with ``mode="max"`` as ORT's kernels and the ONNX reference compute it: for
    each output element, the running ``std::max`` over its samples of ``max(w1*v1, w2*v2, w3*v3,
    w4*v4)``, the largest *weighted corner term*, where the DML page takes the max of the
    interpolated samples (``onnx_roi_align`` with ``attrs["mode"]`` taken as "max")."""
    return onnx_roi_align(x, rois, batch_indices, {**attrs, "mode": "max"}, half_pixel, limit)


def onnx_roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, attrs: dict, half_pixel: bool,
                   limit: Optional[int] = None, rule: Optional["PageRule"] = None) -> Optional[np.ndarray]:
    """ONNX RoiAlign as ORT's CPU kernel computes it
    (``onnxruntime/core/providers/cpu/object_detection/roialign.cc``, RoiAlignForward and
    PreCalcForBilinearInterpolate). ``attrs``: the node's ``mode`` ("avg" or "max"),
    ``output_height``, ``output_width``, ``sampling_ratio``, ``spatial_scale``; ``half_pixel``: its
    coordinate transformation (False: output_half_pixel, RoiAlign-10's only one, which raises a
    region to at least 1x1). ``sampling_ratio=0`` takes ceil(size / output) samples per axis with no
    upper bound, computed in float32, and no sample at all (output 0) when that is <= 0. A sample
    is ``w1*v1 + w2*v2 + w3*v3 + w4*v4``; one outside ``[-1, size]`` has weights 0 at pixel 0, so
    it adds ``0 * X[b, c, 0, 0]`` (NaN when that pixel is NaN or infinite). "avg" sums the samples
    in the kernel's order and divides by their count; "max" keeps, per sample, the largest weighted
    corner term and the running ``std::max`` of those. All in float32 (float16 input is widened,
    as ORT's CPU EP does). ``rule`` puts back the page's reading of some of these (``PageRule``).
    None when the samples would exceed ``limit`` elements (default: the reference's element cap)."""
    f32 = np.float32
    rule = rule or PageRule()
    xs_all = np.asarray(x).astype(np.float64 if rule.wide else np.float32)
    _, channels, height, width = xs_all.shape
    out_h, out_w = int(attrs["output_height"]), int(attrs["output_width"])
    ratio, scale = int(attrs.get("sampling_ratio", 0)), f32(attrs.get("spatial_scale", 1.0))
    average = str(attrs.get("mode", "avg")) == "avg"
    table = np.asarray(rois).astype(np.float32).reshape(-1, 4)
    out = np.zeros((len(table), channels, out_h, out_w), xs_all.dtype)
    with np.errstate(all="ignore"):
        for r, row in enumerate(table):
            x1, y1, x2, y2 = (f32(v * scale - f32(0.5 if half_pixel else 0.0)) for v in row)
            size_h, size_w = f32(y2 - y1), f32(x2 - x1)
            if not half_pixel and not rule.no_clamp:
                size_h, size_w = max(size_h, f32(1)), max(size_w, f32(1))
            grid_h, grid_w = (rule.count(ratio, int(np.ceil(f32(size / f32(o))))) for size, o in
                              ((size_h, out_h), (size_w, out_w)))
            if grid_h <= 0 or grid_w <= 0:
                continue
            if channels * out_h * out_w * grid_h * grid_w > (limit or max_elements()) // 8:
                return None
            plane = xs_all[int(batch_indices.reshape(-1)[r])]
            ys = _axis_samples(y1, size_h, out_h, grid_h, height)
            xs = _axis_samples(x1, size_w, out_w, grid_w, width)
            if average:
                out[r] = _corner_sum(plane, ys, xs, rule.outside_zero) / f32(grid_h * grid_w)
            else:
                out[r] = _corner_max(plane, ys, xs)
    return out


@dataclass(frozen=True)
class PageRule:
    """Which of ORT's RoiAlign readings ``onnx_roi_align`` replaces by the page's, so that a
    meaning shows one divergence alone (the default replaces none: ORT's kernel as it is).
    ``cap``: the page's MaximumSamplesPerOutput bounds an adaptive count; ``one_sample``: an
    empty or inverted region takes one sample (the page's minimum) instead of none; ``no_clamp``:
    RoiAlign-10's 1x1 clamp is left out; ``outside_zero``: a sample outside the input adds 0 (the
    mapper's OutOfBoundsInputValue composition then gives the page's value) instead of
    ``0 * X[b, c, 0, 0]``; ``wide``: values and sums in float64, so that no float32 overflow or
    rounding is taken for a divergence."""

    cap: Optional[int] = None
    one_sample: bool = False
    no_clamp: bool = False
    outside_zero: bool = False
    wide: bool = False

    def count(self, ratio: int, adaptive: int) -> int:
        """Samples per axis: ``ratio`` when fixed, else ``adaptive`` (ONNX's ceil) under the rule."""
        if ratio > 0:
            return ratio
        count = min(adaptive, self.cap) if self.cap is not None else adaptive
        return max(count, 1) if self.one_sample else count


def _corner_max(plane: np.ndarray, ys: tuple, xs: tuple) -> np.ndarray:
    """One region: ``(C, out_h, out_w)``, the running max over samples (rows of the grid first,
    as ORT loops) of each sample's largest weighted corner term."""
    result = None
    for iy in range(ys[0].shape[1]):
        t = _row_terms(plane, ys, xs, iy)
        row = _std_max(_std_max(_std_max(t[0], t[1]), t[2]), t[3])  # (C, out_h, out_w, grid_w)
        for ix in range(row.shape[-1]):
            result = row[..., ix] if result is None else _std_max(result, row[..., ix])
    assert result is not None, "a grid has at least one sample"
    return result


def _corner_sum(plane: np.ndarray, ys: tuple, xs: tuple, outside_zero: bool = False) -> np.ndarray:
    """One region: ``(C, out_h, out_w)``, the running sum over samples (rows of the grid first, as
    ORT loops) of ``((w1*v1 + w2*v2) + w3*v3) + w4*v4``, in the plane's type. Every sample at once,
    laid out row after row on the last axis: ``np.add.accumulate`` adds along it strictly in order
    (never pairwise), so the sum is the kernel's sample by sample, bit for bit."""
    t = _grid_terms(plane, ys, xs, outside_zero)
    samples = ((t[0] + t[1]) + t[2]) + t[3]  # (C, out_h, grid_h, out_w, grid_w)
    c, out_h, grid_h, out_w, grid_w = samples.shape
    ordered = samples.transpose(0, 1, 3, 2, 4).reshape(c, out_h, out_w, grid_h * grid_w)
    return np.add.accumulate(ordered, axis=-1)[..., -1]


def _grid_terms(plane: np.ndarray, ys: tuple, xs: tuple, outside_zero: bool = False) -> list[np.ndarray]:
    """Every sample of every bin of one region: its four weighted corner terms, each ``(C, out_h,
    grid_h, out_w, grid_w)``, as ``_row_terms`` gives them row by row."""
    in_y, y_lo, y_hi, hy, ly = (a[:, :, None, None] for a in ys)
    in_x, x_lo, x_hi, hx, lx = (a[None, None] for a in xs)
    inside = (in_y & in_x)[None]
    terms = [(hy * hx)[None] * plane[:, y_lo, x_lo], (hy * lx)[None] * plane[:, y_lo, x_hi],
             (ly * hx)[None] * plane[:, y_hi, x_lo], (ly * lx)[None] * plane[:, y_hi, x_hi]]
    pixel = plane[:, :1, :1][..., None, None]
    corner = np.zeros_like(pixel) if outside_zero else np.float32(0) * pixel
    return [np.where(inside, t, corner) for t in terms]


def _row_terms(plane: np.ndarray, ys: tuple, xs: tuple, iy: int, outside_zero: bool = False) -> list[np.ndarray]:
    """Samples ``(iy, 0..grid_w-1)`` of every bin of one region: their four weighted corner terms
    ``w1*v1 .. w4*v4``, each ``(C, out_h, out_w, grid_w)``; a sample outside the input has every
    weight 0 and every position pixel 0, as ORT's PreCalcForBilinearInterpolate sets them (or,
    with ``outside_zero``, adds 0)."""
    in_y, y_lo, y_hi, hy, ly = ys
    in_x, x_lo, x_hi, hx, lx = xs
    inside = (in_y[:, iy][:, None, None] & in_x[None, :, :])[None]
    yl, yh = y_lo[:, iy][:, None, None], y_hi[:, iy][:, None, None]
    xl, xh = x_lo[None, :, :], x_hi[None, :, :]
    wy_h, wy_l = hy[:, iy][:, None, None], ly[:, iy][:, None, None]
    terms = [((wy_h * hx[None, :, :])[None] * plane[:, yl, xl]),
             ((wy_h * lx[None, :, :])[None] * plane[:, yl, xh]),
             ((wy_l * hx[None, :, :])[None] * plane[:, yh, xl]),
             ((wy_l * lx[None, :, :])[None] * plane[:, yh, xh])]
    pixel = plane[:, :1, :1][..., None]
    corner = np.zeros_like(pixel) if outside_zero else np.float32(0) * pixel
    return [np.where(inside, t, corner) for t in terms]


# --- per-case input flags ------------------------------------------------------------------

def input_flags(desc: AnyRoiAlign, tensors: MappingT[str, np.ndarray], opset: Optional[int] = None) -> list[Flag]:
    """``diverges`` flags for input values ORT treats differently from the page: non-finite
    inputs, empty regions or knife-edge ratios under an adaptive count, and (RoiAlign-10)
    regions ORT raises to 1x1."""
    d = as_roi_align1(desc)
    rois = np.asarray(tensors["ROITensor"])
    flags = _non_finite_flags(d, np.asarray(tensors["InputTensor"]))
    flags += _adaptive_flags(d, rois)
    if opset is not None and opset < 16:
        flags += _roi_align10_clamp(d, opset, rois)
    return flags


def _non_finite_flags(d: RoiAlign1Desc, x: np.ndarray) -> list[Flag]:
    """A non-finite ``X[b, c, 0, 0]`` under any reduction (every ORT RoiAlign node the mapper
    builds, "avg" or "max", gives a sample outside the input weights 0 at pixel 0); for MAX, any
    non-finite input (the max kernels order NaN their own way)."""
    flags = []
    if not np.isfinite(x[:, :, 0, 0]).all():
        flags.append(Flag("InputTensor[:, :, 0, 0]", "NaN/Inf", "diverges",
                          "ORT's out-of-range samples add 0 * X[b, c, 0, 0] (roialign.cc), which is NaN when that "
                          "element is NaN or Inf; the page reads OutOfBoundsInputValue"))
    if d.reduction_function == "AVERAGE" or np.isfinite(x).all():
        return flags
    # Infinities order like numbers in every max; in ROI align's interpolation 0 * Inf is NaN
    return flags + [Flag("InputTensor", "NaN" if not np.isinf(x).any() else "NaN/Inf", "diverges",
                         "the input holds NaN: the reference ignores NaN in every max; ORT's max kernels let a NaN "
                         "win or lose depending on where it is scanned, so outputs may differ")]


def _adaptive_flags(d: RoiAlign1Desc, rois: np.ndarray) -> list[Flag]:
    if d.minimum_samples_per_output == d.maximum_samples_per_output:
        return []
    sx, sy = float(np.float32(d.spatial_scale_x)), float(np.float32(d.spatial_scale_y))
    _, _, oh, ow = d.output_tensor.sizes
    for row in rois.reshape(-1, 4).astype(np.float64):
        size_x, size_y = (row[2] - row[0]) * sx, (row[3] - row[1]) * sy
        if size_x <= 0 or size_y <= 0:
            return [Flag("ROITensor", row.tolist(), "diverges", "an empty or inverted region with an adaptive sample "
                         "count: ORT takes ceil(size/output) <= 0 samples (output 0, or OutOfBoundsInputValue "
                         "once composed), the page at least MinimumSamplesPerOutput")]
        if any(0 < abs(r - round(r)) < 1e-4 and r > 0.5 for r in (size_x / ow, size_y / oh)):
            return [Flag("ROITensor", row.tolist(), "diverges", "size/output is within 1e-4 of a whole number (not "
                         "one): ORT's float32 ceil may pick one sample more or fewer than the float64 reference")]
    return []


def _roi_align10_clamp(d: RoiAlign1Desc, opset: int, rois: np.ndarray) -> list[Flag]:
    small = np.flatnonzero((rewritten_region_sizes(d, opset, rois) < 1).any(axis=1))
    if not small.size:
        return []
    row = rois.reshape(-1, 4)[small[0]].astype(np.float64).tolist()
    return [Flag("ROITensor", row, "diverges", "RoiAlign-10 raises a region smaller than one pixel to 1x1 (ORT's CPU "
                 "kernel and the ONNX reference); the page samples it as it is")]


# --- ONNX -> DML ---------------------------------------------------------------------------

def import_node(node: onnx.NodeProto, shapes: list[tuple[int, ...]], types: list[np.dtype], mode: str,
                opset: Optional[int]) -> Imported:
    """A RoiAlign node as the ROI_ALIGN1 desc it means (``mode`` "spec") or the one the DML EP
    builds (``"dml-ep"``, module docstring)."""
    a = node_attributes(node)
    x_shape, roi_shape = shapes[:2]
    x_t = float_data_type(types[0], "RoiAlign X", mode)
    flags: list[Flag] = []
    reduction = _import_mode(a.get("mode", "avg"), mode, flags)
    sr = int(a.get("sampling_ratio", 0))
    if sr == 0:
        flags.append(Flag("MinimumSamplesPerOutput", 1, "exact", "ONNX's adaptive count; empty/inverted regions take "
                          "no sample in ORT and one in DML (input data, flagged per case)"))
    ipo = _import_input_offset(a, mode, opset if opset is not None else 16, flags)
    bi_dml = _import_batch_type(types[2], mode)
    r = roi_shape[0]
    roi_sizes, bi_sizes = ((1, 1, r, 4), (1, 1, 1, r)) if mode == "dml-ep" else ((r, 4), (r,))
    scale = float(a.get("spatial_scale", 1.0))
    desc = RoiAlign1Desc(
        input_tensor=TensorDesc(x_t, tuple(x_shape)), roi_tensor=TensorDesc(x_t, roi_sizes),
        batch_indices_tensor=TensorDesc(bi_dml, bi_sizes),
        output_tensor=TensorDesc(x_t, (r, x_shape[1], int(a.get("output_height", 1)), int(a.get("output_width", 1)))),
        reduction_function=reduction, interpolation_mode="LINEAR", spatial_scale_x=scale, spatial_scale_y=scale,
        input_pixel_offset=ipo, output_pixel_offset=-0.5, out_of_bounds_input_value=0.0,
        minimum_samples_per_output=1 if sr == 0 else sr, maximum_samples_per_output=UINT32_MAX if sr == 0 else sr,
        align_regions_to_corners=False)
    bi_np = np.uint64 if bi_dml == "UINT64" else np.uint32

    def inputs(arrays):
        x, rois, bidx = arrays[:3]
        return {"InputTensor": np.asarray(x), "ROITensor": np.asarray(rois).reshape(roi_sizes),
                "BatchIndicesTensor": np.asarray(bidx).astype(bi_np).reshape(bi_sizes)}

    # The 1x1 clamp belongs to the node's ONNX meaning; the desc has it only where its input
    # offset is the node's own (0).
    clamps = (opset is not None and opset < 16 or a.get("coordinate_transformation_mode") == "output_half_pixel") \
        and ipo == 0.0
    return Imported(desc, flags, inputs, lambda out: [out["OutputTensor"]],
                    alternatives=(lambda arrays: clamped_regions(scale, arrays)) if clamps else (lambda arrays: []),
                    data_flags=("InputPixelOffset",) if clamps else ())


CLAMP_REASON = ("the node (output_half_pixel, like RoiAlign-10) raises a region under one pixel to 1x1 before "
                "sampling, as ORT's CPU kernel does (onnxruntime/core/providers/cpu/object_detection/roialign.cc, "
                "RoiAlignForward: \"Force malformed ROIs to be 1x1\"); the page samples the region as it is")


def clamped_regions(spatial_scale: float, arrays: Sequence[np.ndarray]) -> list[Alternative]:
    """The 1x1 clamp as an ``Alternative`` of a RoiAlign node's arrays ``(X, rois, batch_indices)``:
    the ROIs whose scaled width or height is under one pixel, and the same ROIs with that size
    raised to 1 (the start kept), which the desc then computes as the node means them."""
    x, rois = arrays[:2]
    scale = float(np.float32(spatial_scale))
    table = np.asarray(rois, dtype=np.float64).reshape(-1, 4)
    if not table.size or not np.isfinite(scale) or scale <= 0 or not np.isfinite(table).all():
        return []
    width, height = (table[:, 2] - table[:, 0]) * scale, (table[:, 3] - table[:, 1]) * scale
    rows = np.flatnonzero((width < 1) | (height < 1))
    if not rows.size:
        return []
    raised = table.copy()
    raised[:, 2] = table[:, 0] + np.maximum(width, 1.0) / scale
    raised[:, 3] = table[:, 1] + np.maximum(height, 1.0) / scale
    value = {"rows": rows[:8].tolist(), "count": int(rows.size), "of": int(len(table))}
    flag = Flag("ROITensor", value, "diverges", f"{rows.size} of {len(table)} ROIs are under one pixel after "
                f"spatial_scale: {CLAMP_REASON}")
    # the reference takes ROIs of the node's own type; rounding the raised end to it moves the
    # region by under one unit in the last place of its coordinates
    raised = raised.astype(np.asarray(rois).dtype).reshape(np.shape(rois))
    return [Alternative(flag, rows, [x, raised, *arrays[2:]])]


def _import_mode(onnx_mode: str, mode: str, flags: list[Flag]) -> str:
    if mode == "dml-ep" and onnx_mode not in ("avg", "max"):  # exact string match in DmlOperatorRoiAlign.cpp
        raise OnnxImportError(f'mode = "{onnx_mode}": the DML EP matches "avg"/"max" exactly and fails kernel creation')
    if onnx_mode.lower() not in ("avg", "max"):
        raise OnnxImportError(f'mode = "{onnx_mode}": ONNX allows "avg" or "max"')
    if onnx_mode.lower() == "max" and mode == "spec":
        flags.append(Flag("ReductionFunction", "MAX", "diverges", 'ONNX\'s mode="max" (as ORT and onnx.reference '
                          "compute it) is the max of the four weighted corner terms, not DML's max of interpolated "
                          "samples; the desc is the nearest DML one"))
    return "AVERAGE" if onnx_mode.lower() == "avg" else "MAX"


def _import_input_offset(a: dict, mode: str, opset: int, flags: list[Flag]) -> float:
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if mode == "spec":
        half = opset >= 16 and ctm == "half_pixel"
        if not half:
            flags.append(Flag("InputPixelOffset", 0.0, "diverges",
                              ("RoiAlign-10 (no coordinate_transformation_mode) means" if opset < 16 else
                               f'coordinate_transformation_mode="{ctm}" means') +
                              " output_half_pixel, which clamps every region to at least 1x1 before sampling; the "
                              "page's InputPixelOffset 0 never clamps (regions smaller than a pixel differ)"))
        return 0.5 if half else 0.0
    if ctm not in ("half_pixel", "output_half_pixel"):
        raise OnnxImportError(f'coordinate_transformation_mode = "{ctm}": the DML EP accepts only half_pixel and '
                              "output_half_pixel (\"Unsupported RoiAlign coordinate_transformation_mode.\")")
    if opset < 16 and "coordinate_transformation_mode" not in a:
        flags.append(Flag("InputPixelOffset", 0.5, "diverges",
                          "RoiAlign-10 has no coordinate_transformation_mode; the DML EP reads the default "
                          '"half_pixel" (InputPixelOffset 0.5) where ONNX-10 means output_half_pixel'))
    return 0.5 if ctm == "half_pixel" else 0.0


def _import_batch_type(bi_t: np.dtype, mode: str) -> str:
    if bi_t == np.int64:
        return "UINT64"
    if bi_t == np.int32 and mode == "dml-ep":
        return "UINT32"
    raise OnnxImportError(f"batch_indices of type {bi_t}: ONNX RoiAlign takes int64"
                          + (" (the DML EP also int32)" if mode == "dml-ep" else ""))
