"""The self-contained repro bundle of one case: a zip a driver engineer can attach to a bug report.

Contents: ``model.onnx`` (as the run built it, stamped with the lowest IR version its opsets
need, so an older ONNX Runtime loads it too), ``inputs.npz`` exactly as the run fed it,
``expected.npz`` (the DirectML reference, keyed by DML output name), ``allowance.npz`` (the
reference's per-element rounding bounds and knife-edge ranges, when the run's precision model
gave any), ``actual.npz`` (what the
EP returned in the run), ``desc.json`` (the DML desc), ``check.json`` (how the run judged the
case: its tolerances, which ONNX output is which DML output, the index outputs, the EP and its
options, and the run's outcome and message) and ``repro.py``.

``repro.py`` needs only numpy and onnxruntime. It runs the model on the EP, then judges the
outputs with the run's own comparison: ``lib/`` holds verbatim copies of ep-testbed's
``harness/core/compare.py`` and ``harness/core/tolerances.py`` (the one rule, not a second copy of it),
plus the reference package when the operator's index outputs need its window rule to tell a tie
from a mismatch. It prints the verdict and the same summary line the report shows, and exits 1
on a failure, 0 on a pass.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ep_testbed.harness.core import compare, tolerances
from ep_testbed.harness.core.tolerances import Tolerances
from ep_testbed.harness.core.untrusted_files import FileRefused, inside, read_bytes
from ep_testbed.reference import registry

from .artifacts import CaseArtifacts

#: Bundles above this size are not inlined as data URIs (they would bloat report.html);
#: the report points at the artifact folder instead.
MAX_INLINE_BUNDLE = 2 * 1024 * 1024
#: Where the vendored ep-testbed modules go inside the bundle (a regular ``ep_testbed`` package
#: there takes precedence over an installed ep-testbed, so the bundle judges with its own copy).
LIB = "lib/ep_testbed"

REPRO_SCRIPT = '''\
# Repro of ep-testbed case {case_id!r}: runs model.onnx on one execution provider and judges
# the outputs as the run did (its tolerances and comparison, copied into lib/ from ep-testbed).
# Needs only numpy and onnxruntime. Usage: python repro.py [ExecutionProvider]
# (default: the run's EP, with its provider options). Exit 0: pass; 1: fail.
import functools, json, sys
from pathlib import Path
import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "lib"))
from ep_testbed.harness.core.compare import Allowance, compare_outputs  # noqa: E402
from ep_testbed.harness.core.tolerances import Tolerances  # noqa: E402

check = json.loads((HERE / "check.json").read_text(encoding="utf-8"))
provider = sys.argv[1] if len(sys.argv) > 1 else check["provider"]
options = check["provider_options"] if provider == check["provider"] else {{}}
np.seterr(all="ignore")  # NaN/inf are data here; the comparison handles them
so = ort.SessionOptions()
so.log_severity_level = 3  # errors only: the verdict is the output
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the node as built
if provider != "CPUExecutionProvider":  # fail rather than quietly run the node on the CPU
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
if provider == "DmlExecutionProvider":  # one kernel event per node, as the run had it
    so.add_session_config_entry("ep.dml.disable_graph_fusion", "1")
feeds = dict(np.load(HERE / "inputs.npz"))
expected = dict(np.load(HERE / "expected.npz"))
first_line = lambda exc: f"{{type(exc).__name__}}: {{(str(exc).strip().splitlines() or [''])[0]}}"  # noqa: E731
try:
    sess = ort.InferenceSession(str(HERE / "model.onnx"), so, providers=[(provider, options)])
except Exception as exc:  # the EP refused the model: that is the failure to report, as the run words it
    sys.exit(print(f"fail: {{provider}} could not build the session: {{first_line(exc)}}") or 1)
names = [o.name for o in sess.get_outputs()]
try:
    outputs = sess.run(names, feeds)
except Exception as exc:
    sys.exit(print(f"fail: {{provider}} raised while running: {{first_line(exc)}}") or 1)
actual = {{}}
for name, value in zip(names, outputs):  # back to DML names and types, as the run read them
    dml = check["outputs"].get(name, name)
    e, a = expected.get(dml), np.asarray(value)
    actual[dml] = a if e is None else a.astype(e.dtype).reshape(e.shape) if a.size == e.size else a
in_window = None
if check["window_rule"]:  # the operator's window: an index pointing at an equal value elsewhere is no tie
    from ep_testbed.reference import desc_from_dml, spec_for
    desc = desc_from_dml(json.loads((HERE / "desc.json").read_text(encoding="utf-8")))
    in_window = functools.partial(spec_for(desc).index_rule, desc)
allowance = Allowance.from_arrays(dict(np.load(HERE / "allowance.npz"))) if (HERE / "allowance.npz").is_file() else None
result = compare_outputs(expected, actual, Tolerances.from_json(check["tolerances"]),
                         {{dml: feeds[onnx] for dml, onnx in check["inputs"].items()}}, in_window=in_window,
                         index_outputs={{k: tuple(v) for k, v in check["index_outputs"].items()}},
                         allowance=allowance)
verdict = "fail" if not result.passed else "tie-only" if result.ties else "pass"
print(f"{{verdict}}: {{result.summary()}}{{allowance.note(result) if allowance else ''}}")
print(f"the run said {{check['run_outcome']}} on {{check['provider']}}: {{check['run_message']}}")
sys.exit(0 if result.passed else 1)
'''


def repro_script(case_id: str) -> str:
    """The bundle's ``repro.py`` for ``case_id`` (the script reads everything else from check.json)."""
    return REPRO_SCRIPT.format(case_id=case_id)


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """``np.savez`` of ``arrays`` into bytes."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
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
    files = {f"{LIB}/__init__.py": b"", f"{LIB}/harness/__init__.py": b"",
             f"{LIB}/harness/compare.py": Path(compare.__file__).read_bytes(),
             f"{LIB}/harness/tolerances.py": Path(tolerances.__file__).read_bytes()}
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
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("model.onnx", lowest_ir(model))
        z.writestr("inputs.npz", _npz_bytes(dict(art.inputs)))
        z.writestr("expected.npz", _npz_bytes(dict(art.expected)))
        if art.allowance:
            z.writestr("allowance.npz", _npz_bytes(dict(art.allowance)))
        if art.actual:
            z.writestr("actual.npz", _npz_bytes(dict(art.actual)))
        if art.desc is not None:
            z.writestr("desc.json", json.dumps(art.desc, indent=1, default=str))
        z.writestr("check.json", json.dumps(check, indent=1, allow_nan=False, default=str))
        z.writestr("repro.py", repro_script(case.id))
        for path, data in vendored_files(check["window_rule"]).items():
            z.writestr(path, data)
        names = z.namelist()
    return buf.getvalue(), names
