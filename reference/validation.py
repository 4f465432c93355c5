"""Validation of a desc against its doc page, before anything runs.

Everything a page states about a desc (dimension counts, the data types of each DirectML
feature level, "must have the same DataType", sizes that the page derives, ranges of the
scalar fields) is checked here; each failure is a ``DescError`` naming the DML field, the
value and what is allowed. Checks that need the tensors' values (``x2 >= x1``, batch indices
in range) live with the operator that reads them.
"""

from __future__ import annotations

import math
from typing import Iterable

from .descs import Desc, MaxPooling2Desc, RoiAlign1Desc, RoiAlignDesc, RoiPoolingDesc, TensorDesc
from .errors import DescError

#: The newest feature level the four pages list; the default of every check.
NEWEST_FEATURE_LEVEL = "5.0"

_ALL_MAXPOOL_TYPES = ("FLOAT32", "FLOAT16", "INT64", "INT32", "INT16", "INT8",
                      "UINT64", "UINT32", "UINT16", "UINT8")

#: Per operator: [(feature level, {tensor member: allowed data types})], newest first,
#: transcribed from each page's "Tensor support" tables.
TENSOR_SUPPORT: dict[str, list[tuple[str, dict[str, tuple[str, ...]]]]] = {
    "DML_OPERATOR_ROI_POOLING": [
        ("1.0", {"InputTensor": ("FLOAT32", "FLOAT16"), "ROITensor": ("FLOAT32", "FLOAT16"),
                 "OutputTensor": ("FLOAT32", "FLOAT16")}),
    ],
    "DML_OPERATOR_MAX_POOLING2": [
        ("5.0", {"InputTensor": _ALL_MAXPOOL_TYPES, "OutputTensor": _ALL_MAXPOOL_TYPES,
                 "OutputIndicesTensor": ("UINT64", "UINT32")}),
        ("3.0", {"InputTensor": ("FLOAT32", "FLOAT16", "INT8", "UINT8"),
                 "OutputTensor": ("FLOAT32", "FLOAT16", "INT8", "UINT8"),
                 "OutputIndicesTensor": ("UINT32",)}),
        ("2.1", {"InputTensor": ("FLOAT32", "FLOAT16"), "OutputTensor": ("FLOAT32", "FLOAT16"),
                 "OutputIndicesTensor": ("UINT32",)}),
    ],
    "DML_OPERATOR_ROI_ALIGN": [
        ("3.0", {"InputTensor": ("FLOAT32", "FLOAT16"), "ROITensor": ("FLOAT32", "FLOAT16"),
                 "BatchIndicesTensor": ("UINT32",), "OutputTensor": ("FLOAT32", "FLOAT16")}),
    ],
    "DML_OPERATOR_ROI_ALIGN1": [
        ("5.0", {"InputTensor": ("FLOAT32", "FLOAT16"), "ROITensor": ("FLOAT32", "FLOAT16"),
                 "BatchIndicesTensor": ("UINT64", "UINT32"), "OutputTensor": ("FLOAT32", "FLOAT16")}),
        ("4.0", {"InputTensor": ("FLOAT32", "FLOAT16"), "ROITensor": ("FLOAT32", "FLOAT16"),
                 "BatchIndicesTensor": ("UINT32",), "OutputTensor": ("FLOAT32", "FLOAT16")}),
    ],
}


def parse_feature_level(level: str | float) -> tuple[int, int]:
    """``"5.0"`` -> ``(5, 0)``; a DescError for anything that is not ``MAJOR.MINOR``."""
    text = str(level)
    parts = text.split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    raise DescError("feature_level", level, 'a DirectML feature level "MAJOR.MINOR", e.g. "3.0" or "5.0"')


def supported_types(op_type: str, feature_level: str = NEWEST_FEATURE_LEVEL) -> dict[str, tuple[str, ...]]:
    """The data types each tensor of ``op_type`` may have at ``feature_level``."""
    level = parse_feature_level(feature_level)
    for table_level, table in TENSOR_SUPPORT[op_type]:
        if level >= parse_feature_level(table_level):
            return table
    introduced = TENSOR_SUPPORT[op_type][-1][0]
    raise DescError("feature_level", feature_level, f"{op_type} was introduced in DML_FEATURE_LEVEL_{introduced.replace('.', '_')}")


def validate(desc: Desc, feature_level: str = NEWEST_FEATURE_LEVEL) -> None:
    """Raise ``DescError`` unless ``desc`` obeys its doc page at ``feature_level``."""
    types = supported_types(desc.TYPE, feature_level)
    if isinstance(desc, RoiPoolingDesc):
        _validate_roi_pooling(desc, types)
    elif isinstance(desc, MaxPooling2Desc):
        _validate_max_pooling2(desc, types)
    elif isinstance(desc, (RoiAlignDesc, RoiAlign1Desc)):
        _validate_roi_align(desc, types)
    else:
        raise DescError("Type", type(desc).__name__, "one of the four desc dataclasses")


# --- shared checks -------------------------------------------------------------------------

def _tensor(op: str, member: str, t: TensorDesc | None, types: dict[str, tuple[str, ...]],
            dims: Iterable[int]) -> None:
    if t is None:
        raise DescError(member, None, "required tensor", op)
    dims = tuple(dims)
    if t.dimension_count not in dims:
        allowed = f"{dims[0]}" if len(dims) == 1 else f"{dims[0]} to {dims[-1]}"
        raise DescError(f"{member}.Sizes", list(t.sizes), f"must have {allowed} dimensions", op)
    for i, size in enumerate(t.sizes):
        if size < 1:
            raise DescError(f"{member}.Sizes[{i}]", size, "sizes must be at least 1", op)
    if t.strides is not None and len(t.strides) != len(t.sizes):
        raise DescError(f"{member}.Strides", list(t.strides), f"one stride per dimension ({len(t.sizes)})", op)
    if t.data_type not in types[member]:
        raise DescError(f"{member}.DataType", t.data_type,
                        f"one of {', '.join(types[member])} at this feature level", op)


def _same_type(op: str, members: dict[str, TensorDesc]) -> None:
    (first, t0), *rest = members.items()
    for member, t in rest:
        if t.data_type != t0.data_type:
            raise DescError(f"{member}.DataType", t.data_type,
                            f"must have the same DataType as {first} ({t0.data_type})", op)


def _finite(op: str, member: str, value: float) -> None:
    if not math.isfinite(value):
        raise DescError(member, value, "a finite number", op)


def _expect_sizes(op: str, member: str, actual: tuple[int, ...], expected: tuple[int, ...], why: str) -> None:
    if tuple(actual) != tuple(expected):
        raise DescError(f"{member}.Sizes", list(actual), f"must be {list(expected)} ({why})", op)


# --- DML_ROI_POOLING ------------------------------------------------------------------------

def _validate_roi_pooling(d: RoiPoolingDesc, types: dict[str, tuple[str, ...]]) -> None:
    op = d.TYPE
    _tensor(op, "InputTensor", d.input_tensor, types, [4])
    _tensor(op, "ROITensor", d.roi_tensor, types, [4])
    _tensor(op, "OutputTensor", d.output_tensor, types, [4])
    _same_type(op, {"InputTensor": d.input_tensor, "ROITensor": d.roi_tensor, "OutputTensor": d.output_tensor})
    roi = d.roi_tensor.sizes
    if roi[0] != 1 or roi[1] != 1 or roi[3] != 5:
        raise DescError("ROITensor.Sizes", list(roi), "must be {1, 1, NumROIs, 5} (rows [BatchID, x1, y1, x2, y2])", op)
    _finite(op, "SpatialScale", d.spatial_scale)
    if d.spatial_scale < 0:
        raise DescError("SpatialScale", d.spatial_scale,
                        "must be >= 0: a negative scale inverts every region, and the page requires x2 >= x1, y2 >= y1", op)
    if d.pooled_size.height < 1 or d.pooled_size.width < 1:
        raise DescError("PooledSize", {"Height": d.pooled_size.height, "Width": d.pooled_size.width},
                        "Height and Width must be at least 1", op)
    n, c = roi[2], d.input_tensor.sizes[1]
    _expect_sizes(op, "OutputTensor", d.output_tensor.sizes,
                  (n, c, d.pooled_size.height, d.pooled_size.width),
                  "{NumROIs, InputChannelCount, PooledSize.Height, PooledSize.Width}")


# --- DML_MAX_POOLING2 -----------------------------------------------------------------------

def max_pooling2_output_sizes(input_sizes: tuple[int, ...], window_size, strides, start_padding,
                              end_padding, dilations) -> tuple[int, ...]:
    """The page's output-size formula, with the *dilated* window (see DECISIONS.md, MP-1).

    Returns sizes that may be < 1 when the window does not fit; ``validate`` refuses those.
    """
    out = list(input_sizes[:2])
    for i in range(len(window_size)):
        padded = input_sizes[i + 2] + start_padding[i] + end_padding[i]
        dilated_window = (window_size[i] - 1) * dilations[i] + 1
        out.append((padded - dilated_window) // strides[i] + 1)
    return tuple(out)


def _validate_max_pooling2(d: MaxPooling2Desc, types: dict[str, tuple[str, ...]]) -> None:
    op = d.TYPE
    _tensor(op, "InputTensor", d.input_tensor, types, [4, 5])
    _tensor(op, "OutputTensor", d.output_tensor, types, [4, 5])
    _same_type(op, {"InputTensor": d.input_tensor, "OutputTensor": d.output_tensor})
    rank = d.input_tensor.dimension_count
    if d.output_tensor.dimension_count != rank:
        raise DescError("OutputTensor.Sizes", list(d.output_tensor.sizes),
                        f"must have the same DimensionCount as InputTensor ({rank})", op)
    if d.dimension_count != rank - 2:
        raise DescError("DimensionCount", d.dimension_count,
                        f"must be {rank - 2}: 2 for a 4-D InputTensor, 3 for a 5-D one", op)
    for member in ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations"):
        values = getattr(d, _SNAKE[member])
        if len(values) != d.dimension_count:
            raise DescError(member, list(values), f"must hold DimensionCount ({d.dimension_count}) values", op)
        if member in ("Strides", "WindowSize", "Dilations"):
            for i, v in enumerate(values):
                if v < 1:
                    raise DescError(f"{member}[{i}]", v, "must be at least 1", op)
    expected = max_pooling2_output_sizes(d.input_tensor.sizes, d.window_size, d.strides,
                                         d.start_padding, d.end_padding, d.dilations)
    for i in range(d.dimension_count):
        if expected[i + 2] < 1:
            padded = d.input_tensor.sizes[i + 2] + d.start_padding[i] + d.end_padding[i]
            raise DescError(f"WindowSize[{i}]", d.window_size[i],
                            f"the dilated window ({(d.window_size[i] - 1) * d.dilations[i] + 1}) must fit in the "
                            f"padded input ({padded}) along spatial dimension {i}", op)
        empty = _first_window_without_input(d.input_tensor.sizes[i + 2], expected[i + 2], d.window_size[i],
                                            d.strides[i], d.start_padding[i], d.dilations[i])
        if empty is not None:
            raise DescError(f"StartPadding[{i}]/EndPadding[{i}]", (d.start_padding[i], d.end_padding[i]),
                            f"output position {empty} along spatial dimension {i} would see only padding "
                            f"(WindowSize {d.window_size[i]}, Dilations {d.dilations[i]}); the page defines no "
                            "value for such a window, so the padding must leave every window an input element", op)
    _expect_sizes(op, "OutputTensor", d.output_tensor.sizes, expected,
                  "the page's formula: (PaddedSize - dilated WindowSize) / Strides + 1")
    if d.output_indices_tensor is not None:
        _tensor(op, "OutputIndicesTensor", d.output_indices_tensor, types, [4, 5])
        _expect_sizes(op, "OutputIndicesTensor", d.output_indices_tensor.sizes, d.output_tensor.sizes,
                      "OutputTensor and OutputIndicesTensor have the same sizes")
        if d.output_indices_tensor.data_type == "UINT32" and d.input_tensor.element_count > 2**32:
            raise DescError("OutputIndicesTensor.DataType", "UINT32",
                            f"cannot index an InputTensor of {d.input_tensor.element_count} elements; use UINT64", op)


_SNAKE = {"Strides": "strides", "WindowSize": "window_size", "StartPadding": "start_padding",
          "EndPadding": "end_padding", "Dilations": "dilations"}


def _first_window_without_input(size: int, out: int, window: int, stride: int, start: int, dilation: int) -> int | None:
    for o in range(out):
        first = o * stride - start
        if not any(0 <= first + j * dilation < size for j in range(window)):
            return o
    return None


# --- DML_ROI_ALIGN / DML_ROI_ALIGN1 -----------------------------------------------------------

ROI_SHAPES = "{NumROIs, 4}, {1, NumROIs, 4} or {1, 1, NumROIs, 4}"
BATCH_INDICES_SHAPES = "{NumROIs}, {1, NumROIs}, {1, 1, NumROIs} or {1, 1, 1, NumROIs}"


def roi_count(roi_sizes: tuple[int, ...]) -> int:
    """NumROIs of an ROI_ALIGN ROITensor (its second to last size)."""
    return roi_sizes[-2]


def _validate_roi_align(d: RoiAlignDesc | RoiAlign1Desc, types: dict[str, tuple[str, ...]]) -> None:
    op = d.TYPE
    _tensor(op, "InputTensor", d.input_tensor, types, [4])
    _tensor(op, "ROITensor", d.roi_tensor, types, [2, 3, 4])
    _tensor(op, "BatchIndicesTensor", d.batch_indices_tensor, types, [1, 2, 3, 4])
    _tensor(op, "OutputTensor", d.output_tensor, types, [4])
    _same_type(op, {"InputTensor": d.input_tensor, "OutputTensor": d.output_tensor, "ROITensor": d.roi_tensor})
    roi = d.roi_tensor.sizes
    if roi[-1] != 4 or any(s != 1 for s in roi[:-2]):
        raise DescError("ROITensor.Sizes", list(roi), f"must be {ROI_SHAPES}", op)
    n = roi_count(roi)
    batch = d.batch_indices_tensor.sizes
    if batch[-1] != n or any(s != 1 for s in batch[:-1]):
        raise DescError("BatchIndicesTensor.Sizes", list(batch), f"must be {BATCH_INDICES_SHAPES} with NumROIs = {n} "
                        "(from ROITensor)", op)
    _expect_sizes(op, "OutputTensor", d.output_tensor.sizes[:2], (n, d.input_tensor.sizes[1]),
                  "the first two of {NumROIs, ChannelCount, OutputHeight, OutputWidth}")
    if d.reduction_function not in ("AVERAGE", "MAX"):
        raise DescError("ReductionFunction", "DML_REDUCE_FUNCTION_" + d.reduction_function,
                        "DML_REDUCE_FUNCTION_AVERAGE or DML_REDUCE_FUNCTION_MAX", op)
    if d.interpolation_mode not in ("NEAREST_NEIGHBOR", "LINEAR"):
        raise DescError("InterpolationMode", d.interpolation_mode, "NEAREST_NEIGHBOR or LINEAR", op)
    for member in ("SpatialScaleX", "SpatialScaleY"):
        _finite(op, member, getattr(d, "spatial_scale_" + member[-1].lower()))
    if isinstance(d, RoiAlign1Desc):
        _finite(op, "InputPixelOffset", d.input_pixel_offset)
        _finite(op, "OutputPixelOffset", d.output_pixel_offset)
    if d.minimum_samples_per_output < 1:
        raise DescError("MinimumSamplesPerOutput", d.minimum_samples_per_output,
                        "must be at least 1: an output element with no sample has no value to reduce", op)
    if d.maximum_samples_per_output < d.minimum_samples_per_output:
        raise DescError("MaximumSamplesPerOutput", d.maximum_samples_per_output,
                        f"must be >= MinimumSamplesPerOutput ({d.minimum_samples_per_output}) for the clamp to mean anything", op)
