"""A sample-count knife edge under a reading offers the reading's output at the other count
(DECISIONS.md FP-3, READ-1).

The region spans x = 0 to 36 at SpatialScaleX 1/3 over 6 output columns: the exact ratio is
2.00000006 (1/3 is no float32), so the exact count is 3 and a float32 kernel may take 2. Beside a
run of -inf pixels every LINEAR sample near a cell edge is a knife edge too, which makes the
element's range be read from its sample values: under ``corner-term-max`` those must be the largest
weighted corner terms the reading folds, not the interpolated samples, or the range at count 2 is
the interpolated MAX and misses the reading's own output there (the fuzzed case
roi_align/fuzz-s2-b0-006, where ONNX Runtime's mode=max took 2 samples).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from descs_for_tests import roi_align1
from test_bounds import tensors

from ep_testbed.reference import execute_reading
from ep_testbed.reference.roi_align import Rules, kernel_input, region_samples, region_value, sample_coordinates

#: One channel of that fuzzed case's input (FLOAT16 values): a run of -inf on the second row.
PLANE = np.array([[16.625, -15.375, -14.875, -5.125, 5.75, -18.75, -9.875, 16.125, 19.875, 1.0, 10.5, -10.125],
                  [-13.625, -9.375, 5.375, 14.5, -1.875, -18.125, 20.25, -np.inf, -np.inf, -np.inf, -np.inf,
                   -np.inf]], dtype=np.float16)
ROIS = np.array([[0.0, 0.0, 36.0, 8.0]], dtype=np.float16)
ADAPTIVE = (1, 4294967295)


def _desc():
    x = PLANE.reshape(1, 1, *PLANE.shape)
    desc = roi_align1(x.shape, ROIS.shape, (4, 6), dtype="FLOAT16", reduction="MAX", scale=(1 / 3, 0.25),
                      samples=ADAPTIVE)
    return desc, x


def _at_count(desc, x, rules: Rules, n_x: int) -> np.ndarray:
    """The reading's region at ``n_x`` samples per output along X (the Y count unchanged), rounded
    to the output type: the kernel's own computation with the other count's sample coordinates."""
    p = kernel_input(desc, x, ROIS, np.zeros(1, np.uint32), rules)
    ys, _, n_y, exact_x = region_samples(p.desc, 0, p.rois[0], rules)
    assert exact_x == 3 and n_x != exact_x
    x1, _, x2, _ = (float(v) for v in p.rois[0])
    scale = float(np.float32(p.desc.spatial_scale_x))
    xs = sample_coordinates(x1 * scale, x2 * scale - x1 * scale, 6, n_x, float(np.float32(p.desc.input_pixel_offset)),
                            float(np.float32(p.desc.output_pixel_offset)), False)
    return region_value(p, 0, ys, xs, n_y, n_x).astype(np.float16)[..., 0]


def _within(expected, value: np.ndarray) -> np.ndarray:
    """Where ``value`` (OutputHeight, OutputWidth) lies within the bound of the element's knife-edge
    range, or is NaN where an alternative may be."""
    low, high = (a[0, 0].astype(np.float64) for a in expected.alternatives["OutputTensor"])
    bound = expected.bounds["OutputTensor"][0, 0].astype(np.float64)
    v = value.astype(np.float64)
    with np.errstate(invalid="ignore"):
        inside = (low - bound <= v) & (v <= high + bound)
    nan = expected.nan_alternatives.get("OutputTensor")
    return inside | (np.isnan(v) & (nan[0, 0] if nan is not None else False))


def test_the_x_count_is_a_knife_edge_between_3_and_2():
    desc, x = _desc()
    expected = execute_reading(desc, tensors(x, ROIS), ["corner-term-max"], "fp32")
    found = [k for k in expected.knife_edges if "samples per output along X" in k.decision]
    assert found and found[0].exact == "3" and found[0].alternative.startswith("2"), [k.text() for k in found]


def test_corner_term_max_alternatives_hold_its_own_output_at_the_other_count():
    desc, x = _desc()
    rules = dataclasses.replace(Rules(), max_of="corner-terms")
    expected = execute_reading(desc, tensors(x, ROIS), ["corner-term-max"], "fp32")
    other = _at_count(desc, x, rules, 2)
    value = expected.outputs["OutputTensor"][0, 0].astype(np.float64)
    bound = expected.bounds["OutputTensor"][0, 0].astype(np.float64)
    # the other count changes some element beyond the exact one's bound: the alternative matters
    with np.errstate(invalid="ignore"):  # -inf at both counts
        assert (np.abs(other.astype(np.float64) - value) > bound).any()
    missing = np.argwhere(~_within(expected, other))
    assert missing.size == 0, [(tuple(i), float(other[tuple(i)]), float(value[tuple(i)])) for i in missing]


def test_combined_readings_offer_the_combination_at_the_other_count():
    """``weighted-interpolation+corner-term-max`` too (the combination ``explain`` tries)."""
    desc, x = _desc()
    rules = dataclasses.replace(Rules(), max_of="corner-terms", interpolation="weighted")
    expected = execute_reading(desc, tensors(x, ROIS), ["weighted-interpolation", "corner-term-max"], "fp32")
    other = _at_count(desc, x, rules, 2)
    assert _within(expected, other).all()
