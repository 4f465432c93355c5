"""Descs to and from dicts in DirectML's own spelling (the JSON form of a case).

``desc_from_dml`` checks the *form* of the dict (known fields, types, enum names) and raises
``DescError`` naming the field; whether the values obey the doc page is ``validate``'s job.
``desc_to_dml`` writes the canonical form (long enum names, ``OutputIndicesTensor: null``), so
``desc_to_dml(desc_from_dml(d)) == d`` for a canonical ``d`` and
``desc_from_dml(desc_to_dml(desc)) == desc`` for every desc.
"""

from __future__ import annotations

import typing
from typing import Any, Mapping

from .descs import Desc, Size2D, TensorDesc, dml_fields
from .dtypes import NUMPY_DTYPES
from .dtypes import PREFIX as DATA_TYPE_PREFIX
from .errors import DescError
from .registry import names, spec_named, spec_of_type

UINT_MAX = 2**32 - 1

#: Enum-typed fields: DML member name -> (prefix, every value of the DML enum).
#: Which of them an operator allows is checked by validation against its page.
ENUMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "DataType": (DATA_TYPE_PREFIX, tuple(NUMPY_DTYPES)),
    "ReductionFunction": (
        "DML_REDUCE_FUNCTION_",
        ("ARGMAX", "ARGMIN", "AVERAGE", "L1", "L2", "LOG_SUM", "LOG_SUM_EXP", "MAX", "MIN",
         "MULTIPLY", "SUM", "SUM_SQUARE"),
    ),
    "InterpolationMode": ("DML_INTERPOLATION_MODE_", ("NEAREST_NEIGHBOR", "LINEAR")),
}


def desc_from_dml(d: Mapping[str, Any]) -> Desc:
    """Build a desc dataclass from a dict that uses DirectML's member names.

    ``d["Type"]`` selects the desc (a registered ``DML_OPERATOR_*`` name, e.g.
    ``DML_OPERATOR_ROI_ALIGN1``). Enum values may be spelled in full
    (``"DML_TENSOR_DATA_TYPE_FLOAT32"``) or short (``"FLOAT32"``).
    """
    if not isinstance(d, Mapping):
        raise DescError("<desc>", type(d).__name__, "a desc is a JSON object / dict of DML member names")
    op_type = d.get("Type")
    spec = spec_of_type(op_type) if isinstance(op_type, str) else None
    if spec is None or not isinstance(op_type, str):
        raise DescError("Type", op_type, f"one of {', '.join(spec_named(n).dml_type for n in names())}")
    desc_type = spec.desc
    fields = dml_fields(desc_type)
    known = {dml for _, dml, _ in fields} | {"Type"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise DescError(unknown[0], d[unknown[0]], f"not a member of {op_type}; its members are "
                        f"{', '.join(dml for _, dml, _ in fields)}", op_type)
    kwargs: dict[str, Any] = {}
    hints = _type_hints(desc_type)
    for name, dml, f in fields:
        hint = hints[name]
        optional = _strip_optional(hint) is not hint
        if dml not in d:
            if optional:
                kwargs[name] = None
                continue
            raise DescError(dml, "<missing>", "required member", op_type)
        kwargs[name] = _parse(dml, d[dml], hint, op_type, optional)
    return desc_type(**kwargs)


#: Desc dataclass -> its resolved field annotations (``_type_hints``).
_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(desc_type: type) -> dict[str, Any]:
    """The field annotations of a desc dataclass, resolved once per type: resolving the string
    annotations (``from __future__ import annotations``) compiles each one anew, which made this
    most of the time of reading a desc."""
    if desc_type not in _HINTS:
        _HINTS[desc_type] = typing.get_type_hints(desc_type)
    return _HINTS[desc_type]


def desc_to_dml(desc: Desc) -> dict[str, Any]:
    """The canonical DirectML-spelled dict of a desc (the inverse of ``desc_from_dml``)."""
    out: dict[str, Any] = {"Type": desc.TYPE}
    for name, dml, _ in dml_fields(type(desc)):
        out[dml] = _write(dml, getattr(desc, name))
    return out


def _parse(dml: str, value: Any, hint: Any, op: str, optional: bool = False) -> Any:
    if optional and value is None:
        return None
    base = _strip_optional(hint)
    if base is TensorDesc:
        return _parse_tensor(dml, value, op)
    if base is Size2D:
        return _parse_size2d(dml, value, op)
    if dml in ENUMS:
        return _parse_enum(dml, value, op)
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DescError(dml, value, "a number (DML FLOAT)", op)
        return value
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise DescError(dml, value, "true or false (DML BOOL)", op)
    if base is int:
        return _parse_uint(dml, value, op)
    if base == tuple[int, ...]:
        if not isinstance(value, (list, tuple)):
            raise DescError(dml, value, "a list of UINT (one per spatial dimension)", op)
        return tuple(_parse_uint(f"{dml}[{i}]", v, op) for i, v in enumerate(value))
    raise TypeError(f"no parser for {dml}: {hint}")  # a programming error, not bad input


def _strip_optional(hint: Any) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union and type(None) in args:
        return next(a for a in args if a is not type(None))
    return hint


def _parse_uint(dml: str, value: Any, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT_MAX:
        raise DescError(dml, value, f"a whole number in [0, {UINT_MAX}] (DML UINT)", op)
    return value


def _parse_enum(dml: str, value: Any, op: str) -> str:
    prefix, names = ENUMS[dml]
    if isinstance(value, str):
        short = value[len(prefix):] if value.startswith(prefix) else value
        if short in names:
            return short
    raise DescError(dml, value, f"one of {', '.join(prefix + n for n in names)} (or the part after {prefix})", op)


def _parse_tensor(dml: str, value: Any, op: str) -> TensorDesc:
    if not isinstance(value, Mapping):
        raise DescError(dml, value, 'a tensor desc {"DataType": ..., "Sizes": [...], "Strides": [...] (optional)}', op)
    unknown = sorted(set(value) - {"DataType", "Sizes", "Strides"})
    if unknown:
        raise DescError(f"{dml}.{unknown[0]}", value[unknown[0]], "not a member of a tensor desc (DataType, Sizes, Strides)", op)
    if "DataType" not in value or "Sizes" not in value:
        missing = "DataType" if "DataType" not in value else "Sizes"
        raise DescError(f"{dml}.{missing}", "<missing>", "required member of a tensor desc", op)
    data_type = _parse_enum_as(f"{dml}.DataType", "DataType", value["DataType"], op)
    sizes = value["Sizes"]
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise DescError(f"{dml}.Sizes", sizes, "a non-empty list of UINT", op)
    sizes_t = tuple(_parse_uint(f"{dml}.Sizes[{i}]", s, op) for i, s in enumerate(sizes))
    strides = value.get("Strides")
    strides_t = None
    if strides is not None:
        if not isinstance(strides, (list, tuple)):
            raise DescError(f"{dml}.Strides", strides, "null or a list of UINT, one per dimension", op)
        strides_t = tuple(_parse_uint(f"{dml}.Strides[{i}]", s, op) for i, s in enumerate(strides))
    return TensorDesc(data_type=data_type, sizes=sizes_t, strides=strides_t)


def _parse_enum_as(label: str, enum: str, value: Any, op: str) -> str:
    try:
        return _parse_enum(enum, value, op)
    except DescError as e:
        raise DescError(label, value, e.allowed, op) from None


def _parse_size2d(dml: str, value: Any, op: str) -> Size2D:
    if not isinstance(value, Mapping) or set(value) != {"Height", "Width"}:
        raise DescError(dml, value, 'a DML_SIZE_2D {"Height": h, "Width": w}', op)
    return Size2D(width=_parse_uint(f"{dml}.Width", value["Width"], op),
                  height=_parse_uint(f"{dml}.Height", value["Height"], op))


def _write(dml: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, TensorDesc):
        out = {"DataType": DATA_TYPE_PREFIX + value.data_type, "Sizes": list(value.sizes)}
        if value.strides is not None:
            out["Strides"] = list(value.strides)
        return out
    if isinstance(value, Size2D):
        return {"Height": value.height, "Width": value.width}
    if dml in ENUMS:
        return ENUMS[dml][0] + value
    if isinstance(value, tuple):
        return list(value)
    return value


__all__ = ["desc_from_dml", "desc_to_dml"]
