"""Loading a model file nobody vouched for: checked before onnx or onnxruntime touch it.

``load_untrusted(path)`` is the only way ``model run`` reads a model. It guarantees:

- the model file is read once, as bytes, through ``harness.core.untrusted_files`` (a regular file,
  at most the ``model-bytes`` cap; ``onnx.load`` is not used: it would follow external-data
  references itself);
- a truncated file or one that is not an ONNX model is refused with ``ModelRefused`` (protobuf
  cannot parse it, or it parses to something without an IR version, opset imports and a graph);
- every tensor stored as external data (initializers, sparse initializers, ``Constant``-style
  tensor attributes, in every subgraph) is checked *before any file it names is opened*: the
  location must be a relative path that stays inside the model's folder lexically (no absolute
  path, drive or ``..`` escape) and after resolving symlinks, must name a regular file, and its
  offset/length must lie inside that file, and all of them together must stay within the
  ``external-bytes`` cap. Only then are their bytes read, by this module. When the model and
  its external data fit one protobuf message (``INLINE_LIMIT``, 2 GiB), the bytes go into the
  tensors, so the ModelProto handed on holds no external reference; a larger model keeps its
  main graph's external initializers out of the message (their location replaced by
  ``INJECTED``, which names no file) and hands their arrays on in ``LoadedModel.initializers``,
  which every session receives through ``add_external_initializers``. Either way ONNX Runtime
  never opens a file at all (it gets the serialized bytes and, for a large model, the arrays);
- ``check_ops`` (below) and then ``onnx.checker`` check the now self-contained model.

``check_ops(model)`` refuses nodes whose op no execution provider can have (an op the ONNX
standard does not define at the model's opset, or a domain the model does not import), and
``explain_session_error`` turns ONNX Runtime's "no kernel for this node" errors into the same
kind of message. Each refusal is a ``ModelRefused`` whose message names the problem; the CLI
exits 2 on it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..core.untrusted_files import FileRefused, inside, limits, open_regular, read_bytes

#: A model file above this size is refused whatever ``--limit model-bytes`` says: protobuf
#: cannot parse more than 2 GiB in one message (weights beyond that go into external data).
MAX_MODEL_BYTES = 2**31 - 1
#: Up to this many bytes (model plus external data) the external data is inlined into the
#: tensors; above it, initializers are injected into sessions instead (module docstring).
INLINE_LIMIT = 2**31 - 2**24
#: The location an injected tensor is left with: no file has this name (a ``:`` and ``*`` are
#: not valid in Windows file names), and ONNX Runtime never looks it up because the tensor is
#: replaced by ``add_external_initializers`` first.
INJECTED = "*ep-testbed:injected*"


class ModelRefused(ValueError):
    """A model file that is not run; the message names the file and the problem."""


@dataclass
class LoadedModel:
    """A model read by ``load_untrusted``: self-contained (external data inlined), checked."""

    model: onnx.ModelProto
    path: Path
    folder: Path
    sha256: str            # of the model file's bytes (external data files not included)
    external_files: list[str]  # external data locations read, relative to ``folder``
    initializers: dict[str, np.ndarray] = field(default_factory=dict)  # injected, not inlined (a model over 2 GiB)


def load_untrusted(path: str | os.PathLike) -> LoadedModel:
    """Read, parse, resolve external data safely and check the model at ``path`` (see module doc)."""
    model_path = Path(path)
    cap = min(limits().model_bytes, MAX_MODEL_BYTES)
    try:
        data = read_bytes(model_path, "model file", limit=cap, limit_name="model_bytes")
    except FileRefused as exc:
        raise ModelRefused(f"{exc}" + ("; a model over 2 GiB must keep its weights as external data"
                                       if "more than" in exc.problem else "")) from None
    if not data:
        raise ModelRefused(f"{model_path}: empty file, not an ONNX model")
    model = parse_model(data, str(model_path))
    folder = model_path.resolve().parent
    external, injected = resolve_external_data(model, folder, str(model_path), len(data))
    check_ops(model, str(model_path))
    try:
        onnx.checker.check_model(_without(model, injected) if injected else model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelRefused(f"{model_path}: onnx.checker rejects the model: {first}") from None
    return LoadedModel(model, model_path, folder, hashlib.sha256(data).hexdigest(), external, injected)


def _without(model: onnx.ModelProto, injected: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` for ``onnx.checker``: the injected initializers (whose data is not in
    the message) become graph inputs of the same type and shape, which is what the checker can
    check without reading their data."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept = [t for t in copy.graph.initializer if t.name not in injected]
    for tensor in copy.graph.initializer:
        if tensor.name in injected:
            copy.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    return copy


def parse_model(data: bytes, name: str = "model") -> onnx.ModelProto:
    """Bytes -> ModelProto, or ``ModelRefused`` saying the file is truncated or not ONNX."""
    from google.protobuf.message import DecodeError

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelRefused(f"{name}: not a readable ONNX model (truncated or not ONNX): protobuf could not parse "
                           f"its {len(data)} bytes ({exc})") from None
    present = {"ir_version": model.ir_version > 0, "opset_import": len(model.opset_import) > 0,
               "graph": model.HasField("graph") and len(model.graph.node) > 0}
    missing = [what for what, ok in present.items() if not ok]
    if missing:
        raise ModelRefused(f"{name}: not an ONNX model (truncated or another format): it has no "
                           f"{', '.join(missing)} ({len(data)} bytes)")
    for index, opset in enumerate(model.opset_import):
        if isinstance(opset.domain, bytes):
            _not_text(name, "the model", f"opset_import {index}'s domain", opset.domain)
    for index, function in enumerate(model.functions):
        for field_name in ("name", "domain"):
            if isinstance(getattr(function, field_name), bytes):
                _not_text(name, "the model", f"local function {index}'s {field_name}", getattr(function, field_name))
        _check_nodes(function.node, name, f"local function {index}")
    _check_text(model.graph, name, "the graph")
    return model


def _not_text(name: str, where: str, what: str, value: bytes) -> None:
    """Refuse a name that is not UTF-8 text: ONNX's strings are UTF-8, and protobuf hands an
    invalid one over as bytes, which every reader of names (placement, attribution, the
    DirectML host's request, reports) would then meet."""
    raise ModelRefused(f"{name}: {where}: {what} is not UTF-8 text ({value[:60]!r}); ONNX names are UTF-8.\n"
                       "Note: re-save the model with UTF-8 names (onnx.save after renaming them)")


def _check_text(graph: onnx.GraphProto, name: str, where: str) -> None:
    """``_not_text`` for every name in ``graph`` (and its subgraphs)."""
    if isinstance(graph.name, bytes):
        _not_text(name, where, "the graph's name", graph.name)
    for kind, values in (("graph input", graph.input), ("graph output", graph.output),
                         ("value_info", graph.value_info), ("initializer", graph.initializer)):
        for index, value in enumerate(values):
            if isinstance(value.name, bytes):
                _not_text(name, where, f"{kind} {index}'s name", value.name)
    _check_nodes(graph.node, name, where)


def _check_nodes(nodes: Any, name: str, where: str) -> None:
    """``_not_text`` for the names of a graph's or a local function's nodes (and their subgraphs)."""
    for index, node in enumerate(nodes):
        for field_name in ("name", "op_type", "domain"):
            value = getattr(node, field_name)
            if isinstance(value, bytes):
                _not_text(name, where, f"node {index}'s {field_name}", value)
        for field_name in ("input", "output"):
            for position, value in enumerate(getattr(node, field_name)):
                if isinstance(value, bytes):
                    _not_text(name, where, f"node {index}'s {field_name} {position}", value)
        for attribute in node.attribute:
            if isinstance(attribute.name, bytes):
                _not_text(name, where, f"an attribute name of node {index}", attribute.name)
            for sub in [attribute.g, *attribute.graphs] if attribute.HasField("g") or attribute.graphs else []:
                _check_text(sub, name, f"{where}, node {index}'s subgraph")


def iter_tensors(graph: onnx.GraphProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    """(where, tensor) for every tensor a graph holds, subgraphs included."""
    for t in graph.initializer:
        yield f"initializer {t.name!r}", t
    for s in graph.sparse_initializer:
        yield f"sparse initializer {s.values.name!r}", s.values
        yield f"sparse initializer {s.values.name!r} indices", s.indices
    for node in graph.node:
        for attr in node.attribute:
            where = f"node {node.name or node.op_type!r} attribute {attr.name!r}"
            if attr.HasField("t"):
                yield where, attr.t
            for t in attr.tensors:
                yield where, t
            if attr.HasField("sparse_tensor"):
                yield where, attr.sparse_tensor.values
                yield where, attr.sparse_tensor.indices
            for s in attr.sparse_tensors:
                yield where, s.values
                yield where, s.indices
            if attr.HasField("g"):
                yield from iter_tensors(attr.g)
            for g in attr.graphs:
                yield from iter_tensors(g)


def resolve_external_data(model: onnx.ModelProto, folder: Path, name: str = "model", model_bytes: int = 0
                          ) -> tuple[list[str], dict[str, np.ndarray]]:
    """Check every external-data reference against ``folder``, then read the bytes: inlined
    into the tensors when model and data fit ``INLINE_LIMIT``, else returned as arrays to inject
    (module docstring). Returns ``(locations read, injected arrays by initializer name)``.

    Raises ``ModelRefused`` naming the tensor and the location before opening anything for a
    location that is absolute, escapes the folder (``..``, symlinks), is missing, whose
    offset/length do not fit the file, or when all of them together exceed the
    ``external-bytes`` cap."""
    checked = [(where, tensor, *_checked_location(where, tensor, folder, name))
               for where, tensor in iter_tensors(model.graph) if tensor.data_location == onnx.TensorProto.EXTERNAL]
    total = sum(length for *_, length in checked)
    cap = limits().external_bytes
    if total > cap:
        raise ModelRefused(f"{name}: its external data holds {total} bytes, more than the {cap} read.\nNote: if you "
                           f"mean it, raise the cap with --limit external-bytes={total}")
    inline = model_bytes + total <= INLINE_LIMIT
    main = {id(t) for t in model.graph.initializer}
    injected: dict[str, np.ndarray] = {}
    read: list[str] = []
    for where, tensor, target, offset, length in checked:
        payload = _read_range(target, offset, length, name, where)
        if inline:
            tensor.raw_data = payload
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
        else:
            injected[tensor.name] = _injectable(tensor, payload, id(tensor) in main, name, where)
        relative = target.relative_to(folder.resolve()).as_posix()
        if relative not in read:
            read.append(relative)
    return read, injected


def _checked_location(where: str, tensor: onnx.TensorProto, folder: Path, name: str) -> tuple[Path, int, int]:
    """``(file, offset, length)`` of one external tensor, checked as ``resolve_external_data``
    says; nothing is opened."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    if not location:
        raise ModelRefused(f"{name}: {where} is stored as external data without a location")
    try:
        target = inside(folder, location, "external data")
    except FileRefused:
        raise ModelRefused(f"{name}: {where} points at external data {location!r}, which is outside the model's "
                           f"folder {folder.resolve()}; only files inside that folder are read") from None
    if not target.is_file():
        raise ModelRefused(f"{name}: {where}: external data file {location!r} does not exist in {folder.resolve()}")
    try:
        offset = int(info.get("offset", "0") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise ModelRefused(f"{name}: {where}: external data offset/length {info.get('offset')!r}/"
                           f"{info.get('length')!r} are not whole numbers") from None
    size = target.stat().st_size
    if offset < 0 or (length is not None and length < 0) or offset + (length or 0) > size:
        raise ModelRefused(f"{name}: {where}: external data {location!r} offset {offset} length {length} "
                           f"does not fit the file ({size} bytes)")
    return target, offset, size - offset if length is None else length


def _read_range(target: Path, offset: int, length: int, name: str, where: str) -> bytes:
    """Exactly ``length`` bytes at ``offset`` of ``target`` (a regular file, opened as such)."""
    try:
        with open_regular(target, "external data file") as f:
            f.seek(offset)
            payload = f.read(length)
    except FileRefused as exc:
        raise ModelRefused(f"{name}: {where}: {exc}") from None
    if len(payload) != length:
        raise ModelRefused(f"{name}: {where}: external data {target.name!r} ended after {len(payload)} of {length} "
                           "bytes (it changed while being read)")
    return payload


def _injectable(tensor: onnx.TensorProto, payload: bytes, in_main_graph: bool, name: str, where: str) -> np.ndarray:
    """The array an external initializer of a large model is injected as; the tensor keeps its
    external marker with ``INJECTED`` as location. ``ModelRefused`` for a tensor that cannot be
    injected (not a main-graph initializer, a string tensor, bytes that do not fit its dims)."""
    if not in_main_graph:
        raise ModelRefused(f"{name}: {where} holds external data, but the model is over 2 GiB and only the main "
                           "graph's initializers can be handed to ONNX Runtime apart from the model; store that tensor "
                           "in the model or make it an initializer of the main graph")
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        raise ModelRefused(f"{name}: {where} has data type {tensor.data_type}, which has no NumPy form") from None
    count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
    if dtype.kind not in "biufc" or count * dtype.itemsize != len(payload):
        raise ModelRefused(f"{name}: {where}: {len(payload)} bytes of external data do not hold {count} {dtype} "
                           f"values (its dims {list(tensor.dims)})")
    del tensor.external_data[:]
    for key, value in (("location", INJECTED), ("offset", "0"), ("length", str(len(payload)))):
        tensor.external_data.add(key=key, value=value)
    return np.frombuffer(payload, dtype=dtype.newbyteorder("<")).reshape(tuple(tensor.dims)).astype(dtype, copy=False)


def constants(model: onnx.ModelProto, injected: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The main graph's initializers as arrays: those stored in the model, plus ``injected``;
    an external tensor is never read here (``numpy_helper.to_array`` would open its file)."""
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
              if t.data_location != onnx.TensorProto.EXTERNAL}
    arrays.update(injected or {})
    return arrays


def model_opset(model: onnx.ModelProto, domain: str = "") -> int | None:
    """The opset the model imports for ``domain`` ("" and "ai.onnx" are the same domain)."""
    domains = {"", "ai.onnx"} if domain in ("", "ai.onnx") else {domain}
    for entry in model.opset_import:
        if entry.domain in domains:
            return int(entry.version)
    return None


def check_ops(model: onnx.ModelProto, name: str = "model") -> None:
    """Refuse nodes no execution provider can have: a standard-domain op that ONNX does not
    define at the model's opset, or a node whose domain the model does not import."""
    imported = {e.domain or "": e.version for e in model.opset_import}
    for node in model.graph.node:
        domain = node.domain or ""
        label = f"node {node.name!r} (op {node.op_type!r}" + (f", domain {domain!r})" if domain else ")")
        if domain in ("", "ai.onnx"):
            opset = model_opset(model)
            if opset is not None and not onnx.defs.has(node.op_type, opset, ""):
                raise ModelRefused(f"{name}: {label} is not an ONNX operator at opset {opset}; no execution "
                                   "provider implements it")
        elif domain not in imported and not any(f.domain == domain for f in model.functions):
            raise ModelRefused(f"{name}: {label}: the model does not import domain {domain!r}; no execution "
                               "provider can resolve the op")


_NO_KERNEL = re.compile(r"Could not find an implementation for (\S+) node with name '([^']*)'")
_IR_VERSION = re.compile(r"Unsupported model IR version: \d+, max supported IR version: \d+")
_NOT_REGISTERED = re.compile(r"(\S+) is not a registered function/op")


def explain_session_error(exc: BaseException, providers: list[str], name: str = "model") -> ModelRefused | None:
    """A ``ModelRefused`` if ONNX Runtime refused the model for an op with no kernel, else None."""
    text = str(exc)
    match = _NO_KERNEL.search(text)
    if match:
        return ModelRefused(f"{name}: node {match.group(2)!r} (op {match.group(1)}) has no implementation in any "
                            f"available execution provider ({', '.join(providers)})")
    match = _IR_VERSION.search(text)
    if match:
        return ModelRefused(f"{name}: {match.group(0)} in this ONNX Runtime; re-save the model with an older IR "
                            "version (onnx.helper.make_model(..., ir_version=N)) or upgrade onnxruntime")
    match = _NOT_REGISTERED.search(text)
    if match:
        return ModelRefused(f"{name}: op {match.group(1)} is not registered with ONNX Runtime; no execution "
                            f"provider ({', '.join(providers)}) implements it")
    return None
