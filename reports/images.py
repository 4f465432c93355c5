"""Heatmap pictures as tiny inline PNGs, written with the standard library alone.

Why PNG and not SVG: a heatmap is a grid of coloured cells.  As SVG each cell is a ``<rect>``
(~60 bytes), so a 64x64 slice is ~250 KB of markup per picture and a report with a few hundred
pictures gets slow to open.  As PNG the same slice is one pixel per cell, zlib-compressed (a few
hundred bytes), and the browser scales it up with ``image-rendering: pixelated`` so every element
stays a crisp square.  PNG needs only ``zlib`` and ``struct`` (below, ~20 lines), so there is no
Pillow or matplotlib dependency to install on a GPU CI runner.  Exact values are not read off
colours anyway: the worst-elements table next to the pictures gives coordinates and numbers.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass

import numpy as np

# Anchor colours (sRGB) interpolated linearly.  VALUE_MAP is viridis (perceptually uniform, readable
# in grey and by most colour-blind readers); ERROR_MAP goes from white (no error) through yellow
# and orange to dark red (worst), so a zero-error slice is visibly blank.
VALUE_MAP = np.array([
    (68, 1, 84), (72, 40, 120), (62, 74, 137), (49, 104, 142), (38, 130, 142),
    (31, 158, 137), (53, 183, 121), (110, 206, 88), (181, 222, 43), (253, 231, 37),
], dtype=np.float64)
ERROR_MAP = np.array([
    (255, 255, 255), (255, 237, 160), (254, 178, 76), (240, 59, 32), (128, 0, 38),
], dtype=np.float64)
#: Colour of NaN and +-Inf cells in every picture.
NON_FINITE_RGB = (255, 0, 255)


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
    return "data:image/png;base64," + base64.b64encode(encode_png(rgb)).decode("ascii")


def colorize(values: np.ndarray, lo: float, hi: float, colormap: np.ndarray) -> np.ndarray:
    """Map a 2-D float array onto ``colormap`` between ``lo`` and ``hi``; non-finite cells magenta."""
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    span = hi - lo
    t = np.zeros(v.shape) if not span > 0 else np.clip((np.where(finite, v, lo) - lo) / span, 0.0, 1.0)
    pos = t * (len(colormap) - 1)
    i = np.minimum(pos.astype(np.int64), len(colormap) - 2)
    frac = (pos - i)[..., None]
    rgb = colormap[i] * (1.0 - frac) + colormap[i + 1] * frac
    rgb[~finite] = NON_FINITE_RGB
    return np.rint(rgb).astype(np.uint8)


def legend_uri(colormap: np.ndarray, width: int = 96) -> str:
    """A horizontal colour bar for the legend."""
    ramp = np.linspace(0.0, 1.0, width)[None, :].repeat(6, axis=0)
    return png_data_uri(colorize(ramp, 0.0, 1.0, colormap))


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


@dataclass
class SlicePictures:
    """Expected, actual and |difference| pictures of one 2-D slice of an output."""

    label: str
    expected_uri: str
    actual_uri: str
    diff_uri: str
    value_range: tuple[float, float]
    max_diff: float
    shape: tuple[int, int]
    scale: int


def slice_label(names: list[str], lead_shape: tuple[int, ...], index: int) -> str:
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


def worst_slices(op: str, expected: np.ndarray, actual: np.ndarray, limit: int = 4) -> list[SlicePictures]:
    """Pictures of the ``limit`` 2-D slices with the largest |difference|, worst first.

    The last two axes are the picture; every other axis indexes a slice (for (N|ROI, C, H, W)
    outputs, one ROI/batch and one channel).  Expected and actual share one value scale so equal
    colours mean equal values.  Shapes that disagree produce no pictures (the message says why).
    """
    e = np.asarray(expected)
    a = np.asarray(actual)
    if e.shape != a.shape or e.size == 0:
        return []
    if e.ndim < 2:
        e, a = e.reshape(1, -1), a.reshape(1, -1)
    lead_shape = e.shape[:-2]
    h, w = e.shape[-2:]
    e2 = e.reshape(-1, h, w).astype(np.float64)
    a2 = a.reshape(-1, h, w).astype(np.float64)
    diff = abs_difference(e2, a2)
    per_slice = diff.reshape(diff.shape[0], -1).max(axis=1)
    order = np.argsort(-per_slice, kind="stable")[:limit]
    # Slices without error add nothing but scrolling; keep one so a reader sees the output at all.
    order = [s for s in order if per_slice[s] > 0] or list(order[:1])
    names = slice_labels(op, len(lead_shape) + 2)
    scale = display_scale(h, w)
    pictures = []
    for s in order:
        label = slice_label(names, lead_shape, s)
        both = np.concatenate([e2[s][np.isfinite(e2[s])], a2[s][np.isfinite(a2[s])]])
        lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 0.0)
        dmax = float(per_slice[s])
        finite_d = diff[s][np.isfinite(diff[s])]
        dhi = float(finite_d.max()) if finite_d.size else 0.0
        pictures.append(SlicePictures(
            label=label,
            expected_uri=png_data_uri(colorize(e2[s], lo, hi, VALUE_MAP)),
            actual_uri=png_data_uri(colorize(a2[s], lo, hi, VALUE_MAP)),
            diff_uri=png_data_uri(colorize(diff[s], 0.0, dhi, ERROR_MAP)),
            value_range=(lo, hi), max_diff=dmax, shape=(int(h), int(w)), scale=scale,
        ))
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
