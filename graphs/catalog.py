"""The case catalog: named, reproducible cases (a desc, a seed, tags) for the four operators.

``build_catalog(ops, seed)`` lists, per operator:

* ``grid``: every value of every field at least once, pairwise where the full product
  explodes (``pairwise.all_pairs``); the grid does not depend on ``seed``;
* ``random``: descs drawn from ``seed``;
* ``edge-*``: ROIs partly / wholly outside the input, one-pixel and whole-image ROIs, empty and
  inverted regions, ties, NaN/Inf inputs, large ROI and batch counts.

Inputs (``case.inputs()``) are derived from ``(id, seed)`` and drawn well conditioned, so that
a mismatch means a different computation, not a rounding accident:

* floats are multiples of 1/8 in [-4, 4] (exact in float16; sums and bilinear weights of them
  stay far from float16 rounding ties in practice);
* MAX_POOLING2 inputs are a permutation of distinct integer-valued numbers (unique maxima, so
  indices are unambiguous) except in ``edge-ties``, which uses integer values in [0, 3];
* ROI_POOLING ROI corners times SpatialScale stay >= 0.1 away from .5 (no rounding ties) and
  avoid the region sizes where ORT's float32 bins land one off (``input_flags``);
* ROI_ALIGN ROIs with an adaptive sample count avoid empty regions and size/output ratios
  within 1e-4 of a whole number (float32 vs float64 ceil).

Cases whose inputs deliberately trigger a known data-dependent divergence carry
``tags["expect"] = "diverges"`` and ``tags["why"]``. The default catalog is a few hundred
cases of under 50k elements each.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import numpy as np

from ep_testbed.reference.descs import (MaxPooling2Desc, OP_NAMES, RoiAlign1Desc, RoiAlignDesc, RoiPoolingDesc, Size2D,
                             TensorDesc)
from ep_testbed.reference.dtypes import numpy_dtype
from ep_testbed.reference.errors import DescError
from ep_testbed.reference.validation import max_pooling2_output_sizes, validate

from .input_flags import input_flags
from .pairwise import all_pairs

UINT32_MAX = 2**32 - 1
OPS = ("roi_pooling", "max_pooling2", "roi_align", "roi_align1")
TYPE_OF = {short: long for long, short in OP_NAMES.items()}
SHORT_DTYPE = {"FLOAT32": "fp32", "FLOAT16": "fp16"}


@dataclass(frozen=True)
class Case:
    """One named case. ``inputs()`` is deterministic in ``(id, seed)``; ``recipe`` names the
    input generator (``random``, ``outside-partly``, ``nan-inf``, ...)."""

    id: str
    op: str
    desc: Any
    seed: int
    opset: Optional[int] = None
    tags: dict = field(default_factory=dict, hash=False, compare=False)
    recipe: str = "random"

    def inputs(self) -> dict[str, np.ndarray]:
        """The input arrays by DML member name (as ``reference.execute`` takes them)."""
        rng = np.random.default_rng([zlib.crc32(self.id.encode()), self.seed])
        return _make_inputs(self.desc, self.recipe, rng)


def build_catalog(ops: Optional[Iterable[str]] = None, seed: int = 0) -> list[Case]:
    """All cases of ``ops`` (short names ``roi_pooling``, ``max_pooling2``, ``roi_align``,
    ``roi_align1``; None = all four), ids unique and stable for a given seed."""
    chosen = list(OPS) if ops is None else list(ops)
    for op in chosen:
        if op not in OPS:
            raise ValueError(f"op = {op!r}: one of {', '.join(OPS)}")
    cases: list[Case] = []
    for op in chosen:
        cases.extend(_BUILDERS[op](seed))
    ids = [c.id for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise AssertionError(f"duplicate case ids: {sorted(dupes)[:5]}")
    return cases


# --- helpers -------------------------------------------------------------------------------

def _num(v: float) -> str:
    text = f"{v:g}"
    return text.replace("-", "m")


def _case(op: str, name: str, desc, seed: int, family: str, recipe: str = "random", opset=None,
          **extra: str) -> Case:
    dtype = desc.input_tensor.data_type.lower()
    tags = {"dtype": dtype, "family": family, **extra}
    return Case(id=f"{op}/{name}", op=TYPE_OF[op], desc=desc, seed=seed, opset=opset, tags=tags, recipe=recipe)


_GRID_ROWS: dict[str, list[dict]] = {}


def _grid(key: str, params, valid=None) -> list[dict]:
    """``all_pairs`` rows, computed once per process (the grid does not depend on the seed)."""
    if key not in _GRID_ROWS:
        _GRID_ROWS[key] = all_pairs(params, valid=valid)
    return [dict(row) for row in _GRID_ROWS[key]]


def _ok(desc) -> bool:
    try:
        validate(desc)
    except DescError:
        return False
    return True


# --- ROI_ALIGN1 / ROI_ALIGN ------------------------------------------------------------------

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
             SHORT_DTYPE[row["dtype"]], f"scale{_num(row['sx'])}x{_num(row['sy'])}"]
    if v1:
        parts += [f"offset{_num(row['ipo'])}", f"out{_num(row['opo'])}"]
    parts += [f"oob{_num(row['oob'])}", _samples_name(row["samples"])]
    if v1 and row["corners"]:
        parts.append("corners")
    parts += [f"roi{row['roi_rank']}d", f"bi{row['bi_type'].lower()}-{row['bi_rank']}d"]
    return "-".join(parts)


def _roi_align_cases(v1: bool, seed: int) -> list[Case]:
    op = "roi_align1" if v1 else "roi_align"
    params = [("dtype", ["FLOAT32", "FLOAT16"]), ("reduction", ["AVERAGE", "MAX"]),
              ("interp", ["LINEAR", "NEAREST_NEIGHBOR"]), ("sx", [0.5, 1.0, 0.25]), ("sy", [0.5, 1.0]),
              ("oob", [0.0, 1.5]), ("samples", [(1, 1), (2, 2), (3, 3), (1, UINT32_MAX), (1, 4), (2, 5)]),
              ("roi_rank", [2, 3, 4]), ("bi_rank", [1, 2, 3, 4])]
    if v1:
        params += [("ipo", [0.5, 0.0, 0.25]), ("opo", [-0.5, 0.0, -0.25]), ("corners", [False, True]),
                   ("bi_type", ["UINT32", "UINT64"])]
    cases = []
    for row in _grid(op, params):
        row.setdefault("ipo", 0.5), row.setdefault("opo", -0.5), row.setdefault("corners", False)
        row.setdefault("bi_type", "UINT32")
        desc = roi_align_desc(v1, **row)
        cases.append(_case(op, "grid-" + _roi_align_name(row, v1), desc, seed, "grid"))

    base = dict(dtype="FLOAT32", samples=(2, 2))
    edges = [("outside-partly", {}, "outside-partly"), ("outside-wholly", {}, "outside-wholly"),
             ("outside-wholly-oob", {"oob": -2.0}, "outside-wholly"),
             ("one-pixel", {}, "one-pixel"), ("whole-image", {}, "whole-image"),
             ("whole-image-max", {"reduction": "MAX", "samples": (3, 3)}, "whole-image"),
             ("empty-region", {}, "empty"), ("empty-region-max", {"reduction": "MAX"}, "empty"),
             ("inverted-region", {}, "inverted"), ("inverted-region-max-n1", {"reduction": "MAX", "samples": (1, 1)},
                                                   "inverted"),
             ("large-roi-count", {"rois": 300, "out": (2, 2), "channels": 2}, "random"),
             ("large-batch", {"batch": 16, "rois": 32, "height": 8, "width": 8}, "random"),
             ("adaptive-large-regions", {"samples": (1, UINT32_MAX), "height": 24, "width": 24}, "random"),
             ("nan-inf", {}, "nan-inf"), ("fp16-outside-partly", {"dtype": "FLOAT16"}, "outside-partly")]
    if v1:
        edges += [("inverted-region-offset0-corners", {"ipo": 0.0, "corners": True}, "inverted"),
                  ("one-pixel-offset0", {"ipo": 0.0, "opo": 0.0}, "one-pixel")]
    for name, over, recipe in edges:
        kw = {**base, **over}
        desc = roi_align_desc(v1, **kw)
        cases.append(_case(op, f"edge-{name}", desc, seed, f"edge-{recipe}", recipe=recipe))

    # RoiAlign-10: the ONNX spec (and ORT's CPU kernel) read it with no input offset; ORT's
    # DirectML EP builds InputPixelOffset 0.5 for it. These cases exist to show that difference.
    opset10 = [("avg-fp32", dict(ipo=0.0)), ("avg-fp32-offset0.5", dict(ipo=0.5)),
               ("max-fp32-n2", dict(ipo=0.0, reduction="MAX")), ("avg-fp16", dict(ipo=0.0, dtype="FLOAT16"))]
    for name, over in opset10:
        if not v1:
            over = {k: v for k, v in over.items() if k != "ipo"}
            if name.endswith("offset0.5"):
                continue
        desc = roi_align_desc(v1, **{**base, **over})
        cases.append(_case(op, f"opset10-{name}", desc, seed, "opset10", opset=10))

    rng = np.random.default_rng([seed, 1 if v1 else 2])
    for i in range(16):
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
        desc = roi_align_desc(v1, **kw)
        cases.append(_case(op, f"random-s{seed}-{i:03d}", desc, seed, "random"))
    return cases


# --- MAX_POOLING2 ----------------------------------------------------------------------------

MAXPOOL_TYPES = ["FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64"]


def max_pooling2_desc(dtype="FLOAT32", dims=2, window=2, stride=1, start=0, end=0, dilation=1, indices="UINT64",
                      batch=2, channels=3, spatial=None):
    spatial = tuple(spatial or ((7, 9) if dims == 2 else (4, 5, 6)))
    def per(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims
    w, s, ps, pe, dl = per(window), per(stride), per(start), per(end), per(dilation)
    in_sizes = (batch, channels, *spatial)
    out = max_pooling2_output_sizes(in_sizes, w, s, ps, pe, dl)
    return MaxPooling2Desc(
        input_tensor=TensorDesc(dtype, in_sizes), output_tensor=TensorDesc(dtype, out),
        output_indices_tensor=None if indices is None else TensorDesc(indices, out), dimension_count=dims,
        strides=s, window_size=w, start_padding=ps, end_padding=pe, dilations=dl)


def _mp_name(row) -> str:
    def t(v):
        return "x".join(str(x) for x in v) if isinstance(v, (tuple, list)) else str(v)
    return (f"{row['dtype'].lower()}-{row['dims']}d-w{t(row['window'])}-s{t(row['stride'])}-p{t(row['start'])}"
            f"_{t(row['end'])}-d{t(row['dilation'])}-idx{(row['indices'] or 'none').lower()}")


def _max_pooling2_cases(seed: int) -> list[Case]:
    op = "max_pooling2"
    params = [("dtype", MAXPOOL_TYPES), ("dims", [2, 3]), ("indices", [None, "UINT32", "UINT64"]),
              ("window", [1, 2, 3, (2, 3)]), ("stride", [1, 2, 3]), ("start", [0, 1]), ("end", [0, 1, 2]),
              ("dilation", [1, 2])]

    def fix(row):
        row = dict(row)
        for key in ("window", "stride", "start", "end", "dilation"):
            if isinstance(row[key], tuple) and len(row[key]) != row["dims"]:
                row[key] = row[key] + (row[key][-1],) * (row["dims"] - len(row[key]))
        return row

    def valid(row):
        row = fix(row)
        w = row["window"] if isinstance(row["window"], tuple) else (row["window"],) * row["dims"]
        if max(row["start"], row["end"]) >= min(w):   # ORT CPU refuses pads >= kernel: an edge case, not grid
            return False
        return _ok(max_pooling2_desc(**row))

    cases = []
    for row in _grid(op, params, valid):
        row = fix(row)
        cases.append(_case(op, "grid-" + _mp_name(row), max_pooling2_desc(**row), seed, "grid"))
    for opset, dtype in ((8, "FLOAT32"), (10, "FLOAT16"), (11, "INT8"), (12, "UINT8")):
        row = dict(dtype=dtype, dims=2, window=3, stride=2, start=1, end=1, dilation=1 if opset < 10 else 2,
                   indices="UINT64")
        cases.append(_case(op, f"grid-opset{opset}-" + _mp_name(row), max_pooling2_desc(**row), seed, "grid",
                           opset=opset))
    edges = [("ties", dict(window=3, stride=1), "ties"), ("ties-int8", dict(dtype="INT8", window=3, stride=2), "ties"),
             ("ties-3d-fp16", dict(dtype="FLOAT16", dims=3, window=2), "ties"),
             ("window-equals-input", dict(window=(7, 9), stride=1, spatial=(7, 9)), "random"),
             ("window-larger-than-input-padded", dict(window=(4, 4), start=(2, 2), end=(1, 1), spatial=(3, 3)),
              "random"),
             ("pads-ge-kernel", dict(window=2, dilation=3, start=2, end=2, stride=2), "random"),
             ("nan-inf", dict(window=2, stride=2), "nan-inf"),
             ("minus-inf-window", dict(window=2, stride=2), "minus-inf"),
             ("int64-large", dict(dtype="INT64", window=2), "int64-large"),
             ("uint64-extremes", dict(dtype="UINT64", window=3, stride=2), "extremes"),
             ("int8-extremes", dict(dtype="INT8", window=2), "extremes"),
             ("large-batch", dict(batch=32, channels=8, spatial=(12, 12), window=2, stride=2), "random"),
             ("dilation-padding-5d", dict(dims=3, window=2, dilation=2, start=1, end=1), "random")]
    for name, over, recipe in edges:
        desc = max_pooling2_desc(**over)
        extra = {}
        if recipe == "nan-inf":
            extra = {"expect": "diverges", "why": "NaN inputs: ORT's indexed MaxPool lets a NaN that comes first "
                     "in a window win, the reference ignores NaN"}
        if name == "uint64-extremes":
            extra = {"expect": "inexpressible", "why": "UINT64 values near 2^64 collide in the float64 the "
                     "composition pools in"}
        if name == "pads-ge-kernel":
            extra = {"expect": "diverges", "why": "pads >= kernel_shape: ORT's CPU kernel refuses the model"}
        cases.append(_case(op, f"edge-{name}", desc, seed, f"edge-{recipe}", recipe=recipe, **extra))
    rng = np.random.default_rng([seed, 3])
    i = 0
    while i < 16:
        dims = int(rng.integers(2, 4))
        row = dict(dtype=MAXPOOL_TYPES[rng.integers(len(MAXPOOL_TYPES))], dims=dims,
                   window=tuple(int(v) for v in rng.integers(1, 4, dims)),
                   stride=tuple(int(v) for v in rng.integers(1, 4, dims)),
                   start=tuple(int(v) for v in rng.integers(0, 2, dims)),
                   end=tuple(int(v) for v in rng.integers(0, 2, dims)),
                   dilation=tuple(int(v) for v in rng.integers(1, 3, dims)),
                   indices=[None, "UINT32", "UINT64"][rng.integers(3)], batch=int(rng.integers(1, 4)),
                   channels=int(rng.integers(1, 4)),
                   spatial=tuple(int(v) for v in rng.integers(3, 10 if dims == 2 else 7, dims)))
        if any(p >= w for p, w in zip(row["start"] + row["end"], row["window"] * 2)):
            continue
        desc = max_pooling2_desc(**row)
        if not _ok(desc):
            continue
        cases.append(_case(op, f"random-s{seed}-{i:03d}", desc, seed, "random"))
        i += 1
    return cases


# --- ROI_POOLING -----------------------------------------------------------------------------

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
    for row in _grid(op, params):
        name = (f"grid-{SHORT_DTYPE[row['dtype']]}-scale{_num(row['scale'])}-pool{row['pooled'][0]}x{row['pooled'][1]}"
                f"-rois{row['rois']}")
        cases.append(_case(op, name, roi_pooling_desc(**row), seed, "grid"))
    edges = [("outside-partly", {}, "outside-partly"), ("outside-wholly", {}, "outside-wholly"),
             ("one-pixel", {}, "one-pixel"), ("whole-image", {"pooled": (3, 3)}, "whole-image"),
             ("empty-bins", {"pooled": (5, 5)}, "one-pixel"),
             ("rounding-ties", {"scale": 0.5}, "rounding-ties"), ("ties", {}, "ties"),
             ("float32-bins", {"pooled": (11, 1), "height": 33, "width": 4, "batch": 1}, "float32-bins"),
             ("nan-inf", {}, "nan-inf"), ("large-roi-count", {"rois": 400, "pooled": (2, 2), "channels": 2}, "random"),
             ("large-batch", {"batch": 16, "rois": 40}, "random"), ("fp16-rounding-ties", {"dtype": "FLOAT16"},
                                                                     "rounding-ties")]
    for name, over, recipe in edges:
        extra = {}
        if recipe == "nan-inf":
            extra = {"expect": "diverges", "why": "NaN inputs: ORT's std::max keeps a NaN only when scanned last"}
        if recipe == "float32-bins":
            extra = {"expect": "diverges", "why": "29 rows into 11 bins: ORT's float32 bin end is one past the "
                     "page's integer one (roi_pool.cc)"}
        cases.append(_case(op, f"edge-{name}", roi_pooling_desc(**over), seed, f"edge-{recipe}", recipe=recipe,
                           **extra))
    rng = np.random.default_rng([seed, 4])
    for i in range(14):
        row = dict(dtype=["FLOAT32", "FLOAT16"][rng.integers(2)], scale=float(rng.choice([1.0, 0.5, 0.25, 0.0625])),
                   pooled=(int(rng.integers(1, 6)), int(rng.integers(1, 6))), rois=int(rng.integers(1, 10)),
                   batch=int(rng.integers(1, 4)), channels=int(rng.integers(1, 5)), height=int(rng.integers(4, 20)),
                   width=int(rng.integers(4, 20)))
        cases.append(_case(op, f"random-s{seed}-{i:03d}", roi_pooling_desc(**row), seed, "random"))
    return cases


_BUILDERS = {"roi_align1": lambda seed: _roi_align_cases(True, seed),
             "roi_align": lambda seed: _roi_align_cases(False, seed),
             "max_pooling2": _max_pooling2_cases, "roi_pooling": _roi_pooling_cases}


# --- inputs ----------------------------------------------------------------------------------

def _floats(rng, shape, dtype):
    return (rng.integers(-32, 33, size=shape) / 8).astype(dtype)


def _make_inputs(desc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if isinstance(desc, MaxPooling2Desc):
        return {"InputTensor": _maxpool_input(desc, recipe, rng)}
    x_dtype = numpy_dtype(desc.input_tensor.data_type)
    x = _floats(rng, desc.input_tensor.sizes, x_dtype)
    if recipe == "ties":
        x = rng.integers(0, 4, size=desc.input_tensor.sizes).astype(x_dtype)
    if recipe == "nan-inf":
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=max(3, flat.size // 20), replace=False)
        flat[picks] = np.array([np.nan, np.inf, -np.inf], dtype=x_dtype)[np.arange(picks.size) % 3]
        x[:, :, 0, 0] = 1  # ORT reads X[b, c, 0, 0] for out-of-range samples (input_flags); keep it finite
    tensors = {"InputTensor": x}
    for attempt in range(50):
        if isinstance(desc, RoiPoolingDesc):
            tensors["ROITensor"] = _roi_pooling_rois(desc, recipe, rng)
        else:
            tensors.update(_roi_align_rois(desc, recipe, rng))
        if recipe in ("nan-inf", "float32-bins") or not input_flags(desc, tensors):
            break
    return tensors


def _maxpool_input(desc: MaxPooling2Desc, recipe: str, rng) -> np.ndarray:
    sizes = desc.input_tensor.sizes
    dtype = numpy_dtype(desc.input_tensor.data_type)
    count = int(np.prod(sizes))
    if recipe == "ties":
        return rng.integers(0, 4, size=sizes).astype(dtype)
    if recipe == "extremes":
        info = np.iinfo(dtype)
        return rng.choice(np.array([info.min, info.min + 1, 0, info.max - 1, info.max], dtype=dtype), size=sizes)
    if recipe == "int64-large":
        values = rng.permutation(count).astype(np.int64) * (2**40) - 2**52
        return values.reshape(sizes).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -count), min(int(info.max), count)
        if hi - lo + 1 >= count:
            values = rng.permutation(np.arange(lo, lo + count))       # distinct: unique maxima
        else:
            values = rng.integers(lo, hi + 1, size=count)            # int8/uint8: ties unavoidable
        return values.reshape(sizes).astype(dtype)
    # floats: distinct multiples of 1/8 (exact in float16 up to 256)
    span = min(count, 2048)
    values = (rng.permutation(count) % span - span // 2) / 8
    x = values.reshape(sizes).astype(dtype)
    if recipe == "nan-inf":
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=max(3, flat.size // 20), replace=False)
        flat[picks] = np.array([np.nan, np.inf, -np.inf], dtype=dtype)[np.arange(picks.size) % 3]
        x[(0, 0) + (0,) * (x.ndim - 2)] = np.nan    # a NaN first in the first window
    if recipe == "minus-inf":
        x[..., :2, :2] = -np.inf
    return x


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


def _roi_align_rois(desc, recipe: str, rng) -> dict[str, np.ndarray]:
    batch, _, height, width = desc.input_tensor.sizes
    n = desc.roi_tensor.sizes[-2]
    dtype = numpy_dtype(desc.roi_tensor.data_type)
    sx, sy = float(np.float32(desc.spatial_scale_x)), float(np.float32(desc.spatial_scale_y))

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
    else:
        x1, y1 = grid(-1, width - 1, n), grid(-1, height - 1, n)
        x2, y2 = x1 + grid(0.5, width, n), y1 + grid(0.5, height, n)
    rois = np.stack([x1 / sx, y1 / sy, x2 / sx, y2 / sy], axis=1).astype(dtype)
    bi = rng.integers(0, batch, n).astype(numpy_dtype(desc.batch_indices_tensor.data_type))
    return {"ROITensor": rois.reshape(desc.roi_tensor.sizes),
            "BatchIndicesTensor": bi.reshape(desc.batch_indices_tensor.sizes)}
