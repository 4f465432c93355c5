"""Loading a model file nobody vouched for: checked before onnx or onnxruntime touch it.

``load_untrusted(path)`` is the only way ``model run`` reads a model. It guarantees:

- the model file is read once, as bytes, by this module (``onnx.load`` is not used: it would
  follow external-data references itself);
- a truncated file or one that is not an ONNX model is refused with ``ModelRefused`` (protobuf
  cannot parse it, or it parses to something without an IR version, opset imports and a graph);
- every tensor stored as external data (initializers, sparse initializers, ``Constant``-style
  tensor attributes, in every subgraph) is checked *before any file it names is opened*: the
  location must be a relative path that stays inside the model's folder lexically (no absolute
  path, drive or ``..`` escape) and after resolving symlinks, must name a regular file, and its
  offset/length must lie inside that file. Only then are its bytes read, by this module, into
  the tensor, so the ModelProto handed on holds no external reference and ONNX Runtime
  never opens a file at all (it gets the serialized bytes);
- ``check_ops`` (below) and then ``onnx.checker`` check the now self-contained model.

``check_ops(model)`` refuses nodes whose op no execution provider can have (an op the ONNX
standard does not define at the model's opset, or a domain the model does not import), and
``explain_session_error`` turns ONNX Runtime's "no kernel for this node" errors into the same
kind of message. Each refusal is a ``ModelRefused`` whose message names the problem; the CLI
exits 2 on it.
"""

from __future__ import annotations

import hashlib
import ntpath
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import onnx

#: Models above this size are refused (protobuf cannot serialize more than 2 GiB in one message).
MAX_MODEL_BYTES = 2**31 - 1


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


def load_untrusted(path: str | os.PathLike) -> LoadedModel:
    """Read, parse, resolve external data safely and check the model at ``path`` (see module doc)."""
    model_path = Path(path)
    if not model_path.exists():
        raise ModelRefused(f"{model_path}: no such file")
    if not model_path.is_file():
        raise ModelRefused(f"{model_path}: not a regular file")
    size = model_path.stat().st_size
    if size == 0:
        raise ModelRefused(f"{model_path}: empty file, not an ONNX model")
    if size > MAX_MODEL_BYTES:
        raise ModelRefused(f"{model_path}: {size} bytes; models over 2 GiB must keep their weights as external data")
    data = model_path.read_bytes()
    model = parse_model(data, str(model_path))
    folder = model_path.resolve().parent
    external = resolve_external_data(model, folder, str(model_path))
    check_ops(model, str(model_path))
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelRefused(f"{model_path}: onnx.checker rejects the model: {first}") from None
    return LoadedModel(model, model_path, folder, hashlib.sha256(data).hexdigest(), external)


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
    return model


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


def resolve_external_data(model: onnx.ModelProto, folder: Path, name: str = "model") -> list[str]:
    """Check every external-data reference against ``folder``, then inline the bytes.

    Raises ``ModelRefused`` naming the tensor and the location before opening anything for a
    location that is absolute, escapes the folder (``..``, symlinks), is missing, or whose
    offset/length do not fit the file. Returns the locations read.
    """
    root = folder.resolve()
    checked: list[tuple[onnx.TensorProto, Path, int, int | None]] = []
    for where, tensor in iter_tensors(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        if not location:
            raise ModelRefused(f"{name}: {where} is stored as external data without a location")
        target = _inside(location, root)
        if target is None:
            raise ModelRefused(f"{name}: {where} points at external data {location!r}, which is outside the model's "
                               f"folder {root}; only files inside that folder are read")
        if not target.is_file():
            raise ModelRefused(f"{name}: {where}: external data file {location!r} does not exist in {root}")
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
        checked.append((tensor, target, offset, length))
    read: list[str] = []
    for tensor, target, offset, length in checked:
        with open(target, "rb") as f:
            f.seek(offset)
            tensor.raw_data = f.read() if length is None else f.read(length)
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
        relative = str(target.relative_to(root))
        if relative not in read:
            read.append(relative)
    return read


def _inside(location: str, root: Path) -> Path | None:
    """The file ``location`` names under ``root``, or None if it is not inside ``root``.

    Decided lexically first (absolute paths, drive letters, ``..`` that climbs out), with no
    filesystem access, then again after resolving symlinks (``realpath`` only reads links)."""
    if (posixpath.isabs(location) or ntpath.isabs(location) or ntpath.splitdrive(location)[0]
            or location.startswith(("\\", "/"))):
        return None
    parts = re.split(r"[\\/]+", location)
    depth = 0
    for part in parts:
        if part in ("", "."):
            continue
        depth = depth - 1 if part == ".." else depth + 1
        if depth < 0:
            return None
    candidate = Path(os.path.realpath(root.joinpath(*[p for p in parts if p not in ("", ".")])))
    try:
        candidate.relative_to(root)
    except ValueError:
        return None
    return candidate


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
