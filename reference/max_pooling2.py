"""DML_MAX_POOLING2_OPERATOR_DESC: the maximum of a sliding window, and where it was found.

The page, in order:

* InputTensor is ``{Batch, Channel, [Depth,] Height, Width}``; the window slides over the
  ``DimensionCount`` spatial dimensions with ``Strides``, ``WindowSize``, ``Dilations``, after
  ``StartPadding`` / ``EndPadding`` elements of padding.
* OutputTensor sizes: ``(PaddedSize - WindowSize) / Strides + 1`` per spatial dimension, read
  with the dilated window ``(WindowSize - 1) * Dilations + 1`` (DECISIONS.md MP-1;
  ``output_sizes``).
* OutputIndicesTensor: zero-based indices into InputTensor "as a contiguous one-dimensional
  array" (batch and channel included, logical row-major order of ``Sizes``: MP-3), the first
  maximum encountered winning ties (scan order: row-major over the window, MP-4).

Padding elements are never selected (MP-2); validation refuses windows that would see only
padding. Every data type of the page's tables is computed exactly (a max only selects). NaN
elements lose to numbers; an all-NaN window gives NaN at its first element (NAN-1).

How: the padded input is laid out once so that, for every window offset, the elements all
outputs read at that offset form one dense block (``phase_layout``). The window is then visited
one offset at a time in row-major order: a running maximum over all outputs at once records an
offset only where a value is strictly greater, which is "the first value encountered" by
construction; padding holds the lowest value of the type and so can never be strictly greater.
Windows whose maximum is that lowest value itself (all -inf, all INT_MIN) or that hold a NaN
are settled by a second, exact pass over just those windows. An integer window that is a run of
64 bytes or more of adjacent elements of one row, beside the next window (``along_rows``: the
stress tier's int8 shapes of up to 2^32 - 1 elements), is instead reduced in place, a block of rows at a time on several threads
(``scan_rows``): its maximum, then its first element equal to it, which is the same answer
without a copy of the input. Flat indices are computed a block at a time in the index type. The
simple form (every window gathered, then reduced) is kept in
``tests/reference/simple_max_pooling2.py`` as the oracle this one must equal bit for bit, and
the kernel before row scans in ``tests/reference/max_pooling2_oracle.py``.

``Rules`` holds the choices other kernels make otherwise (defaults: the primary reading) and
``READINGS`` names each departure (``reference/readings.py``); a reading changes only the exact
second pass (``_resolve_exactly``, or ``_resolve_in_mlas_order`` for MLAS's order of folding) and
which windows go to it: every other window's maximum is the running maximum's, the same code as
the primary reading's.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Sequence, cast

import numpy as np

from .checks import TypeTable, check_tensor, expect_sizes, max_loop, max_work, same_type, within_cap
from .descs import Desc, TensorDesc, dml_field, member_value
from .dtypes import NUMPY_DTYPES, numpy_dtype, random_values
from .errors import DescError
from .readings import check_rules, holds, reading
from .workers import usable_cpus

PAGE = "https://learn.microsoft.com/windows/win32/api/directml/ns-directml-dml_max_pooling2_operator_desc"


@dataclass(frozen=True)
class MaxPooling2Desc(Desc):
    """``DML_MAX_POOLING2_OPERATOR_DESC`` (DML_FEATURE_LEVEL_2_1)."""

    TYPE: ClassVar[str] = "DML_OPERATOR_MAX_POOLING2"
    FEATURE_LEVEL: ClassVar[str] = "2.1"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor",)
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor", "OutputIndicesTensor")

    input_tensor: TensorDesc = dml_field("InputTensor")
    output_tensor: TensorDesc = dml_field("OutputTensor")
    output_indices_tensor: Optional[TensorDesc] = dml_field("OutputIndicesTensor")
    dimension_count: int = dml_field("DimensionCount")
    strides: tuple[int, ...] = dml_field("Strides")
    window_size: tuple[int, ...] = dml_field("WindowSize")
    start_padding: tuple[int, ...] = dml_field("StartPadding")
    end_padding: tuple[int, ...] = dml_field("EndPadding")
    dilations: tuple[int, ...] = dml_field("Dilations")


_ALL_TYPES = tuple(NUMPY_DTYPES)

#: [(feature level, {tensor member: allowed data types})], newest first: the page's tables.
TENSOR_SUPPORT: tuple[tuple[str, TypeTable], ...] = (
    ("5.0", {"InputTensor": _ALL_TYPES, "OutputTensor": _ALL_TYPES, "OutputIndicesTensor": ("UINT64", "UINT32")}),
    ("3.0", {"InputTensor": ("FLOAT32", "FLOAT16", "INT8", "UINT8"),
             "OutputTensor": ("FLOAT32", "FLOAT16", "INT8", "UINT8"), "OutputIndicesTensor": ("UINT32",)}),
    ("2.1", {"InputTensor": ("FLOAT32", "FLOAT16"), "OutputTensor": ("FLOAT32", "FLOAT16"),
             "OutputIndicesTensor": ("UINT32",)}),
)

#: Index output -> (the value output it locates, the input it indexes, flat over the whole tensor).
INDEX_OUTPUTS = {"OutputIndicesTensor": ("OutputTensor", "InputTensor")}
_WINDOW_FIELDS = ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations")


@dataclass(frozen=True)
class Rules:
    """How the kernel reads "the maximum value across the elements within the sliding window"
    where kernels differ (defaults: the primary reading, MP-4, MP-8, NAN-1).

    ``start``: the max is the largest element, the first one winning ties ("first"), or starts from
    the lowest finite value of the type and takes an element only when strictly greater ("lowest":
    a window of only -inf, or of the type's lowest value, keeps that start), or starts from -inf
    likewise ("minus-inf": a window of only NaN gives -inf). ``unmatched_index``: with
    ``start="lowest"``, the index of a window no element beat: its first element ("first"), the
    position of coordinate -1 on every spatial axis of its (batch, channel) plane ("minus-one":
    ``plane * plane_size - sum of the row strides``, -Width - 1 in 2-D, cast to the index type, as
    a kernel whose per-axis indices start at -1 computes it) or 0, the tensor's first element ("zero"). ``nan``: a NaN loses to any number unless the whole
    window is NaN ("ignore"), wins when it is the window's first element ("first-wins"), or wins
    wherever it is ("propagate", at the first NaN). ``start`` and ``nan`` both "mlas-x86": the
    window folded in the order and with the two max instructions of ONNX Runtime's float32 MLAS
    pooling on x86-64 (``mlas_x86_fold``), which decides where a max starts and whether a NaN wins
    together, so a reading that sets either otherwise cannot hold with it; the index is the element
    that fold selected."""

    start: str = "first"
    unmatched_index: str = "first"
    nan: str = "ignore"

    @property
    def mlas(self) -> bool:
        """Whether the window folds as MLAS does on x86-64 (``start`` and ``nan`` "mlas-x86")."""
        return self.start == "mlas-x86"


PRIMARY = Rules()
RULE_VALUES = {"start": ("first", "lowest", "minus-inf", "mlas-x86"), "unmatched_index": ("first", "minus-one", "zero"),
               "nan": ("ignore", "first-wins", "propagate", "mlas-x86")}
def _minus_inf_or_nan(desc: "MaxPooling2Desc", arrays: Any) -> bool:
    """The input holds -inf or NaN: a window of only those starts and ends otherwise."""
    return holds(arrays, "-inf", "nan")


def _lowest_value(desc: "MaxPooling2Desc", arrays: Any) -> bool:
    """The input holds its type's lowest value (or -inf, or NaN): where an index of -1 can show."""
    x = np.asarray(arrays["InputTensor"])
    low = (np.finfo(x.dtype) if x.dtype.kind == "f" else np.iinfo(x.dtype)).min
    return bool((x == low).any()) or _minus_inf_or_nan(desc, arrays)


def _nan(desc: "MaxPooling2Desc", arrays: Any) -> bool:
    """The input holds a NaN."""
    return holds(arrays, "nan")


def _mlas_pool(desc: "MaxPooling2Desc", arrays: Any) -> bool:
    """ONNX Runtime's CPU EP pools this desc with MLAS (a float32 or float16 MaxPool without the
    Indices output and without dilations: pool.cc, ``MaxPoolV8::ComputeImpl``; float16 runs as
    float32 between Casts on x86-64), and the input holds NaN or -inf, where its fold differs."""
    return (desc.output_indices_tensor is None and all(d == 1 for d in desc.dilations)
            and desc.input_tensor.data_type in ("FLOAT32", "FLOAT16") and holds(arrays, "nan", "-inf"))


_ORT = "https://github.com/microsoft/onnxruntime/blob/v1.28.0/onnxruntime/core/providers/cpu/nn/pool_functors.h"
_ORT_MAIN = "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/providers/cpu/nn/pool_functors.h"
_MLAS_POOLING = ("https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/mlas/lib/pooling.cpp "
                 "(MlasPool, MlasPool2DVectorKernel, MlasPool3DVectorKernel, MlasPoolGlobalKernel, "
                 "MLAS_MAXIMUM_POOLING); onnxruntime/core/mlas/lib/mlasi.h (MlasMaximumFloat32x4 = _mm_max_ps, "
                 "MlasReduceMaximumFloat32x4); tests/reference/test_readings.py::"
                 "test_onnxruntime_maxpool_without_indices_is_its_reading")
#: The departures from the primary reading that kernels are known to compute (DECISIONS.md MP-*, NAN-1).
READINGS = (
    reading("lowest-start", "every window starts from the lowest finite value of the type and takes an element only "
            "when it is greater, so a window of only -inf (or NaN and -inf) gives -FLT_MAX (float16: -65504) at its "
            "first element", ("DirectML.dll 1.15.4 (observed under Wine)", "oneDNN's max pooling (the OpenVINO EP)",
                              "ONNX Runtime's WebGPU MaxPool shader", "ONNX Runtime's MaxPool without Indices, some shapes"),
            "tests/eps/test_dml_wine_observed.py; https://github.com/uxlfoundation/oneDNN/blob/"
            "7fb96fc1bb8129e29bbfb730067e6034b5d991cf/src/cpu/nhwc_pooling.cpp#L133-L146", shows=_minus_inf_or_nan,
            start="lowest"),
    reading("lowest-start-index-minus-one", "every window starts from the lowest value of the type with index -1 and "
            "takes an element only when it is greater: a window of only -inf gives -FLT_MAX, and a window whose elements "
            "all equal the lowest value (int8 -128, -FLT_MAX, -inf) keeps its per-axis indices at -1: the flat index "
            "of its plane's row -1, column -1 (-Width - 1 in the first plane)",
            ("ONNX Runtime's MaxPool before 1.29 (MaxPool1DTask/2D/3D)",), _ORT, shows=_lowest_value, start="lowest",
            unmatched_index="minus-one"),
    reading("lowest-start-index-zero", "every window starts from the lowest value of the type and takes an element "
            "only when it is greater; a window no element beat (its maximum is the lowest value: -FLT_MAX, uint8 0, "
            "-inf) gets index 0, the tensor's first element, while its value is right",
            ("the OpenVINO EP's MaxPool Indices (onnxruntime-openvino 1.24.1, observed)",),
            "tests/corpus/max_pooling2_corpus-openvino-*", shows=_lowest_value, start="lowest", unmatched_index="zero"),
    reading("minus-inf-start", "every window starts from -inf and takes an element only when it is greater: a window "
            "of only NaN gives -inf at its first element", ("ONNX Runtime's float16 MaxPool (MLAS)",),
            "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/mlas/lib/pooling_fp16.cpp",
            shows=_nan, start="minus-inf"),
    reading("nan-first-wins", "a NaN that is the first element of its window is the window's max, with its index; a "
            "NaN later in the window is ignored", ("ONNX Runtime's MaxPool with Indices, from 1.29",), _ORT_MAIN,
            shows=_nan, nan="first-wins"),
    reading("nan-propagates", "a window that holds a NaN has the max NaN, at its first NaN",
            ("ONNX Runtime's MaxPool without Indices (MLAS), on some windows",), _ORT_MAIN, shows=_nan,
            nan="propagate"),
    reading("mlas-x86-fold", "each window folds as ONNX Runtime's float32 MLAS pooling does on x86-64: a 2-D or "
            "3-D window whose last stride is at most 2 and whose sides are at most 32 is reduced down each column, "
            "then across the columns with _mm_max_ps, which returns its second operand when either is NaN (columns "
            "past the input's last whole group of four fold down with std::max, which keeps a NaN it holds and drops "
            "a new one; padding columns hold -FLT_MAX); a window covering the whole input (strides 1, no padding) "
            "folds in four lanes from -FLT_MAX; any other starts from -FLT_MAX and skips NaN. So a NaN wins or loses "
            "by its position, and a window of only NaN or -inf can give -FLT_MAX (float16: -inf)",
            ("ONNX Runtime's CPU MaxPool without Indices, float32 and float16, on x86-64 (measured on 1.23.2, "
             "1.24.4, 1.32.0; ARM's vmaxq_f32 propagates NaN: another fold)",), _MLAS_POOLING,
            shows=_mlas_pool, start="mlas-x86", nan="mlas-x86"),
)


def output_sizes(input_sizes: tuple[int, ...], window_size, strides, start_padding, end_padding,
                 dilations) -> tuple[int, ...]:
    """The page's output-size formula, with the *dilated* window (see DECISIONS.md, MP-1).

    Returns sizes that may be < 1 when the window does not fit; ``validate_desc`` refuses those.
    """
    out = list(input_sizes[:2])
    for i in range(len(window_size)):
        padded = input_sizes[i + 2] + start_padding[i] + end_padding[i]
        dilated_window = (window_size[i] - 1) * dilations[i] + 1
        out.append((padded - dilated_window) // strides[i] + 1)
    return tuple(out)


def validate_desc(d: MaxPooling2Desc, types: TypeTable) -> None:
    """The page's rules for the desc's fields (the registry's ``validate``)."""
    op = d.TYPE
    check_tensor(op, "InputTensor", d.input_tensor, types, [4, 5])
    check_tensor(op, "OutputTensor", d.output_tensor, types, [4, 5])
    same_type(op, {"InputTensor": d.input_tensor, "OutputTensor": d.output_tensor})
    rank = d.input_tensor.dimension_count
    if d.output_tensor.dimension_count != rank:
        raise DescError("OutputTensor.Sizes", list(d.output_tensor.sizes),
                        f"must have the same DimensionCount as InputTensor ({rank})", op)
    if d.dimension_count != rank - 2:
        raise DescError("DimensionCount", d.dimension_count,
                        f"must be {rank - 2}: 2 for a 4-D InputTensor, 3 for a 5-D one", op)
    _check_window_fields(d)
    expected = output_sizes(d.input_tensor.sizes, d.window_size, d.strides, d.start_padding, d.end_padding,
                            d.dilations)
    for i in range(d.dimension_count):
        _check_axis(d, i, expected[i + 2])
    _check_cost(d, expected)
    expect_sizes(op, "OutputTensor", d.output_tensor.sizes, expected,
                 "the page's formula: (PaddedSize - dilated WindowSize) / Strides + 1")
    if d.output_indices_tensor is not None:
        check_tensor(op, "OutputIndicesTensor", d.output_indices_tensor, types, [4, 5])
        expect_sizes(op, "OutputIndicesTensor", d.output_indices_tensor.sizes, d.output_tensor.sizes,
                     "OutputTensor and OutputIndicesTensor have the same sizes")
        if d.output_indices_tensor.data_type == "UINT32" and d.input_tensor.element_count > 2**32:
            raise DescError("OutputIndicesTensor.DataType", "UINT32",
                            f"cannot index an InputTensor of {d.input_tensor.element_count} elements; use UINT64", op)


def _check_window_fields(d: MaxPooling2Desc) -> None:
    """Each window field holds DimensionCount values; Strides, WindowSize, Dilations are >= 1."""
    for member in _WINDOW_FIELDS:
        values = member_value(d, member)
        if len(values) != d.dimension_count:
            raise DescError(member, list(values), f"must hold DimensionCount ({d.dimension_count}) values", d.TYPE)
        if member in ("Strides", "WindowSize", "Dilations"):
            for i, v in enumerate(values):
                if v < 1:
                    raise DescError(f"{member}[{i}]", v, "must be at least 1", d.TYPE)


def _check_cost(d: MaxPooling2Desc, out: tuple[int, ...]) -> None:
    """The reference's limits (``checks.within_cap``), before any array exists: the padded
    layout ``phase_layout`` builds, the window offsets and stride phases it loops over, and the
    work of one pass per offset over every output."""
    op, n, c = d.TYPE, out[0], out[1]
    spatial = out[2:]
    reach = [(spatial[i] - 1) * d.strides[i] + (d.window_size[i] - 1) * d.dilations[i] + 1
             for i in range(d.dimension_count)]
    layout = n * c * math.prod(-(-reach[i] // d.strides[i]) * d.strides[i] for i in range(d.dimension_count))
    window = math.prod(d.window_size)
    within_cap(op, "Strides", list(d.strides), math.prod(d.strides), "loop iterations (one per stride phase)",
               max_loop())
    within_cap(op, "WindowSize", list(d.window_size), window, "loop iterations (one per window offset)", max_loop())
    within_cap(op, "WindowSize/Dilations/Strides", [list(d.window_size), list(d.dilations), list(d.strides)],
               layout, "elements for the padded input the windows read")
    within_cap(op, "WindowSize", list(d.window_size), window * math.prod(out), "element-steps (window offsets x "
               "output elements)", max_work())


def _check_axis(d: MaxPooling2Desc, i: int, out: int) -> None:
    """Spatial axis ``i``: the dilated window fits the padded input, and every window sees an
    input element (the page defines no value for a window of padding only)."""
    size, window, dilation = d.input_tensor.sizes[i + 2], d.window_size[i], d.dilations[i]
    if out < 1:
        padded = size + d.start_padding[i] + d.end_padding[i]
        raise DescError(f"WindowSize[{i}]", window, f"the dilated window ({(window - 1) * dilation + 1}) must fit in "
                        f"the padded input ({padded}) along spatial dimension {i}", d.TYPE)
    empty = first_window_without_input(size, out, window, d.strides[i], d.start_padding[i], dilation)
    if empty is not None:
        raise DescError(f"StartPadding[{i}]/EndPadding[{i}]", (d.start_padding[i], d.end_padding[i]),
                        f"output position {empty} along spatial dimension {i} would see only padding "
                        f"(WindowSize {window}, Dilations {dilation}); the page defines no value for such a "
                        "window, so the padding must leave every window an input element", d.TYPE)


def first_window_without_input(size: int, out: int, window: int, stride: int, start: int,
                               dilation: int) -> int | None:
    """The first output position along one axis whose window reads only padding, or None.

    Arithmetic, not a scan over the outputs (their count can be 2**32): output ``o`` reads
    positions ``o*stride - start + j*dilation``, ``j < window``. A window misses the input when
    it ends left of it, starts right of it, or (``dilation > size``) straddles it with every
    step jumping over it: then its first position at or past 0 is ``(o*stride - start) mod
    dilation``, which must be ``>= size`` (``_first_in_residues`` finds the first such ``o``)."""
    span = (window - 1) * dilation
    first_reaching = max(0, -(-(start - span) // stride))         # first o whose last position is >= 0
    if first_reaching > 0:
        return 0 if out > 0 else None
    past_end = -(-(size + start) // stride)                       # first o whose first position is >= size
    candidates = [past_end] if past_end < out else []
    straddling_end = min(-(-start // stride), past_end, out)      # o below this start left of the input
    if dilation > size and straddling_end > 0:
        found = _first_in_residues(stride, -start, dilation, size, dilation - 1, straddling_end)
        if found is not None:
            candidates.append(found)
    return min(candidates) if candidates else None


def _first_in_residues(a: int, b: int, m: int, low: int, high: int, count: int) -> int | None:
    """The least ``x`` in ``[0, count)`` with ``low <= (a*x + b) mod m <= high`` (``0 <= low <=
    high < m``), or None: ``(a*x) mod m`` must fall in the interval shifted by ``-b``, which
    may wrap around ``m`` and is then two intervals."""
    lo, hi = (low - b) % m, (high - b) % m
    pieces = [(lo, hi)] if lo <= hi else [(lo, m - 1), (0, hi)]
    found = [x for x in (_least_multiple_in(a % m, m, p, q) for p, q in pieces) if x is not None and x < count]
    return min(found) if found else None


def _least_multiple_in(a: int, m: int, low: int, high: int) -> int | None:
    """The least ``x >= 0`` with ``low <= (a*x) mod m <= high`` (``0 <= low <= high < m``,
    ``0 <= a < m``), or None. Euclid-like: when no multiple of ``a`` lands in the interval
    before the first wrap, the wraps ``y`` solve the same problem for ``(m mod a, a)``; each
    step at least halves the modulus, so this takes O(log m) steps."""
    if low == 0:
        return 0
    if a == 0:
        return None
    x = -(-low // a)
    if a * x <= high:
        return x
    y = _least_multiple_in(m % a, a, (-high) % a, (-low) % a)
    if y is None:
        return None
    return -(-(m * y + low) // a)


def window_coordinates(size: int, out: int, window: int, stride: int, start_padding: int,
                       dilation: int) -> tuple[np.ndarray, np.ndarray]:
    """Input coordinates ``(window, out)``: where window offset ``j`` of output ``o`` reads
    along one axis, and whether that lies inside the input (padding does not)."""
    coords = np.arange(window)[:, None] * dilation + (np.arange(out)[None, :] * stride - start_padding)
    return coords, (coords >= 0) & (coords < size)


def window_contains(desc: MaxPooling2Desc, output_positions: np.ndarray, input_indices: np.ndarray) -> np.ndarray:
    """Whether each flat input index lies in the window of the output at the same flat position
    (same batch and channel, and on the window's dilated grid, padding excluded). Lets a
    comparison tell a tie (another element of the window equal to its maximum) from an index
    that points at an equal value elsewhere."""
    in_sizes, out_sizes = desc.input_tensor.sizes, desc.output_tensor.sizes
    index = np.asarray(input_indices).astype(np.int64)
    inside = (index >= 0) & (index < desc.input_tensor.element_count)
    o = np.unravel_index(np.asarray(output_positions, dtype=np.int64), out_sizes)
    i = np.unravel_index(np.where(inside, index, 0), in_sizes)
    ok = inside & (o[0] == i[0]) & (o[1] == i[1])
    for axis in range(desc.dimension_count):
        offset = i[axis + 2] - (o[axis + 2] * desc.strides[axis] - desc.start_padding[axis])
        ok &= (offset >= 0) & (offset % desc.dilations[axis] == 0) & \
              (offset // desc.dilations[axis] < desc.window_size[axis])
    return ok


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


def execute_desc(desc: MaxPooling2Desc, tensors: dict[str, np.ndarray],
                 rules: Rules = PRIMARY) -> dict[str, np.ndarray]:
    """The registry's ``execute``: ``max_pooling2`` on arrays keyed by DML member name (under
    ``rules``: a reading, ``reference/readings.py``)."""
    check_rules(rules, RULE_VALUES, desc.TYPE)
    if (rules.start == "mlas-x86") != (rules.nan == "mlas-x86"):
        raise DescError("<rules>.start/<rules>.nan", (rules.start, rules.nan), "both 'mlas-x86' (MLAS's fold decides "
                        "where a max starts and whether a NaN wins together) or neither", desc.TYPE)
    return max_pooling2(desc, tensors["InputTensor"], rules)


def random_inputs(desc: MaxPooling2Desc, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Any valid input of a validated desc (the registry's ``random_inputs``)."""
    return {"InputTensor": random_values(desc.input_tensor.sizes, desc.input_tensor.data_type, rng)}


def max_pooling2(desc: MaxPooling2Desc, input_tensor: np.ndarray, rules: Rules = PRIMARY) -> dict[str, np.ndarray]:
    """``{"OutputTensor", ["OutputIndicesTensor"]}`` for a validated desc and matching array, under
    ``rules`` (a reading changes only how the windows the running maximum cannot settle are settled)."""
    batch, channels, *spatial = input_tensor.shape
    offsets = list(itertools.product(*(range(k) for k in desc.window_size)))  # row-major scan order
    # fp16 is compared as float32 (exact both ways; NumPy's fp16 arithmetic is slow).
    work_dtype = np.dtype(np.float32) if input_tensor.dtype == np.float16 else input_tensor.dtype
    lowest = np.array(-np.inf if np.issubdtype(work_dtype, np.floating) else np.iinfo(cast(Any, work_dtype)).min,
                      dtype=work_dtype)
    index_dtype = None if desc.output_indices_tensor is None else numpy_dtype(desc.output_indices_tensor.data_type)
    view: PerOffset
    best_offset: Optional[np.ndarray] = None  # which offset holds each window's maximum, where computed
    flat: Optional[np.ndarray] = None
    if along_rows(desc, work_dtype):
        best, flat = scan_rows(input_tensor, desc, index_dtype)
        view = functools.partial(input_view, input_tensor, desc)
    else:
        layout = phase_layout(input_tensor, desc, lowest)
        view = functools.partial(offset_block, layout, desc)
        best, best_offset = _scan_layout(view, offsets)

    unresolved = _unsettled(best, lowest, rules, input_tensor, view, offsets)
    settle = unresolved is not None and bool(unresolved.any())
    unmatched = None
    if settle:
        assert unresolved is not None
        if best_offset is None:  # the second pass writes the windows it settles, and only those are read
            best_offset = np.zeros(best.shape, dtype=np.min_scalar_type(-len(offsets)))
        if rules.mlas:
            unmatched = _resolve_in_mlas_order(view, offsets, desc, spatial, unresolved, best, best_offset)
        else:
            unmatched = _resolve_exactly(view, offsets, desc, spatial, unresolved, best, best_offset, rules,
                                         _finite_lowest(input_tensor.dtype))

    with np.errstate(over="ignore"):  # a float16 window the MLAS fold leaves at -FLT_MAX is -inf
        result = {"OutputTensor": best.astype(input_tensor.dtype, copy=False)}
    if index_dtype is not None:
        if flat is None:
            assert best_offset is not None
            flat = _flat_indices(desc, spatial, offsets, best_offset, index_dtype)
        elif settle:
            assert unresolved is not None and best_offset is not None
            where = np.nonzero(unresolved)
            flat[where] = _indices_at(desc, spatial, offsets, where, best_offset[where])
        if unmatched is not None and rules.unmatched_index != "first":
            where = np.nonzero(unmatched)
            flat[where] = np.broadcast_to(_unmatched(rules, spatial, batch, channels, len(spatial)), unmatched.shape)[where]
        result["OutputIndicesTensor"] = flat
    return result


def _scan_layout(view: PerOffset, offsets: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """Each window's running maximum over ``view(offset)`` in scan order, and the index of the
    offset that holds it (the first one where a value is strictly greater than all before)."""
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
    return best, best_offset


def _unsettled(best: np.ndarray, lowest: np.ndarray, rules: Rules, input_tensor: np.ndarray, view: PerOffset,
               offsets: list[tuple[int, ...]]) -> Optional[np.ndarray]:
    """The windows the strict '>' scan does not settle, or None when there are none: windows
    whose maximum is the padding value itself (the first offset may be padding), and windows
    holding a NaN (np.maximum propagates it); under a reading that starts from the type's lowest
    value, windows that reach no further; under MLAS's fold, also where its start shows, and
    zeros, whose sign its order picks. An integer output whose least maximum is above the type's
    lowest value has none under a reading other than MLAS's (checked without a mask)."""
    if best.dtype.kind in "iu" and not rules.mlas and (best.size == 0 or best.min() > lowest):
        return None
    unresolved = best == lowest
    if rules.start != "first":
        unresolved |= best <= _finite_lowest(input_tensor.dtype)
    if np.issubdtype(best.dtype, np.floating) and np.isnan(input_tensor).any():
        unresolved |= _has_nan_in_window(view, offsets, best.shape)
    if rules.mlas:
        unresolved |= (best <= _mlas_start(best.dtype)) | (best == 0)
    return unresolved


#: The fewest bytes of adjacent window elements along a row for which ``scan_rows`` reduces each
#: window in place rather than laying the input out by stride phase: NumPy reduces a row at a fixed
#: cost per row (~25 ns), which the layout's running maximum beats on shorter windows. Measured on
#: one thread, 64 rows of 65536 elements, windows side by side: int8 windows of 64 took 3.9 ms
#: against the layout's 6.6, of 32 6.4 against 4.3; int32 windows of 16 12.1 against 13.7, of 8
#: 18.2 against 11.5 (overlapping windows, each element read by several, were slower in every case).
ROW_SCAN_MIN_BYTES = 64
#: Bytes of input rows one block of ``scan_rows`` reads (and of int64 indices ``_flat_indices``
#: computes at a time): large enough that threads spend their time in NumPy's loops rather than
#: waiting for the interpreter lock between them. Measured on 16 cores, the stress tier's 4 GiB
#: int8 shape: 1.9 s with 1 MiB blocks, 0.65 s with 4 MiB, 0.54 s with 8 and 16 MiB; one thread
#: takes the same time with any of them. A thread holds about twice a block at a time.
ROW_BLOCK_BYTES = 2**23


def along_rows(desc: MaxPooling2Desc, dtype: np.dtype) -> bool:
    """Whether ``scan_rows`` computes this desc: an integer type (a maximum is one value: no NaN,
    no signed zero), a window of one element on every spatial axis but the last (which then
    never reads padding: validation refuses a window of padding only) and, along the last,
    ``ROW_SCAN_MIN_BYTES`` or more of adjacent elements (no dilation), no padding, and a stride of
    at least the window (windows side by side: each element is read once). Every window is then
    a run of one input row."""
    width = desc.window_size[-1]
    return (np.issubdtype(dtype, np.integer) and all(w == 1 for w in desc.window_size[:-1])
            and width * dtype.itemsize >= ROW_SCAN_MIN_BYTES and desc.strides[-1] >= width
            and desc.dilations[-1] == 1 and desc.start_padding[-1] == 0 and desc.end_padding[-1] == 0)


def input_view(input_tensor: np.ndarray, desc: MaxPooling2Desc, offset: tuple[int, ...]) -> np.ndarray:
    """``(N, C, O_1..O_D)``: the element every output reads at window ``offset``, as a strided view
    of the input itself; only for a desc whose windows read no padding (``along_rows``)."""
    out = desc.output_tensor.sizes[2:]
    index: tuple[Any, ...] = (slice(None), slice(None), *(
        slice(j * d - p, j * d - p + (n - 1) * s + 1, s)
        for j, d, p, n, s in zip(offset, desc.dilations, desc.start_padding, out, desc.strides)))
    return input_tensor[index]


def scan_rows(input_tensor: np.ndarray, desc: MaxPooling2Desc,
              index_dtype: Optional[np.dtype]) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """For a desc ``along_rows``: each window's maximum (what ``_scan_layout`` computes), and with
    ``index_dtype`` the flat input index of its first maximum along the row (what
    ``_flat_indices`` computes from ``_scan_layout``'s offsets), without laying the input out and
    without an array of offsets: each window is a strided view of its row, reduced in place, and
    ``_first_true`` finds where its maximum first occurs. Blocks of rows (``ROW_BLOCK_BYTES``) run
    on ``worker_threads`` threads, each writing its own part of the outputs. Memory beyond the
    input: the outputs, and about one and a half blocks per thread."""
    out = desc.output_tensor.sizes
    dims, width, stride = desc.dimension_count, desc.window_size[-1], desc.strides[-1]
    rows = input_view(input_tensor, desc, (0,) * dims)[..., :1]  # (N, C, O_1..O_{D-1}, 1)
    rows = np.lib.stride_tricks.as_strided(rows, shape=(*rows.shape[:-1], out[-1], width),
                                           strides=(*rows.strides[:-1], stride * input_tensor.itemsize,
                                                    input_tensor.itemsize), writeable=False)
    best = np.empty(out, dtype=input_tensor.dtype)
    flat = None if index_dtype is None else np.empty(out, dtype=index_dtype)
    spatial = input_tensor.shape[2:]
    row_strides = [int(np.prod(spatial[i + 1:])) for i in range(dims)]
    columns = np.arange(out[-1], dtype=np.int64) * stride  # a window's first element along its row
    per_row = out[-1] * width * input_tensor.itemsize
    block = max(1, ROW_BLOCK_BYTES // max(1, per_row))
    tasks = [(*plane, slice(top, min(top + block, rows.shape[-3])))
             for plane in np.ndindex(*rows.shape[:-3]) for top in range(0, rows.shape[-3], block)]

    def scan(where: tuple[Any, ...]) -> None:
        windows = rows[where]
        maximum = np.max(windows, axis=-1, out=best[where])
        equal = np.empty((*maximum.shape, -(-width // 8) * 8), dtype=bool)  # whole bytes per window
        equal[..., width:] = False
        np.equal(windows, maximum[..., None], out=equal[..., :width])
        if flat is None:
            return
        n, c, *outer = where[:-1]
        row = np.arange(where[-1].start, where[-1].stop, dtype=np.int64) * desc.strides[-2] * row_strides[-2]
        row += (n * out[1] + c) * math.prod(spatial) + sum(o * s * r for o, s, r in zip(outer, desc.strides,
                                                                                       row_strides))
        index = _first_true(equal).reshape(maximum.shape)
        index += columns
        index += row[:, None]
        flat[where] = index

    in_threads(scan, tasks, best.size * width * input_tensor.itemsize)
    return best, flat


def _first_true(rows: np.ndarray) -> np.ndarray:
    """The position of the first True in each row of a C-contiguous boolean array ``(..., W)``,
    ``W`` a multiple of 8, whose every row holds one, as int64 over the flattened rows. The rows are
    packed into bits, ``W / 8`` bytes each; the lowest set bit of a row's first 64 bits (read as one
    little-endian word) is the answer, and past 64 elements the next word is read where none was."""
    row_bytes = rows.shape[-1] // 8
    count = rows.size // rows.shape[-1] if rows.size else 0
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    packed = np.empty(count * row_bytes + 8, dtype=np.uint8)
    packed[count * row_bytes:] = 0  # the last row's word reads up to 7 bytes past it
    packed[:count * row_bytes] = np.packbits(rows.reshape(-1), bitorder="little")
    first = None
    for step in range(0, row_bytes, 8):
        word = np.ndarray((count,), dtype="<u8", buffer=packed, offset=step, strides=(row_bytes,))
        lowest_bit = word & (~word + np.uint64(1))
        position = np.frexp(lowest_bit.astype(np.float64))[1].astype(np.int64)  # exact: a power of two
        position += 8 * step - 1
        if first is None:  # a row of at most 64 elements holds its True in its first word
            first = position if row_bytes <= 8 else np.where(word != 0, position, -1)
        else:
            first = np.where((first < 0) & (word != 0), position, first)
    assert first is not None
    return first


#: Threads ``in_threads`` runs blocks on (None: one per processor this process may run on).
THREADS: Optional[int] = None
#: Below this many bytes of work, ``in_threads`` runs its blocks in the calling thread.
THREAD_MIN_BYTES = 2**24


def worker_threads() -> int:
    """``THREADS``, or the processors this process may run on."""
    if THREADS is not None:
        return max(1, THREADS)
    return usable_cpus()


def in_threads(run: Callable[[Any], None], tasks: Sequence[Any], work_bytes: int) -> None:
    """``run(task)`` for every task, on ``worker_threads`` threads when there are several tasks
    and ``work_bytes`` is at least ``THREAD_MIN_BYTES`` (NumPy releases the interpreter lock
    inside its loops; each task writes its own part of the outputs). The first exception raised
    is raised here, after every task has finished."""
    threads = min(worker_threads(), len(tasks))
    if threads <= 1 or work_bytes < THREAD_MIN_BYTES:
        for task in tasks:
            run(task)
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        for done in [pool.submit(run, task) for task in tasks]:
            done.result()


def _finite_lowest(dtype: np.dtype) -> Any:
    """The lowest finite value of ``dtype`` (a reading's window start)."""
    return (np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)).min


def _has_nan_in_window(view, offsets, shape) -> np.ndarray:
    seen = np.zeros(shape, dtype=bool)
    for offset in offsets:
        seen |= np.isnan(view(offset))
    return seen


def _inside(desc: MaxPooling2Desc, spatial, out_spatial, offset) -> np.ndarray:
    """Whether each output's element at this offset is an input element (not padding)."""
    inside = np.ones(out_spatial, dtype=bool)
    for i in range(len(spatial)):
        _, valid = window_coordinates(spatial[i], out_spatial[i], desc.window_size[i], desc.strides[i],
                                      desc.start_padding[i], desc.dilations[i])
        shape = [1] * len(spatial)
        shape[i] = out_spatial[i]
        inside = inside & valid[offset[i]].reshape(shape)
    return inside


def _resolve_exactly(view, offsets, desc, spatial, unresolved, best, best_offset, rules: Rules = PRIMARY,
                     finite_lowest: Any = None) -> np.ndarray:
    """Settle the windows ``unresolved`` in place, element by element in scan order (MP-4): the first
    non-NaN maximum among input elements, else (all NaN) NaN at the first input element (NAN-1);
    under ``rules``, starting from the type's lowest value or -inf (``start``: an element is taken
    only when greater) and letting a NaN win (``nan``). Returns which windows no element beat
    (their index is the reading's ``unmatched_index``)."""
    out_spatial = best.shape[2:]
    where = np.nonzero(unresolved)
    cur = np.full(where[0].shape, -1, dtype=np.int32)
    start = {"lowest": finite_lowest, "minus-inf": -np.inf}.get(rules.start)
    cur_value = np.full(where[0].shape, 0 if start is None else start, dtype=best.dtype)
    first_inside = np.full(where[0].shape, -1, dtype=np.int32)
    nan_at = np.full(where[0].shape, -1, dtype=np.int32)
    is_float = np.issubdtype(best.dtype, np.floating)
    for k, offset in enumerate(offsets):
        values = view(offset)[where]
        inside = np.broadcast_to(_inside(desc, spatial, out_spatial, offset), best.shape)[where]
        first_inside = np.where((first_inside < 0) & inside, k, first_inside)
        is_nan = inside & np.isnan(values) if is_float else np.zeros(values.shape, dtype=bool)
        nan_at = np.where(is_nan & (nan_at < 0), k, nan_at)
        candidate = inside & ~is_nan
        take = candidate & (((cur < 0) & (start is None)) | (values > cur_value))
        cur = np.where(take, k, cur)
        cur_value = np.where(take, values, cur_value)
    wins = np.zeros(cur.shape, dtype=bool)
    if rules.nan == "propagate":
        wins = nan_at >= 0
    elif rules.nan == "first-wins":
        wins = (nan_at >= 0) & (nan_at == first_inside)
    if start is None:
        wins |= (cur < 0) & (nan_at >= 0)  # every element NaN
    unmatched = (cur < 0) & ~wins
    best[where] = np.where(wins, np.array(np.nan if is_float else 0, dtype=best.dtype), cur_value)
    best_offset[where] = np.where(wins, nan_at, np.where(cur < 0, first_inside, cur))
    full = np.zeros(best.shape, dtype=bool)
    full[where] = unmatched
    return full


#: MLAS's reduction buffer of the vectorised kernels (pooling.cpp, MLAS_POOL_REDUCTION_BUFFER_STACK),
#: less the 3 elements it keeps for over-reading one vector (MLAS_POOL_REDUCTION_BUFFER_PADDING).
MLAS_REDUCTION_ROOM = 2048 - 3


def _mlas_start(dtype: np.dtype) -> Any:
    """Where MLAS starts a max and what its padding columns hold: float32's lowest finite value,
    for float16 too (run as float32); the lowest value of an integer type (a fold read generically)."""
    if np.issubdtype(dtype, np.floating):
        return dtype.type(np.finfo(np.float32).min)
    return np.iinfo(dtype).min


def mlas_kernel(window: Sequence[int], strides: Sequence[int], start_padding: Sequence[int],
                end_padding: Sequence[int], spatial: Sequence[int]) -> str:
    """Which float32 pooling kernel MLAS runs for a MaxPool without Indices (pooling.cpp,
    ``MlasPool``): "global" when the window is the whole input with strides 1 and no padding;
    "vector" (``MlasPool2DVectorKernel``/``MlasPool3DVectorKernel``) for 2-D and 3-D windows
    whose last stride is at most 2, every side at most 32, and whose padded input width fits
    the reduction buffer; "generic" otherwise."""
    dims = len(window)
    if all(window[i] == spatial[i] and strides[i] == 1 and start_padding[i] == 0 and end_padding[i] == 0
           for i in range(dims)):
        return "global"
    room = MLAS_REDUCTION_ROOM
    for pad in (start_padding[-1], end_padding[-1]):
        room = room - pad if room >= pad else 0
    if dims >= 2 and strides[-1] <= 2 and max(window) <= 32 and room >= spatial[-1]:
        return "vector"
    return "generic"


def _keep(a: np.ndarray, b: np.ndarray, instruction: str) -> np.ndarray:
    """Where the max of ``a`` (what is held) and ``b`` (what comes) keeps ``a``: ``_mm_max_ps(a,
    b)`` ("maxps") is ``a > b ? a : b``, so a NaN on either side gives ``b``; ``std::max(a, b)``
    ("std") is ``a < b ? b : a``, so a NaN held stays and a NaN coming is dropped."""
    with np.errstate(invalid="ignore"):
        return (a > b) if instruction == "maxps" else ~(a < b)


def _fold_step(held: tuple[np.ndarray, np.ndarray], value: np.ndarray, at: Any,
               keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``held`` (values, the window offset each came from; -1: the start or padding) after taking
    ``value`` from offset ``at`` wherever ``keep`` is False."""
    return np.where(keep, held[0], value), np.where(keep, held[1], at)


#: ``view(offset)`` / ``inside(offset)`` of ``mlas_x86_fold``: one array over every window per offset.
PerOffset = Callable[[tuple[int, ...]], np.ndarray]


def mlas_x86_fold(view: PerOffset, window: tuple[int, ...], kernel: str, vector_column: Callable[[int], np.ndarray],
                  inside: PerOffset, start: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each window's maximum as MLAS's float32 pooling computes it on x86-64 (pooling.cpp; SSE's
    ``_mm_max_ps`` for ``MlasMaximumFloat32x4``), and the row-major window offset of the element
    it selected (-1: none, the result is ``start``).

    ``view(offset)`` gives, for every window, its element at that offset; ``inside(offset)`` whether
    that element is input (padding is not); ``vector_column(jx)`` whether the input column a window
    reads at column offset ``jx`` lies in MLAS's groups of four (the columns before
    ``4 * (InputWidth // 4)``); ``kernel`` is ``mlas_kernel``'s answer; ``start`` the lowest finite
    float32 (MLAS_MAXIMUM_POOLING::InitialValue). The folds, kernel by kernel:

    * "vector": each column of the window is reduced down its rows (2-D: from its first input row;
      3-D: from ``start``, over depth then rows) with ``_mm_max_ps`` in a group of four, with
      ``std::max`` past them; a padding column is ``start``; then the columns are reduced left to
      right with ``_mm_max_ps``.
    * "global": offset ``k`` goes to lane ``k % 4`` (the whole groups of four), each lane folding
      ``_mm_max_ps`` from ``start``; the lanes combine as ``max(max(l0, l2), max(l1, l3))``
      (MlasReduceMaximumFloat32x4), then the remaining offsets follow with ``std::max``.
    * "generic": ``std::max`` from ``start`` over the input elements in row-major order."""
    offsets = list(itertools.product(*(range(k) for k in window)))
    shape = np.shape(view(offsets[0]))
    held = (np.full(shape, start), np.full(shape, -1))
    if kernel == "generic":
        for k, offset in enumerate(offsets):
            value = view(offset)
            held = _fold_step(held, value, k, _keep(held[0], value, "std") | ~inside(offset))
        return held
    if kernel == "global":
        whole = 4 * (len(offsets) // 4)
        lanes = [held] * 4
        for k in range(whole):
            value = view(offsets[k])
            lanes[k % 4] = _fold_step(lanes[k % 4], value, k, _keep(lanes[k % 4][0], value, "maxps"))
        pairs = [_fold_step(lanes[i], lanes[i + 2][0], lanes[i + 2][1], _keep(lanes[i][0], lanes[i + 2][0], "maxps"))
                 for i in (0, 1)]
        held = _fold_step(pairs[0], pairs[1][0], pairs[1][1], _keep(pairs[0][0], pairs[1][0], "maxps"))
        for k in range(whole, len(offsets)):
            value = view(offsets[k])
            held = _fold_step(held, value, k, _keep(held[0], value, "std"))
        return held
    return _vector_fold(view, window, vector_column, inside, start, shape)


def _vector_fold(view: PerOffset, window: tuple[int, ...], vector_column: Callable[[int], np.ndarray],
                 inside: PerOffset, start: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``mlas_x86_fold``'s "vector" kernel: down each column, then across the columns."""
    outer = list(itertools.product(*(range(k) for k in window[:-1])))
    width = window[-1]
    result: Optional[tuple[np.ndarray, np.ndarray]] = None
    for jx in range(width):
        vector = vector_column(jx)
        column = (np.full(shape, start), np.full(shape, -1))
        started = np.zeros(shape, dtype=bool) if len(window) == 2 else np.ones(shape, dtype=bool)
        readable = np.zeros(shape, dtype=bool)
        for jo in outer:
            offset = (*jo, jx)
            value, here = view(offset), inside(offset)
            keep = np.where(vector, _keep(column[0], value, "maxps"), _keep(column[0], value, "std"))
            column = _fold_step(column, value, _outer_index(jo, window) * width + jx, (keep & started) | ~here)
            started = started | here
            readable = readable | here
        column = (np.where(readable, column[0], start), np.where(readable, column[1], -1))  # padding columns
        result = column if result is None else _fold_step(result, column[0], column[1],
                                                          _keep(result[0], column[0], "maxps"))
    assert result is not None
    return result


def _outer_index(jo: tuple[int, ...], window: tuple[int, ...]) -> int:
    """The row-major index of outer offset ``jo`` among the window's outer (all but last) axes."""
    index = 0
    for j, size in zip(jo, window[:-1]):
        index = index * size + j
    return index


def _resolve_in_mlas_order(view, offsets, desc, spatial, unresolved, best, best_offset) -> np.ndarray:
    """The reading ``mlas-x86-fold``: settle the windows ``unresolved`` in place with
    ``mlas_x86_fold`` over just those windows, with the kernel MLAS picks for this desc (dilated
    windows, which ONNX Runtime never gives MLAS, fold generically). Returns which windows no
    element beat (their maximum is MLAS's start; their index the first input element)."""
    where = np.nonzero(unresolved)
    out_spatial = best.shape[2:]
    width, stride, left = spatial[-1], desc.strides[-1], desc.start_padding[-1]
    kernel = mlas_kernel(desc.window_size, desc.strides, desc.start_padding, desc.end_padding, spatial)
    if any(d != 1 for d in desc.dilations):
        kernel = "generic"

    def inside(offset: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(_inside(desc, spatial, out_spatial, offset), best.shape)[where]

    def vector_column(jx: int) -> np.ndarray:
        column = where[-1] * stride - left + jx
        return (column >= 0) & (column < 4 * (width // 4))

    value, chosen = mlas_x86_fold(lambda offset: view(offset)[where], tuple(desc.window_size), kernel, vector_column,
                                  inside, _mlas_start(best.dtype))
    first_inside = np.full(chosen.shape, -1)
    for k in reversed(range(len(offsets))):
        first_inside = np.where(inside(offsets[k]), k, first_inside)
    best[where] = value
    best_offset[where] = np.where(chosen >= 0, chosen, first_inside)
    full = np.zeros(best.shape, dtype=bool)
    full[where] = chosen < 0
    return full


def _flat_indices(desc: MaxPooling2Desc, spatial: list[int], offsets: list[tuple[int, ...]],
                  best_offset: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Flat row-major input index of each output's maximum (MP-3), in ``dtype`` (cast from int64,
    wrapping as ``astype`` does): the output's window origin, plus the position of its winning
    offset within the window, plus its (batch, channel) plane. Computed in int64 a block of
    outputs at a time (``ROW_BLOCK_BYTES`` of int64), on ``worker_threads`` threads: no int64
    array of the whole output exists."""
    dims = len(spatial)
    row_strides = [int(np.prod(spatial[i + 1:])) for i in range(dims)]
    out = best_offset.shape[2:]
    within = np.array([sum(j[i] * desc.dilations[i] * row_strides[i] for i in range(dims)) for j in offsets],
                      dtype=np.int64)
    origins = [(np.arange(out[i]) * desc.strides[i] - desc.start_padding[i]) * row_strides[i] for i in range(dims)]
    rest = [origin.reshape([-1] + [1] * (dims - 1 - i)) for i, origin in enumerate(origins) if i > 0]
    plane = int(np.prod(spatial))
    lead = best_offset.shape[0] * best_offset.shape[1] * out[0]  # (batch, channel, first output axis) flattened
    offset_rows = best_offset.reshape(lead, *out[1:])
    flat = np.empty(best_offset.shape, dtype=dtype)
    flat_rows = flat.reshape(lead, *out[1:])
    block = max(1, ROW_BLOCK_BYTES // (8 * int(np.prod(out[1:]))))

    def fill(top: int) -> None:
        rows = np.arange(top, min(top + block, lead))
        index = np.take(within, offset_rows[rows[0]:rows[-1] + 1])
        index += ((rows // out[0]) * plane + origins[0][rows % out[0]]).reshape([-1] + [1] * (dims - 1))
        for origin in rest:
            index += origin
        flat_rows[rows[0]:rows[-1] + 1] = index

    in_threads(fill, range(0, lead, block), flat.size * 8)
    return flat


def _indices_at(desc: MaxPooling2Desc, spatial: list[int], offsets: list[tuple[int, ...]],
                where: tuple[np.ndarray, ...], offset_at: np.ndarray) -> np.ndarray:
    """``_flat_indices``'s int64 values at the outputs ``where`` (``np.nonzero``'s answer), whose
    winning offsets are ``offset_at``: the same sum, element by element."""
    dims = len(spatial)
    row_strides = [int(np.prod(spatial[i + 1:])) for i in range(dims)]
    within = np.array([sum(j[i] * desc.dilations[i] * row_strides[i] for i in range(dims)) for j in offsets],
                      dtype=np.int64)
    index = np.take(within, offset_at)
    index += (where[0] * desc.output_tensor.sizes[1] + where[1]) * int(np.prod(spatial))
    for i in range(dims):
        index += (where[i + 2] * desc.strides[i] - desc.start_padding[i]) * row_strides[i]
    return index


def _unmatched(rules: Rules, spatial: list[int], batch: int, channels: int, dims: int) -> np.ndarray:
    """The index a window no element beat gets under ``rules.unmatched_index`` ("zero" or
    "minus-one"), broadcastable to the output: per (batch, channel) plane for "minus-one"."""
    if rules.unmatched_index == "zero":
        return np.zeros((1,) * (2 + dims), dtype=np.int64)
    row_strides = [int(np.prod(spatial[i + 1:])) for i in range(len(spatial))]
    planes = np.arange(batch * channels, dtype=np.int64).reshape(batch, channels, *([1] * dims)) * int(np.prod(spatial))
    return planes - sum(row_strides)
