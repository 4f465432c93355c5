"""Faults planted in the reference, one at a time: the oracle's own test (DECISIONS.md READ-1).

A verdict is worth what the reference behind it is worth. Each ``Mutant`` replaces one function of
the reference (wherever a module holds it: ``plant``) with a plausible wrong reading of one field:
window bounds, rounding, sample counts and spacing, weights, offsets, scale axes, padding side,
dilations, NaN and infinity rules, the out-of-bounds value, the index base, the accumulation type.
A run of the catalog (and a fixed fuzz sample) with expectations on must fail at least one case
under every mutant that is not equivalent (``tests/mutation/test_mutation.py``,
``tools/mutation_test.py``): a known divergence is proven by readings of the same kernel, so a
fault of the kernel cannot hide in ``known``. A mutant that makes an EP's own reading primary (ties
rounded away from zero, the closed sampling range) is caught on that EP by the strict expectation
pinning a catalog case where the reading shows: the case passes, and is reported ``fixed``.
``equivalent_on`` names the EPs on which a mutant cannot show at all, with the reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ep_testbed.reference import max_pooling2 as mp
from ep_testbed.reference import registry
from ep_testbed.reference import roi_align as ra
from ep_testbed.reference import roi_pooling as rp


@dataclass(frozen=True)
class Mutant:
    """One planted fault: ``op`` the operator it affects, ``kind`` what it gets wrong, ``target``
    the reference function replaced and ``make(original)`` its replacement."""

    name: str
    op: str
    kind: str
    target: Callable[..., Any]
    make: Callable[[Callable[..., Any]], Callable[..., Any]]
    note: str
    #: ``(source, -k selection)`` of a few cases that catch it (the suite runs only those; the full
    #: catalog and fuzz sample are tools/mutation_test.py's)
    witness: tuple[str, str] = ("catalog", "")
    equivalent_on: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def planted(mutant: Mutant) -> Iterator[None]:
    """The reference with ``mutant`` planted in this process: its target replaced in every
    ``ep_testbed`` module that holds it (a module that imported it by name included) and in every
    operator record that names it, restored after."""
    original = mutant.target
    replacement = mutant.make(original)
    changed = []
    for module in list(sys.modules.values()):
        if module is None or not getattr(module, "__name__", "").startswith("ep_testbed."):
            continue
        for name, value in list(vars(module).items()):
            if value is original:
                setattr(module, name, replacement)
                changed.append((module, name))
    records = [spec for spec in registry.specs() if original in (spec.execute, spec.bounded, spec.validate)]
    for spec in records:
        fields = {f: replacement for f in ("execute", "bounded", "validate") if getattr(spec, f) is original}
        registry.register(dataclasses.replace(spec, **fields))
    try:
        yield
    finally:
        for module, name in changed:
            setattr(module, name, original)
        for spec in records:
            registry.register(spec)


def _wrap_desc(transform: Callable[[Any], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A replacement calling the original with the desc (first argument) transformed."""
    def make(original):
        def mutated(desc, *args, **kwargs):
            return original(transform(desc), *args, **kwargs)
        return mutated
    return make


def _swap_padding(d):
    return dataclasses.replace(d, start_padding=d.end_padding, end_padding=d.start_padding)


def _swap_scales(d):
    return dataclasses.replace(d, spatial_scale_x=d.spatial_scale_y, spatial_scale_y=d.spatial_scale_x)


def _no_input_offset(d):
    return dataclasses.replace(d, input_pixel_offset=0.0) if hasattr(d, "input_pixel_offset") else d


def _flipped_output_offset(d):
    return dataclasses.replace(d, output_pixel_offset=-d.output_pixel_offset) if hasattr(d, "output_pixel_offset") else d


def _half_away(original):
    return lambda x, rules=rp.PRIMARY: rp.round_half_away_from_zero(x)


def _float64_scale(original):
    def scaled_regions(rois, spatial_scale, rules=rp.PRIMARY):
        wide = rois.astype(np.float32).astype(np.float64) * float(np.float32(spatial_scale))
        return rp.integers(rp.round_corner(wide, rules))
    return scaled_regions


def _no_dilations(d):
    return dataclasses.replace(d, dilations=(1,) * len(d.dilations))


def _strides_reversed(d):
    return dataclasses.replace(d, strides=tuple(reversed(d.strides)))


def _window_reversed(d):
    return dataclasses.replace(d, window_size=tuple(reversed(d.window_size)))


def _rp_rows(transform):
    """A replacement of ROI_POOLING's ``kernel_input`` reading ``transform(rows)`` for its ROI rows."""
    def make(original):
        def kernel_input(desc, input_tensor, roi_tensor, rules=rp.PRIMARY):
            return original(desc, input_tensor, transform(roi_tensor.reshape(-1, 5)).reshape(roi_tensor.shape), rules)
        return kernel_input
    return make


def _ra_inputs(rows=lambda r: r, batch=lambda b: b):
    """A replacement of ROI_ALIGN's ``kernel_input`` reading ``rows(rois)`` and ``batch(indices)``."""
    def make(original):
        def kernel_input(desc, input_tensor, roi_tensor, batch_indices_tensor, rules=ra.PRIMARY):
            return original(desc, input_tensor, rows(roi_tensor), batch(batch_indices_tensor), rules)
        return kernel_input
    return make


def _first_batch(b):
    return np.zeros_like(b)


def _rp_first_batch(rows):
    return np.concatenate([np.zeros_like(rows[:, :1]), rows[:, 1:]], axis=1)


def _rp_xy_swapped(rows):
    return rows[:, [0, 2, 1, 4, 3]]


def _ra_xy_swapped(rois):
    return rois[..., [1, 0, 3, 2]]


def _no_maximum(original):
    def count(ratio, minimum, maximum, rules=ra.PRIMARY):
        return original(ratio, minimum, max(maximum, 2**20), rules)
    return count


def _padding_zero(original):
    return lambda input_tensor, desc, lowest: original(input_tensor, desc, np.zeros_like(lowest))


def _empty_bins_lowest(original):
    def pool(plane, corners, pooled_h, pooled_w, maximum, out, rules=rp.PRIMARY):
        out[...] = np.finfo(out.dtype).min if out.dtype.kind == "f" else np.iinfo(out.dtype).min
        original(plane, corners, pooled_h, pooled_w, maximum, out, rules)
    return pool


def _corners_ignored(original):
    def coordinates(start, size, output, samples, ipo, opo, corners, kind=np.float64):
        return original(start, size, output, samples, ipo, opo, False, kind)
    return coordinates


def _outside_reads_zero(original):
    return lambda plane, out_of_bounds, rules, kind: original(plane, 0.0, rules, kind)


def _region_desc(transform):
    """A replacement of ROI_ALIGN's ``region_samples`` reading the desc as ``transform`` makes it."""
    def make(original):
        def samples(d, row, roi, rules=ra.PRIMARY):
            return original(transform(d), row, roi, rules)
        return samples
    return make


def _input_offset_added(d):
    return dataclasses.replace(d, input_pixel_offset=-d.input_pixel_offset)


def _scale_x_for_both(d):
    return dataclasses.replace(d, spatial_scale_y=d.spatial_scale_x)


def _corners_clamped_first(original):
    def pool(plane, corners, pooled_h, pooled_w, maximum, out, rules=rp.PRIMARY):
        height, width = plane.shape[:2]
        x1, y1, x2, y2 = corners
        clamped = (min(max(x1, 0), width - 1), min(max(y1, 0), height - 1), min(max(x2, 0), width - 1),
                   min(max(y2, 0), height - 1))
        original(plane, clamped, pooled_h, pooled_w, maximum, out, rules)
    return pool


def _index_padded(original):
    def flat(desc, spatial, offsets, best_offset, dtype):
        wide = original(desc, spatial, offsets, best_offset, np.dtype(np.int64))
        plane, within = np.divmod(wide, int(np.prod(spatial)))
        padded = tuple(n + a + b for n, a, b in zip(spatial, desc.start_padding, desc.end_padding))
        position = tuple(p + a for p, a in zip(np.unravel_index(within, tuple(spatial)), desc.start_padding))
        return (plane * int(np.prod(padded)) + np.ravel_multi_index(position, padded)).astype(dtype)
    return flat


def _region_one_smaller(original):
    return lambda index, size, pooled, origin, limit, rules=rp.PRIMARY: original(index, max(size - 1, 1), pooled,
                                                                                   origin, limit, rules)


def _bin_end_plus_one(original):
    def bounds(index, size, pooled, origin, limit, rules=rp.PRIMARY):
        start, end = original(index, size, pooled, origin, limit, rules)
        return start, min(end + 1, limit)
    return bounds


def _nan_always_maximum(original):
    return lambda input_tensor: np.maximum


def _no_nan_windows(original):
    return lambda view, offsets, shape: np.zeros(shape, dtype=bool)


def _index_plus_one(original):
    return lambda *args: original(*args) + 1


def _index_without_plane(original):
    def flat(desc, spatial, offsets, best_offset, dtype):
        wide = original(desc, spatial, offsets, best_offset, np.dtype(np.int64))
        return (wide % int(np.prod(spatial))).astype(dtype)
    return flat


def _index_column_major(original):
    def flat(desc, spatial, offsets, best_offset, dtype):
        wide = original(desc, spatial, offsets, best_offset, np.dtype(np.int64))
        plane, within = np.divmod(wide, int(np.prod(spatial)))
        position = np.unravel_index(within, tuple(spatial))
        return (plane * int(np.prod(spatial)) + np.ravel_multi_index(position, tuple(spatial), order="F")).astype(dtype)
    return flat


def _edge_blends_zero(original):
    def samples(plane, ys, xs, mode, rules=ra.PRIMARY):
        if mode != "LINEAR" or rules.interpolation != "lerp":
            return original(plane, ys, xs, mode, rules)
        return original(np.pad(plane, ((1, 1), (1, 1), (0, 0))), ys + 1, xs + 1, mode, rules)
    return samples


def _lowest_start_windows(original):
    def pool(desc, input_tensor, rules=mp.PRIMARY):
        return original(desc, input_tensor, mp.Rules(start="lowest") if rules == mp.PRIMARY else rules)
    return pool


def _lerp_weights_swapped(original):
    def taps(coords, size):
        low, high, t = original(coords, size)
        return low, high, 1.0 - t
    return taps


def _weights_swapped(original):
    def taps(coords, size):
        low, high, w_low, w_high = original(coords, size)
        return low, high, w_high, w_low
    return taps


def _count_floor(original):
    def count(ratio, minimum, maximum, rules=ra.PRIMARY):
        return original(float(math.floor(ratio)), minimum, maximum, rules)
    return count


def _count_without_minimum(original):
    def count(ratio, minimum, maximum, rules=ra.PRIMARY):
        return original(ratio, 0, maximum, rules) if minimum != maximum else original(ratio, minimum, maximum, rules)
    return count


def _spacing_minus_one(original):
    def coordinates(start, size, output, samples, ipo, opo, corners, *kind):
        if corners or output * samples < 2:
            return original(start, size, output, samples, ipo, opo, corners, *kind)
        return original(start, size * output * samples / (output * samples - 1), output, samples, ipo, opo, corners,
                        *kind)
    return coordinates


def _oob_zero_in_average(original):
    return lambda plane, ys, xs, n_y, n_x, out_of_bounds, rules=ra.PRIMARY, into=None: original(
        plane, ys, xs, n_y, n_x, 0.0, rules, into)


def _no_sample_zero(original):
    return lambda d, channels: np.zeros_like(original(d, channels))


def _nearest_rounds_down(original):
    def samples(plane, ys, xs, mode, rules=ra.PRIMARY):
        if mode == "NEAREST_NEIGHBOR":
            return original(plane, ys - 0.5, xs - 0.5, mode, rules)
        return original(plane, ys, xs, mode, rules)
    return samples


def _max_propagates_nan(original):
    def reduce(grid, rules, lowest):
        return original(grid, dataclasses.replace(rules, max_nan="propagate"), lowest)
    return reduce


def _closed_edge(original):
    return lambda coords, size, rules=ra.PRIMARY: original(coords, size, dataclasses.replace(rules, edge="closed"))


def _lerp_as_weighted(original):
    def samples(plane, ys, xs, mode, rules=ra.PRIMARY):
        if rules.interpolation == "lerp":
            rules = dataclasses.replace(rules, interpolation="weighted")
        return original(plane, ys, xs, mode, rules)
    return samples


def _float32_accumulation(original):
    def kernel_input(desc, x, rois, batch, rules=ra.PRIMARY):
        return original(desc, x, rois, batch, dataclasses.replace(rules, arithmetic="float32"))
    return kernel_input



MUTANTS: tuple[Mutant, ...] = (
    Mutant("rp-round-half-away", "roi_pooling", "rounding", rp.round_corner, _half_away,
           "halfway corners rounded away from zero", ("catalog", "edge-rounding-ties")),
    Mutant("rp-scale-float64", "roi_pooling", "accumulation type", rp.scaled_regions, _float64_scale,
           "Roi * SpatialScale multiplied in float64, not float32", ("catalog", "edge-float32-product-ties"),
           {ep: "the outputs round each region's float32 product (scaled_region), so only the bounds' knife-edge "
                "candidates take the float64 one; they differ where the product lies within its float32 rounding of a "
                "half (DECISIONS.md FP-3), and there the fault drops one alternative corner: a rule stricter by one "
                "element of edge-float32-product-ties, whose EP values lie on the other corner here; the bounds oracle "
                "test catches it (tests/mutation/test_mutation.py::"
                "test_a_fault_only_knife_edges_show_is_caught_by_the_bounds_oracle)" for ep in ("cpu", "dml-wine", "openvino")}),
    Mutant("rp-batch-ignored", "roi_pooling", "index base", rp.kernel_input, _rp_rows(_rp_first_batch),
           "every region pooled from the first batch item", witness=("catalog", "large-batch")),
    Mutant("rp-corners-xy-swapped", "roi_pooling", "scale axes", rp.kernel_input, _rp_rows(_rp_xy_swapped),
           "ROI corners read as [y1, x1, y2, x2]", witness=("catalog", "edge-outside-partly")),
    Mutant("rp-empty-bins-lowest", "roi_pooling", "out-of-bounds value", rp.pool_region, _empty_bins_lowest,
           "an empty bin gives the lowest value instead of 0", witness=("catalog", "empty-bins")),
    Mutant("rp-corners-clamped-first", "roi_pooling", "window bounds", rp.pool_region, _corners_clamped_first,
           "region corners clamped to the input before its bins are laid out", witness=("catalog", "outside-partly")),
    Mutant("rp-region-one-smaller", "roi_pooling", "window bounds", rp.bin_bounds, _region_one_smaller,
           "RegionHeight = y2 - y1 (no + 1)", witness=("catalog", "grid-fp32-scale1-pool1x1")),
    Mutant("rp-bin-end-plus-one", "roi_pooling", "window bounds", rp.bin_bounds, _bin_end_plus_one,
           "bin ends inclusive (one row past)", witness=("catalog", "grid-fp32-scale0.5-pool2x2")),
    Mutant("rp-nan-propagates", "roi_pooling", "NaN rule", rp.bin_maximum, _nan_always_maximum,
           "a NaN in a bin wins its max", ("catalog", "edge-nan-inf"),
           {"cpu": "ONNX Runtime's MaxRoiPool folds every bin holding a NaN with std::max (the std-max-fold reading, "
                   "which reproduces it element for element), so no NaN rule of the primary reading shows on the CPU "
                   "EP; DirectML, which skips NaN as the page's max does, catches it (roi_pooling/edge-nan-inf)"}),
    Mutant("mp-padding-sides-swapped", "max_pooling2", "padding side", mp.max_pooling2, _wrap_desc(_swap_padding),
           "StartPadding and EndPadding swapped", witness=("catalog", "grid-float32-3d-w3-s3-p0_2")),
    Mutant("mp-dilations-ignored", "max_pooling2", "window bounds", mp.max_pooling2, _wrap_desc(_no_dilations),
           "Dilations read as 1", witness=("catalog", "grid-float32-3d-w2-s2-p1_1-d2-idxuint32")),
    Mutant("mp-strides-reversed", "max_pooling2", "scale axes", mp.max_pooling2, _wrap_desc(_strides_reversed),
           "Strides applied to the spatial axes in reverse order", witness=("catalog", "every-field-per-axis")),
    Mutant("mp-window-reversed", "max_pooling2", "scale axes", mp.max_pooling2, _wrap_desc(_window_reversed),
           "WindowSize applied to the spatial axes in reverse order", witness=("catalog", "every-field-per-axis")),
    Mutant("mp-padding-zero", "max_pooling2", "padding side", mp.phase_layout, _padding_zero,
           "padding reads 0 instead of taking no part in the max", witness=("catalog", "p1")),
    Mutant("mp-nan-propagates", "max_pooling2", "NaN rule", mp._has_nan_in_window, _no_nan_windows,
           "a NaN in a window wins its max", witness=("catalog", "edge-nan-inf")),
    Mutant("mp-index-base-one", "max_pooling2", "index base", mp._flat_indices, _index_plus_one,
           "indices one-based", witness=("catalog", "grid-float32-3d-w2-s2-p1_1")),
    Mutant("mp-index-without-plane", "max_pooling2", "index base", mp._flat_indices, _index_without_plane,
           "indices within the (batch, channel) plane, not the whole tensor", witness=("catalog", "grid-float32-3d-w2-s2-p1_1")),
    Mutant("mp-index-column-major", "max_pooling2", "index base", mp._flat_indices, _index_column_major,
           "indices of the spatial position in column-major order", witness=("catalog", "grid-float32-3d-w2-s2-p1_1")),
    Mutant("mp-index-padded", "max_pooling2", "index base", mp._flat_indices, _index_padded,
           "indices counted in the padded input", witness=("catalog", "grid-float32-3d-w2-s2-p1_1")),
    Mutant("mp-lowest-start", "max_pooling2", "infinity rule", mp.max_pooling2, _lowest_start_windows,
           "windows start from the lowest finite value (-FLT_MAX for a window of -inf)",
           ("catalog", "edge-minus-inf-window")),
    Mutant("ra-lerp-weights-swapped", "roi_align", "weights", ra.lerp_taps, _lerp_weights_swapped,
           "LINEAR interpolates with 1 - t where t belongs", witness=("catalog", "edge-whole-image-max")),
    Mutant("ra-weights-swapped", "roi_align", "weights", ra.edge_taps, _weights_swapped,
           "the separable AVERAGE's LINEAR weights swapped", witness=("catalog", "grid-avg-linear-fp32-scale0.5x0.5-oob0-n1")),
    Mutant("ra-count-floor", "roi_align", "sample counts", ra.samples_for_ratio, _count_floor,
           "adaptive sample count rounded down", witness=("catalog", "grid-max-linear-fp32-scale1x0.5-oob0-n1-4")),
    Mutant("ra-count-without-minimum", "roi_align", "sample counts", ra.samples_for_ratio, _count_without_minimum,
           "an adaptive count not clamped to MinimumSamplesPerOutput (an empty region takes no sample)", witness=("catalog", "edge-empty-region-adaptive")),
    Mutant("ra-spacing-minus-one", "roi_align", "sample spacing", ra.sample_coordinates, _spacing_minus_one,
           "samples spread over size / (N - 1) as if aligned to corners", witness=("catalog", "grid-avg-linear-fp32-scale0.5x0.5-oob0-n1")),
    Mutant("ra-output-offset-sign", "roi_align", "offsets", ra.region_samples, _wrap_desc(_flipped_output_offset),
           "OutputPixelOffset added instead of subtracted", witness=("catalog", "grid-avg-linear-fp32-scale0.5x0.5-oob0-n1")),
    Mutant("ra-input-offset-ignored", "roi_align", "offsets", ra.region_samples, _wrap_desc(_no_input_offset),
           "InputPixelOffset ignored", witness=("catalog", "grid-avg-linear-fp32-scale0.5x0.5-oob0-n1")),
    Mutant("ra-batch-ignored", "roi_align", "index base", ra.kernel_input, _ra_inputs(batch=_first_batch),
           "BatchIndicesTensor ignored: every region sampled from the first batch item",
           witness=("catalog", "grid-avg-linear-fp32-scale0.5x0.5-oob0-n1-roi2d-biuint32-1d")),
    Mutant("ra-corners-xy-swapped", "roi_align", "scale axes", ra.kernel_input, _ra_inputs(rows=_ra_xy_swapped),
           "ROI corners read as [y1, x1, y2, x2]",
           witness=("catalog", "grid-avg-linear-fp32-scale0.5x0.5-oob0-n1-roi2d-biuint32-1d")),
    Mutant("ra-count-without-maximum", "roi_align", "sample counts", ra.samples_for_ratio, _no_maximum,
           "MaximumSamplesPerOutput ignored", witness=("catalog", "grid-avg-linear-fp32-scale0.5x0.5-oob0-n1-roi2d-biuint32-1d")),
    Mutant("ra-scale-axes-swapped", "roi_align", "scale axes", ra.region_samples, _wrap_desc(_swap_scales),
           "SpatialScaleX used for Y and SpatialScaleY for X", witness=("catalog", "grid-max-linear-fp32-scale0.25x1-oob0-n3")),
    Mutant("ra-oob-ignored-in-average", "roi_align", "out-of-bounds value", ra.average_linear, _oob_zero_in_average,
           "OutOfBoundsInputValue ignored in the AVERAGE path (a sample outside reads 0)", witness=("catalog", "oob1.5")),
    Mutant("ra-no-sample-reads-zero", "roi_align", "out-of-bounds value", ra.no_sample_value, _no_sample_zero,
           "an element the onnx count gives no sample is 0, not OutOfBoundsInputValue",
           witness=("catalog", "edge-empty-region-adaptive-oob"),
           equivalent_on={"dml-wine": "the DirectML EP builds an adaptive count of at least one sample "
                                      "(directml-ep-adaptive-count), so no element goes without a sample there and "
                                      "the onnx count's empty region never shows"}),
    Mutant("ra-nearest-rounds-down", "roi_align", "rounding", ra.clamped_samples, _nearest_rounds_down,
           "NEAREST_NEIGHBOR takes floor(c) instead of floor(c + 0.5)", ("catalog", "nearest"),
           {ep: "ONNX's RoiAlign has no nearest-neighbour mode: every NEAREST_NEIGHBOR case is inexpressible and no EP "
                "runs it; the reference's own hand-worked case catches it "
                "(tests/reference/test_roi_align.py::test_nearest_neighbor_hand_worked)" for ep in ("cpu", "dml-wine")}),
    Mutant("ra-max-nan-propagates", "roi_align", "NaN rule", ra.sample_max, _max_propagates_nan,
           "a NaN sample wins a MAX", witness=("catalog", "edge-nan-max"),
           equivalent_on={"cpu": "ONNX Runtime's CPU EP computes a composed MAX through MLAS's MaxPool, whose fold "
                                 "(the mlas-x86-fold reading) replaces the primary reading's NaN rule and reproduces "
                                 "it element for element, so no NaN rule of the primary reading shows on the CPU EP; "
                                 "DirectML, which skips NaN as the page's max does, catches it"}),
    Mutant("ra-edge-blends-zero", "roi_align", "out-of-bounds value", ra.clamped_samples, _edge_blends_zero,
           "a sample in (-1, 0) or (size - 1, size) blends its edge pixel with 0 instead of reading it twice",
           ("catalog", "grid-max-linear-fp32-scale0.25x1-oob0-n3-roi4d-biuint32-3d")),
    Mutant("ra-corners-ignored", "roi_align", "sample spacing", ra.sample_coordinates, _corners_ignored,
           "AlignRegionsToCorners ignored",
           witness=("catalog", "grid-avg-linear-fp32-scale0.25x0.5-offset0.25-outm0.25-oob1.5-n3-corners-roi4d-biuint64-3d")),
    Mutant("ra-outside-reads-zero", "roi_align", "out-of-bounds value", ra.outside_value, _outside_reads_zero,
           "a sample outside the input reads 0, whatever OutOfBoundsInputValue says",
           witness=("catalog", "roi_align/random-s0-002")),
    Mutant("ra-input-offset-added", "roi_align", "offsets", ra.region_samples, _region_desc(_input_offset_added),
           "InputPixelOffset added to the sample coordinates instead of subtracted",
           witness=("catalog", "roi_align1/grid-avg-linear-fp32-scale0.5x0.5-offset0.25")),
    Mutant("ra-scale-x-for-both", "roi_align", "scale axes", ra.region_samples, _region_desc(_scale_x_for_both),
           "SpatialScaleX used for both axes", witness=("catalog", "grid-max-linear-fp32-scale0.25x1-oob0-n3")),
    Mutant("ra-closed-edge", "roi_align", "window bounds", ra.reads_input, _closed_edge,
           "a sample exactly at -1 or at the size reads the input",
           ("catalog", "grid-avg-linear-fp32-scale1x0.5-oob0-n1-max")),
    Mutant("ra-lerp-as-weighted", "roi_align", "infinity rule", ra.clamped_samples, _lerp_as_weighted,
           "LINEAR as a weighted sum (an infinite tap stays infinite)",
           ("catalog", "edge-nan-inf")),
    Mutant("ra-float32-accumulation", "roi_align", "accumulation type", ra.kernel_input, _float32_accumulation,
           "samples and their sum in float32", witness=("catalog", "edge-near-flt-max")),
)


def named(name: str) -> Mutant:
    """The mutant called ``name``."""
    return next(m for m in MUTANTS if m.name == name)
