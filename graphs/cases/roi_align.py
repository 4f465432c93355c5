"""ROI_ALIGN / ROI_ALIGN1 cases: a pairwise grid of every field value, edges, RoiAlign-10 cases, random ones.

Inputs: ROIs on a 1/16 grid (exact in float16 for |v| < 128); with an adaptive sample count
they avoid empty regions and size/output ratios within 1e-4 of a whole number (float32 vs
float64 ceil), both of which the mapper flags per input.
"""

from __future__ import annotations

import numpy as np
from ep_testbed.reference.descs import TensorDesc
from ep_testbed.reference.dtypes import numpy_dtype
from ep_testbed.reference.roi_align import RoiAlign1Desc, RoiAlignDesc, roi_count

from .common import SHORT_DTYPE, UINT32_MAX, Case, grid, make_case, num, roi_op_inputs


def catalog_v0(seed: int) -> list[Case]:
    """The ROI_ALIGN cases (registry ``cases``)."""
    return _roi_align_cases(False, seed)


def catalog_v1(seed: int) -> list[Case]:
    """The ROI_ALIGN1 cases (registry ``cases``)."""
    return _roi_align_cases(True, seed)


def make_inputs(desc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A case's inputs by recipe (``outside-partly``, ``outside-wholly``, ``one-pixel``,
    ``whole-image``, ``empty``, ``inverted``, ``ties``, ``nan-inf``, ``random``)."""
    return roi_op_inputs(desc, recipe, rng, _roi_align_rois)


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
_EDGES = [("outside-partly", {}, "outside-partly"), ("outside-wholly", {}, "outside-wholly"),
          ("outside-wholly-oob", {"oob": -2.0}, "outside-wholly"),
          ("one-pixel", {}, "one-pixel"), ("whole-image", {}, "whole-image"),
          ("whole-image-max", {"reduction": "MAX", "samples": (3, 3)}, "whole-image"),
          ("empty-region", {}, "empty"), ("empty-region-max", {"reduction": "MAX"}, "empty"),
          ("inverted-region", {}, "inverted"),
          ("inverted-region-max-n1", {"reduction": "MAX", "samples": (1, 1)}, "inverted"),
          ("large-roi-count", {"rois": 300, "out": (2, 2), "channels": 2}, "random"),
          ("large-batch", {"batch": 16, "rois": 32, "height": 8, "width": 8}, "random"),
          ("adaptive-large-regions", {"samples": (1, UINT32_MAX), "height": 24, "width": 24}, "random"),
          ("nan-inf", {}, "nan-inf"), ("fp16-outside-partly", {"dtype": "FLOAT16"}, "outside-partly")]
_EDGES_V1 = [("inverted-region-offset0-corners", {"ipo": 0.0, "corners": True}, "inverted"),
             ("one-pixel-offset0", {"ipo": 0.0, "opo": 0.0}, "one-pixel")]


def _edge_cases(op: str, v1: bool, seed: int) -> list[Case]:
    return [make_case(op, f"edge-{name}", roi_align_desc(v1, **{**_BASE, **over}), seed, f"edge-{recipe}",
                      recipe=recipe) for name, over, recipe in _EDGES + (_EDGES_V1 if v1 else [])]


def _opset10_cases(op: str, v1: bool, seed: int) -> list[Case]:
    """RoiAlign-10: the ONNX spec (and ORT's CPU kernel) read it with no input offset; ORT's
    DirectML EP builds InputPixelOffset 0.5 for it. These cases exist to show that difference."""
    opset10 = [("avg-fp32", dict(ipo=0.0)), ("avg-fp32-offset0.5", dict(ipo=0.5)),
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


def _roi_align_rois(desc, recipe: str, rng) -> dict[str, np.ndarray]:
    batch, _, height, width = desc.input_tensor.sizes
    n = roi_count(desc.roi_tensor.sizes)
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
