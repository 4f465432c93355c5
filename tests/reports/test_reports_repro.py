"""Repro bundles confirm failures: downloaded from report.html and run, each repro.py applies the
run's tolerance rule, prints the run's verdict and exits 1 on a failing case, 0 on a passing one.

The run is a real CPU run against a deliberately wrong reference (``perturbed_reference``: about
half the cases get one expected element moved outside tolerance), so it has real failures and
passes whose bundles hold the very files the run used. The bundles run under this interpreter's
onnxruntime and, when a venv with onnxruntime 1.24.4 exists, under that too (numpy and
onnxruntime only: that venv has no ep-testbed).
"""

from __future__ import annotations

import io
import os
import subprocess
import zipfile
from pathlib import Path

import onnx
import pytest
import repro_check
from perturbed_reference import PERTURB_ENV

from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.reports import render_run
from ep_testbed.reports.results import load_run

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
ORT124_HINT = ("create it with: python -m venv .venv-ort124 && .venv-ort124/bin/pip install onnxruntime==1.24.4 "
               "numpy (or point EP_TESTBED_ORT124_PYTHON at such an interpreter)")


@pytest.fixture(scope="module")
def perturbed_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("perturbed") / "run"
    args = parse_args(["run", "--ep", "cpu", "-k", "random-s0-00", "--no-expectations", "--keep-worst", "50",
                       "--out", str(out), "--no-progress"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PERTURB_ENV, "1")
        assert run_command(args, mapper="perturbed_reference:to_onnx", worker_paths=(str(HERE),)) == 1
    render_run(out, max_pictures=500)
    return out


@pytest.mark.slow
def test_every_bundle_exits_like_the_run_and_prints_its_verdict(perturbed_run):
    ran = repro_check.run_all(perturbed_run)
    said = repro_check.messages(perturbed_run)
    outcomes = {c.id: c.outcome for c in load_run(perturbed_run).cases if c.artifacts}
    assert sorted(r.case_id for r in ran) == sorted(outcomes)  # every case with a folder has a bundle
    failing = [r for r in ran if r.outcome in repro_check.FAILED]
    passing = [r for r in ran if r.outcome in repro_check.PASSED]
    assert len(failing) >= 10 and len(passing) >= 2
    assert [r.case_id for r in failing if r.code != 1] == []
    assert [r.case_id for r in passing if r.code != 0] == []
    for r in ran:  # the same verdict text as the report's message for the case
        assert r.verdict == f"{'fail' if r.outcome == 'fail' else r.outcome}: {said[r.case_id]}", r.case_id


def test_bundled_model_has_the_lowest_ir_its_opset_needs(perturbed_run):
    cid, _, data = repro_check.bundles(perturbed_run / "report.html")[0]
    bundled = onnx.load_from_string(zipfile.ZipFile(io.BytesIO(data)).read("model.onnx"))
    lowest = onnx.helper.find_min_ir_version_for(list(bundled.opset_import), ignore_unknown=True)
    assert bundled.ir_version == lowest < onnx.IR_VERSION
    run = load_run(perturbed_run)
    folder = perturbed_run / run.by_id()[cid].artifacts
    original = onnx.load(str(folder / "model.onnx"))
    assert original.ir_version >= bundled.ir_version
    assert original.graph == bundled.graph  # only the IR stamp changed


def _ort124() -> str | None:
    """The onnxruntime 1.24 interpreter: EP_TESTBED_ORT124_PYTHON, else .venv-ort124 here."""
    named = os.environ.get("EP_TESTBED_ORT124_PYTHON")
    if named:
        return named
    local = ROOT / ".venv-ort124" / "bin" / "python"
    return str(local) if local.exists() else None


def test_bundles_run_on_onnxruntime_1_24(perturbed_run):
    python = _ort124()
    if python is None:
        ci_has_it = ".venv-ort124" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        if os.environ.get("CI") == "true" and ci_has_it:
            pytest.fail(f".ci/run makes .venv-ort124 but it is missing; {ORT124_HINT}")
        pytest.skip(f"no onnxruntime 1.24 venv; {ORT124_HINT}")
    version = subprocess.run([python, "-c", "import onnxruntime; print(onnxruntime.__version__)"],
                             capture_output=True, text=True, timeout=120).stdout.strip()
    assert version.startswith("1.24"), f"{python} has onnxruntime {version!r}, not 1.24"
    ran = repro_check.run_all(perturbed_run, python)
    assert ran and [(r.case_id, r.outcome, r.code, r.stderr[-300:]) for r in ran if not r.agrees] == []
