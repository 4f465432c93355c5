"""Inputs for a whole-model run: the model's input specs, ``--shape``, seeded generation, ``.npz``.

``input_specs(model)`` lists the graph inputs a caller must feed (initializers excluded), with
NumPy dtypes and dims (an int, a symbolic name, or None when the model leaves it blank).
``resolve_shapes(specs, parse_shapes(["batch=2", "rois=6x4"]))`` fixes every dim: a ``--shape``
item names either a symbolic dimension (one number) or an input (its whole shape); an unresolved
dim is a ``ShapeError`` naming the input, the axis and the ``--shape`` that would fix it.

``generate_inputs`` is seeded and range-aware: it looks at who consumes each input, and where an
attributed node gives that input a role (its operator record's ``onnx_input_roles``:
``reference.registry.INPUT_ROLES``), generates for the role: regions get boxes inside their
feature map's image (x1 < x2, y1 < y2, in the input's pixel units, i.e. feature size /
spatial_scale) and batch indices inside the batch, while other floats are standard normal and
other integers small and non-negative.
``load_inputs`` reads an ``.npz`` through ``harness.core.untrusted_files`` (no pickles, sizes capped
before anything is decompressed) and checks names, dtypes and shapes. Every array generated or
read holds at most the ``elements`` cap (``--limit elements=N``), all inputs together too:
``generate_inputs`` computes the sizes before it allocates anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper, shape_inference

from ...reference.dtypes import filled
from ...reference.registry import specs_for_onnx
from ..core.untrusted_files import FileRefused, limits, read_arrays

#: The roles that place an input on its node's feature map (the others are generated as plain inputs).
PLACED_ROLES = ("boxes", "batch_index", "batch_boxes")


class ShapeError(ValueError):
    """A dimension the run cannot fix, or a ``--shape`` item that names nothing."""


class InputsError(ValueError):
    """Given inputs (``--inputs``) that do not fit the model."""


@dataclass(frozen=True)
class InputSpec:
    """One graph input: name, NumPy dtype, dims (int, symbolic name, or None if blank; ``dims``
    itself None when the model gives no shape at all)."""

    name: str
    dtype: np.dtype
    dims: tuple[int | str | None, ...] | None

    def to_json(self) -> dict[str, Any]:
        """The spec as recorded in ``model_result.json``'s ``inputs.specs``."""
        return {"name": self.name, "dtype": self.dtype.name, "dims": None if self.dims is None else list(self.dims)}


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """The graph inputs that need feeds, in graph order."""
    initializers = {t.name for t in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise InputsError(f"input {value.name!r}: only tensor inputs are supported "
                              f"(got {value.type.WhichOneof('value')})")
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        except Exception:
            raise InputsError(f"input {value.name!r}: element type {tensor.elem_type} has no NumPy dtype") from None
        if not tensor.HasField("shape"):  # rank unknown: only --shape INPUT=... can fix it
            specs.append(InputSpec(value.name, dtype, None))
            continue
        dims: list[int | str | None] = []
        for d in tensor.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(d.dim_param)
            else:
                dims.append(None)
        specs.append(InputSpec(value.name, dtype, tuple(dims)))
    return specs


def parse_shapes(items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """``["batch=2", "image=1x3x224x224"]`` -> {"batch": (2,), "image": (1, 3, 224, 224)}."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        try:
            dims = tuple(int(v) for v in text.lower().replace(",", "x").split("x")) if sep and text else ()
        except ValueError:
            dims = ()
        if not name.strip() or not dims or any(d <= 0 for d in dims):
            raise ShapeError(f"--shape {item!r}: expected NAME=N (a symbolic dimension) or INPUT=AxBxC (an input's "
                             "shape), positive whole numbers, e.g. batch=2 or image=1x3x224x224")
        out[name.strip()] = dims
    return out


def resolve_shapes(specs: Sequence[InputSpec], given: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Input name -> concrete shape; ``ShapeError`` naming the first dim nothing fixes."""
    symbols = {d for s in specs for d in (s.dims or ()) if isinstance(d, str)}
    names = {s.name for s in specs}
    for key, dims in given.items():
        if key in names:
            continue
        if key not in symbols:
            raise ShapeError(f"--shape {key}=...: the model has no input or symbolic dimension named {key!r} "
                             f"(inputs: {', '.join(sorted(names)) or 'none'}; symbolic dims: "
                             f"{', '.join(sorted(symbols)) or 'none'})")
        if len(dims) != 1:
            raise ShapeError(f"--shape {key}=...: {key!r} is a symbolic dimension; give one number, e.g. {key}=2")
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        if spec.dims is None:
            if spec.name not in given:
                raise ShapeError(f"input {spec.name!r} has no shape in the model: give --shape {spec.name}=AxBx...")
            shapes[spec.name] = tuple(given[spec.name])
            continue
        if spec.name in given:
            dims = given[spec.name]
            if len(dims) != len(spec.dims):
                raise ShapeError(f"--shape {spec.name}=...: input {spec.name!r} has rank {len(spec.dims)}, "
                                 f"got {len(dims)} dims")
            for axis, (want, got) in enumerate(zip(spec.dims, dims)):
                if isinstance(want, int) and want != got:
                    raise ShapeError(f"--shape {spec.name}=...: axis {axis} of {spec.name!r} is fixed at {want} "
                                     f"in the model, got {got}")
            shapes[spec.name] = tuple(dims)
            continue
        resolved = []
        for axis, dim in enumerate(spec.dims):
            if isinstance(dim, int):
                resolved.append(dim)
            elif isinstance(dim, str) and dim in given:
                resolved.append(given[dim][0])
            elif isinstance(dim, str):
                raise ShapeError(f"input {spec.name!r} axis {axis} is the symbolic dimension {dim!r}: give "
                                 f"--shape {dim}=N (or the whole input: --shape {spec.name}=...)")
            else:
                raise ShapeError(f"input {spec.name!r} axis {axis} has no size in the model: give "
                                 f"--shape {spec.name}=" + "x".join(str(d) if isinstance(d, int) else "N"
                                                                      for d in spec.dims))
        shapes[spec.name] = tuple(resolved)
    return shapes


def skeleton(model: onnx.ModelProto, keep_bytes: int = 2**16) -> onnx.ModelProto:
    """A copy of ``model`` for shape inference without its weights: initializers larger than
    ``keep_bytes`` become graph inputs of their type and shape (inference needs the values of
    small ones only, such as a Reshape's shape), so no large model is copied whole."""
    skeleton = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name)
    skeleton.opset_import.extend(model.opset_import)
    skeleton.functions.extend(model.functions)
    graph = skeleton.graph
    graph.name = model.graph.name
    for field in ("node", "input", "output", "value_info"):
        getattr(graph, field).extend(getattr(model.graph, field))
    declared = {v.name for v in model.graph.input}
    for tensor in model.graph.initializer:
        if tensor.ByteSize() <= keep_bytes:
            graph.initializer.append(tensor)
        elif tensor.name not in declared:
            graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    return skeleton


def known_size(dims: tuple[int | None, ...] | None) -> int | None:
    """The element count of a shape whose every dimension is known (``inferred_shapes``), else None."""
    if dims is None or not all(isinstance(d, int) and d >= 0 for d in dims):
        return None
    return math.prod(d for d in dims if d is not None)


def inferred_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]], *, declared: bool = True
                    ) -> dict[str, tuple[int | None, ...]]:
    """Value name -> shape after ONNX shape inference with the inputs fixed to ``shapes``; with
    ``declared=False`` the shapes the model declares for its outputs and intermediates are
    dropped first, so the result is what the nodes compute, not what the file claims."""
    fixed = skeleton(model)
    if not declared:
        for value in [*fixed.graph.output, *fixed.graph.value_info]:
            value.type.tensor_type.ClearField("shape")
    for value in fixed.graph.input:
        if value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            for d, n in zip(dims, shapes[value.name]):
                d.Clear()
                d.dim_value = n
    try:
        inferred = shape_inference.infer_shapes(fixed, strict_mode=False)
    except Exception:
        return {}
    out = {}
    for value in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        t = value.type.tensor_type
        if t.HasField("shape"):
            out[value.name] = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in t.shape.dim)
    return out


def check_graph_sizes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> None:
    """``ShapeError`` naming the value when ONNX shape inference, with the inputs' ``shapes``,
    gives a tensor of more elements than the ``elements`` cap: the model would make ONNX Runtime
    allocate it. Values whose size inference cannot tell (data-dependent shapes) are not bounded
    here; run such a model with ``--timeout`` to keep it in a child process."""
    cap = limits().elements
    for name, dims in inferred_shapes(model, shapes, declared=False).items():
        size = known_size(dims)
        if dims and size is not None and size > cap:
            raise ShapeError(f"value {name!r} of the model would have shape {list(dims)} ({size} elements) "
                             f"with these inputs, more than the {cap} elements this run allows; give smaller inputs "
                             "with --shape, or raise the cap with --limit elements=N if you mean it")


def check_sizes(shapes: dict[str, tuple[int, ...]], what: str = "generated inputs") -> None:
    """``ShapeError`` naming the input (and the ``--shape`` or cap that decides) when any input,
    or all of them together, would hold more elements than the ``elements`` cap: checked
    before anything is allocated."""
    cap = limits().elements
    total = 0
    for name, shape in shapes.items():
        count = math.prod(shape)
        total += count
        if count > cap or total > cap:
            raise ShapeError(f"input {name!r} with shape {list(shape)} ({count} elements) would take the {what} past "
                             f"{cap} elements; give smaller dims with --shape, or raise the cap with --limit "
                             f"elements=N if you mean it")


def generate_inputs(model: onnx.ModelProto, specs: Sequence[InputSpec], shapes: dict[str, tuple[int, ...]],
                    seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every spec (module docstring: which ranges and why); every one an
    ndarray of its spec's shape (a scalar input is a 0-d array), sizes checked first
    (``check_sizes``)."""
    check_sizes({spec.name: shapes[spec.name] for spec in specs})
    rng = np.random.default_rng(seed)
    roles = _roles(model, shapes)
    feeds = {}
    for spec in specs:
        shape = shapes[spec.name]
        role = roles.get(spec.name)
        if role is not None:
            feeds[spec.name] = _role_array(rng, role, shape, spec.dtype)
        elif spec.dtype.kind == "f":
            feeds[spec.name] = filled(shape, spec.dtype, rng.standard_normal)  # no float64 copy of the input
        elif spec.dtype.kind in "iu":
            feeds[spec.name] = filled(shape, spec.dtype, lambda n: rng.integers(0, 4, size=n))
        elif spec.dtype.kind == "b":
            feeds[spec.name] = filled(shape, np.bool_, lambda n: rng.random(n) < 0.5)
        else:
            raise InputsError(f"input {spec.name!r}: cannot generate {spec.dtype} data; give --inputs FILE.npz")
    return {name: np.asarray(value) for name, value in feeds.items()}


def _node_roles(node: onnx.NodeProto) -> tuple[str, ...]:
    """The role of each input of ``node`` by position, as its operator record gives them for its op
    type (``OpSpec.onnx_input_roles``); () for a node no record reads back."""
    if node.domain not in ("", "ai.onnx"):
        return ()
    found = specs_for_onnx(node.op_type)
    return tuple(found[0].onnx_input_roles.get(node.op_type, ())) if found else ()


def _roles(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple]:
    """Input name -> (role, feature shape, spatial_scale) for the graph inputs an attributed node
    gives a placed role (``PLACED_ROLES``), placed on the node's 4-D ``feature`` input."""
    roles: dict[str, tuple] = {}
    inputs = set(shapes)
    wanted = [(n, r) for n in model.graph.node if "feature" in (r := _node_roles(n))]
    if not any(name in inputs for n, r in wanted for name, role in zip(n.input, r) if role in PLACED_ROLES):
        return roles
    known = inferred_shapes(model, shapes)
    for node, node_roles in wanted:
        feature = known.get(node.input[node_roles.index("feature")])
        if feature is None or len(feature) != 4 or any(d is None for d in feature):
            continue
        scale = 1.0
        for a in node.attribute:
            if a.name == "spatial_scale":
                scale = float(a.f)
        if not (math.isfinite(scale) and scale > 0):  # boxes cannot be placed in units of such a scale
            continue
        for name, role in zip(node.input, node_roles):
            if role in PLACED_ROLES and name in inputs:
                roles[name] = (role, feature, scale)
    return roles


def _boxes(rng: np.random.Generator, count: int, feature: tuple, scale: float) -> np.ndarray:
    """``count`` boxes (x1, y1, x2, y2) inside the image a feature map of ``feature`` covers."""
    height, width = feature[2] / scale, feature[3] / scale
    x1 = rng.uniform(0, 0.7 * width, count)
    y1 = rng.uniform(0, 0.7 * height, count)
    x2 = x1 + rng.uniform(0.15, 1.0, count) * (width - 1 - x1).clip(min=1.0)
    y2 = y1 + rng.uniform(0.15, 1.0, count) * (height - 1 - y1).clip(min=1.0)
    return np.stack([x1, y1, x2, y2], axis=1)


def _role_array(rng: np.random.Generator, role: tuple, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A seeded array for an ROI input of ``role`` (``_roles``); standard normal if its shape does not fit the role."""
    kind, feature, scale = role
    count = shape[0] if shape else 1
    if kind == "batch_index":
        return filled(shape, dtype, lambda n: rng.integers(0, feature[0], size=n))
    if kind == "boxes" and shape[-1:] == (4,):
        return _boxes(rng, count, feature, scale).reshape(shape).astype(dtype)
    if kind == "batch_boxes" and shape[-1:] == (5,):
        batch = rng.integers(0, feature[0], size=(count, 1)).astype(np.float64)
        # the role's boxes are rounded to whole pixels by the node: draw whole-pixel boxes so no corner sits on .5
        boxes = np.round(_boxes(rng, count, feature, scale))
        boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2])
        return np.concatenate([batch, boxes], axis=1).reshape(shape).astype(dtype)
    return filled(shape, dtype, rng.standard_normal)


def load_inputs(path: str | Path, specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """Arrays from an ``.npz`` keyed by input name (``untrusted_files.read_arrays``), checked
    against ``specs`` (``match_inputs``); ``InputsError`` naming the file and the input otherwise."""
    try:
        arrays = read_arrays(path, "inputs NPZ")
    except FileRefused as exc:
        raise InputsError(f"--inputs {exc}") from None
    return match_inputs(arrays, specs, f"--inputs {path}")


def match_inputs(arrays: dict[str, np.ndarray], specs: Sequence[InputSpec], label: str) -> dict[str, np.ndarray]:
    """``arrays`` as the model's feeds: exactly its inputs' names, each with its dtype and any
    fixed dims; ``InputsError`` starting with ``label`` (where the arrays came from) otherwise."""
    names = [s.name for s in specs]
    missing = [n for n in names if n not in arrays]
    extra = [n for n in arrays if n not in names]
    if missing or extra:
        raise InputsError(f"{label}: " + "; ".join(
            part for part in (f"missing {', '.join(missing)}" if missing else "",
                              f"not model inputs: {', '.join(extra)}" if extra else "") if part)
            + f" (the model's inputs: {', '.join(names)})")
    for spec in specs:
        array = arrays[spec.name]
        if array.dtype != spec.dtype:
            raise InputsError(f"{label}: {spec.name!r} is {array.dtype}, the model takes {spec.dtype}")
        dims = spec.dims
        if dims is not None and (array.ndim != len(dims) or any(isinstance(d, int) and d != n
                                                                 for d, n in zip(dims, array.shape))):
            raise InputsError(f"{label}: {spec.name!r} has shape {list(array.shape)}, the model takes "
                              f"{list(dims)}")
    return {n: arrays[n] for n in names}
