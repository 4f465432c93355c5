"""The reference against an independent implementation: torchvision's own ``roi_align`` (aligned
True and False, fixed and adaptive sampling) and ``roi_pool`` C++ kernels.

Runs where torch and torchvision import (through ``tools/torchvision_loader.py``, which loads a
CUDA build of torchvision beside a CPU torch); skipped with the reason elsewhere: torch is
optional tooling, never a dependency. Every difference found is one of those DECISIONS.md lists
in its torchvision section (TV-1..TV-5), and each test below checks that the rows that differ
are exactly the rows that section predicts:

* ``roi_align`` runs in float64 (its kernel is a template over the input type), so what is
  compared is the two readings, not float32 rounding: the reference, rounded once to float32,
  is within half a float32 unit in the last place of torchvision's float64 result.
* ``roi_pool`` takes a max, exact in any type; it runs in float32 like the models that use it.

Where a CUDA GPU is present, torchvision's CUDA kernels are compared the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
try:
    from torchvision_loader import import_torchvision

    torchvision, _NOTE = import_torchvision()
    import torch
except ImportError as exc:  # torch is optional tooling
    pytest.skip(f"torch/torchvision do not import here ({exc}); e.g. python -m venv .venv-torch && "
                ".venv-torch/bin/pip install torch torchvision && .venv-torch/bin/pip install -e '.[test]'",
                allow_module_level=True)

from ep_testbed.reference import execute  # noqa: E402
from ep_testbed.reference.descs import Size2D, TensorDesc  # noqa: E402
from ep_testbed.reference.roi_align import RoiAlign1Desc  # noqa: E402
from ep_testbed.reference.roi_pooling import RoiPoolingDesc, round_half_away_from_zero  # noqa: E402

UINT32_MAX = 2**32 - 1
SHAPE = (2, 3, 11, 13)  # N, C, H, W
#: torchvision's CPU kernels everywhere; its CUDA kernels too where a GPU is present.
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _align_desc(rois: int, out: tuple[int, int], scale: float, sampling: int, aligned: bool) -> RoiAlign1Desc:
    """torchvision's roi_align as DML_ROI_ALIGN1 (TV-1): offset 0.5 when aligned, else 0."""
    n, c, _, _ = SHAPE
    return RoiAlign1Desc(
        input_tensor=TensorDesc("FLOAT32", SHAPE), roi_tensor=TensorDesc("FLOAT32", (rois, 4)),
        batch_indices_tensor=TensorDesc("UINT32", (rois,)), output_tensor=TensorDesc("FLOAT32", (rois, c, *out)),
        reduction_function="AVERAGE", interpolation_mode="LINEAR", spatial_scale_x=scale, spatial_scale_y=scale,
        input_pixel_offset=0.5 if aligned else 0.0, output_pixel_offset=-0.5, out_of_bounds_input_value=0.0,
        minimum_samples_per_output=sampling or 1, maximum_samples_per_output=sampling or UINT32_MAX,
        align_regions_to_corners=False)


def _regions(rng: np.random.Generator, count: int, scale: float) -> np.ndarray:
    """Regions in and around the input, with some under one pixel, some empty, some inverted."""
    _, _, h, w = SHAPE
    x1 = rng.uniform(-2, w + 1, count) / scale
    y1 = rng.uniform(-2, h + 1, count) / scale
    size = rng.choice([0.0, 0.3, 0.9, 2.5, 6.0, -1.5], size=(count, 2)) + rng.uniform(0, 0.2, (count, 2))
    return np.stack([x1, y1, x1 + size[:, 0] / scale, y1 + size[:, 1] / scale], axis=1).astype(np.float32)


def _torch_align(x: np.ndarray, rois: np.ndarray, batch: np.ndarray, out, scale, sampling, aligned,
                 device: str) -> np.ndarray:
    """torchvision's roi_align in float64 on ``device``."""
    boxes = np.concatenate([batch[:, None].astype(np.float64), rois.astype(np.float64)], axis=1)
    y = torchvision.ops.roi_align(torch.from_numpy(x.astype(np.float64)).to(device), torch.from_numpy(boxes).to(device),
                                  out, spatial_scale=scale, sampling_ratio=sampling, aligned=aligned)
    return y.cpu().numpy()


def _within_half_ulp(reference32: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per ROI row: every element of the float32 reference within half a float32 ulp (plus 1e-12
    for float64 summation order) of torchvision's float64 value."""
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    ok = np.abs(reference32.astype(np.float64) - exact) <= 0.5 * ulp + 1e-12
    return ok.reshape(ok.shape[0], -1).all(axis=1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "legacy"])
@pytest.mark.parametrize("sampling", [0, 1, 2, 3], ids=lambda s: f"sampling{s}")
def test_roi_align_equals_torchvision_except_where_decisions_say(aligned, sampling, device):
    rng = np.random.default_rng(100 * sampling + aligned)
    x = rng.uniform(-4, 4, SHAPE).astype(np.float32)
    for scale, out in ((1.0, (3, 4)), (0.5, (2, 2)), (0.25, (5, 3)), (0.125, (7, 7))):
        rois = _regions(rng, 24, scale)
        batch = rng.integers(0, SHAPE[0], len(rois))
        desc = _align_desc(len(rois), out, scale, sampling, aligned)
        reference = execute(desc, {"InputTensor": x, "ROITensor": rois,
                                   "BatchIndicesTensor": batch.astype(np.uint32)})["OutputTensor"]
        theirs = _torch_align(x, rois, batch, out, scale, sampling, aligned, device)
        same = _within_half_ulp(reference, theirs)
        sizes = (rois[:, 2:].astype(np.float64) - rois[:, :2]) * np.float64(np.float32(scale))
        if not aligned:
            # TV-2: the legacy mode raises a region under one pixel to 1x1 (its start kept)
            raised = rois.astype(np.float64).copy()
            raised[:, 2:] = raised[:, :2] + np.maximum(sizes, 1.0) / np.float64(np.float32(scale))
            clamped = execute(desc, {"InputTensor": x, "ROITensor": raised.astype(np.float32),
                                     "BatchIndicesTensor": batch.astype(np.uint32)})["OutputTensor"]
            small = (sizes < 1).any(axis=1)
            assert small.any()
            # the raised end is rounded to float32: compare to float32 accuracy there
            near = np.isclose(clamped, theirs, rtol=1e-5, atol=1e-5).reshape(len(rois), -1).all(axis=1)
            assert near[small].all(), np.flatnonzero(small & ~near)
            assert same[~small].all(), np.flatnonzero(~small & ~same)
        elif sampling == 0:
            # TV-3: adaptive sampling of an empty or inverted region: torchvision's grid
            # ceil(size / output) <= 0 takes no sample (output 0), the page's clamp takes one
            empty = (sizes <= 0).any(axis=1)
            assert empty.any() and (theirs[empty] == 0).all()
            assert same[~empty].all(), np.flatnonzero(~empty & ~same)
            assert not same[empty & (np.abs(reference).reshape(len(rois), -1).max(axis=1) > 0)].any()
        else:
            assert same.all(), np.flatnonzero(~same)  # fixed sampling: inverted regions mirror alike


def _torchvision_bins(start: int, end: int, pooled: int, limit: int) -> list[tuple[int, int]]:
    """torchvision's roi_pool bins along one axis, as its CPU kernel computes them
    (torchvision/csrc/ops/cpu/roi_pool_kernel.cpp: float32 bin size, floor/ceil, clipped)."""
    size = max(end - start + 1, 1)
    bin_size = np.float32(size) / np.float32(pooled)
    bins = []
    for p in range(pooled):
        lo = int(np.floor(np.float32(p) * bin_size)) + start
        hi = int(np.ceil(np.float32(p + 1) * bin_size)) + start
        bins.append((min(max(lo, 0), limit), min(max(hi, 0), limit)))
    return bins


def _page_bins(start: int, end: int, pooled: int, limit: int) -> list[tuple[int, int]]:
    """The page's integer bins (RP-2), clipped (RP-4)."""
    size = end - start + 1
    return [(min(max(p * size // pooled + start, 0), limit), min(max(((p + 1) * size + pooled - 1) // pooled + start,
                                                                      0), limit)) for p in range(pooled)]


@pytest.mark.parametrize("device", DEVICES)
def test_roi_pool_equals_torchvision_where_their_bins_agree(device):
    rng = np.random.default_rng(7)
    x = rng.uniform(-4, 4, SHAPE).astype(np.float32)
    _, _, h, w = SHAPE
    for scale, out in ((1.0, (3, 4)), (0.5, (2, 3)), (0.25, (5, 3)), (1.0, (11, 7)), (2.0, (6, 9))):
        x1 = rng.uniform(-1, w, 40) / scale
        y1 = rng.uniform(-1, h, 40) / scale
        x2 = x1 + rng.uniform(0, w + 3, 40) / scale  # TV-5: x2 >= x1 (the page refuses the rest)
        y2 = y1 + rng.uniform(0, h + 3, 40) / scale
        batch = rng.integers(0, SHAPE[0], 40).astype(np.float32)
        rois = np.stack([batch, x1, y1, x2, y2], axis=1).astype(np.float32)
        reference, theirs = _pool_both(x, rois, out, scale, device)
        for r, roi in enumerate(rois):
            if _same_bins(roi, scale, out, (h, w)):  # TV-4: same bins, so the same maxima, exactly
                np.testing.assert_array_equal(reference[r], theirs[r], err_msg=f"row {r} of scale {scale}")


@pytest.mark.parametrize("device", DEVICES)
def test_roi_pool_differs_from_torchvision_exactly_where_its_float_bins_end_one_later(device):
    """TV-4 (RP-2's example): a region 29 rows high pooled to 11 rows. torchvision's float32 bin
    size 29/11 times 11 is 29.0000007, whose ceil ends the last bin one row later than the
    page's integer division; with the larger values in that extra row only the last output row differs."""
    x = np.zeros((1, 2, 40, 40), np.float32)
    x[0, :, 29, :] = 5.0  # the row only torchvision's last bin reaches
    x[0, :, :29, :] = np.random.default_rng(3).uniform(-1, 1, (2, 29, 40)).astype(np.float32)
    rois = np.array([[0, 0, 0, 9, 28]], np.float32)  # rows 0..28: RegionHeight 29
    assert not _same_bins(rois[0], 1.0, (11, 2), (40, 40))
    reference, theirs = _pool_both(x, rois, (11, 2), 1.0, device)
    np.testing.assert_array_equal(reference[0, :, :10], theirs[0, :, :10])
    assert (theirs[0, :, 10] == 5.0).all() and (reference[0, :, 10] < 1.0).all()


def _pool_both(x: np.ndarray, rois: np.ndarray, out: tuple[int, int], scale: float,
               device: str) -> tuple[np.ndarray, np.ndarray]:
    """``(reference, torchvision on device)`` ROI pooling of ``x`` over rows ``[batch, x1, y1, x2, y2]``."""
    n, c, h, w = x.shape
    desc = RoiPoolingDesc(input_tensor=TensorDesc("FLOAT32", x.shape),
                          roi_tensor=TensorDesc("FLOAT32", (1, 1, len(rois), 5)),
                          output_tensor=TensorDesc("FLOAT32", (len(rois), c, *out)), spatial_scale=scale,
                          pooled_size=Size2D(width=out[1], height=out[0]))
    reference = execute(desc, {"InputTensor": x, "ROITensor": rois.reshape(1, 1, -1, 5)})["OutputTensor"]
    theirs = torchvision.ops.roi_pool(torch.from_numpy(x).to(device), torch.from_numpy(rois).to(device), out,
                                      scale).cpu().numpy()
    return reference, theirs


def _same_bins(roi: np.ndarray, scale: float, out: tuple[int, int], size: tuple[int, int]) -> bool:
    """Whether torchvision's float bins and the page's integer bins of this region coincide."""
    x_lo, y_lo, x_hi, y_hi = (int(v) for v in round_half_away_from_zero(
        (roi[1:].astype(np.float32) * np.float32(scale)).astype(np.float64)))
    return (_torchvision_bins(y_lo, y_hi, out[0], size[0]) == _page_bins(y_lo, y_hi, out[0], size[0])
            and _torchvision_bins(x_lo, x_hi, out[1], size[1]) == _page_bins(x_lo, x_hi, out[1], size[1]))
