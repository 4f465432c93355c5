"""ROI_POOLING cases: a pairwise grid, edges (outside, one-pixel, whole-image, empty bins,
rounding ties, float32 bins, NaN), random ones.

Inputs: ROI corners times SpatialScale stay >= 0.1 away from .5 (no rounding ties) and avoid
the region sizes where ORT's float32 bins land one off (flagged per input), except in the
recipes that exist to hit them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

import numpy as np

from ...reference.descs import Size2D, TensorDesc
from ...reference.dtypes import numpy_dtype
from ...reference.roi_pooling import RoiPoolingDesc
from .common import (
    FUZZ_RECIPE,
    REGION_KINDS,
    SHORT_DTYPE,
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


def catalog(seed: int) -> list[Case]:
    """The ROI_POOLING cases (registry ``cases``)."""
    return _roi_pooling_cases(seed)


def make_inputs(desc: RoiPoolingDesc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A case's inputs by recipe (``outside-partly``, ``outside-wholly``, ``one-pixel``,
    ``whole-image``, ``rounding-ties``, ``float32-bins``, ``ties``, ``nan-inf``, ``random``; a
    fuzzed case's ``fuzz:<value kind>:<region kind>``, see ``common.fuzz_values`` and
    ``common.fuzz_regions``)."""
    if recipe.startswith(FUZZ_RECIPE + ":"):
        return _fuzz_inputs(desc, recipe, rng)
    return roi_op_inputs(desc, recipe, rng, lambda d, r, g: {"ROITensor": _roi_pooling_rois(d, r, g)})


#: Region kinds ROI_POOLING takes: the page requires x2 >= x1 and y2 >= y1.
FUZZ_REGIONS = tuple(k for k in REGION_KINDS if k != "inverted")
#: SpatialScale values fuzzing draws (the catalog's, then extremes), the default first.
FUZZ_SCALES = (1.0, 0.5, 0.25, 0.0625, 2.0, 0.0, 1 / 3, 16.0, 1e-3)


def fuzz_strategy(op: str = "roi_pooling", size: str = "default") -> Any:
    """A Hypothesis strategy of ``FuzzDraw``s over ROI_POOLING's whole field space: both data
    types, any SpatialScale (0 and extremes included), pooled sizes from 1 to past the region,
    region counts, batch, channels, input sizes; simplest values first."""
    from hypothesis import strategies as st

    from . import fuzzing

    bounds = fuzzing.limits(size)

    @st.composite
    def draw(draw: Any) -> FuzzDraw:
        """One ROI_POOLING draw (the enclosing docstring)."""
        height, width = draw(fuzzing.bounded(1, bounds.spatial)), draw(fuzzing.bounded(1, bounds.spatial))
        pooled = (draw(fuzzing.bounded(1, bounds.out)), draw(fuzzing.bounded(1, bounds.out)))
        room = max(1, bounds.elements // (height * width))
        batch = draw(fuzzing.bounded(1, min(bounds.batch, room)))
        channels = draw(fuzzing.bounded(1, min(bounds.channels, room // batch, bounds.elements // (pooled[0] * pooled[1]))))
        rois = draw(fuzzing.bounded(1, min(bounds.rois, max(1, bounds.elements // (channels * pooled[0] * pooled[1])))))
        desc = roi_pooling_desc(dtype=draw(fuzzing.choice(["FLOAT32", "FLOAT16"])), scale=draw(fuzzing.choice(FUZZ_SCALES)),
                                pooled=pooled, rois=rois, batch=batch, channels=channels, height=height, width=width)
        values, regions = draw(fuzzing.value_kind()), draw(fuzzing.region_kind(FUZZ_REGIONS))
        return FuzzDraw(desc, fuzzing.recipe(values, regions), draw(fuzzing.value_seed()))

    return draw()


def _fuzz_inputs(desc: RoiPoolingDesc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A fuzzed case's feature map and regions ``[BatchID, x1, y1, x2, y2]`` (regions placed in
    scaled pixels, then divided by SpatialScale; x2 >= x1 and y2 >= y1 kept, as the page requires)."""
    values, regions = fuzz_recipe(recipe)
    batch, _, height, width = desc.input_tensor.sizes
    x = fuzz_values(desc.input_tensor.sizes, desc.input_tensor.data_type, values, rng)
    n = desc.roi_tensor.sizes[2]
    box = fuzz_regions(regions, n, height, width, rng)
    box[:, 2], box[:, 3] = np.maximum(box[:, 0], box[:, 2]), np.maximum(box[:, 1], box[:, 3])
    scale = float(np.float32(desc.spatial_scale)) or 1.0
    ids = rng.integers(0, batch, n).astype(np.float64)
    limit = float(np.finfo(x.dtype).max)  # a region past float16's range would be +-inf, which the page refuses
    rois = np.concatenate([ids[:, None], np.clip(box / scale, -limit, limit)], axis=1).astype(x.dtype)
    rois[:, 3], rois[:, 4] = np.maximum(rois[:, 1], rois[:, 3]), np.maximum(rois[:, 2], rois[:, 4])
    return {"InputTensor": x, "ROITensor": rois.reshape(desc.roi_tensor.sizes)}


def shrink_moves(desc: RoiPoolingDesc, arrays: dict[str, np.ndarray]) -> Iterator[Variant]:
    """Smaller variants of a ROI_POOLING case (registry ``CASES_HOOKS``), the largest cut first:
    fewer regions (each alone, then halves), channels, images (those no region reads dropped;
    then one image with its regions, BatchID renumbered), a cropped feature map (the regions
    moved with it, by the crop over SpatialScale; none for a scale <= 0, which the page's products
    pin), a smaller PooledSize. Each keeps part of the case as it was; the shrinker runs them on
    the EP and keeps one that fails as the case did."""
    x, rois = arrays["InputTensor"], arrays["ROITensor"].reshape(-1, 5)
    pooled = (desc.pooled_size.height, desc.pooled_size.width)

    def variant(x=x, rois=rois, pooled=pooled) -> Variant:
        roi_sizes = (1, 1, len(rois), 5)
        smaller = replace(desc, input_tensor=sized(desc.input_tensor, x.shape), roi_tensor=sized(desc.roi_tensor, roi_sizes),
                          output_tensor=sized(desc.output_tensor, (len(rois), x.shape[1], *pooled)),
                          pooled_size=Size2D(width=pooled[1], height=pooled[0]))
        return smaller, {"InputTensor": x, "ROITensor": rois.reshape(roi_sizes)}

    for keep in kept_subsets(len(rois)):
        yield variant(rois=rois[keep])
    for keep in kept_subsets(x.shape[1]):
        yield variant(x=x[:, keep])
    ids = rois[:, 0].astype(np.float64)
    whole = bool(np.all(np.isfinite(ids))) and bool(np.all(ids == np.round(ids)))
    for images, regions in image_moves(x.shape[0], ids.astype(np.int64)) if whole else ():
        renumbered = rois[regions].copy()
        renumbered[:, 0] = np.searchsorted(images, ids[regions].astype(np.int64))
        yield variant(x=x[images], rois=renumbered)
    scale = float(np.float32(desc.spatial_scale))
    for axis, columns in ((2, [2, 4]), (3, [1, 3])):
        for begin, end in kept_spans(x.shape[axis]):
            if begin and scale <= 0:
                continue
            moved = rois.copy()
            moved[:, columns] = shifted(rois[:, columns], -begin / (scale or 1))
            yield variant(x=np.take(x, range(begin, end), axis=axis), rois=moved)
    for axis in (0, 1):
        for begin, end in kept_spans(pooled[axis]):
            if begin == 0:
                yield variant(pooled=tuple(end if a == axis else s for a, s in enumerate(pooled)))


def roi_pooling_desc(dtype="FLOAT32", scale=1.0, pooled=(2, 2), rois=3, batch=2, channels=3, height=9, width=11):
    ph, pw = pooled
    return RoiPoolingDesc(input_tensor=TensorDesc(dtype, (batch, channels, height, width)),
                          roi_tensor=TensorDesc(dtype, (1, 1, rois, 5)),
                          output_tensor=TensorDesc(dtype, (rois, channels, ph, pw)), spatial_scale=scale,
                          pooled_size=Size2D(width=pw, height=ph))


def _roi_pooling_cases(seed: int) -> list[Case]:
    op = "roi_pooling"
    params = [("dtype", ["FLOAT32", "FLOAT16"]), ("scale", [1.0, 0.5, 0.25, 2.0, 0.0]),
              ("pooled", [(1, 1), (2, 2), (2, 3), (3, 2), (7, 7), (11, 1)]), ("rois", [1, 3, 8])]
    cases = []
    for row in grid(op, params):
        name = (f"grid-{SHORT_DTYPE[row['dtype']]}-scale{num(row['scale'])}-pool{row['pooled'][0]}x{row['pooled'][1]}"
                f"-rois{row['rois']}")
        cases.append(make_case(op, name, roi_pooling_desc(**row), seed, "grid"))
    edges: list[Variation] = [("outside-partly", {}, "outside-partly"), ("outside-wholly", {}, "outside-wholly"),
             ("one-pixel", {}, "one-pixel"), ("whole-image", {"pooled": (3, 3)}, "whole-image"),
             ("empty-bins", {"pooled": (5, 5)}, "empty-bins"),
             ("rounding-ties", {"scale": 0.5}, "rounding-ties"),
             # halves only in float32: Roi * SpatialScale of 25 * 0.1f is exactly 2.5 in float32 and
             # 2.50000004 exactly, so either neighbour is within the rule (FP-3's knife edge)
             ("float32-product-ties", {"scale": float(np.float32(0.1))}, "rounding-ties"), ("ties", {}, "ties"),
             ("float32-bins", {"pooled": (11, 1), "height": 33, "width": 4, "batch": 1}, "float32-bins"),
             ("nan-inf", {}, "nan-inf"), ("large-roi-count", {"rois": 400, "pooled": (2, 2), "channels": 2}, "random"),
             ("large-batch", {"batch": 16, "rois": 40}, "random"), ("fp16-rounding-ties", {"dtype": "FLOAT16"},
                                                                     "rounding-ties")]
    for name, over, recipe in edges:
        extra: dict[str, str] = {}
        if recipe == "nan-inf":
            extra = {"expect": "diverges", "why": "NaN inputs: ORT's std::max keeps a NaN only when scanned last"}
        if recipe == "float32-bins":
            extra = {"expect": "diverges", "why": "29 rows into 11 bins: ORT's float32 bin end is one past the "
                     "page's integer one (roi_pool.cc)"}
        cases.append(make_case(op, f"edge-{name}", roi_pooling_desc(**over), seed, f"edge-{recipe}", recipe=recipe,
                           **extra))
    rng = np.random.default_rng([seed, 4])
    for i in range(14):
        row = dict(dtype=["FLOAT32", "FLOAT16"][rng.integers(2)], scale=float(rng.choice([1.0, 0.5, 0.25, 0.0625])),
                   pooled=(int(rng.integers(1, 6)), int(rng.integers(1, 6))), rois=int(rng.integers(1, 10)),
                   batch=int(rng.integers(1, 4)), channels=int(rng.integers(1, 5)), height=int(rng.integers(4, 20)),
                   width=int(rng.integers(4, 20)))
        cases.append(make_case(op, f"random-s{seed}-{i:03d}", roi_pooling_desc(**row), seed, "random"))
    return cases


#: The smoke tier: catalog cases (id patterns after ``roi_pooling/``).
SMOKE = ("edge-outside-partly", "edge-whole-image", "edge-empty-bins", "edge-rounding-ties", "random-s*-000")

#: The stress tier: ``(name, roi_pooling_desc arguments, recipe)``. A detector's MaxRoiPool with
#: its proposals at spatial scale 1/16 and with regions of up to half the image at scale 1,
#: 10,000 regions, output counts one 64-thread group below, at and above 65,535 groups (8x8
#: bins of 65,534 / 65,535 / 65,536 region-channels), and regions as large as the input.
STRESS: list[Variation] = [
    ("detection-1x512x38x50-r300-7x7-scale1_16", dict(scale=1 / 16, pooled=(7, 7), rois=300, batch=1, channels=512,
                                                       height=38, width=50), "detection"),
    ("detection-1x512x38x50-r300-7x7-scale1-half-image", dict(scale=1.0, pooled=(7, 7), rois=300, batch=1,
                                                               channels=512, height=38, width=50), "detection-half"),
    ("rois-10000-1x64x38x50-7x7", dict(scale=1.0, pooled=(7, 7), rois=10000, batch=1, channels=64, height=38,
                                       width=50), "detection-half"),
    *[(f"out-8x8-{r}x{c}-groups-of-64", dict(scale=1.0, pooled=(8, 8), rois=r, batch=1, channels=c, height=16,
                                             width=16), "random") for r, c in ((151, 434), (257, 255), (256, 256))],
    ("whole-image-1x64x200x304-r8-1x1", dict(scale=1.0, pooled=(1, 1), rois=8, batch=1, channels=64, height=200,
                                             width=304), "whole-image"),
]


#: What the reference spends on one region before its bins' maxima (its corners and bins are worked
#: out in Python), in values of ``common.time_need``.
REGION_VALUES = 5000


def stress_cases(op: str, seed: int) -> list[Case]:
    """The ROI_POOLING stress tier (``STRESS``), each case tagged with its memory need and time."""
    # input copies: the whole-image case (a 15.6 MB input, 8 tiny regions) peaked at 210 MiB, about
    # five copies of its input over the process (benchmarks/bench_stress_memory.py); six stated
    return [stress_case(op, name, desc, seed, recipe, input_copies=6, reference_values=REGION_VALUES * row["rois"]
                        + desc.output_tensor.element_count)
            for name, row, recipe in STRESS for desc in [roi_pooling_desc(**row)]]


def _away_from_half(rng, lo, hi, n):
    """Numbers in [lo, hi] whose fractional part is at least 0.1 away from .5."""
    whole = rng.integers(int(np.floor(lo)), int(np.ceil(hi)) + 1, n)
    frac = rng.uniform(-0.35, 0.35, n)
    return np.clip(whole + frac, lo, hi)


def _roi_pooling_rois(desc: RoiPoolingDesc, recipe: str, rng) -> np.ndarray:
    batch, _, height, width = desc.input_tensor.sizes
    n = desc.roi_tensor.sizes[2]
    dtype = numpy_dtype(desc.roi_tensor.data_type)
    scale = float(np.float32(desc.spatial_scale)) or 1.0
    ids = rng.integers(0, batch, n).astype(np.float64)
    if recipe in ("detection", "detection-half"):
        box = detection_regions(n, height, width, scale, recipe == "detection-half", rng)
        return np.concatenate([ids[:, None], box], axis=1).astype(dtype).reshape(desc.roi_tensor.sizes)
    if recipe == "outside-partly":
        x1, y1 = _away_from_half(rng, -4, width - 2, n), _away_from_half(rng, -4, height - 2, n)
        x2, y2 = x1 + _away_from_half(rng, 2, width + 4, n), y1 + _away_from_half(rng, 2, height + 4, n)
        x2, y2 = np.round(x2) + 0.25, np.round(y2) + 0.25
    elif recipe == "outside-wholly":
        x1, y1 = width + 2 + rng.integers(0, 5, n) + 0.25, height + 2 + rng.integers(0, 5, n) + 0.25
        x2, y2 = x1 + 3, y1 + 2
    elif recipe == "one-pixel":
        x1, y1 = rng.integers(0, width, n) + 0.2, rng.integers(0, height, n) - 0.2
        x2, y2 = x1, y1
    elif recipe == "empty-bins":
        # regions reaching past the right or the top of the image: bins wholly outside are empty
        x1 = np.where(np.arange(n) % 2 == 0, width - 2, rng.integers(0, width // 2, n)) + 0.25
        y1 = np.where(np.arange(n) % 2 == 0, rng.integers(0, height // 2, n), -8) + 0.25
        x2, y2 = np.where(np.arange(n) % 2 == 0, x1 + 9, x1 + 2), np.where(np.arange(n) % 2 == 0, y1 + 2, y1 + 9)
    elif recipe == "whole-image":
        x1, y1 = np.zeros(n), np.zeros(n)
        x2, y2 = np.full(n, width - 1.0), np.full(n, height - 1.0)
    elif recipe == "rounding-ties":
        x1, y1 = rng.integers(0, width // 2, n) + 0.5, rng.integers(0, height // 2, n) + 0.5
        x2, y2 = x1 + rng.integers(1, 4, n), y1 + rng.integers(1, 4, n)
    elif recipe == "float32-bins":
        x1, y1, x2, y2 = np.zeros(n), np.zeros(n), np.zeros(n) + 2, np.full(n, 28.0)
    else:
        x1, y1 = _away_from_half(rng, -1, width - 1, n), _away_from_half(rng, -1, height - 1, n)
        # whole widths keep x2's fractional part that of x1, away from .5
        x2 = x1 + rng.integers(0, width + 1, n)
        y2 = y1 + rng.integers(0, height + 1, n)
    x1, y1, x2, y2 = (v / scale for v in (x1, y1, x2, y2))
    rois = np.stack([ids, x1, y1, x2, y2], axis=1).astype(dtype)
    return rois.reshape(desc.roi_tensor.sizes)
