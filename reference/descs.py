"""The four DirectML operator descs as dataclasses, field for field as their doc pages list them.

Each snake_case field maps one to one to a DML member name (``spatial_scale_x`` <->
``SpatialScaleX``); the DML name is kept in the field's metadata (``dml_name``) so that
``desc_from_dml`` / ``desc_to_dml`` and every error message speak DirectML's spelling.

Enum values are stored in their short spelling (``"FLOAT32"``, ``"AVERAGE"``, ``"LINEAR"``);
the DML prefixes are added back by ``desc_to_dml``. FLOAT fields hold the Python float the
user gave (round trip exact); the operators read them as float32, as DirectML's FLOAT is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Union


def _dml(name: str, **kwargs: Any) -> Any:
    return field(metadata={"dml_name": name}, **kwargs)


@dataclass(frozen=True)
class TensorDesc:
    """A ``DML_BUFFER_TENSOR_DESC``: data type, sizes and optional strides (in elements).

    The testbed passes tensors as NumPy arrays in their logical shape (``sizes``); strides
    are kept so that a desc round-trips, and are validated (one per dimension), but they do
    not change any result: see ``reference/DECISIONS.md`` (MaxPool indices).
    """

    data_type: str = _dml("DataType")
    sizes: tuple[int, ...] = _dml("Sizes")
    strides: Optional[tuple[int, ...]] = _dml("Strides", default=None)

    @property
    def dimension_count(self) -> int:
        return len(self.sizes)

    @property
    def element_count(self) -> int:
        count = 1
        for size in self.sizes:
            count *= size
        return count


@dataclass(frozen=True)
class Size2D:
    """A ``DML_SIZE_2D`` (``{UINT Width; UINT Height;}``)."""

    width: int = _dml("Width")
    height: int = _dml("Height")


@dataclass(frozen=True)
class RoiPoolingDesc:
    """``DML_ROI_POOLING_OPERATOR_DESC`` (DML_FEATURE_LEVEL_1_0)."""

    TYPE: ClassVar[str] = "DML_OPERATOR_ROI_POOLING"
    FEATURE_LEVEL: ClassVar[str] = "1.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor", "ROITensor")
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = _dml("InputTensor")
    roi_tensor: TensorDesc = _dml("ROITensor")
    output_tensor: TensorDesc = _dml("OutputTensor")
    spatial_scale: float = _dml("SpatialScale")
    pooled_size: Size2D = _dml("PooledSize")


@dataclass(frozen=True)
class MaxPooling2Desc:
    """``DML_MAX_POOLING2_OPERATOR_DESC`` (DML_FEATURE_LEVEL_2_1)."""

    TYPE: ClassVar[str] = "DML_OPERATOR_MAX_POOLING2"
    FEATURE_LEVEL: ClassVar[str] = "2.1"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor",)
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor", "OutputIndicesTensor")

    input_tensor: TensorDesc = _dml("InputTensor")
    output_tensor: TensorDesc = _dml("OutputTensor")
    output_indices_tensor: Optional[TensorDesc] = _dml("OutputIndicesTensor")
    dimension_count: int = _dml("DimensionCount")
    strides: tuple[int, ...] = _dml("Strides")
    window_size: tuple[int, ...] = _dml("WindowSize")
    start_padding: tuple[int, ...] = _dml("StartPadding")
    end_padding: tuple[int, ...] = _dml("EndPadding")
    dilations: tuple[int, ...] = _dml("Dilations")


@dataclass(frozen=True)
class RoiAlignDesc:
    """``DML_ROI_ALIGN_OPERATOR_DESC`` (DML_FEATURE_LEVEL_3_0).

    Its page gives no formula; the ROI_ALIGN1 page defines it: ROI_ALIGN is ROI_ALIGN1 with
    ``InputPixelOffset = 0.5``, ``OutputPixelOffset = -0.5`` and ``AlignRegionsToCorners = FALSE``.
    """

    TYPE: ClassVar[str] = "DML_OPERATOR_ROI_ALIGN"
    FEATURE_LEVEL: ClassVar[str] = "3.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor", "ROITensor", "BatchIndicesTensor")
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = _dml("InputTensor")
    roi_tensor: TensorDesc = _dml("ROITensor")
    batch_indices_tensor: TensorDesc = _dml("BatchIndicesTensor")
    output_tensor: TensorDesc = _dml("OutputTensor")
    reduction_function: str = _dml("ReductionFunction")
    interpolation_mode: str = _dml("InterpolationMode")
    spatial_scale_x: float = _dml("SpatialScaleX")
    spatial_scale_y: float = _dml("SpatialScaleY")
    out_of_bounds_input_value: float = _dml("OutOfBoundsInputValue")
    minimum_samples_per_output: int = _dml("MinimumSamplesPerOutput")
    maximum_samples_per_output: int = _dml("MaximumSamplesPerOutput")


@dataclass(frozen=True)
class RoiAlign1Desc:
    """``DML_ROI_ALIGN1_OPERATOR_DESC`` (DML_FEATURE_LEVEL_4_0)."""

    TYPE: ClassVar[str] = "DML_OPERATOR_ROI_ALIGN1"
    FEATURE_LEVEL: ClassVar[str] = "4.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor", "ROITensor", "BatchIndicesTensor")
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = _dml("InputTensor")
    roi_tensor: TensorDesc = _dml("ROITensor")
    batch_indices_tensor: TensorDesc = _dml("BatchIndicesTensor")
    output_tensor: TensorDesc = _dml("OutputTensor")
    reduction_function: str = _dml("ReductionFunction")
    interpolation_mode: str = _dml("InterpolationMode")
    spatial_scale_x: float = _dml("SpatialScaleX")
    spatial_scale_y: float = _dml("SpatialScaleY")
    input_pixel_offset: float = _dml("InputPixelOffset")
    output_pixel_offset: float = _dml("OutputPixelOffset")
    out_of_bounds_input_value: float = _dml("OutOfBoundsInputValue")
    minimum_samples_per_output: int = _dml("MinimumSamplesPerOutput")
    maximum_samples_per_output: int = _dml("MaximumSamplesPerOutput")
    align_regions_to_corners: bool = _dml("AlignRegionsToCorners")


Desc = Union[RoiPoolingDesc, MaxPooling2Desc, RoiAlignDesc, RoiAlign1Desc]

DESC_TYPES: dict[str, type] = {
    cls.TYPE: cls for cls in (RoiPoolingDesc, MaxPooling2Desc, RoiAlignDesc, RoiAlign1Desc)
}

#: Short operator names used in case ids and on the command line.
OP_NAMES: dict[str, str] = {
    "DML_OPERATOR_ROI_POOLING": "roi_pooling",
    "DML_OPERATOR_MAX_POOLING2": "max_pooling2",
    "DML_OPERATOR_ROI_ALIGN": "roi_align",
    "DML_OPERATOR_ROI_ALIGN1": "roi_align1",
}


def dml_fields(desc_type: type) -> list[tuple[str, str, dataclasses.Field]]:
    """``(snake_name, DML name, field)`` for every field of a desc dataclass, in page order."""
    return [(f.name, f.metadata["dml_name"], f) for f in dataclasses.fields(desc_type)]


def dml_name(desc_type: type, snake_name: str) -> str:
    """The DML member name of a dataclass field (``"spatial_scale_x"`` -> ``"SpatialScaleX"``)."""
    for name, dml, _ in dml_fields(desc_type):
        if name == snake_name:
            return dml
    raise KeyError(snake_name)


def as_roi_align1(desc: RoiAlignDesc | RoiAlign1Desc) -> RoiAlign1Desc:
    """ROI_ALIGN as the ROI_ALIGN1 desc its page says it equals (pixel offsets 0.5 / -0.5)."""
    if isinstance(desc, RoiAlign1Desc):
        return desc
    return RoiAlign1Desc(
        input_tensor=desc.input_tensor,
        roi_tensor=desc.roi_tensor,
        batch_indices_tensor=desc.batch_indices_tensor,
        output_tensor=desc.output_tensor,
        reduction_function=desc.reduction_function,
        interpolation_mode=desc.interpolation_mode,
        spatial_scale_x=desc.spatial_scale_x,
        spatial_scale_y=desc.spatial_scale_y,
        input_pixel_offset=0.5,
        output_pixel_offset=-0.5,
        out_of_bounds_input_value=desc.out_of_bounds_input_value,
        minimum_samples_per_output=desc.minimum_samples_per_output,
        maximum_samples_per_output=desc.maximum_samples_per_output,
        align_regions_to_corners=False,
    )
