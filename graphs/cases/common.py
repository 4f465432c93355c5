"""What every operator's case generators share: the ``Case`` record, naming, the pairwise grid,
and the float inputs of the ROI operators.

Inputs are derived from ``(id, seed)`` and drawn well conditioned, so that a mismatch means a
different computation, not a rounding accident: floats are multiples of 1/8 in [-4, 4] (exact
in float16; sums and bilinear weights of them stay far from float16 rounding ties in practice).
"""

from __future__ import annotations

import importlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
from ep_testbed.reference import DescError, validate
from ep_testbed.reference.dtypes import numpy_dtype
from ep_testbed.reference.registry import spec_named, spec_of_type

from ..input_flags import input_flags
from ..pairwise import all_pairs

UINT32_MAX = 2**32 - 1
SHORT_DTYPE = {"FLOAT32": "fp32", "FLOAT16": "fp16"}


@dataclass(frozen=True)
class Case:
    """One named case: a desc, a seed, tags. ``op`` is the operator's ``DML_OPERATOR_*`` name
    (as result lines carry it); ``inputs()`` is deterministic in ``(id, seed)``; ``recipe`` names the input generator of the
    operator's cases module (``random``, ``outside-partly``, ``nan-inf``, ...)."""

    id: str
    op: str
    desc: Any
    seed: int
    opset: Optional[int] = None
    tags: dict = field(default_factory=dict, hash=False, compare=False)
    recipe: str = "random"

    def inputs(self) -> dict[str, np.ndarray]:
        """The input arrays by DML member name (as ``reference.execute`` takes them)."""
        rng = np.random.default_rng([zlib.crc32(self.id.encode()), self.seed])
        return cases_module(self.op).make_inputs(self.desc, self.recipe, rng)


def cases_module(op_type: str) -> Any:
    """The cases module of an operator (``DML_OPERATOR_*`` name)."""
    spec = spec_of_type(op_type)
    if spec is None:
        raise ValueError(f"op = {op_type!r}: no registered operator has this DML_OPERATOR_* name")
    return importlib.import_module(spec.cases.partition(":")[0])


def cases_builder(op: str) -> Callable[[int], list[Case]]:
    """The function that lists an operator's catalog cases for a seed."""
    module, _, function = spec_named(op).cases.partition(":")
    return getattr(importlib.import_module(module), function or "catalog")


def num(v: float) -> str:
    """A number as it appears in a case id (``-0.5`` -> ``m0.5``)."""
    return f"{v:g}".replace("-", "m")


def make_case(op: str, name: str, desc: Any, seed: int, family: str, recipe: str = "random", opset=None,
              **extra: str) -> Case:
    """A case ``<op>/<name>`` tagged with its dtype and family (``grid``, ``random``, ``edge-*``)."""
    tags = {"dtype": desc.input_tensor.data_type.lower(), "family": family, **extra}
    return Case(id=f"{op}/{name}", op=spec_named(op).dml_type, desc=desc, seed=seed, opset=opset, tags=tags, recipe=recipe)


_GRID_ROWS: dict[str, list[dict]] = {}


def grid(key: str, params, valid=None) -> list[dict]:
    """``all_pairs`` rows, computed once per process (the grid does not depend on the seed)."""
    if key not in _GRID_ROWS:
        _GRID_ROWS[key] = all_pairs(params, valid=valid)
    return [dict(row) for row in _GRID_ROWS[key]]


def is_valid(desc) -> bool:
    """Whether ``desc`` obeys its page."""
    try:
        validate(desc)
    except DescError:
        return False
    return True


def float_values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Multiples of 1/8 in [-4, 4]."""
    return (rng.integers(-32, 33, size=shape) / 8).astype(dtype)


def roi_op_inputs(desc: Any, recipe: str, rng: np.random.Generator,
                  regions: Callable[[Any, str, np.random.Generator], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Inputs of an ROI operator: the feature map for ``recipe`` (``ties``: integers in [0, 3];
    ``nan-inf``: a twentieth NaN/+inf/-inf, X[:, :, 0, 0] kept finite), then regions drawn by
    ``regions`` until none raises an input flag (50 tries; ``nan-inf`` and ``float32-bins``
    exist to raise one)."""
    x_dtype = numpy_dtype(desc.input_tensor.data_type)
    x = float_values(rng, desc.input_tensor.sizes, x_dtype)
    if recipe == "ties":
        x = rng.integers(0, 4, size=desc.input_tensor.sizes).astype(x_dtype)
    if recipe == "nan-inf":
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=max(3, flat.size // 20), replace=False)
        flat[picks] = np.array([np.nan, np.inf, -np.inf], dtype=x_dtype)[np.arange(picks.size) % 3]
        x[:, :, 0, 0] = 1  # ORT reads X[b, c, 0, 0] for out-of-range samples (input_flags); keep it finite
    tensors = {"InputTensor": x}
    for _ in range(50):
        tensors.update(regions(desc, recipe, rng))
        if recipe in ("nan-inf", "float32-bins") or not input_flags(desc, tensors):
            break
    return tensors
