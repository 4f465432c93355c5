"""The self-contained repro bundle of one case: a zip a driver engineer can attach to a bug report.

Contents: ``model.onnx`` and ``inputs.npz`` exactly as the run used them, ``expected.npz`` (the
DirectML reference outputs, keyed by the model's ONNX output names so the script needs no
ep-testbed code), ``actual.npz`` (what the EP returned in the run), ``desc.json`` (the DML desc)
and ``repro.py`` (numpy + onnxruntime only).  DML output names map to ONNX outputs by name when
the graph outputs carry the DML names (as graphs.to_onnx writes them), else by position, the order
in which DML declares them (OutputTensor, then OutputIndicesTensor).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from .artifacts import CaseArtifacts

#: Bundles above this size are not inlined as data URIs (they would bloat report.html);
#: the report points at the artifact folder instead.
MAX_INLINE_BUNDLE = 2 * 1024 * 1024

REPRO_SCRIPT = '''\
# Repro of ep-testbed case {case_id!r}; needs only numpy and onnxruntime.
# Usage: python repro.py [ExecutionProvider]   (default: {provider!r}, the EP of the run)
import sys
import numpy as np
import onnxruntime as ort

provider = sys.argv[1] if len(sys.argv) > 1 else {provider!r}
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the node as built
if provider != "CPUExecutionProvider":  # fail rather than quietly run the node on the CPU
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
if provider == "DmlExecutionProvider":  # the DirectML EP requires both settings
    so.enable_mem_pattern = False
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
sess = ort.InferenceSession("model.onnx", so, providers=[provider])
inputs = dict(np.load("inputs.npz"))
expected = dict(np.load("expected.npz"))
names = [o.name for o in sess.get_outputs()]
for name, actual in zip(names, sess.run(names, inputs)):  # index outputs: an equal-valued index is a tie
    e, a = expected[name], np.asarray(actual)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
    diff[(e == a) | (np.isnan(e.astype(np.float64)) & np.isnan(a.astype(np.float64)))] = 0.0
    diff[np.isnan(diff)] = np.inf
    print(f"{{name}}: max |actual - expected| = {{diff.max() if diff.size else 0.0:g}}, "
          f"{{int((diff > 0).sum())}} of {{diff.size}} elements differ")
    if diff.size and diff.max() > 0:
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
        print(f"  worst at {{tuple(int(i) for i in worst)}}: expected {{e[worst].item()!r}}, got {{a[worst].item()!r}}")
'''


def repro_script(case_id: str, provider: str) -> str:
    return REPRO_SCRIPT.format(case_id=case_id, provider=provider)


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def build_bundle(case_id: str, provider: str, art: CaseArtifacts) -> tuple[bytes, list[str]] | None:
    """(zip bytes, file names) of the repro folder, or None when the model or inputs are missing."""
    folder: Path = art.folder
    model, inputs = folder / "model.onnx", folder / "inputs.npz"
    if not (model.is_file() and inputs.is_file()) or art.model is None:
        return None
    onnx_names = [o.name for o in art.model.outputs]
    if set(art.expected) <= set(onnx_names):  # the mapper named the graph outputs after the DML outputs
        expected = dict(art.expected)
    else:
        expected = {onnx_names[i]: arr for i, arr in enumerate(art.expected.values()) if i < len(onnx_names)}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(model, "model.onnx")
        z.write(inputs, "inputs.npz")
        z.writestr("expected.npz", _npz_bytes(expected))
        if (folder / "actual.npz").is_file():
            z.write(folder / "actual.npz", "actual.npz")
        if (folder / "desc.json").is_file():
            z.write(folder / "desc.json", "desc.json")
        z.writestr("repro.py", repro_script(case_id, provider))
        names = z.namelist()
    return buf.getvalue(), names
