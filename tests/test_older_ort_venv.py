"""Runs the CPU catalog under an older ONNX Runtime (1.24.4, made by ``tools/ort-venv.sh``).

``onnxruntime-directml`` stops at 1.24.x while ``onnxruntime`` moves on, and the CPU EP's
kernels changed in between; ``harness/expectations/cpu.json`` ties such entries to an
``onnxruntime`` range. This test proves the README's main command (``ep-testbed run --ep cpu``)
has no unexpected outcome on 1.24.4 as the main suite proves it on the installed ONNX Runtime.
The venv defaults to ``.venv-ort124`` at the repository root (``EP_TESTBED_OLD_ORT_PYTHON`` may
name another interpreter). Without it the test is skipped with the command that creates it,
except under CI (``CI`` set), where ``.ci/run`` creates it and its absence is a failure.
"""

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = "Scripts" if os.name == "nt" else "bin"
VENV_PYTHON = os.environ.get("EP_TESTBED_OLD_ORT_PYTHON") or os.path.join(
    ROOT, ".venv-ort124", BIN, "python.exe" if os.name == "nt" else "python")
VERSION = "1.24.4"


@pytest.mark.slow
def test_cpu_catalog_has_no_unexpected_outcome_on_onnxruntime_1_24(tmp_path):
    if not os.path.exists(VENV_PYTHON):
        message = f"no onnxruntime {VERSION} venv at {VENV_PYTHON}; create it with: bash tools/ort-venv.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path / "cpu"
    p = subprocess.run([VENV_PYTHON, "-m", "ep_testbed.harness.cli", "run", "--ep", "cpu", "--out", str(out),
                        "--jobs", "2", "--no-progress"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    header, cases = lines[0], [line for line in lines if line["type"] == "case"]
    assert header["ort_version"] == VERSION, header["ort_version"]
    assert len(cases) == header["case_count"] > 200
    unexpected = [c["id"] for c in cases if c["outcome"] not in ("pass", "tie-only", "known", "inexpressible")
                  and not (c["outcome"] == "not-on-ep" and c["expected_outcome"])]  # a refusal an entry names
    assert unexpected == []
    # the ranges are what makes it hold: some entry is known here only because it is tied to < 1.29
    assert any(c["outcome"] == "known" and (c["expected_outcome"] or {}).get("onnxruntime") == "<1.29"
               for c in cases)
