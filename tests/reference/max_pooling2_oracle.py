"""The MAX_POOLING2 kernel as it was before windows along a row were reduced in place, in blocks:
a frozen copy of ``reference/max_pooling2.py``'s ``max_pooling2`` (the whole padded input laid out
once by ``phase_layout``, a running maximum over every window offset, flat indices in int64 over
the whole output). Test-only: ``test_max_pooling2_oracle.py`` checks that the reference equals it
bit for bit (values, indices, under every reading). Do not edit it to follow the reference's
implementation; the exact second pass that a reading changes (``_resolve_exactly``,
``_resolve_in_mlas_order``) is imported from the reference, so a change of what a reading computes
is made once.
"""

from __future__ import annotations

import itertools
from typing import Any, cast

import numpy as np

from ep_testbed.reference.dtypes import numpy_dtype
from ep_testbed.reference.max_pooling2 import (
    PRIMARY,
    MaxPooling2Desc,
    Rules,
    _finite_lowest,
    _mlas_start,
    _resolve_exactly,
    _resolve_in_mlas_order,
)


def phase_layout(input_tensor: np.ndarray, desc: MaxPooling2Desc, lowest: np.ndarray) -> np.ndarray:
    """The padded input as ``(s_1..s_D, N, C, L_1..L_D)``: element ``(r, m)`` of spatial axis ``i``
    is padded position ``m * Strides[i] + r``, padding holding ``lowest``. Then the elements read
    at one window offset by all outputs are one dense slice (see ``offset_block``). Copied a block
    of the first spatial axis at a time (``LAYOUT_BLOCK_BYTES`` of input), every phase of a block
    before the next: each phase reads every ``Strides[i]``-th element, so phase after phase over
    the whole input read it from memory once per phase."""
    batch, channels, *spatial = input_tensor.shape
    dims = len(spatial)
    out = desc.output_tensor.sizes[2:]
    reach = [(out[i] - 1) * desc.strides[i] + (desc.window_size[i] - 1) * desc.dilations[i] + 1 for i in range(dims)]
    lengths = [-(-reach[i] // desc.strides[i]) for i in range(dims)]
    layout = np.full((*desc.strides, batch, channels, *lengths), lowest, dtype=lowest.dtype)
    row_bytes = batch * channels * int(np.prod(spatial[1:])) * input_tensor.itemsize * desc.strides[0]
    block = max(1, LAYOUT_BLOCK_BYTES // max(1, row_bytes))
    for top in range(0, lengths[0], block):
        for phase in itertools.product(*(range(s) for s in desc.strides)):
            target, source = [], []
            for i in range(dims):
                stride, start = desc.strides[i], desc.start_padding[i]
                first = max(0, -(-(start - phase[i]) // stride))                # first m reading the input
                last = min(lengths[i], -(-(start + spatial[i] - phase[i]) // stride))
                if i == 0:  # this block's part
                    first, last = max(first, top), min(last, top + block)
                if last <= first:
                    break
                column = first * stride + phase[i] - start                      # its input coordinate
                target.append(slice(first, last))
                source.append(slice(column, column + (last - first - 1) * stride + 1, stride))
            else:
                into: tuple[Any, ...] = (*phase, slice(None), slice(None), *target)  # named: mypy misreads *x in []
                read: tuple[Any, ...] = (slice(None), slice(None), *source)
                layout[into] = input_tensor[read]
    return layout


#: Bytes of input ``phase_layout`` copies at a time, all its phases: within a processor's cache.
LAYOUT_BLOCK_BYTES = 2**21


def offset_block(layout: np.ndarray, desc: MaxPooling2Desc, offset: tuple[int, ...]) -> np.ndarray:
    """``(N, C, O_1..O_D)``: the element every output reads at window ``offset``. Output ``o``
    reads padded position ``o * s + j * d = (o + (j * d) // s) * s + (j * d) % s``."""
    shifts = [offset[i] * desc.dilations[i] for i in range(len(offset))]
    out = desc.output_tensor.sizes[2:]
    phase = tuple(shift % stride for shift, stride in zip(shifts, desc.strides))
    blocks = tuple(slice(shift // stride, shift // stride + n) for shift, stride, n in zip(shifts, desc.strides, out))
    index: tuple[Any, ...] = (*phase, slice(None), slice(None), *blocks)  # named: mypy misreads *x in []
    return layout[index]


def max_pooling2(desc: MaxPooling2Desc, input_tensor: np.ndarray, rules: Rules = PRIMARY) -> dict[str, np.ndarray]:
    """``{"OutputTensor", ["OutputIndicesTensor"]}`` for a validated desc and matching array, under
    ``rules`` (a reading changes only how the windows the running maximum cannot settle are settled)."""
    batch, channels, *spatial = input_tensor.shape
    offsets = list(itertools.product(*(range(k) for k in desc.window_size)))  # row-major scan order
    # fp16 is compared as float32 (exact both ways; NumPy's fp16 arithmetic is slow).
    work_dtype = np.dtype(np.float32) if input_tensor.dtype == np.float16 else input_tensor.dtype
    lowest = np.array(-np.inf if np.issubdtype(work_dtype, np.floating) else np.iinfo(cast(Any, work_dtype)).min,
                      dtype=work_dtype)
    layout = phase_layout(input_tensor, desc, lowest)

    def view(offset: tuple[int, ...]) -> np.ndarray:
        return offset_block(layout, desc, offset)

    best = view(offsets[0]).copy()
    best_offset = np.zeros(best.shape, dtype=np.min_scalar_type(-len(offsets)))  # which offset holds the maximum
    greater = np.empty(best.shape, dtype=bool)
    step = np.empty(best.shape, dtype=best_offset.dtype)
    for k, offset in enumerate(offsets[1:], start=1):
        values = view(offset)
        np.greater(values, best, out=greater)
        np.maximum(best, values, out=best)
        # best_offset = where(greater, k, best_offset), as arithmetic (a masked store is ~10x slower)
        np.subtract(best_offset.dtype.type(k), best_offset, out=step)
        np.multiply(step, greater, out=step)
        np.add(best_offset, step, out=best_offset)

    # Not settled by the strict '>' scan: windows whose maximum is the padding value itself
    # (the first offset may be padding), and windows holding a NaN (np.maximum propagates it);
    # under a reading that starts from the type's lowest value, windows that reach no further.
    unresolved = best == lowest
    if rules.start != "first":
        unresolved |= best <= _finite_lowest(input_tensor.dtype)
    if np.issubdtype(best.dtype, np.floating) and np.isnan(input_tensor).any():
        unresolved |= _has_nan_in_window(view, offsets, best.shape)
    if rules.mlas:  # also where its start shows, and zeros, whose sign its order picks
        unresolved |= (best <= _mlas_start(work_dtype)) | (best == 0)
    unmatched = None
    if unresolved.any():
        if rules.mlas:
            unmatched = _resolve_in_mlas_order(view, offsets, desc, spatial, unresolved, best, best_offset)
        else:
            unmatched = _resolve_exactly(view, offsets, desc, spatial, unresolved, best, best_offset, rules,
                                         _finite_lowest(input_tensor.dtype))

    with np.errstate(over="ignore"):  # a float16 window the MLAS fold leaves at -FLT_MAX is -inf
        result = {"OutputTensor": best.astype(input_tensor.dtype, copy=False)}
    if desc.output_indices_tensor is not None:
        flat = _flat_indices(desc, spatial, offsets, best_offset, batch, channels)
        if unmatched is not None and rules.unmatched_index != "first":
            flat = np.where(unmatched, _unmatched(rules, spatial, batch, channels, len(spatial)), flat)
        result["OutputIndicesTensor"] = flat.astype(numpy_dtype(desc.output_indices_tensor.data_type), copy=False)
    return result


def _has_nan_in_window(view, offsets, shape) -> np.ndarray:
    seen = np.zeros(shape, dtype=bool)
    for offset in offsets:
        seen |= np.isnan(view(offset))
    return seen


def _flat_indices(desc: MaxPooling2Desc, spatial: list[int], offsets: list[tuple[int, ...]],
                  best_offset: np.ndarray, batch: int, channels: int) -> np.ndarray:
    """Flat row-major input index of each output's maximum (MP-3): the output's window origin,
    plus the position of its winning offset within the window, plus its (batch, channel) plane."""
    dims = len(spatial)
    row_strides = [int(np.prod(spatial[i + 1:])) for i in range(dims)]
    out = desc.output_tensor.sizes[2:]
    within = np.array([sum(j[i] * desc.dilations[i] * row_strides[i] for i in range(dims)) for j in offsets],
                      dtype=np.int64)
    origin = np.zeros(out, dtype=np.int64)
    for i in range(dims):
        shape = [1] * dims
        shape[i] = out[i]
        origin = origin + ((np.arange(out[i]) * desc.strides[i] - desc.start_padding[i]) * row_strides[i]).reshape(shape)
    planes = np.arange(batch * channels, dtype=np.int64).reshape(batch, channels, *([1] * dims)) * int(np.prod(spatial))
    index = np.take(within, best_offset)
    index += origin
    index += planes
    return index


def _unmatched(rules: Rules, spatial: list[int], batch: int, channels: int, dims: int) -> np.ndarray:
    """The index a window no element beat gets under ``rules.unmatched_index`` ("zero" or
    "minus-one"), broadcastable to the output: per (batch, channel) plane for "minus-one"."""
    if rules.unmatched_index == "zero":
        return np.zeros((1,) * (2 + dims), dtype=np.int64)
    row_strides = [int(np.prod(spatial[i + 1:])) for i in range(len(spatial))]
    planes = np.arange(batch * channels, dtype=np.int64).reshape(batch, channels, *([1] * dims)) * int(np.prod(spatial))
    return planes - sum(row_strides)
