"""The corpus: minimal failing cases as folders, run next to the catalog by ``ep-testbed run --corpus DIR``.

One folder per case (named ``harness.core.results.safe_id`` of its id), every file plain data::

    DIR/<safe id>/case.json    what the case is, what failed where, and its expectations
    DIR/<safe id>/desc.json    the desc in DirectML's spelling (``desc_from_dml`` reads it)
    DIR/<safe id>/inputs.npz   one array per DML input member (InputTensor, ROITensor, ...)
    DIR/<safe id>/repro/       the case's repro bundle: model.onnx, inputs.npz (ONNX names),
                               expected.npz, actual.npz, desc.json, repro.py (numpy + onnxruntime)

``case.json`` (``CASE_FILE``) holds::

    {"format": "ep-testbed-corpus/1",
     "id": "max_pooling2/corpus-openvino-3f2a9c01d4",    # <op>/corpus-<ep alias>-<content hash>
     "op": "DML_OPERATOR_MAX_POOLING2", "opset": null, "tags": {...},
     "found": {"ep": ..., "ep_alias": ..., "ort_flavour": ..., "ort_version": ..., "date": ...,
               "from": "<fuzzed case id>", "signature": {...}, "message": "...",
               "original_elements": N, "minimal_elements": n},
     "expectations": {"openvino": {"outcome": "fail", "reason": "...", "link": "...", "strict": true}},
     "repro": {"provider": "OpenVINOExecutionProvider", "prints": "<what repro.py printed>"}}

``expectations`` says, per EP alias, how the case is expected to end there (the entry format of
``harness/expectations/<ep>.json``, matched to this one id); an EP without an entry is expected
to pass. A case written by ``ep-testbed fuzz --corpus-out`` carries the expectation that made
it ``known``, or none for a new failure (add its reason and link before committing it).
``repro.prints`` is what ``repro.py`` printed on the EP that found it: the bundle alone shows
the failure (``tests/corpus/`` checks every case that way).

Reading is for untrusted folders: sizes, names, types and shapes are checked before anything
is allocated, and every problem is a ``CorpusError`` naming the file and the field; a case folder
that is a symbolic link is refused (``untrusted_files.link_refused``), never followed or skipped.
Loading reads each ``inputs.npz``'s headers only: a case's arrays are read when a worker runs it
(``CorpusCase``), and its ``memory_mb`` tag (``memory_need``) lets a run skip, with the reason, a
case this machine cannot hold.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...graphs.cases.common import LiteralCase, memory_need
from ...reference import DescError, desc_from_dml, desc_to_dml, validate
from ...reference.descs import member_value
from ...reference.dtypes import numpy_dtype
from ...reference.registry import spec_of_type
from ...reports.artifacts import load_artifacts, resolve_folder
from ...reports.repro import build_bundle, header_tolerances
from ...reports.results import CaseResult
from ..core import expectations as expectations_mod
from ..core.expectations import Expectation, Expectations
from ..core.results import CaseLine, part, safe_id
from ..core.untrusted_files import (
    FileRefused,
    Limits,
    array_headers,
    inside,
    limits,
    link_refused,
    open_output,
    output_folder,
    read_arrays,
    read_json,
    using_limits,
    write_arrays,
)

FORMAT = "ep-testbed-corpus/1"
CASE_FILE, DESC_FILE, INPUTS_FILE, REPRO_DIR = "case.json", "desc.json", "inputs.npz", "repro"
#: Limits on what a corpus may hold (a corpus is data from elsewhere).
MAX_CASES = 100_000


class CorpusError(ValueError):
    """A corpus folder or file that cannot be read as a corpus case (the message says where)."""


@dataclass
class CorpusEntry:
    """One corpus case: the case, its expectations by EP alias, where it lives, what found it."""

    case: LiteralCase
    expectations: dict[str, Expectation] = field(default_factory=dict)
    path: str = ""
    found: dict[str, Any] = field(default_factory=dict)
    repro: dict[str, Any] = field(default_factory=dict)


# --- reading ------------------------------------------------------------------------------

def load_corpus(root: str) -> list[CorpusEntry]:
    """Every case folder under ``root`` (sorted by folder name); ``CorpusError`` for a folder
    that is not a corpus, or for the first case that cannot be read."""
    if not os.path.isdir(root):
        raise CorpusError(f"--corpus {root}: not a folder. Note: a corpus is a folder of case folders, each with "
                          f"{CASE_FILE}, {DESC_FILE} and {INPUTS_FILE} (see `ep-testbed fuzz --corpus-out`)")
    with os.scandir(root) as scan:
        listing = sorted(scan, key=lambda e: e.name)
    link = next((e.path for e in listing if e.is_symlink()), None)
    if link is not None:  # a linked case folder could lead anywhere: refused, never skipped without a word
        raise CorpusError(str(link_refused(link, "a corpus holds case folders only")))
    folders = [e.path for e in listing if e.is_dir(follow_symlinks=False)
               and os.path.isfile(os.path.join(e.path, CASE_FILE))]
    if len(folders) > MAX_CASES:
        raise CorpusError(f"--corpus {root}: {len(folders)} case folders; at most {MAX_CASES} are read")
    entries = [read_entry(folder) for folder in folders]
    seen = Counter(e.case.id for e in entries)
    dupes = sorted(i for i, n in seen.items() if n > 1)
    if dupes:
        raise CorpusError(f"--corpus {root}: case id {dupes[0]!r} appears in two folders; ids must be unique")
    return entries


def read_entry(folder: str) -> CorpusEntry:
    """One case folder (module docstring); ``CorpusError`` naming the file and field on bad data."""
    meta = _read_json(_inside(folder, CASE_FILE))
    where = os.path.join(folder, CASE_FILE)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CorpusError(f"{where}: \"format\" must be {FORMAT!r}")
    case_id, op = meta.get("id"), meta.get("op")
    if not isinstance(case_id, str) or not case_id or len(case_id) > 300:
        raise CorpusError(f"{where}: \"id\" must be a non-empty string of at most 300 characters")
    try:
        desc = desc_from_dml(_read_json(_inside(folder, DESC_FILE)))
        validate(desc)
    except DescError as exc:
        raise CorpusError(f"{os.path.join(folder, DESC_FILE)}: {exc}") from None
    if op != desc.TYPE:
        raise CorpusError(f"{where}: \"op\" is {op!r} but {DESC_FILE} is a {desc.TYPE}")
    _check_id(case_id, desc.TYPE, where)
    opset = meta.get("opset")
    if opset is not None and (not isinstance(opset, int) or isinstance(opset, bool) or not 1 <= opset <= 100):
        raise CorpusError(f"{where}: \"opset\" must be null or an opset number")
    tags = meta.get("tags") or {}
    if not isinstance(tags, dict):
        raise CorpusError(f"{where}: \"tags\" must be an object of strings")
    inputs = _inside(folder, INPUTS_FILE)
    check_inputs(inputs, desc)
    tags = {str(k): str(v) for k, v in tags.items()} | {"family": "corpus"}
    tags.setdefault("dtype", member_value(desc, desc.INPUTS[0]).data_type.lower())
    tags["memory_mb"] = str(-(-memory_need(desc) // 2**20))  # a run skips what does not fit, with this need
    case = CorpusCase(id=case_id, op=desc.TYPE, desc=desc, seed=0, opset=opset, tags=tags, recipe="literal",
                      source=inputs, caps=limits())
    return CorpusEntry(case, _expectations(meta.get("expectations"), case_id, where), folder,
                       part(meta, "found"),
                       part(meta, "repro"))


def _check_id(case_id: str, op_type: str, where: str) -> None:
    """``CorpusError`` naming both unless ``case_id`` names the operator its desc is (``<op>/...``):
    an id naming another operator would file the case's result under that operator (selection by
    ``--ops`` and ``-k``, expectations, the reports' tables). A catalog case's id is refused where
    the catalog is known (``cli.run.refuse_clashes``)."""
    name = _op_name(op_type)
    prefix, slash, _ = case_id.partition("/")
    if prefix != name or not slash:
        named = f"operator {prefix!r}" if slash else "no operator"
        raise CorpusError(f"{where}: \"id\" {case_id!r} names {named}, but {DESC_FILE} is a {op_type} "
                          f"({name}).\nNote: a corpus id is {name}/corpus-<ep alias>-<hash> (what `ep-testbed fuzz "
                          "--corpus-out` writes); fix the id or the desc")


def _inside(folder: str, name: str) -> str:
    """``folder/name``, refused (``CorpusError``) when a link leads it out of the case folder."""
    try:
        return str(inside(folder, name, "corpus file"))
    except FileRefused as exc:
        raise CorpusError(str(exc)) from None


def _read_json(path: str) -> Any:
    """The decoded JSON of ``path`` through ``untrusted_files`` (a regular file within the JSON
    caps, strict JSON); ``CorpusError`` naming the file otherwise."""
    try:
        return read_json(path, "corpus file")
    except FileRefused as exc:
        raise CorpusError(str(exc)) from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read it ({exc.strerror or exc})") from None


@dataclass(frozen=True)
class CorpusCase(LiteralCase):
    """A corpus case whose arrays stay in its ``inputs.npz`` (``source``) until a worker runs it:
    loading a corpus reads only the arrays' headers, so a corpus of large cases costs the main
    process nothing, and each case's arrays exist in one worker at a time. ``caps``: the
    ``--limit`` caps the corpus was loaded under, applied again when the arrays are read."""

    source: str = field(default="", compare=False)
    caps: Limits = field(default_factory=Limits, compare=False)

    def inputs(self) -> dict[str, np.ndarray]:
        """The arrays of ``source``, read and checked against the desc now (``read_inputs``);
        given ``arrays`` (a test's) win. ``CorpusError`` when the file changed since it was loaded."""
        if self.arrays:
            return super().inputs()
        with using_limits(self.caps):
            return read_inputs(self.source, self.desc)


def _read(reader: Any, path: str) -> Any:
    """``reader(path, "corpus inputs")`` (an ``untrusted_files`` NPZ reader), its refusals and
    I/O errors turned into one ``CorpusError`` naming the file."""
    try:
        return reader(path, "corpus inputs")
    except FileRefused as exc:
        raise CorpusError(str(exc)) from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def check_inputs(path: str, desc: Any) -> None:
    """``read_inputs``'s checks from the NPZ's headers alone (nothing decompressed): exactly the
    desc's input members, each of the desc's data type and sizes; ``CorpusError`` otherwise."""
    headers = _read(array_headers, path)
    _check_members(path, desc, {name: (shape, dtype) for name, (shape, dtype) in headers.items()})


def _check_members(path: str, desc: Any, found: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    """``CorpusError`` unless ``found`` (member -> shape, dtype) is exactly ``desc``'s inputs."""
    if set(found) != set(desc.INPUTS):
        raise CorpusError(f"{path}: holds {sorted(found)}; expected exactly {sorted(desc.INPUTS)} "
                          f"(one array per input member of {desc.TYPE})")
    for member, (shape, dtype) in found.items():
        tensor = member_value(desc, member)
        want_dtype, sizes = numpy_dtype(tensor.data_type), tuple(tensor.sizes)
        if tuple(shape) != sizes or dtype != want_dtype:
            raise CorpusError(f"{path}: {member} is {dtype} {list(shape)}; the desc says {want_dtype} "
                              f"{list(sizes)}")


def read_inputs(path: str, desc: Any) -> dict[str, np.ndarray]:
    """The input arrays of ``desc`` from an NPZ of ``<member>.npy`` files, read through
    ``untrusted_files`` (members and sizes checked before anything is decompressed): exactly
    the desc's input members, each of the desc's data type and sizes."""
    arrays = _read(read_arrays, path)
    _check_members(path, desc, {name: (array.shape, array.dtype) for name, array in arrays.items()})
    return arrays


def _expectations(data: Any, case_id: str, where: str) -> dict[str, Expectation]:
    """``{"<ep alias>": {outcome, reason, link[, strict]}}`` as expectations matching ``case_id`` only."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: \"expectations\" must map EP aliases to expectation entries")
    out = {}
    for alias, entry in data.items():
        if not isinstance(entry, dict):
            raise CorpusError(f"{where}: expectations.{alias} must be an object with outcome, reason, link")
        try:
            parsed = expectations_mod.parse([{**entry, "id": case_id}], f"{where}: expectations.{alias}")
        except ValueError as exc:
            raise CorpusError(str(exc)) from None
        if parsed.entries:  # an entry outside its onnxruntime range holds for no case here
            out[str(alias)] = parsed.entries[0]
    return out


def with_corpus(expectations: Expectations, entries: list[CorpusEntry], alias: str) -> Expectations:
    """``expectations`` with the corpus cases' entries for EP ``alias`` first (they name one id each)."""
    own = [e.expectations[alias] for e in entries if alias in e.expectations]
    if not own:
        return expectations
    source = f"{expectations.source or 'no expectations file'} + {len(own)} from the corpus"
    digest = hashlib.sha256(json.dumps([expectations.digest, [e.to_json() for e in own]], sort_keys=True,
                                       default=str).encode()).hexdigest()  # --resume notices an edited corpus
    return Expectations(own + list(expectations.entries), source, expectations.inactive, expectations.predictor,
                        digest)


# --- writing ------------------------------------------------------------------------------

def write_entry(root: str, case: LiteralCase, line: CaseLine, header: Mapping[str, Any], signature: Any,
                shrink_result: Any, run_dir: str) -> str:
    """Write ``case`` (a minimal failure whose settled result line is ``line``, from the run
    whose header is ``header`` in ``run_dir``) as a corpus folder under ``root``; returns the
    folder. The repro bundle is the one the report offers, built from the run's case folder,
    and ``repro.py`` is run once on the EP to record what it prints."""
    alias = str(header.get("ep_alias") or header.get("ep"))
    corpus_id = f"{_op_name(case.op)}/corpus-{alias}-{content_hash(case)}"
    folder = os.path.join(root, safe_id(corpus_id))
    output_folder(root, safe_id(corpus_id))  # never written through a link planted in the corpus folder
    _write_json(os.path.join(folder, DESC_FILE), desc_to_dml(case.desc))
    write_arrays(os.path.join(folder, INPUTS_FILE), case.arrays)
    provider = str(header.get("ep"))
    prints = _write_bundle(folder, corpus_id, header, run_dir, line)
    meta = {"format": FORMAT, "id": corpus_id, "op": case.op, "opset": case.opset,
            "tags": {k: v for k, v in case.tags.items() if k in ("dtype", "values", "regions")},
            "found": {"ep": provider, "ep_alias": alias, "ort_flavour": header.get("ort_flavour"),
                      "ort_version": header.get("ort_version"), "date": _dt.date.today().isoformat(),
                      "from": case.tags.get("shrunk_from"), "signature": signature.to_json(),
                      "message": str(line.get("message") or "")[:2000],
                      "original_elements": shrink_result.original_elements,
                      "minimal_elements": shrink_result.minimal_elements},
            "expectations": _found_expectation(line, alias, signature),
            "repro": {"provider": provider, "prints": prints}}
    _write_json(os.path.join(folder, CASE_FILE), meta)
    return folder


def content_hash(case: LiteralCase) -> str:
    """Ten hex digits of a hash of the desc and the input bytes: equal cases get one corpus id."""
    digest = hashlib.sha256(json.dumps(desc_to_dml(case.desc), sort_keys=True).encode())
    arrays = case.arrays or case.inputs()  # a corpus case read back holds its arrays in its file
    for name in sorted(arrays):
        digest.update(name.encode() + np.ascontiguousarray(arrays[name]).tobytes())
    return digest.hexdigest()[:10]


def _op_name(op_type: str) -> str:
    """The registry name of a ``DML_OPERATOR_*`` type (the type itself when unregistered)."""
    spec = spec_of_type(op_type)
    return spec.name if spec else op_type


def _found_expectation(line: CaseLine, alias: str, signature: Any) -> dict[str, Any]:
    """The expectation that made the case ``known`` (its raw outcome, reason, link and the readings
    that reproduced its elements), if any."""
    expected = line.get("expected_outcome")
    if not isinstance(expected, dict) or line.get("outcome") != "known":
        return {}
    readings = sorted({name for key in expected.get("explained_by") or {} for name in str(key).split("+")})
    entry = {"outcome": signature.outcome, "reason": expected.get("reason"), "link": expected.get("link"),
             "strict": bool(expected.get("strict", True))}
    if readings:  # the readings that reproduced this case's elements: what proves it known again
        entry["readings"] = readings
    return {alias: entry}


def _write_bundle(folder: str, corpus_id: str, header: Mapping[str, Any], run_dir: str,
                  line: CaseLine) -> str:
    """Unpack the report's repro bundle of the case (judged as the run in ``run_dir``, whose
    header is ``header``, judged it) into ``folder/repro`` and run its ``repro.py`` once;
    returns what it printed ("" when the run kept no case folder)."""

    source = resolve_folder(Path(run_dir), line.get("artifacts"))
    case = CaseResult({**line, "id": corpus_id})
    built = build_bundle(case, dict(header), load_artifacts(source), header_tolerances(dict(header))) if source else None
    if built is None:
        return ""
    target = os.path.join(folder, REPRO_DIR)
    output_folder(folder, REPRO_DIR)
    with zipfile.ZipFile(io.BytesIO(built[0])) as archive:
        archive.extractall(target)
    return run_repro(target, str(header.get("ep")))


def run_repro(folder: str, provider: str, python: str | None = None, timeout: float = 300.0) -> str:
    """What ``repro.py`` in ``folder`` prints when run on ``provider`` (stdout, then stderr's
    last line when it failed)."""
    try:
        done = subprocess.run([python or sys.executable, "repro.py", provider], cwd=folder, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"(repro.py ran past {timeout:g} s)"
    text = done.stdout.strip()
    if done.returncode:
        text += f"\n(exit status {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]})"
    return text


def _write_json(path: str, data: Any) -> None:
    """``data`` as indented JSON, values JSON lacks as their ``str``."""
    with open_output(path, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
