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
different element holding the same maximum is a *tie* (see ``harness.core.compare``).

Beyond the rule, under a precision model (``--precision-model``, default ``fp32``) an element
also passes within the reference's own per-element rounding bound, or within that bound of a
knife-edge alternative (``harness.core.compare``, ``reference/DECISIONS.md`` FP-2 and FP-3), so an
element passes within ``max(rule, bound)``; ``--strict-tolerance`` keeps the rule alone.

This module and ``harness.core.compare`` import nothing but NumPy and each other: a repro
bundle ships them verbatim as its judge, where neither ep-testbed nor onnx is installed.
Reading a tolerance table from a file (through ``untrusted_files``) is the front ends' job
(``harness/cli/options.py``: ``load_tolerances``).

Why these defaults: the reference computes in float64 and rounds once to the output dtype,
so it is the correctly rounded answer; an EP accumulating in its own precision is allowed a
few ULP of the output dtype plus ONNX Runtime OpTester's absolute/relative floor
(``onnxruntime/test/providers/checkers.cc``: float 1e-5/1e-4, fp16 0.0025 (DML 0.005)/0.001).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

import numpy as np

#: The one table of what a tolerance value may be, for the writer (``--tol``, parsed by
#: ``Tolerances.override``) and the reader (a tolerance file, a run header: ``Tolerances.from_json``)
#: alike, so that anything a run accepts and records, its own readers accept back: ``atol`` and
#: ``rtol`` a finite float >= 0, ``ulp`` a whole number in ``[0, MAX_ULP]`` or none. 2**64 counts
#: more than every float64 value (a larger ULP bound means nothing), and its 20 digits stay within
#: the JSON reader's integer cap (``untrusted_files.Limits.int_digits``, 40; a test checks it).
MAX_ULP = 2**64
KEYS = ("atol", "rtol", "ulp")


#: What each key may be, in words (the messages of both readers of ``valid``).
ALLOWED = {"atol": "a finite number >= 0", "rtol": "a finite number >= 0",
           "ulp": "a whole number from 0 to 2**64, or none/null (no ULP bound)"}


def valid(key: str, value: Any) -> bool:
    """Whether ``value`` is allowed for ``key`` (one of ``KEYS``) by the table above."""
    if key == "ulp":
        return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ULP)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def check_value(key: str, value: Any, where: str) -> None:
    """ValueError naming ``where``, the value and what is allowed, unless ``valid(key, value)``."""
    if not valid(key, value):
        raise ValueError(f"{where} = {_short(value)}: must be {ALLOWED[key]}")


def _short(value: Any) -> str:
    """``repr(value)``, a long one cut to 40 characters (a 100-digit number is named, not printed)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else f"<a {len(str(abs(value)))}-digit number>"
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class Tolerance:
    """``|a - e| <= atol + rtol * |e|`` or ``ulp_distance(a, e) <= ulp`` (``ulp`` None: unused)."""

    atol: float = 0.0
    rtol: float = 0.0
    ulp: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    # The rule's arithmetic, in one place: ``compare`` judges with it and ``error_stats`` draws
    # and inverts it, so a verdict and the share a heatmap shows cannot drift apart.

    def allowed(self, expected: np.ndarray) -> np.ndarray:
        """Each element's absolute allowance under the rule: ``atol + rtol * |e|``."""
        return self.atol + self.rtol * np.abs(expected)

    def passes(self, absdiff: np.ndarray, ulp: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """Where the rule passes a pair of finite values: ``|a - e| <= allowed`` (``allowed``:
        ``self.allowed(e)``, or a larger allowance) or ``ulp_distance <= self.ulp``."""
        ok = absdiff <= allowed
        if self.ulp is not None:
            ok = ok | (ulp <= self.ulp)
        return ok

    def share(self, absdiff: np.ndarray, ulp: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """The share of its allowance each element used: the smaller of ``|a - e| / allowed``
        and ``ulp / self.ulp``; 0 where they are equal, ``inf`` where a zero allowance is exceeded
        (1.0 is the limit; the caller sets non-finite pairs)."""
        absdiff = np.asarray(absdiff, dtype=np.float64)
        used = np.full(np.broadcast_shapes(absdiff.shape, np.shape(allowed)), np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(absdiff, allowed, out=used, where=np.asarray(allowed) > 0)
        np.copyto(used, 0.0, where=absdiff == 0)  # exact, whatever the allowance (none at all included)
        if self.ulp is not None:
            by_ulp = ulp / self.ulp if self.ulp else np.where(ulp == 0, 0.0, np.inf)
            np.minimum(used, by_ulp, out=used)
        return used

    def smallest_passing(self, absdiff: np.ndarray, ulp: np.ndarray, expected: np.ndarray,
                         finite: np.ndarray) -> dict[str, float | int | None]:
        """The rule inverted over finite pairs: the smallest ``atol``, ``rtol`` and ``ulp``, each
        with this tolerance's other two parts, that passes every one of them, before rounding;
        None for a part no value of which helps (rtol where an expected 0 is missed by more than
        atol)."""
        abs_e = np.abs(np.where(finite, expected, 0.0))
        by_ulp = ulp <= self.ulp if self.ulp is not None else np.zeros(expected.shape, bool)
        by_abs = absdiff <= self.allowed(abs_e)
        need = finite & ~by_ulp  # elements the ulp part does not pass: atol or rtol must
        atol = max(float(np.max(absdiff[need] - self.rtol * abs_e[need], initial=0.0)), 0.0)
        rtol: float | None = None
        if not (need & (abs_e == 0) & (absdiff > self.atol)).any():
            pos = need & (abs_e > 0)
            rtol = max(float(np.max((absdiff[pos] - self.atol) / abs_e[pos], initial=0.0)), 0.0)
        return {"atol": atol, "rtol": rtol, "ulp": int(np.max(ulp[finite & ~by_abs], initial=0))}


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
        if data_type not in KNOWN_DTYPES:
            raise ValueError(f"--tol {spec!r}: {dtype_text.strip()!r} is not a data type; use one of "
                             f"{', '.join(KNOWN_DTYPES)} (or fp16, fp32, fp64)")
        tolerance = self.for_dtype(data_type)
        seen: set[str] = set()
        for item in body.split(","):
            key, eq, value = item.partition("=")
            key = key.strip()
            if not eq or key not in KEYS:
                raise ValueError(f"--tol {_short(spec)}: {_short(item)} must be atol=X, rtol=X or ulp=N")
            if key in seen:  # last-wins would hide a typo: say which one counts
                raise ValueError(f"--tol {_short(spec)}: {key} is given twice; give each of atol, rtol, ulp at most once")
            seen.add(key)
            tolerance = replace(tolerance, **{key: _number(spec, key, value)})
        by_dtype = dict(self.by_dtype)
        by_dtype[data_type] = tolerance
        return Tolerances(by_dtype)

    def to_json(self) -> dict[str, Any]:
        """The table as run headers and repro bundles record it (``from_json`` reads it back)."""
        return {"rule": RULE, "by_dtype": {k: v.to_json() for k, v in sorted(self.by_dtype.items())},
                "other_dtypes": EXACT.to_json()}

    @classmethod
    def from_json(cls, data: Any) -> "Tolerances":
        """Read ``to_json()`` output, or a plain ``{"FLOAT16": {"atol": ..}}`` table, over the defaults.

        ValueError naming the entry and key for anything else: a dtype that is not a DML data
        type, a key other than atol/rtol/ulp, a value that is not a finite number >= 0 (``ulp``
        a whole number or null)."""
        if not isinstance(data, dict):
            raise ValueError(f"a tolerance table is a JSON object, not a {type(data).__name__}")
        table = data["by_dtype"] if "by_dtype" in data else data
        if not isinstance(table, dict):
            raise ValueError("by_dtype: must be an object of data type -> {atol, rtol, ulp}")
        by_dtype = dict(DEFAULT_TOLERANCES)
        for name, values in table.items():
            data_type = _DTYPE_ALIASES.get(name.lower(), name.upper())
            if data_type not in KNOWN_DTYPES:
                raise ValueError(f"{name!r} is not a data type (allowed: {', '.join(KNOWN_DTYPES)})")
            by_dtype[data_type] = _tolerance_from(name, values)
        return cls(by_dtype)


def _number(spec: str, key: str, text: str) -> Any:
    """The value of one ``--tol`` item, checked against ``check_value``'s table; ValueError naming it."""
    text = text.strip()
    if len(text) > 64:  # no float or ULP bound the table allows needs more characters
        raise ValueError(f"--tol {_short(spec)}: {key} = <{len(text)} characters>: too long; it must be "
                         f"{ALLOWED[key]}")
    try:
        number: Any = (None if text.lower() == "none" else int(text)) if key == "ulp" else float(text)
    except ValueError:
        raise ValueError(f"--tol {_short(spec)}: {key} = {text!r} is not a number") from None
    if not valid(key, number):
        raise ValueError(f"--tol {_short(spec)}: {key} must be {ALLOWED[key]}, not {_short(number)}")
    return number


def _tolerance_from(name: str, values: Any) -> Tolerance:
    """One table entry as a ``Tolerance``; ValueError naming ``name.key`` and what is allowed."""
    keys = [f.name for f in fields(Tolerance)]
    if not isinstance(values, dict):
        raise ValueError(f"{name}: must be an object with {', '.join(keys)}")
    for key, value in values.items():
        where = f"{name}.{key}"
        if key not in keys:
            raise ValueError(f"{where}: not a tolerance key (allowed: {', '.join(keys)})")
        check_value(key, value, where)
    default = Tolerance()
    return Tolerance(atol=float(values.get("atol", default.atol)), rtol=float(values.get("rtol", default.rtol)),
                     ulp=values.get("ulp", default.ulp))


_DTYPE_ALIASES = {
    "fp32": "FLOAT32", "float32": "FLOAT32", "float": "FLOAT32",
    "fp16": "FLOAT16", "float16": "FLOAT16", "half": "FLOAT16",
    "fp64": "FLOAT64", "float64": "FLOAT64", "double": "FLOAT64",
}

#: Data types a tolerance may be given for: the float types above and NumPy's integer types of
#: every width DML has, named as the comparison looks a tolerance up (``dtype.name.upper()``).
#: Derived from NumPy rather than from the reference's type table (``reference/dtypes.py``) so
#: that this module needs nothing but NumPy; a test checks every DML data type is among them.
KNOWN_DTYPES = (*DEFAULT_TOLERANCES,
                *(np.dtype(f"{kind}{bits}").name.upper() for kind in ("int", "uint") for bits in (64, 32, 16, 8)))
