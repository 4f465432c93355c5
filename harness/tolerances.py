"""The tolerance model: one rule, defaults per output data type, overridable.

An element of an output passes when, with ``e`` the expected (reference) value and ``a``
the value the EP returned::

    e is NaN             -> a is NaN (any payload)
    e is +inf or -inf    -> a == e
    otherwise            -> a is finite and
                            (|a - e| <= atol + rtol * |e|  or  ulp_distance(a, e) <= ulp)

``ulp_distance`` counts representable values of the output's dtype between ``a`` and ``e``
(``+0`` and ``-0`` are 0 apart). Integer outputs use ``|a - e| <= atol`` (default 0: exact).
Index outputs (``OutputIndicesTensor``) are exact, except that an index pointing at a
different element holding the same maximum is a *tie* (see ``harness.compare``).

Beyond the rule, under a precision model (``--precision-model``, default ``fp32``) an element
also passes within the reference's own per-element rounding bound, or within that bound of a
knife-edge alternative (``harness.compare``, ``reference/DECISIONS.md`` FP-2 and FP-3), so an
element passes within ``max(rule, bound)``; ``--strict-tolerance`` keeps the rule alone.

Why these defaults: the reference computes in float64 and rounds once to the output dtype,
so it is the correctly rounded answer; an EP accumulating in its own precision is allowed a
few ULP of the output dtype plus ONNX Runtime OpTester's absolute/relative floor
(``onnxruntime/test/providers/checkers.cc``: float 1e-5/1e-4, fp16 0.0025 (DML 0.005)/0.001).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class Tolerance:
    """``|a - e| <= atol + rtol * |e|`` or ``ulp_distance(a, e) <= ulp`` (``ulp`` None: unused)."""

    atol: float = 0.0
    rtol: float = 0.0
    ulp: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: Output data type (short DML name) -> default tolerance. Integers not listed are exact.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "FLOAT32": Tolerance(atol=1e-5, rtol=1e-4, ulp=4),
    "FLOAT16": Tolerance(atol=5e-3, rtol=1e-3, ulp=2),
    "FLOAT64": Tolerance(atol=1e-12, rtol=1e-10, ulp=4),
}

EXACT = Tolerance()

#: The rule, as printed in run headers and reports.
RULE = ("element passes iff: expected NaN -> actual NaN; expected +-inf -> actual equal; else actual finite and "
        "(|a-e| <= atol + rtol*|e| or ulp_distance(a,e) <= ulp, or, under a precision model other than exact, "
        "|a-e| <= the reference's rounding bound of the element or a within that bound of a knife-edge "
        "alternative); integers |a-e| <= atol; indices exact or a tie")


@dataclass(frozen=True)
class Tolerances:
    """Tolerance per output data type, with the defaults above for types not overridden."""

    by_dtype: Mapping[str, Tolerance]

    @classmethod
    def defaults(cls) -> "Tolerances":
        return cls(dict(DEFAULT_TOLERANCES))

    def for_dtype(self, data_type: str) -> Tolerance:
        return self.by_dtype.get(data_type, EXACT)

    def override(self, spec: str) -> "Tolerances":
        """Apply ``"FLOAT16:atol=1e-2,rtol=0,ulp=8"`` (dtype names case-insensitive; ``fp16``,
        ``fp32``, ``float16`` accepted). Raises ValueError naming the bad part."""
        dtype_text, sep, body = spec.partition(":")
        if not sep or not body:
            raise ValueError(f"--tol {spec!r}: expected DTYPE:key=value[,key=value], e.g. fp16:atol=1e-2,ulp=4")
        data_type = _DTYPE_ALIASES.get(dtype_text.strip().lower(), dtype_text.strip().upper())
        tolerance = self.for_dtype(data_type)
        for item in body.split(","):
            key, eq, value = item.partition("=")
            key = key.strip()
            if not eq or key not in ("atol", "rtol", "ulp"):
                raise ValueError(f"--tol {spec!r}: {item!r} must be atol=X, rtol=X or ulp=N")
            try:
                number: Any = (None if value.strip().lower() == "none" else int(value)) if key == "ulp" else float(value)
            except ValueError:
                raise ValueError(f"--tol {spec!r}: {key} = {value!r} is not a number") from None
            if number is not None and (number < 0 or (isinstance(number, float) and math.isnan(number))):
                raise ValueError(f"--tol {spec!r}: {key} must be >= 0")
            tolerance = replace(tolerance, **{key: number})
        by_dtype = dict(self.by_dtype)
        by_dtype[data_type] = tolerance
        return Tolerances(by_dtype)

    def to_json(self) -> dict[str, Any]:
        return {"rule": RULE, "by_dtype": {k: v.to_json() for k, v in sorted(self.by_dtype.items())},
                "other_dtypes": EXACT.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Tolerances":
        """Read ``to_json()`` output, or a plain ``{"FLOAT16": {"atol": ..}}`` file, over the defaults."""
        table = data.get("by_dtype", data)
        by_dtype = dict(DEFAULT_TOLERANCES)
        for name, values in table.items():
            by_dtype[_DTYPE_ALIASES.get(name.lower(), name.upper())] = Tolerance(**values)
        return cls(by_dtype)


def load_tolerances(path: str | None, overrides: list[str] | None = None) -> Tolerances:
    """Defaults, then a JSON file (``--tolerances``), then ``--tol`` overrides, in that order."""
    tolerances = Tolerances.defaults()
    if path:
        with open(path, encoding="utf-8") as f:
            tolerances = Tolerances.from_json(json.load(f))
    for spec in overrides or []:
        tolerances = tolerances.override(spec)
    return tolerances


_DTYPE_ALIASES = {
    "fp32": "FLOAT32", "float32": "FLOAT32", "float": "FLOAT32",
    "fp16": "FLOAT16", "float16": "FLOAT16", "half": "FLOAT16",
    "fp64": "FLOAT64", "float64": "FLOAT64", "double": "FLOAT64",
}
