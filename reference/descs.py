"""What every desc dataclass shares: tensor descs, DML_SIZE_2D, and the one field-name table.

Each operator's desc dataclass lives in that operator's module (``roi_align.RoiAlign1Desc``,
...). Its snake_case fields map one to one to DML member names (``spatial_scale_x`` <->
``SpatialScaleX``); the DML name is kept in the field's metadata (``dml_field``), and
``dml_fields`` / ``attribute_of`` read that metadata: it is the only place the two spellings
meet, so ``desc_from_dml`` / ``desc_to_dml``, validation and every error message speak
DirectML's spelling.

Enum values are stored in their short spelling (``"FLOAT32"``, ``"AVERAGE"``, ``"LINEAR"``);
the DML prefixes are added back by ``desc_to_dml``. FLOAT fields hold the Python float the
user gave (round trip exact); the operators read them as float32, as DirectML's FLOAT is.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional


def dml_field(name: str, **kwargs: Any) -> Any:
    """A dataclass field whose DirectML member name is ``name``."""
    return field(metadata={"dml_name": name}, **kwargs)


@dataclass(frozen=True)
class TensorDesc:
    """A ``DML_BUFFER_TENSOR_DESC``: data type, sizes and optional strides (in elements).

    The testbed passes tensors as NumPy arrays in their logical shape (``sizes``); strides
    are kept so that a desc round-trips, and are validated (one per dimension), but they do
    not change any result: see ``reference/DECISIONS.md`` (MaxPool indices).
    """

    data_type: str = dml_field("DataType")
    sizes: tuple[int, ...] = dml_field("Sizes")
    strides: Optional[tuple[int, ...]] = dml_field("Strides", default=None)

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

    width: int = dml_field("Width")
    height: int = dml_field("Height")


class Desc:
    """What every operator desc dataclass declares besides its fields.

    ``TYPE`` is DirectML's ``DML_OPERATOR_*`` name, ``FEATURE_LEVEL`` the level that introduced
    it, ``INPUTS`` / ``OUTPUTS`` its tensor members in page order (outputs may be optional)."""

    TYPE: ClassVar[str]
    FEATURE_LEVEL: ClassVar[str]
    INPUTS: ClassVar[tuple[str, ...]]
    OUTPUTS: ClassVar[tuple[str, ...]]


def dml_fields(desc_type: type) -> list[tuple[str, str, dataclasses.Field]]:
    """``(snake_name, DML name, field)`` for every field of a desc dataclass, in page order."""
    return [(f.name, f.metadata["dml_name"], f) for f in dataclasses.fields(desc_type)]


@functools.lru_cache(maxsize=None)
def _by_dml(desc_type: type) -> dict[str, str]:
    return {dml: name for name, dml, _ in dml_fields(desc_type)}


def attribute_of(desc_type: type, member: str) -> str:
    """The dataclass attribute of a DML member (``"SpatialScaleX"`` -> ``"spatial_scale_x"``)."""
    return _by_dml(desc_type)[member]


def member_value(desc: Any, member: str) -> Any:
    """The value of DML member ``member`` of ``desc`` (``member_value(d, "InputTensor")``)."""
    return getattr(desc, attribute_of(type(desc), member))


def dml_name(desc_type: type, snake_name: str) -> str:
    """The DML member name of a dataclass field (``"spatial_scale_x"`` -> ``"SpatialScaleX"``)."""
    for name, dml, _ in dml_fields(desc_type):
        if name == snake_name:
            return dml
    raise KeyError(snake_name)
