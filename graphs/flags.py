"""``Flag``: how one DML field value reaches ONNX, in one of four kinds, with a reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The four kinds, from best to worst for a test:
#: ``exact``         the value maps to an ONNX node attribute/input with the same meaning;
#: ``composed``      expressible exactly, with extra ONNX nodes (Cast, Reshape, Mul, MaxPool...);
#: ``diverges``      expressible in ONNX, but ONNX's or ONNX Runtime's meaning differs from the page;
#: ``inexpressible`` no ONNX graph computes it (then the case is reported as such, never run).
KINDS = ("exact", "composed", "diverges", "inexpressible")


@dataclass(frozen=True)
class Flag:
    """One DML field (``"ReductionFunction"``, ``"ROITensor.Sizes"``), its value, a kind, a reason."""

    field: str
    value: Any
    kind: str
    reason: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Flag.kind = {self.kind!r}: one of {', '.join(KINDS)}")

    def to_json(self) -> dict[str, Any]:
        """``{"field", "value", "kind", "reason"}`` with a JSON-safe value."""
        return {"field": self.field, "value": _jsonable(self.value), "kind": self.kind, "reason": self.reason}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return str(value)


def worst_kind(flags: list[Flag]) -> str:
    """The worst kind among ``flags`` (``exact`` for none)."""
    return max((f.kind for f in flags), key=KINDS.index, default="exact")
