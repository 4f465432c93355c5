"""The operator registry: one record per DirectML operator, and the only list of operators.

A record (``OpSpec``) gathers everything the testbed knows about one operator: its desc
dataclass and doc page, the data types of each feature level, its validation and reference
kernel (this folder), and, named by module so that the reference never imports ONNX, the
module that maps it to and from ONNX (``graphs``) and the one that generates its cases
(``cases``). Every other part of the testbed asks the registry: ``execute`` and ``validate``
find a desc's record by its class, ``to_onnx`` / ``from_onnx`` its mapper, the catalog its
cases, model runs the ONNX op types to attribute, the comparison its index outputs.

Adding an operator: a reference module (desc dataclass, ``TENSOR_SUPPORT``, ``validate_desc``,
``execute_desc``, ``random_inputs``), a mapper module in ``graphs/ops/``, a cases module in
``graphs/cases/``, and one ``register(OpSpec(...))`` line below (or in your own code).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from . import max_pooling2, roi_align, roi_align_bounds, roi_pooling, roi_pooling_bounds
from .checks import TypeTable
from .errors import DescError
from .precision import Expected, PrecisionModel


@dataclass(frozen=True)
class OpSpec:
    """Everything about one DirectML operator (module docstring).

    ``validate(desc, types)`` raises DescError for a desc that breaks its page (``types``: the
    data types allowed at the feature level asked for); ``execute(desc, arrays)`` computes a
    validated desc on arrays keyed by DML input member, returning arrays keyed by DML output
    member; ``random_inputs(desc, rng)`` draws one valid input. ``graphs`` is a module with
    ``to_onnx(desc, opset)``, ``input_flags(desc, tensors, opset)`` and ``import_node(...)``;
    ``cases`` a ``"module:function"`` returning the op's catalog cases for a seed, the module
    also holding ``make_inputs(desc, recipe, rng)``. ``onnx_ops`` are the ONNX op types whose
    nodes read back as this desc. ``index_outputs`` maps an index output to the value output it
    locates and the input it indexes; ``index_rule(desc, output_positions, input_indices)`` says
    whether an index lies in its output's window (so a comparison can accept ties).
    ``bounded(desc, arrays, model)`` computes a validated desc under a precision model
    (``precision.Expected``: outputs, per-element rounding bounds, knife-edge alternatives), its
    outputs from the kernel ``execute`` runs (bit for bit ``execute``'s, never a second copy of
    the arithmetic); None means every output is a selection, exact under every model.
    ``check_values(desc, arrays)``, when given, runs before ``execute`` and ``bounded`` and raises
    DescError for input values whose computation would exceed the reference's limits
    (``checks.within_cap``).
    """

    name: str
    desc: type
    page: str
    tensor_support: tuple[tuple[str, TypeTable], ...]
    validate: Callable[[Any, TypeTable], None]
    execute: Callable[[Any, Mapping[str, np.ndarray]], dict[str, np.ndarray]]
    random_inputs: Callable[[Any, np.random.Generator], dict[str, np.ndarray]]
    graphs: str
    cases: str
    onnx_ops: tuple[str, ...] = ()
    index_outputs: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    index_rule: Optional[Callable[[Any, np.ndarray, np.ndarray], np.ndarray]] = None
    bounded: Optional[Callable[[Any, Mapping[str, np.ndarray], PrecisionModel], Expected]] = None
    check_values: Optional[Callable[[Any, Mapping[str, np.ndarray]], None]] = None

    @property
    def dml_type(self) -> str:
        """DirectML's ``DML_OPERATOR_*`` name."""
        return self.desc.TYPE


_SPECS: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    """Add an operator (a second record with the same name or desc class replaces the first)."""
    for name, existing in list(_SPECS.items()):
        if existing.desc is spec.desc and name != spec.name:
            del _SPECS[name]
    _SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove an operator (tests that register a toy one clean up with this)."""
    _SPECS.pop(name, None)


def specs() -> tuple[OpSpec, ...]:
    """Every registered operator, in registration order."""
    return tuple(_SPECS.values())


def names() -> tuple[str, ...]:
    """The short names (``roi_pooling``, ``max_pooling2``, ``roi_align``, ``roi_align1``, ...)."""
    return tuple(_SPECS)


def spec_named(name: str) -> OpSpec:
    """The record of a short name; a ValueError listing the names otherwise."""
    try:
        return _SPECS[name]
    except KeyError:
        raise ValueError(f"operator {name!r}: one of {', '.join(_SPECS)}") from None


def spec_of_type(dml_type: str) -> Optional[OpSpec]:
    """The record of a ``DML_OPERATOR_*`` name, or None."""
    return next((s for s in _SPECS.values() if s.desc.TYPE == dml_type), None)


def spec_for(desc: Any) -> OpSpec:
    """The record of a desc (by its exact class); DescError for anything else."""
    for spec in _SPECS.values():
        if type(desc) is spec.desc:
            return spec
    raise DescError("Type", type(desc).__name__, f"a desc dataclass of a registered operator "
                    f"({', '.join(s.desc.__name__ for s in _SPECS.values())})")


def specs_for_onnx(op_type: str) -> tuple[OpSpec, ...]:
    """The records whose desc an ONNX node of ``op_type`` reads back as."""
    return tuple(s for s in _SPECS.values() if op_type in s.onnx_ops)


# --- the four DirectML operators ------------------------------------------------------------

register(OpSpec(
    name="roi_pooling", desc=roi_pooling.RoiPoolingDesc, page=roi_pooling.PAGE,
    tensor_support=roi_pooling.TENSOR_SUPPORT, validate=roi_pooling.validate_desc,
    execute=roi_pooling.execute_desc, random_inputs=roi_pooling.random_inputs,
    graphs="ep_testbed.graphs.ops.roi_pooling", cases="ep_testbed.graphs.cases.roi_pooling:catalog",
    onnx_ops=("MaxRoiPool",), bounded=roi_pooling_bounds.execute_bounded))
register(OpSpec(
    name="max_pooling2", desc=max_pooling2.MaxPooling2Desc, page=max_pooling2.PAGE,
    tensor_support=max_pooling2.TENSOR_SUPPORT, validate=max_pooling2.validate_desc,
    execute=max_pooling2.execute_desc, random_inputs=max_pooling2.random_inputs,
    graphs="ep_testbed.graphs.ops.max_pooling2", cases="ep_testbed.graphs.cases.max_pooling2:catalog",
    onnx_ops=("MaxPool",), index_outputs=max_pooling2.INDEX_OUTPUTS, index_rule=max_pooling2.window_contains))
register(OpSpec(
    name="roi_align", desc=roi_align.RoiAlignDesc, page=roi_align.PAGE_V0,
    tensor_support=roi_align.TENSOR_SUPPORT_V0, validate=roi_align.validate_desc,
    execute=roi_align.execute_desc, random_inputs=roi_align.random_inputs,
    graphs="ep_testbed.graphs.ops.roi_align", cases="ep_testbed.graphs.cases.roi_align:catalog_v0",
    bounded=roi_align_bounds.execute_bounded, check_values=roi_align.check_values))
register(OpSpec(
    name="roi_align1", desc=roi_align.RoiAlign1Desc, page=roi_align.PAGE_V1,
    tensor_support=roi_align.TENSOR_SUPPORT_V1, validate=roi_align.validate_desc,
    execute=roi_align.execute_desc, random_inputs=roi_align.random_inputs,
    graphs="ep_testbed.graphs.ops.roi_align", cases="ep_testbed.graphs.cases.roi_align:catalog_v1",
    onnx_ops=("RoiAlign",), bounded=roi_align_bounds.execute_bounded, check_values=roi_align.check_values))
