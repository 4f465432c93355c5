"""Heatmap pictures as tiny inline PNGs, written with the standard library alone.

Why PNG and not SVG: a heatmap is a grid of coloured cells.  As SVG each cell is a ``<rect>``
(~60 bytes), so a 64x64 slice is ~250 KB of markup per picture and a report with a few hundred
pictures gets slow to open.  As PNG the same slice is one pixel per cell, zlib-compressed (a few
hundred bytes), and the browser scales it up with ``image-rendering: pixelated`` so every element
stays a crisp square (error pictures are drawn a few pixels per cell when that leaves room to
dot the cells outside tolerance).  PNG needs only ``zlib`` and ``struct`` (below, ~20 lines), so
there is no Pillow or matplotlib dependency to install on a GPU CI runner.  Exact values are not
read off colours: hovering a cell shows its values (heat.js), and the worst-elements table next
to the pictures gives coordinates and numbers.
"""

from __future__ import annotations

import base64
import json
import math
import struct
import zlib
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..harness.core import error_stats
from ..harness.core.tolerances import Tolerance, Tolerances

# Anchor colours (sRGB) interpolated linearly.  VALUE_MAP is viridis (perceptually uniform, readable
# in grey and by most colour-blind readers).  The error pictures are drawn on one absolute scale,
# in units of the element's tolerance (``harness.core.error_stats.element_errors``: 1.0 is the limit):
# WITHIN_MAP from white (exact) to blue (at the limit), OUTSIDE_MAP from orange (just past it) to
# dark red (SHARE_TOP times the limit and beyond, on a log scale), so a slice whose elements
# all pass can never look red, and every cell past the limit is in the red family.
VALUE_MAP = np.array([
    (68, 1, 84), (72, 40, 120), (62, 74, 137), (49, 104, 142), (38, 130, 142),
    (31, 158, 137), (53, 183, 121), (110, 206, 88), (181, 222, 43), (253, 231, 37),
], dtype=np.float64)
WITHIN_MAP = np.array([(255, 255, 255), (222, 235, 247), (158, 202, 225), (66, 146, 198), (8, 81, 156)],
                      dtype=np.float64)
OUTSIDE_MAP = np.array([(254, 196, 79), (251, 106, 74), (203, 24, 29), (103, 0, 13)], dtype=np.float64)
#: Share of the tolerance where the outside scale saturates (log scale from 1 to it).
SHARE_TOP = 1000.0
#: Colour of NaN cells, and of an error cell where a NaN or an infinity met a number.
NON_FINITE_RGB = (255, 0, 255)
#: Value cells at -inf or at the dtype's lowest value (-FLT_MAX: DML's padding value for max
#: pooling), and at +inf or the highest value: drawn apart so they do not stretch the scale.
LOW_RGB, HIGH_RGB = (0, 0, 0), (255, 255, 255)
#: Slices with more cells than this get no hover values (they would bloat the page).
HOVER_CELLS = 4096


def encode_png(rgb: np.ndarray) -> bytes:
    """PNG bytes of an (H, W, 3) uint8 image (8-bit RGB, no interlace)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w, _ = rgb.shape
    raw = np.zeros((h, 1 + 3 * w), dtype=np.uint8)  # filter byte 0 (None) per scanline
    raw[:, 1:] = rgb.reshape(h, 3 * w)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 9)) + chunk(b"IEND", b""))


def png_data_uri(rgb: np.ndarray) -> str:
    """``rgb`` as a ``data:image/png;base64,...`` URI (inline in the page)."""
    return "data:image/png;base64," + base64.b64encode(encode_png(rgb)).decode("ascii")


def colorize(values: np.ndarray, lo: float, hi: float, colormap: np.ndarray) -> np.ndarray:
    """Map a 2-D float array onto ``colormap`` between ``lo`` and ``hi``; non-finite cells magenta."""
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    span = hi - lo
    t = np.zeros(v.shape) if not span > 0 else np.clip((np.where(finite, v, lo) - lo) / span, 0.0, 1.0)
    rgb = _ramp(t, colormap)
    rgb[~finite] = NON_FINITE_RGB
    return np.rint(rgb).astype(np.uint8)


def _ramp(t: np.ndarray, colormap: np.ndarray) -> np.ndarray:
    """Colours of ``t`` in [0, 1] along ``colormap`` (float RGB, same shape plus 3)."""
    pos = np.clip(t, 0.0, 1.0) * (len(colormap) - 1)
    i = np.minimum(pos.astype(np.int64), len(colormap) - 2)
    frac = (pos - i)[..., None]
    return colormap[i] * (1.0 - frac) + colormap[i + 1] * frac


def legend_uri(colormap: np.ndarray, width: int = 96) -> str:
    """A horizontal colour bar for the legend."""
    ramp = np.linspace(0.0, 1.0, width)[None, :].repeat(6, axis=0)
    return png_data_uri(colorize(ramp, 0.0, 1.0, colormap))


def share_position(share: np.ndarray) -> np.ndarray:
    """Where a share of the tolerance sits on the error scale: [0, 0.5] within the limit
    (linear), (0.5, 1] from the limit to ``SHARE_TOP`` times it (log)."""
    s = np.asarray(share, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        outside = 0.5 + 0.5 * np.log10(np.maximum(s, 1.0)) / np.log10(SHARE_TOP)
    return np.where(s <= 1.0, 0.5 * np.clip(s, 0.0, 1.0), np.minimum(outside, 1.0))


def share_colours(share: np.ndarray) -> np.ndarray:
    """RGB (uint8) of each cell's share of its tolerance (``share_position``); inf magenta."""
    s = np.asarray(share, dtype=np.float64)
    pos = share_position(np.where(np.isfinite(s), s, 0.0))
    rgb = np.where((s <= 1.0)[..., None], _ramp(pos * 2.0, WITHIN_MAP), _ramp(pos * 2.0 - 1.0, OUTSIDE_MAP))
    rgb[~np.isfinite(s)] = NON_FINITE_RGB
    return np.rint(rgb).astype(np.uint8)


#: Labels of the error scale's colour bar: (share of the tolerance, text).
SHARE_TICKS = ((0.0, "0"), (0.5, "0.5"), (1.0, "1 = limit"), (10.0, "10×"), (SHARE_TOP, f"≥{SHARE_TOP:g}×"))


def share_legend() -> tuple[str, list[tuple[float, str]]]:
    """(PNG data URI of the error scale's bar, [(left %, label)] of its ticks)."""
    pos = np.linspace(0.0, 1.0, 200)
    share = np.where(pos <= 0.5, pos * 2.0, 10.0 ** ((pos - 0.5) * 2.0 * np.log10(SHARE_TOP)))
    bar = share_colours(share[None, :].repeat(8, axis=0))
    ticks = [(float(share_position(np.array(v))) * 100.0, label) for v, label in SHARE_TICKS]
    return png_data_uri(bar), ticks


def value_colours(values: np.ndarray, lo: float, hi: float, extreme: float) -> np.ndarray:
    """Viridis between ``lo`` and ``hi``; NaN magenta; -inf and values <= -``extreme`` (the
    dtype's lowest) ``LOW_RGB``, +inf and values >= ``extreme`` ``HIGH_RGB``."""
    v = np.asarray(values, dtype=np.float64)
    rgb = colorize(v, lo, hi, VALUE_MAP)
    with np.errstate(invalid="ignore"):
        rgb[v <= -extreme] = LOW_RGB
        rgb[v >= extreme] = HIGH_RGB
    return rgb


def value_range(arrays: list[np.ndarray], extreme: float) -> tuple[float, float]:
    """(lo, hi) over the finite values below ``extreme`` in magnitude, so -FLT_MAX padding or
    an infinity never squeezes the other values into one colour; (0, 0) when none."""
    both = np.concatenate([a.ravel() for a in arrays]).astype(np.float64)
    with np.errstate(invalid="ignore"):
        ordinary = both[np.isfinite(both) & (np.abs(both) < extreme)]
    return (float(ordinary.min()), float(ordinary.max())) if ordinary.size else (0.0, 0.0)


def upscale(rgb: np.ndarray, cell: int) -> np.ndarray:
    """Each pixel of ``rgb`` as a ``cell`` x ``cell`` block."""
    return rgb.repeat(cell, axis=0).repeat(cell, axis=1) if cell > 1 else rgb


def mark_cells(rgb: np.ndarray, mask: np.ndarray, cell: int) -> np.ndarray:
    """A dot in the middle of each ``mask`` cell of an upscaled picture (black on light
    colours, white on dark ones); pictures with cells under 3 pixels stay unmarked."""
    if cell < 3 or not mask.any():
        return rgb
    out = rgb.copy()
    size = max(1, cell // 3)
    start = (cell - size) // 2
    for y, x in np.argwhere(mask):
        colour = out[y * cell, x * cell].astype(np.float64)
        ink = 0 if colour @ (0.2126, 0.7152, 0.0722) > 110 else 255
        out[y * cell + start:y * cell + start + size, x * cell + start:x * cell + start + size] = ink
    return out


def axis_ticks(n: int, most: int = 5) -> list[tuple[int, float]]:
    """Tick positions along an axis of ``n`` cells: (index, centre as % of the length), on a
    1/2/5 step so at most ``most`` (+ the last index) are drawn."""
    step = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 10**9) if n / s <= most)
    indices = sorted(set(range(0, n, step)) | {n - 1}) if n else []
    if len(indices) > 1 and indices[-1] - indices[-2] < step / 2:
        indices.pop(-2)  # the last index next to a step mark: keep the last
    return [(i, (i + 0.5) / n * 100.0) for i in indices]


def hover_json(e: np.ndarray, a: np.ndarray, share: np.ndarray) -> str | None:
    """JSON the page's heat.js reads to show a cell's values on hover: width, height and the
    expected, actual and share arrays as base64 float32 (little-endian); None for big slices."""
    if e.size > HOVER_CELLS:
        return None
    pack = lambda x: base64.b64encode(np.ascontiguousarray(x, dtype="<f4").tobytes()).decode("ascii")  # noqa: E731
    return json.dumps({"h": int(e.shape[0]), "w": int(e.shape[1]), "e": pack(e), "a": pack(a), "s": pack(share)})


@dataclass
class SlicePictures:
    """Expected, actual and error pictures of one 2-D slice of an output, with what the page
    draws around them (ticks, colour bar numbers, hover values)."""

    label: str
    expected_uri: str
    actual_uri: str
    diff_uri: str
    value_range: tuple[float, float]
    max_diff: float
    shape: tuple[int, int]
    scale: int
    outside: int = 0
    max_share: float = 0.0
    extremes: int = 0
    ticks_x: list[tuple[int, float]] = field(default_factory=list)
    ticks_y: list[tuple[int, float]] = field(default_factory=list)
    hover: str | None = None


def slice_label(names: Sequence[str], lead_shape: tuple[int, ...], index: int) -> str:
    """``"batch 0, channel 2"`` for slice ``index`` of the leading axes, or ``"whole output"``."""
    coords = np.unravel_index(int(index), lead_shape) if lead_shape else ()
    return ", ".join(f"{n} {int(c)}" for n, c in zip(names, coords)) or "whole output"


def slice_labels(op: str, ndim: int) -> tuple[str, ...]:
    """Names of the leading (non-image) axes: ROI ops index regions, pooling indexes batches."""
    if ndim == 4:
        return ("ROI", "channel") if "ROI" in op.upper() else ("batch", "channel")
    return tuple(f"axis {i}" for i in range(max(ndim - 2, 0)))


def display_scale(h: int, w: int, target: int = 140, largest: int = 24) -> int:
    """Integer upscale so a small slice is ~``target`` pixels across, never below 1x."""
    return int(max(1, min(largest, target // max(h, w, 1))))


def _tolerance_for(dtype: np.dtype, tolerance: Tolerance | None) -> Tolerance:
    """The tolerance an output of ``dtype`` was judged by: the given one, else the defaults."""
    return tolerance if tolerance is not None else Tolerances.defaults().for_dtype(dtype.name.upper())


def _extreme(dtype: np.dtype) -> float:
    """The magnitude of the dtype's lowest/highest finite value (inf for non-floats)."""
    return float(np.finfo(dtype).max) if dtype.kind == "f" else math.inf


def _picture(label: str, e: np.ndarray, a: np.ndarray, share: np.ndarray, extreme: float,
             scale: int) -> SlicePictures:
    """The pictures of one slice (``e``, ``a``: 2-D; ``share``: their share of the tolerance)."""
    h, w = e.shape
    lo, hi = value_range([e, a], extreme)
    outside = share > 1.0
    cell = scale if scale >= 3 else 1
    diff = mark_cells(upscale(share_colours(share), cell), outside, cell)
    return SlicePictures(
        label=label, expected_uri=png_data_uri(value_colours(e, lo, hi, extreme)),
        actual_uri=png_data_uri(value_colours(a, lo, hi, extreme)), diff_uri=png_data_uri(diff),
        value_range=(lo, hi), max_diff=float(abs_difference(e, a).max()), shape=(int(h), int(w)), scale=scale,
        outside=int(outside.sum()), max_share=float(share.max()),
        extremes=int(np.sum(~np.isnan(e) & (np.abs(e) >= extreme)) + np.sum(~np.isnan(a) & (np.abs(a) >= extreme))),
        ticks_x=axis_ticks(int(w)), ticks_y=axis_ticks(int(h)), hover=hover_json(e, a, share))


def abs_difference(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """|actual - expected| in float64; equal non-finite values count 0, unequal ones +Inf."""
    e = np.asarray(expected, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a - e)
    same = (e == a) | (np.isnan(e) & np.isnan(a))
    d[same] = 0.0
    d[~np.isfinite(d)] = np.inf
    return d


def worst_slices(op: str, expected: np.ndarray, actual: np.ndarray, limit: int = 4,
                 tolerance: Tolerance | None = None, hover: bool = True) -> list[SlicePictures]:
    """Pictures of the ``limit`` 2-D slices with the most elements outside tolerance (then the
    largest share of it), worst first.

    The last two axes are the picture; every other axis indexes a slice (for (N|ROI, C, H, W)
    outputs, one ROI/batch and one channel).  Expected and actual share one value scale per
    slice; the error picture is in units of ``tolerance`` (the run's tolerance for the
    output's dtype; default: the default tolerances), the same scale in every slice and case.
    Shapes or dtypes that disagree produce no pictures (the message says why). ``hover`` False
    leaves out the hover values (a page without heat.js).
    """
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.size == 0 or e.dtype != a.dtype:
        return []
    if e.ndim < 2:
        e, a = e.reshape(1, -1), a.reshape(1, -1)
    lead_shape, (h, w) = e.shape[:-2], e.shape[-2:]
    e2, a2 = e.reshape(-1, h, w), a.reshape(-1, h, w)
    tol = _tolerance_for(e.dtype, tolerance)
    if e.dtype.kind == "f":
        share = error_stats.element_errors(e2, a2, tol).share.reshape(e2.shape)
    else:
        d = abs_difference(e2, a2)
        share = np.where(d == 0, 0.0, d / tol.atol if tol.atol else np.inf)
    flat = share.reshape(len(share), -1)
    outside, worst = (flat > 1.0).sum(axis=1), flat.max(axis=1)
    order = [s for s in np.lexsort((-worst, -outside)) if worst[s] > 0][:limit] or [0]
    names = slice_labels(op, len(lead_shape) + 2)
    scale, extreme = display_scale(h, w), _extreme(e.dtype)
    pictures = [_picture(slice_label(names, lead_shape, s), e2[s].astype(np.float64), a2[s].astype(np.float64),
                         share[s], extreme, scale) for s in order]
    for p in pictures if not hover else ():
        p.hover = None
    return pictures


#: Colours of index pictures: same index (white), tie (green), mismatch (dark red).
INDEX_PALETTE = np.array([(255, 255, 255), (124, 196, 141), (160, 16, 16)], dtype=np.uint8)


@dataclass
class IndexSlicePicture:
    label: str
    uri: str
    mismatches: int
    ties: int
    shape: tuple[int, int]
    scale: int


def index_slices(op: str, codes: np.ndarray, limit: int = 4) -> list[IndexSlicePicture]:
    """Pictures of the ``limit`` slices of an index output with the most mismatches (then ties);
    ``codes`` holds 0 (same index), 1 (tie), 2 (mismatch) per element."""
    c = np.asarray(codes)
    if c.ndim < 2:
        c = c.reshape(1, -1)
    lead_shape = c.shape[:-2]
    h, w = c.shape[-2:]
    c2 = c.reshape(-1, h, w)
    mism = (c2 == 2).reshape(len(c2), -1).sum(axis=1)
    ties = (c2 == 1).reshape(len(c2), -1).sum(axis=1)
    order = [s for s in np.lexsort((-ties, -mism)) if mism[s] or ties[s]][:limit]
    names = slice_labels(op, len(lead_shape) + 2)
    scale = display_scale(h, w)
    out = []
    for s in order:
        label = slice_label(names, lead_shape, s)
        out.append(IndexSlicePicture(label, png_data_uri(INDEX_PALETTE[np.clip(c2[s], 0, 2)]), int(mism[s]),
                                     int(ties[s]), (int(h), int(w)), scale))
    return out
