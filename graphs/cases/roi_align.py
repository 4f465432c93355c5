"""ROI_ALIGN / ROI_ALIGN1 cases: a pairwise grid of every field value, edges, RoiAlign-10 cases, random ones.

Inputs: ROIs on a 1/16 grid (exact in float16 for |v| < 128); with an adaptive sample count
they avoid empty regions and size/output ratios within 1e-4 of a whole number (float32 vs
float64 ceil), both of which the mapper flags per input.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

import numpy as np

from ...reference.descs import TensorDesc
from ...reference.dtypes import numpy_dtype
from ...reference.roi_align import RoiAlign1Desc, RoiAlignDesc, roi_count
from .common import (
    FUZZ_RECIPE,
    SHORT_DTYPE,
    UINT32_MAX,
    Case,
    FuzzDraw,
    Variant,
    Variation,
    detection_regions,
    fuzz_recipe,
    fuzz_regions,
    fuzz_values,
    grid,
    image_moves,
    kept_spans,
    kept_subsets,
    make_case,
    num,
    roi_op_inputs,
    shifted,
    sized,
    stress_case,
)


def catalog_v0(seed: int) -> list[Case]:
    """The ROI_ALIGN cases (registry ``cases``)."""
    return _roi_align_cases(False, seed)


def catalog_v1(seed: int) -> list[Case]:
    """The ROI_ALIGN1 cases (registry ``cases``)."""
    return _roi_align_cases(True, seed)


def make_inputs(desc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A case's inputs by recipe (``outside-partly``, ``outside-wholly``, ``one-pixel``,
    ``whole-image``, ``empty``, ``inverted``, ``ties``, ``nan-inf``, ``random``; a fuzzed case's
    ``fuzz:<value kind>:<region kind>``, see ``common.fuzz_values`` and ``common.fuzz_regions``)."""
    if recipe.startswith(FUZZ_RECIPE + ":"):
        return _fuzz_inputs(desc, recipe, rng)
    return roi_op_inputs(desc, recipe, rng, _roi_align_rois)


#: Field values fuzzing draws with their weights: the page's defaults (ROI_ALIGN's fixed offsets)
#: first, then the catalog's, then extremes. Values the mapper finds inexpressible in ONNX (no
#: nearest-neighbour RoiAlign, sample-count ranges other than n..n and 1..max, output offsets
#: other than -0.5, corner alignment, most out-of-bounds values) never reach an EP, so they are
#: drawn rarely: they still show up as ``inexpressible`` in every run of a few seconds.
FUZZ_SCALES = ((1.0, 3), (0.5, 2), (0.25, 2), (0.0625, 2), (2.0, 1), (0.125, 1), (1 / 3, 1), (0.0, 1), (-1.0, 1),
               (1e-3, 1), (64.0, 1))
FUZZ_INPUT_OFFSETS = ((0.5, 4), (0.0, 3), (0.25, 1), (-0.5, 1), (1.0, 1), (100.0, 1))
FUZZ_OUTPUT_OFFSETS = ((-0.5, 12), (0.0, 1), (-0.25, 1), (0.5, 1), (1.0, 1), (-100.0, 1))
FUZZ_OOB = ((0.0, 24), (1.5, 1), (-2.0, 1), (-0.0, 1), (65504.0, 1), (float("inf"), 1), (float("-inf"), 1),
            (float("nan"), 1))
FUZZ_SAMPLES = (((1, 1), 3), ((2, 2), 3), ((1, UINT32_MAX), 3), ((3, 3), 2), ((4, 4), 1), ((8, 8), 1), ((1, 4), 1),
                ((2, 5), 1), ((1, 2), 1), ((5, UINT32_MAX), 1))
#: Adaptive sample counts are capped here by shrinking huge regions: ORT and the reference
#: both sample ceil(region / output) points per axis, and a region of thousands of pixels per
#: output element would cost seconds per case.
FUZZ_MAX_ADAPTIVE = 64


def fuzz_strategy(op: str = "roi_align1", size: str = "default") -> Any:
    """A Hypothesis strategy of ``FuzzDraw``s over ROI_ALIGN's (``op="roi_align"``) or
    ROI_ALIGN1's whole field space: both data types, both reductions and interpolations, any
    scales (0, negative and extremes included), pixel offsets, out-of-bounds values (infinities
    and NaN included), every sample-count setting, corner alignment, every ROI and batch-index
    rank and type; simplest values first."""
    from hypothesis import strategies as st

    from . import fuzzing

    v1 = op == "roi_align1"
    bounds = fuzzing.limits(size)

    @st.composite
    def draw(draw: Any) -> FuzzDraw:
        """One ROI_ALIGN / ROI_ALIGN1 draw (the enclosing docstring)."""
        kw = _fuzz_geometry(draw, bounds)
        kw.update(dtype=draw(fuzzing.choice(["FLOAT32", "FLOAT16"])), reduction=draw(fuzzing.choice(["AVERAGE", "MAX"])),
                  interp=draw(fuzzing.weighted([("LINEAR", 12), ("NEAREST_NEIGHBOR", 1)])),
                  sx=draw(fuzzing.weighted(FUZZ_SCALES)), sy=draw(fuzzing.weighted(FUZZ_SCALES)),
                  oob=draw(fuzzing.weighted(FUZZ_OOB)), samples=draw(fuzzing.weighted(FUZZ_SAMPLES)),
                  roi_rank=draw(fuzzing.bounded(2, 4)), bi_rank=draw(fuzzing.bounded(1, 4)))
        if v1:
            kw.update(ipo=draw(fuzzing.weighted(FUZZ_INPUT_OFFSETS)), opo=draw(fuzzing.weighted(FUZZ_OUTPUT_OFFSETS)),
                      corners=draw(fuzzing.weighted([(False, 12), (True, 1)])),
                      bi_type=draw(fuzzing.choice(["UINT32", "UINT64"])))
        desc = roi_align_desc(v1, **kw)
        values, regions = draw(fuzzing.value_kind()), draw(fuzzing.region_kind())
        opset = draw(fuzzing.choice([None, None, None, 10]))
        return FuzzDraw(desc, fuzzing.recipe(values, regions), draw(fuzzing.value_seed()), opset)

    return draw()


def _fuzz_geometry(draw: Any, bounds: Any) -> dict:
    """Input, region and output sizes within ``bounds`` (a ``fuzzing.Limits``)."""
    from . import fuzzing

    height, width = draw(fuzzing.bounded(1, bounds.spatial)), draw(fuzzing.bounded(1, bounds.spatial))
    out = (draw(fuzzing.bounded(1, bounds.out)), draw(fuzzing.bounded(1, bounds.out)))
    room = max(1, bounds.elements // (height * width))
    batch = draw(fuzzing.bounded(1, min(bounds.batch, room)))
    channels = draw(fuzzing.bounded(1, min(bounds.channels, room // batch, bounds.elements // (out[0] * out[1]))))
    rois = draw(fuzzing.bounded(1, min(bounds.rois, max(1, bounds.elements // (channels * out[0] * out[1])))))
    return dict(batch=batch, channels=channels, height=height, width=width, out=out, rois=rois)


def _fuzz_inputs(desc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A fuzzed case's feature map, regions (placed in scaled pixels, then divided by each
    axis's scale; kept finite in the data type) and batch indices."""
    values, regions = fuzz_recipe(recipe)
    batch, _, height, width = desc.input_tensor.sizes
    x = fuzz_values(desc.input_tensor.sizes, desc.input_tensor.data_type, values, rng)
    n = roi_count(desc.roi_tensor.sizes)
    box = fuzz_regions(regions, n, height, width, rng)
    if desc.maximum_samples_per_output > FUZZ_MAX_ADAPTIVE:
        out_h, out_w = desc.output_tensor.sizes[2:]
        _cap_extent(box, 0, 2, out_w * FUZZ_MAX_ADAPTIVE)
        _cap_extent(box, 1, 3, out_h * FUZZ_MAX_ADAPTIVE)
    scales = np.array([desc.spatial_scale_x, desc.spatial_scale_y] * 2, dtype=np.float32).astype(np.float64)
    limit = float(np.finfo(x.dtype).max)
    rois = np.clip(box / np.where(scales == 0, 1.0, scales), -limit, limit).astype(x.dtype)
    bi = rng.integers(0, batch, n).astype(numpy_dtype(desc.batch_indices_tensor.data_type))
    return {"InputTensor": x, "ROITensor": rois.reshape(desc.roi_tensor.sizes),
            "BatchIndicesTensor": bi.reshape(desc.batch_indices_tensor.sizes)}


def _cap_extent(box: np.ndarray, lo: int, hi: int, limit: float) -> None:
    """Shorten regions along one axis (columns ``lo``/``hi`` of ``box``) to at most ``limit``."""
    extent = box[:, hi] - box[:, lo]
    box[:, hi] = box[:, lo] + np.clip(extent, -limit, limit)


def shrink_moves(desc, arrays: dict[str, np.ndarray]) -> Iterator[Variant]:
    """Smaller variants of a ROI_ALIGN / ROI_ALIGN1 case (registry ``CASES_HOOKS``), the largest
    cut first: fewer regions (each alone, then halves), channels, images (those no region reads
    dropped; then one image with its regions), a cropped feature map (the regions moved with it,
    by the crop over the axis's scale), a smaller output, the lowest ROI and batch-index ranks.
    Each keeps part of the case as it was; the shrinker runs them on the EP and keeps one that
    fails as the case did. Output-size moves are left out under adaptive sampling, where a region
    over fewer output elements takes more samples each (``FUZZ_MAX_ADAPTIVE``)."""
    x, n = arrays["InputTensor"], roi_count(desc.roi_tensor.sizes)
    rois, bi = arrays["ROITensor"].reshape(n, 4), arrays["BatchIndicesTensor"].reshape(n)
    out_hw, ranks = tuple(desc.output_tensor.sizes[2:]), (len(desc.roi_tensor.sizes), len(desc.batch_indices_tensor.sizes))

    def variant(x=x, rois=rois, bi=bi, out_hw=out_hw, ranks=ranks) -> Variant:
        k = len(bi)
        roi_sizes, bi_sizes = (1,) * (ranks[0] - 2) + (k, 4), (1,) * (ranks[1] - 1) + (k,)
        smaller = replace(desc, input_tensor=sized(desc.input_tensor, x.shape),
                          roi_tensor=sized(desc.roi_tensor, roi_sizes),
                          batch_indices_tensor=sized(desc.batch_indices_tensor, bi_sizes),
                          output_tensor=sized(desc.output_tensor, (k, x.shape[1], *out_hw)))
        return smaller, {"InputTensor": x, "ROITensor": rois.reshape(roi_sizes), "BatchIndicesTensor": bi.reshape(bi_sizes)}

    for keep in kept_subsets(n):
        yield variant(rois=rois[keep], bi=bi[keep])
    for keep in kept_subsets(x.shape[1]):
        yield variant(x=x[:, keep])
    for images, regions in image_moves(x.shape[0], bi):
        yield variant(x=x[images], rois=rois[regions], bi=np.searchsorted(images, bi[regions]).astype(bi.dtype))
    for axis, scale, columns in ((2, desc.spatial_scale_y, [1, 3]), (3, desc.spatial_scale_x, [0, 2])):
        for begin, end in kept_spans(x.shape[axis]):
            if begin and not float(np.float32(scale)):
                continue  # a scale of 0 puts every region at the origin: no crop moves it
            moved = rois.copy()
            moved[:, columns] = shifted(rois[:, columns], -begin / float(np.float32(scale) or 1))
            yield variant(x=np.take(x, range(begin, end), axis=axis), rois=moved)
    if desc.maximum_samples_per_output <= FUZZ_MAX_ADAPTIVE:
        for axis in (0, 1):
            for begin, end in kept_spans(out_hw[axis]):
                if begin == 0:
                    yield variant(out_hw=tuple(end if a == axis else s for a, s in enumerate(out_hw)))
    if ranks != (2, 1):
        yield variant(ranks=(2, 1))


def roi_align_desc(v1: bool, dtype="FLOAT32", reduction="AVERAGE", interp="LINEAR", sx=0.5, sy=0.5, ipo=0.5,
                   opo=-0.5, oob=0.0, samples=(2, 2), corners=False, roi_rank=2, bi_type="UINT32", bi_rank=1,
                   rois=4, batch=2, channels=3, height=10, width=12, out=(3, 4)):
    roi_sizes = (1,) * (roi_rank - 2) + (rois, 4)
    bi_sizes = (1,) * (bi_rank - 1) + (rois,)
    common = dict(input_tensor=TensorDesc(dtype, (batch, channels, height, width)),
                  roi_tensor=TensorDesc(dtype, roi_sizes), batch_indices_tensor=TensorDesc(bi_type, bi_sizes),
                  output_tensor=TensorDesc(dtype, (rois, channels, *out)), reduction_function=reduction,
                  interpolation_mode=interp, spatial_scale_x=sx, spatial_scale_y=sy, out_of_bounds_input_value=oob,
                  minimum_samples_per_output=samples[0], maximum_samples_per_output=samples[1])
    if not v1:
        return RoiAlignDesc(**common)
    return RoiAlign1Desc(**common, input_pixel_offset=ipo, output_pixel_offset=opo, align_regions_to_corners=corners)


def _samples_name(s):
    return f"n{s[0]}" if s[0] == s[1] else f"n{s[0]}-{'max' if s[1] == UINT32_MAX else s[1]}"


def _roi_align_name(row, v1: bool) -> str:
    parts = [{"AVERAGE": "avg", "MAX": "max"}[row["reduction"]], "linear" if row["interp"] == "LINEAR" else "nearest",
             SHORT_DTYPE[row["dtype"]], f"scale{num(row['sx'])}x{num(row['sy'])}"]
    if v1:
        parts += [f"offset{num(row['ipo'])}", f"out{num(row['opo'])}"]
    parts += [f"oob{num(row['oob'])}", _samples_name(row["samples"])]
    if v1 and row["corners"]:
        parts.append("corners")
    parts += [f"roi{row['roi_rank']}d", f"bi{row['bi_type'].lower()}-{row['bi_rank']}d"]
    return "-".join(parts)


def _roi_align_cases(v1: bool, seed: int) -> list[Case]:
    op = "roi_align1" if v1 else "roi_align"
    cases = [make_case(op, "grid-" + _roi_align_name(row, v1), roi_align_desc(v1, **row), seed, "grid")
             for row in _grid_rows(op, v1)]
    return cases + _edge_cases(op, v1, seed) + _opset10_cases(op, v1, seed) + _random_cases(op, v1, seed)


def _grid_rows(op: str, v1: bool) -> list[dict]:
    """Pairwise rows over every field value (ROI_ALIGN1's own fields only for it)."""
    params = [("dtype", ["FLOAT32", "FLOAT16"]), ("reduction", ["AVERAGE", "MAX"]),
              ("interp", ["LINEAR", "NEAREST_NEIGHBOR"]), ("sx", [0.5, 1.0, 0.25]), ("sy", [0.5, 1.0]),
              ("oob", [0.0, 1.5]), ("samples", [(1, 1), (2, 2), (3, 3), (1, UINT32_MAX), (1, 4), (2, 5)]),
              ("roi_rank", [2, 3, 4]), ("bi_rank", [1, 2, 3, 4])]
    if v1:
        params += [("ipo", [0.5, 0.0, 0.25]), ("opo", [-0.5, 0.0, -0.25]), ("corners", [False, True]),
                   ("bi_type", ["UINT32", "UINT64"])]
    rows = grid(op, params)
    for row in rows:
        row.setdefault("ipo", 0.5), row.setdefault("opo", -0.5), row.setdefault("corners", False)
        row.setdefault("bi_type", "UINT32")
    return rows


_BASE = dict(dtype="FLOAT32", samples=(2, 2))
_EDGES: list[Variation] = [("outside-partly", {}, "outside-partly"), ("outside-wholly", {}, "outside-wholly"),
          ("outside-wholly-oob", {"oob": -2.0}, "outside-wholly"),
          ("one-pixel", {}, "one-pixel"), ("whole-image", {}, "whole-image"),
          ("whole-image-max", {"reduction": "MAX", "samples": (3, 3)}, "whole-image"),
          ("empty-region", {}, "empty"), ("empty-region-max", {"reduction": "MAX"}, "empty"),
          ("inverted-region", {}, "inverted"),
          ("inverted-region-max-n1", {"reduction": "MAX", "samples": (1, 1)}, "inverted"),
          ("large-roi-count", {"rois": 300, "out": (2, 2), "channels": 2}, "random"),
          ("large-batch", {"batch": 16, "rois": 32, "height": 8, "width": 8}, "random"),
          ("adaptive-large-regions", {"samples": (1, UINT32_MAX), "height": 24, "width": 24}, "random"),
          ("nan-inf", {}, "nan-inf"), ("nan-inf-max", {"reduction": "MAX"}, "nan-inf"),
          ("nan-max", {"reduction": "MAX"}, "nan"),
          ("fp16-outside-partly", {"dtype": "FLOAT16"}, "outside-partly"),
          ("adaptive-count-knife-edge", {"samples": (1, UINT32_MAX), "sx": 0.1, "sy": 0.1, "height": 120, "width": 8,
                                         "out": (1, 2), "rois": 1}, "count-knife-edge"),
          ("empty-region-adaptive", {"samples": (1, UINT32_MAX)}, "empty"),
          ("empty-region-adaptive-oob", {"samples": (1, UINT32_MAX), "oob": 1.5}, "empty"),
          ("near-flt-max", {"samples": (2, 2)}, "near-flt-max")]
_EDGES_V1: list[Variation] = [("inverted-region-offset0-corners", {"ipo": 0.0, "corners": True}, "inverted"),
             ("one-pixel-offset0", {"ipo": 0.0, "opo": 0.0}, "one-pixel")]


def _edge_cases(op: str, v1: bool, seed: int) -> list[Case]:
    return [make_case(op, f"edge-{name}", roi_align_desc(v1, **{**_BASE, **over}), seed, f"edge-{recipe}",
                      recipe=recipe) for name, over, recipe in _EDGES + (_EDGES_V1 if v1 else [])]


def _opset10_cases(op: str, v1: bool, seed: int) -> list[Case]:
    """RoiAlign-10: the ONNX spec (and ORT's CPU kernel) read it with no input offset; ORT's
    DirectML EP builds InputPixelOffset 0.5 for it. These cases exist to show that difference."""
    opset10: list[tuple[str, dict[str, Any]]] = [("avg-fp32", dict(ipo=0.0)), ("avg-fp32-offset0.5", dict(ipo=0.5)),
               ("max-fp32-n2", dict(ipo=0.0, reduction="MAX")), ("avg-fp16", dict(ipo=0.0, dtype="FLOAT16"))]
    cases = []
    for name, over in opset10:
        if not v1:
            over = {k: v for k, v in over.items() if k != "ipo"}
            if name.endswith("offset0.5"):
                continue
        cases.append(make_case(op, f"opset10-{name}", roi_align_desc(v1, **{**_BASE, **over}), seed, "opset10",
                               opset=10))
    return cases


def _random_cases(op: str, v1: bool, seed: int, count: int = 16) -> list[Case]:
    rng = np.random.default_rng([seed, 1 if v1 else 2])
    cases = []
    for i in range(count):
        samples = [(1, 1), (2, 2), (3, 3), (1, UINT32_MAX), (2, 4)][rng.integers(5)]
        kw = dict(dtype=["FLOAT32", "FLOAT16"][rng.integers(2)], reduction=["AVERAGE", "MAX"][rng.integers(2)],
                  interp="LINEAR" if rng.random() < 0.85 else "NEAREST_NEIGHBOR",
                  sx=float(rng.choice([0.25, 0.5, 1.0, 0.125, 2.0])), sy=float(rng.choice([0.25, 0.5, 1.0, 2.0])),
                  oob=float(rng.choice([0.0, 0.0, 1.25])), samples=samples, roi_rank=int(rng.integers(2, 5)),
                  bi_rank=int(rng.integers(1, 5)), rois=int(rng.integers(1, 9)), batch=int(rng.integers(1, 4)),
                  channels=int(rng.integers(1, 5)), height=int(rng.integers(4, 17)), width=int(rng.integers(4, 17)),
                  out=(int(rng.integers(1, 6)), int(rng.integers(1, 6))))
        if v1:
            kw.update(ipo=float(rng.choice([0.5, 0.5, 0.0, 0.375])), opo=float(rng.choice([-0.5, -0.5, 0.0, -0.125])),
                      corners=bool(rng.random() < 0.2), bi_type=["UINT32", "UINT64"][rng.integers(2)])
        cases.append(make_case(op, f"random-s{seed}-{i:03d}", roi_align_desc(v1, **kw), seed, "random"))
    return cases


#: The smoke tier: catalog cases (id patterns after ``roi_align/`` or ``roi_align1/``).
SMOKE = ("edge-outside-partly", "edge-whole-image", "edge-one-pixel", "edge-empty-region", "edge-fp16-outside-partly",
         "opset10-avg-fp32", "random-s*-000")

_DETECTION = dict(batch=1, channels=256, height=200, width=304, rois=1000, out=(7, 7), samples=(2, 2))
#: The stress tier: ``(name, roi_align_desc arguments, recipe, ROI_ALIGN1 only)``. A detector's
#: RoiAlign with its proposals at spatial scale 1/16 and with regions of up to half the image at
#: scale 1 (same sample count, other memory access), 10,000 regions, output counts one 64-thread
#: group below, at and above 65,535 groups (8x8 outputs of 65,534 / 65,535 / 65,536
#: region-channels), and regions as large as the input sampled adaptively.
STRESS = [
    ("detection-1x256x200x304-r1000-7x7-sr2-scale1_16", dict(_DETECTION, sx=1 / 16, sy=1 / 16), "detection", False),
    ("detection-1x256x200x304-r1000-7x7-sr2-scale1-half-image", dict(_DETECTION, sx=1.0, sy=1.0), "detection-half",
     False),
    ("detection-1x256x200x304-r1000-7x7-sr2-scale1_16-fp16", dict(_DETECTION, dtype="FLOAT16", sx=1 / 16, sy=1 / 16),
     "detection", True),
    ("rois-10000-1x64x50x50-7x7", dict(batch=1, channels=64, height=50, width=50, rois=10000, out=(7, 7), sx=1.0,
                                       sy=1.0), "detection-half", True),
    *[(f"out-8x8-{r}x{c}-groups-of-64", dict(batch=1, channels=c, height=16, width=16, rois=r, out=(8, 8), sx=1.0,
                                             sy=1.0), "random", True) for r, c in ((151, 434), (257, 255), (256, 256))],
    ("whole-image-adaptive-1x16x200x304-r8-1x1", dict(batch=1, channels=16, height=200, width=304, rois=8, out=(1, 1),
                                                      samples=(1, UINT32_MAX), sx=1.0, sy=1.0), "whole-image", False),
]


def stress_cases(op: str, seed: int) -> list[Case]:
    """The ROI_ALIGN / ROI_ALIGN1 stress tier (``STRESS``; ROI_ALIGN takes the fp32 detection
    shapes and the whole-image regions only), each case tagged with its memory need and its time
    (``common.stress_case``; the reference's work: ``sample_values``)."""
    v1 = op == "roi_align1"
    return [stress_case(op, name, desc, seed, recipe, reference_values=sample_values(desc))
            for name, row, recipe, v1_only in STRESS if v1 or not v1_only
            for desc in [roi_align_desc(v1, **row)]]


def sample_values(desc: Any) -> int:
    """The sample values (sample points times channels) the reference interpolates for ``desc``,
    at most: every region at its sample count, an adaptive count taken as a region as large as
    the scaled input (its output size times the count covers it)."""
    _, channels, height, width = desc.input_tensor.sizes
    out_h, out_w = desc.output_tensor.sizes[2:]
    low, high = desc.minimum_samples_per_output, desc.maximum_samples_per_output

    def count(size: int, scale: float, out: int) -> int:
        return low if low == high else min(high, max(low, -(-int(np.ceil(size * abs(scale))) // out)))

    per_region = out_h * count(height, desc.spatial_scale_y, out_h) * out_w * count(width, desc.spatial_scale_x, out_w)
    return roi_count(desc.roi_tensor.sizes) * channels * per_region


def _roi_align_rois(desc, recipe: str, rng) -> dict[str, np.ndarray]:
    batch, _, height, width = desc.input_tensor.sizes
    n = roi_count(desc.roi_tensor.sizes)
    dtype = numpy_dtype(desc.roi_tensor.data_type)
    sx, sy = float(np.float32(desc.spatial_scale_x)), float(np.float32(desc.spatial_scale_y))
    if recipe in ("detection", "detection-half"):
        out_h, out_w = desc.output_tensor.sizes[2:]
        samples = desc.minimum_samples_per_output
        rois = detection_regions(n, height, width, sx, recipe == "detection-half", rng,
                                 quantum=(out_w * samples / 16, out_h * samples / 16)).astype(dtype)
        bi = rng.integers(0, batch, n).astype(numpy_dtype(desc.batch_indices_tensor.data_type))
        return {"ROITensor": rois.reshape(desc.roi_tensor.sizes),
                "BatchIndicesTensor": bi.reshape(desc.batch_indices_tensor.sizes)}

    def grid(lo, hi, size):  # multiples of 1/16: exact in float16 for |v| < 128
        return np.round(rng.uniform(lo, hi, size) * 16) / 16

    if recipe == "outside-partly":
        x1, y1 = grid(-4, width / 2, n), grid(-4, height / 2, n)
        x2, y2 = x1 + grid(width / 2, width + 4, n), y1 + grid(height / 2, height + 4, n)
    elif recipe == "outside-wholly":
        x1, y1 = grid(width + 1.5, width + 6, n), grid(-8, -3, n)
        x2, y2 = x1 + grid(1, 4, n), y1 + grid(1, 2, n)
    elif recipe == "one-pixel":
        x1, y1 = grid(0, width - 1, n), grid(0, height - 1, n)
        x2, y2 = x1 + 1, y1 + 1
    elif recipe == "whole-image":
        x1, y1 = np.zeros(n), np.zeros(n)
        x2, y2 = np.full(n, float(width)), np.full(n, float(height))
    elif recipe == "empty":
        x1, y1 = grid(0, width - 1, n), grid(0, height - 1, n)
        x2, y2 = x1.copy(), y1.copy()
    elif recipe == "inverted":
        x2, y2 = grid(0, width / 2, n), grid(0, height / 2, n)
        x1, y1 = x2 + grid(1, width / 2, n), y2 + grid(1, height / 2, n)
    elif recipe == "count-knife-edge":
        # Scaled by 0.1 (float32 0.100000001490116), rows 1000 to 1050 span exactly 5.0000000745
        # rows: 6 samples per output; float32 scales both corners to 100 and 105, 5 samples.
        x1, y1, x2, y2 = np.zeros(n), np.full(n, 1000.0), np.full(n, min(30.0, width / sx)), np.full(n, 1050.0)
        rois = np.stack([x1, y1, x2, y2], axis=1).astype(dtype)
        bi = np.zeros(n).astype(numpy_dtype(desc.batch_indices_tensor.data_type))
        return {"ROITensor": rois.reshape(desc.roi_tensor.sizes),
                "BatchIndicesTensor": bi.reshape(desc.batch_indices_tensor.sizes)}
    else:
        x1, y1 = grid(-1, width - 1, n), grid(-1, height - 1, n)
        x2, y2 = x1 + grid(0.5, width, n), y1 + grid(0.5, height, n)
    rois = np.stack([x1 / sx, y1 / sy, x2 / sx, y2 / sy], axis=1).astype(dtype)
    bi = rng.integers(0, batch, n).astype(numpy_dtype(desc.batch_indices_tensor.data_type))
    return {"ROITensor": rois.reshape(desc.roi_tensor.sizes),
            "BatchIndicesTensor": bi.reshape(desc.batch_indices_tensor.sizes)}
