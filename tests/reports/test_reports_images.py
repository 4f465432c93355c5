import struct
import zlib

import numpy as np

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


def test_worst_slices_orders_by_error_and_names_roi_and_channel():
    e = np.zeros((3, 2, 4, 4), np.float32)
    a = e.copy()
    a[2, 1, 0, 0] = 5.0
    a[0, 0, 3, 3] = 1.0
    pics = images.worst_slices("DML_OPERATOR_ROI_ALIGN1", e, a, limit=4)
    assert [p.label for p in pics] == ["ROI 2, channel 1", "ROI 0, channel 0"]  # error-free slices left out
    assert pics[0].max_diff == 5.0
    diff = _decode_png(__import__("base64").b64decode(pics[0].diff_uri.split(",", 1)[1]))
    assert diff.shape == (4, 4, 3)
    assert tuple(diff[0, 0]) == tuple(images.ERROR_MAP[-1].astype(np.uint8))  # the worst cell is darkest
    assert tuple(diff[1, 1]) == (255, 255, 255)  # no error: white
    assert images.worst_slices("DML_OPERATOR_MAX_POOLING2", e, e)[0].label == "batch 0, channel 0"
    assert images.worst_slices("X", e, a[:2]) == []  # shapes disagree: no pictures
