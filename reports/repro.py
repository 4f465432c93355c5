"""The self-contained repro bundle of one case: a zip a driver engineer can attach to a bug report.

Contents: ``model.onnx`` (as the run built it, stamped with the lowest IR version its opsets
need, so an older ONNX Runtime loads it too), ``inputs.npz`` exactly as the run fed it,
``expected.npz`` (the DirectML reference, keyed by DML output name), ``allowance.npz`` (the
reference's per-element rounding bounds and knife-edge ranges, when the run's precision model
gave any), ``actual.npz`` (what the EP returned in the run), ``desc.json`` (the DML desc),
``check.json`` (how the run judged the case: its tolerances, which ONNX output is which DML
output, the index outputs, the EP and its options, the onnxruntime it used, the run's outcome and
message, and the size and SHA-256 of every other file) and ``repro.py``.

``repro.py`` (``templates/repro.py``) needs only numpy and onnxruntime. It runs the model on the
EP, then judges the outputs with the run's own comparison: ``lib/ep_testbed_judging/`` holds
verbatim copies of ep-testbed's ``harness/core/compare.py`` and ``harness/core/tolerances.py``
(the one rule, not a second copy of it; they import nothing but NumPy and each other), plus the
reference package when the operator's index outputs need its window rule to tell a tie from a
mismatch. The copies live under their own package name, so an installed ep-testbed never
stands in for one. It prints the verdict and the same summary line the report shows; exit 0
pass, 1 the failure reproduces, 2 no verdict (a missing or damaged file or module, an
onnxruntime without the EP...), with one line saying what and what to do.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..harness.core import compare, tolerances
from ..harness.core.tolerances import Tolerances
from ..harness.core.untrusted_files import FileRefused, inside, read_bytes, write_arrays
from ..reference import registry
from .artifacts import CaseArtifacts

#: Bundles above this size are not inlined as data URIs (they would bloat report.html);
#: the report points at the artifact folder instead.
MAX_INLINE_BUNDLE = 2 * 1024 * 1024
#: Where the vendored ep-testbed modules go inside the bundle: a package name of their own, so
#: that neither an installed ep-testbed (whose import hooks could serve a module the copy lacks)
#: nor anything else stands in for the run's judging code.
LIB = "lib/ep_testbed_judging"

#: The bundle's script, kept as a Python file of its own so that it is linted and tested as one.
SCRIPT = Path(__file__).with_name("templates") / "repro.py"
#: The vendored package's ``__init__.py``: what its modules are and where they come from.
JUDGING_INIT = (b'"""Verbatim copies of ep-testbed\'s judging code (harness/core/compare.py, harness/core/tolerances.py '
                b'and, when the operator\'s window rule is needed, the reference package), as the run used it."""\n')


def repro_script() -> bytes:
    """The bundle's ``repro.py`` (it reads the case from check.json)."""
    return SCRIPT.read_bytes()


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """``np.savez`` of ``arrays`` into bytes."""
    buf = io.BytesIO()
    write_arrays(buf, arrays)
    return buf.getvalue()


def lowest_ir(model_bytes: bytes) -> bytes:
    """The model stamped with the lowest IR version its opset imports need (IR 8 for opset 16),
    so that an older ONNX Runtime loads it; unchanged when that fails the ONNX checker or the
    model is unreadable."""
    import onnx  # only when a bundle is built: most report pages need none
    from onnx import helper

    try:
        model = onnx.load_from_string(model_bytes)
        lowest = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        if lowest >= model.ir_version:
            return model_bytes
        model.ir_version = lowest
        onnx.checker.check_model(model)
        return model.SerializeToString()
    except Exception:  # onnx raises several types for damaged or unusual models
        return model_bytes


def vendored_files(window_rule: bool) -> dict[str, bytes]:
    """``lib/...`` path -> source of the ep-testbed modules ``repro.py`` imports: the comparison
    and the tolerance rule, plus the reference package when ``window_rule``."""
    files = {f"{LIB}/__init__.py": JUDGING_INIT,
             f"{LIB}/compare.py": Path(compare.__file__).read_bytes(),
             f"{LIB}/tolerances.py": Path(tolerances.__file__).read_bytes()}
    if window_rule:
        for path in sorted(Path(registry.__file__).parent.glob("*.py")):
            files[f"{LIB}/reference/{path.name}"] = path.read_bytes()
    return files


def _output_names(art: CaseArtifacts) -> dict[str, str]:
    """ONNX output name -> DML output name: by name when the mapper named the graph outputs after
    the DML outputs (as graphs.to_onnx does), else by position (DML's declaration order)."""
    onnx_names = [o.name for o in art.model.outputs] if art.model else []
    if set(art.expected) <= set(onnx_names):
        return {name: name for name in onnx_names if name in art.expected}
    return {onnx_names[i]: dml for i, dml in enumerate(art.expected) if i < len(onnx_names)}


def check_json(case: Any, header: dict[str, Any], art: CaseArtifacts, tols: Tolerances) -> dict[str, Any]:
    """What ``repro.py`` needs to judge like the run (see the module docstring)."""
    spec = registry.spec_of_type(case.op)
    index_outputs = {k: list(v) for k, v in (spec.index_outputs if spec else {}).items() if k in art.expected}
    feeds = list(art.inputs)
    sources = {source for _, source in index_outputs.values()}
    inputs = {s: s if s in art.inputs else feeds[0] for s in sources if s in art.inputs or len(feeds) == 1}
    options = header.get("ep_options")
    return {
        "case_id": case.id, "op": case.op, "provider": str(header.get("ep") or "CPUExecutionProvider"),
        "provider_options": {str(k): str(v) for k, v in options.items()} if isinstance(options, dict) else {},
        "tolerances": tols.to_json(), "outputs": _output_names(art), "index_outputs": index_outputs,
        "inputs": inputs, "window_rule": bool(index_outputs and spec and spec.index_rule),
        "run_outcome": case.outcome, "run_message": case.message,
        "run_onnxruntime": {"distribution": str(header.get("ort_flavour") or "onnxruntime"),
                            "version": str(header.get("ort_version") or "")},
    }


def header_tolerances(header: dict[str, Any]) -> Tolerances:
    """The tolerances a run judged its cases by (its header's table over the defaults); the
    defaults when the header has none or an unreadable one (a header is data)."""
    table = header.get("tolerances")
    try:
        return Tolerances.from_json(table) if isinstance(table, dict) else Tolerances.defaults()
    except (TypeError, ValueError, AttributeError):
        return Tolerances.defaults()


def build_bundle(case: Any, header: dict[str, Any], art: CaseArtifacts,
                 tols: Tolerances) -> tuple[bytes, list[str]] | None:
    """(zip bytes, file names) of the repro folder of ``case`` (a ``results.CaseResult``), or None
    when the model, the inputs or the expected outputs are missing."""
    folder: Path = art.folder
    if art.model is None or not art.inputs or not art.expected:
        return None
    try:  # the case folder is data: the same reader, caps and containment as load_artifacts
        model = read_bytes(inside(folder, "model.onnx", "case file"), "ONNX model", limit_name="model_bytes")
    except FileRefused:
        return None
    check = check_json(case, header, art, tols)
    files = {"model.onnx": lowest_ir(model), "inputs.npz": _npz_bytes(dict(art.inputs)),
             "expected.npz": _npz_bytes(dict(art.expected))}
    if art.allowance:
        files["allowance.npz"] = _npz_bytes(dict(art.allowance))
    if art.actual:
        files["actual.npz"] = _npz_bytes(dict(art.actual))
    if art.desc is not None:
        files["desc.json"] = json.dumps(art.desc, indent=1, default=str).encode("utf-8")
    files["repro.py"] = repro_script()
    files.update(vendored_files(check["window_rule"]))
    # repro.py checks every file against this before judging: a damaged one gets no verdict
    check["files"] = {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                      for name, data in files.items()}
    files["check.json"] = json.dumps(check, indent=1, allow_nan=False, default=str).encode("utf-8")
    buf = io.BytesIO()
    # the fastest deflate: float arrays shrink about as much at level 1 as at 6, in a fifth of the time
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, data in files.items():
            z.writestr(_entry(name), data, compress_type=z.compression, compresslevel=z.compresslevel)
        names = z.namelist()
    return buf.getvalue(), names


#: Every bundle entry's date: zip's earliest, so a bundle's bytes depend on its files alone (the
#: same case gives the same bundle in every report, findings folder and corpus entry).
ENTRY_DATE = (1980, 1, 1, 0, 0, 0)


def _entry(name: str) -> zipfile.ZipInfo:
    """The zip entry ``name`` dated ``ENTRY_DATE``, readable by its owner (as ``writestr`` makes
    an entry from a bare name, but for the date, which would be the time of writing)."""
    info = zipfile.ZipInfo(name, date_time=ENTRY_DATE)
    info.external_attr = 0o600 << 16
    return info

