import base64
import json
import struct
import zlib

import numpy as np
import pytest

from ep_testbed.harness.core.tolerances import Tolerance
from ep_testbed.reports import images


def _decode_png(data: bytes) -> np.ndarray:
    """Minimal decoder for the encoder's own format (8-bit RGB, filter 0), checking every CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + length
    w, h, depth, colour, _, _, _ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, colour) == (8, 2)
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 1 + 3 * w)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, 3)


def test_png_round_trips_pixels():
    rgb = np.random.default_rng(1).integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    assert np.array_equal(_decode_png(images.encode_png(rgb)), rgb)


def test_colorize_ends_and_non_finite():
    v = np.array([[0.0, 1.0, np.nan, np.inf]])
    rgb = images.colorize(v, 0.0, 1.0, images.VALUE_MAP)
    assert tuple(rgb[0, 0]) == tuple(images.VALUE_MAP[0].astype(np.uint8))
    assert tuple(rgb[0, 1]) == tuple(images.VALUE_MAP[-1].astype(np.uint8))
    assert tuple(rgb[0, 2]) == images.NON_FINITE_RGB == tuple(rgb[0, 3])


def test_abs_difference_treats_matching_non_finite_as_equal():
    e = np.array([1.0, np.nan, np.inf, 2.0, np.nan])
    a = np.array([1.5, np.nan, np.inf, np.nan, 3.0])
    assert images.abs_difference(e, a).tolist() == [0.5, 0.0, 0.0, np.inf, np.inf]


def _pixels(uri: str) -> np.ndarray:
    return _decode_png(base64.b64decode(uri.split(",", 1)[1]))


def test_worst_slices_rank_by_elements_outside_tolerance_and_name_roi_and_channel():
    """One element 1000x past its tolerance counts less than five elements just past it: a
    reader looks first where the most elements fail. Error-free slices are left out."""
    tol = Tolerance(atol=1e-3, rtol=0.0, ulp=None)
    e = np.zeros((3, 2, 4, 4), np.float32)
    a = e.copy()
    a[2, 1, 0, 0] = 1.0                     # share 1000
    a[0, 0, 0, :] = a[0, 0, 1, 0] = 2e-3    # five elements at share 2
    a[1, 1, 3, 3] = 5e-4                    # within tolerance: share 0.5
    pics = images.worst_slices("DML_OPERATOR_ROI_ALIGN1", e, a, limit=4, tolerance=tol)
    assert [p.label for p in pics] == ["ROI 0, channel 0", "ROI 2, channel 1", "ROI 1, channel 1"]
    assert [p.outside for p in pics] == [5, 1, 0]
    assert pics[1].max_share == pytest.approx(1000.0, rel=1e-12) and pics[1].max_diff == 1.0
    assert images.worst_slices("DML_OPERATOR_MAX_POOLING2", e, e)[0].label == "batch 0, channel 0"
    assert images.worst_slices("X", e, a[:2]) == []  # shapes disagree: no pictures


def test_error_pictures_are_on_one_absolute_scale_and_mark_cells_outside():
    """The same share of the tolerance has the same colour in every slice; a slice whose
    elements all pass has no colour of the outside family; each outside cell carries a dot."""
    tol = Tolerance(atol=1e-3, rtol=0.0, ulp=None)
    e = np.zeros((2, 1, 4, 4), np.float32)
    a = e.copy()
    a[0, 0, 1, 2] = 9e-4                     # share 0.9: within, the slice's largest error
    a[1, 0, 1, 2] = 9e-4
    a[1, 0, 3, 3] = 5e-2                     # share 50: outside
    within, mixed = sorted(images.worst_slices("DML_OPERATOR_ROI_ALIGN", e, a, tolerance=tol), key=lambda p: p.outside)
    cell = within.scale
    pw, pm = _pixels(within.diff_uri), _pixels(mixed.diff_uri)
    assert pw.shape == (4 * cell, 4 * cell, 3)
    same = lambda p, y, x: tuple(p[y * cell, x * cell])  # a cell's corner: its colour, not the dot  # noqa: E731
    assert same(pw, 1, 2) == same(pm, 1, 2) == tuple(images.share_colours(np.array([0.9])).ravel())
    assert all(int(px[0]) <= int(px[2]) for px in pw.reshape(-1, 3))  # only the white-to-blue family
    out = same(pm, 3, 3)
    assert out[0] > out[2]                                            # the red family
    centre = tuple(pm[3 * cell + cell // 2, 3 * cell + cell // 2])
    assert centre != out and centre in ((0, 0, 0), (255, 255, 255))   # the dot
    assert tuple(pm[1 * cell + cell // 2, 2 * cell + cell // 2]) == same(pm, 1, 2)  # no dot inside


def test_lowest_float_and_infinities_do_not_collapse_the_value_scale():
    lowest = np.finfo(np.float32).min
    e = np.array([[0.0, 0.5, 1.0, lowest]], np.float32).reshape(1, 1, 1, 4)
    a = np.array([[0.0, 0.5, 1.0, -np.inf]], np.float32).reshape(1, 1, 1, 4)
    (pic,) = images.worst_slices("DML_OPERATOR_MAX_POOLING2", e, a)
    assert pic.value_range == (0.0, 1.0) and pic.extremes == 2
    pe, pa = _pixels(pic.expected_uri), _pixels(pic.actual_uri)
    assert tuple(pe[0, 0]) == tuple(images.VALUE_MAP[0].astype(np.uint8))
    assert tuple(pe[0, 2]) == tuple(images.VALUE_MAP[-1].astype(np.uint8))
    assert tuple(pe[0, 3]) == tuple(pa[0, 3]) == images.LOW_RGB
    assert pic.outside == 1 and pic.max_share == np.inf               # -inf vs -FLT_MAX: a mismatch
    assert tuple(_pixels(pic.diff_uri)[0, 3 * pic.scale]) == images.NON_FINITE_RGB


def test_share_legend_ticks_and_axis_ticks():
    bar, ticks = images.share_legend()
    positions = [p for p, _ in ticks]
    assert positions == sorted(positions) and dict((label, p) for p, label in ticks)["1 = limit"] == 50.0
    assert bar.startswith("data:image/png;base64,")
    for n in (1, 4, 7, 12, 64, 1000):
        ticks = images.axis_ticks(n)
        idx = [i for i, _ in ticks]
        assert idx[0] == 0 and idx[-1] == n - 1 and len(idx) <= 7 and idx == sorted(set(idx))


def test_hover_values_round_trip_and_stop_for_big_slices():
    e = np.arange(12, dtype=np.float32).reshape(3, 4)
    data = json.loads(images.hover_json(e, e + 1, e / 10))
    values = np.frombuffer(base64.b64decode(data["a"]), "<f4").reshape(data["h"], data["w"])
    assert np.array_equal(values, e + 1)
    big = np.zeros((65, 64))
    assert images.hover_json(big, big, big) is None
