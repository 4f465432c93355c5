"""``execute(desc, tensors)``: run a desc on NumPy arrays keyed by DML member name."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .descs import Desc, member_value
from .dtypes import numpy_dtype
from .errors import DescError
from .precision import DEFAULT_MODEL, Expected, precision_model
from .readings import Reading, combine, named
from .registry import OpSpec, spec_for
from .validation import NEWEST_FEATURE_LEVEL, validate


def execute(desc: Desc, tensors: Mapping[str, np.ndarray],
            feature_level: str = NEWEST_FEATURE_LEVEL) -> dict[str, np.ndarray]:
    """Compute ``desc`` as its DirectML doc page specifies it.

    ``tensors`` holds the desc's inputs by DML member name (``InputTensor``, ``ROITensor``,
    ``BatchIndicesTensor``), each an array whose shape is the tensor desc's ``Sizes`` and whose
    dtype is its ``DataType``. The result holds the outputs by member name (``OutputTensor``,
    and ``OutputIndicesTensor`` when the desc has one), in the desc's data types.

    Raises ``DescError`` (naming the field) for a desc that breaks its page at
    ``feature_level``, for missing, extra or mismatched arrays, and for tensor values the
    page leaves undefined (e.g. a batch index outside ``[0, BatchCount)``), and for a desc or
    values that would need more than the reference's limits (``checks.within_cap``).
    """
    spec, arrays = prepare(desc, tensors, feature_level)
    return spec.execute(desc, arrays)


def execute_with_bounds(desc: Desc, tensors: Mapping[str, np.ndarray], model: str = DEFAULT_MODEL,
                        feature_level: str = NEWEST_FEATURE_LEVEL) -> Expected:
    """``execute``, plus what a kernel that rounds may return under the precision model named
    ``model`` (``precision.MODELS``: ``fp32``, ``tensor-type``, ``exact``).

    The result's ``outputs`` equal ``execute``'s bit for bit: the same preparation (``prepare``)
    refuses the same descs and inputs, and an operator's ``bounded`` takes its outputs from the
    kernel ``execute`` runs, computing only the bounds beside them. ``bounds`` holds per value
    output the largest ``|kernel - expected|`` rounding in the model's type can cause, and
    ``alternatives`` the ``(low, high)`` range of each element over the knife-edge decisions
    that rounding can flip (``knife_edges`` notes them). An operator without a ``bounded``
    record (selections only) gets no bound and no alternative. Raises what ``execute`` raises,
    and ValueError for an unknown model name (before anything else is checked)."""
    chosen = precision_model(model)
    spec, arrays = prepare(desc, tensors, feature_level)
    if spec.bounded is None:
        return Expected(outputs=spec.execute(desc, arrays), model=chosen)
    return spec.bounded(desc, arrays, chosen)


def execute_reading(desc: Desc, tensors: Mapping[str, np.ndarray], readings: "list[str] | tuple[str, ...]",
                    model: str = DEFAULT_MODEL, feature_level: str = NEWEST_FEATURE_LEVEL) -> Expected:
    """``execute_with_bounds`` under the readings named ``readings`` combined (``readings.combine``)
    instead of the primary reading: the same preparation, the same kernel with the readings' rules,
    the same precision model and bounds. An empty list is the primary reading. Raises what
    ``execute_with_bounds`` raises, and ``ReadingError`` for a name the operator does not have or
    readings that cannot be combined."""
    chosen = precision_model(model)
    spec, arrays = prepare(desc, tensors, feature_level)
    rules = combine(spec.rules, [named(spec.readings, n, spec.name) for n in readings]) if readings else spec.rules
    if rules is None:
        return execute_with_bounds(desc, tensors, model, feature_level)
    if spec.bounded is None:
        return Expected(outputs=spec.execute(desc, arrays, rules), model=chosen)  # type: ignore[call-arg]
    return spec.bounded(desc, arrays, chosen, rules)  # type: ignore[call-arg]


def select_regions(desc: Desc, tensors: Mapping[str, np.ndarray],
                   rows: np.ndarray) -> "tuple[Desc, dict[str, np.ndarray]] | None":
    """The desc and inputs that compute only the rows ``rows`` (sorted, distinct, at least one) of
    the first axis of every output of ``desc`` on ``tensors`` (``OpSpec.regions``); None for an
    operator whose rows are not independent. Row ``i`` of anything computed from them is row
    ``rows[i]`` of the same computed from ``desc`` and ``tensors``."""
    spec = spec_for(desc)
    if spec.regions is None:
        return None
    return spec.regions(desc, dict(tensors), np.asarray(rows, dtype=np.intp))


def readings_of(desc: Desc) -> tuple[Reading, ...]:
    """The readings the operator of ``desc`` has (``OpSpec.readings``)."""
    return spec_for(desc).readings


def prepare(desc: Desc, tensors: Mapping[str, np.ndarray],
            feature_level: str = NEWEST_FEATURE_LEVEL) -> tuple[OpSpec, dict[str, np.ndarray]]:
    """What every computation of a desc starts with, ``execute`` and ``execute_with_bounds``
    alike: the desc validated at ``feature_level``, the arrays checked against it, and the
    operator's ``check_values`` (limits that depend on the values, checked before a kernel
    allocates). Returns the operator's record and the arrays by member name; raises DescError."""
    validate(desc, feature_level)
    arrays = _check_tensors(desc, tensors)
    spec = spec_for(desc)
    if spec.check_values is not None:
        spec.check_values(desc, arrays)
    return spec, arrays


def _check_tensors(desc: Desc, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    if not isinstance(tensors, Mapping):
        raise DescError("<tensors>", type(tensors).__name__, f"a dict keyed by {', '.join(desc.INPUTS)}", desc.TYPE)
    extra = sorted(set(tensors) - set(desc.INPUTS))
    if extra:
        raise DescError(extra[0], "<array>", f"not an input of {desc.TYPE}; its inputs are {', '.join(desc.INPUTS)}",
                        desc.TYPE)
    arrays = {}
    for member in desc.INPUTS:
        if member not in tensors:
            raise DescError(member, "<missing>", "required input array", desc.TYPE)
        arrays[member] = check_array(desc, member, tensors[member])
    return arrays


def check_array(desc: Desc, member: str, array: object) -> np.ndarray:
    """``array`` as an ndarray, if it matches the tensor desc ``member`` of ``desc`` exactly."""
    tensor = member_value(desc, member)
    if not isinstance(array, np.ndarray):
        raise DescError(member, type(array).__name__, f"a numpy.ndarray of shape {list(tensor.sizes)} "
                        f"and dtype {numpy_dtype(tensor.data_type)}", desc.TYPE)
    if tuple(array.shape) != tuple(tensor.sizes):
        raise DescError(member, f"array of shape {list(array.shape)}", f"shape must equal {member}.Sizes "
                        f"{list(tensor.sizes)}", desc.TYPE)
    expected = numpy_dtype(tensor.data_type)
    if array.dtype != expected:
        raise DescError(member, f"array of dtype {array.dtype}", f"dtype must be {expected} "
                        f"({member}.DataType {tensor.data_type})", desc.TYPE)
    return array
