"""The shipped corpus (``tests/corpus/``): minimal failures fuzzing found on the EPs that run here,
each a case folder (``harness.fuzz.corpus``) with its expectation per EP.

Every case reproduces with its repro bundle alone: ``repro/`` copied somewhere else and run with
nothing but numpy and onnxruntime prints what it printed when the case was found. OpenVINO
cases run in the OpenVINO venv (``tools/openvino-venv.sh``); without it they are skipped with
the command that makes it, except under CI, where that is a failure. The corpus also runs next
to the catalog (``ep-testbed run --corpus tests/corpus``) with every expectation met.
"""

import os
import shutil
import subprocess
import sys

import pytest

from ep_testbed.harness.fuzz.corpus import load_corpus, run_repro
from ep_testbed.harness.core.results import read_run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPENVINO_PYTHON = os.environ.get("EP_TESTBED_OPENVINO_PYTHON") or os.path.join(
    ROOT, ".venv-openvino", "Scripts" if os.name == "nt" else "bin", "python.exe" if os.name == "nt" else "python")
ENTRIES = load_corpus(HERE)


def _python_for(provider: str) -> str:
    """The interpreter whose onnxruntime has ``provider`` (skip, or fail under CI, when absent)."""
    if provider == "CPUExecutionProvider":
        return sys.executable
    if provider == "OpenVINOExecutionProvider" and os.path.exists(OPENVINO_PYTHON):
        return OPENVINO_PYTHON
    message = f"no interpreter with {provider} here (OpenVINO: bash tools/openvino-venv.sh)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def test_the_corpus_holds_cases_from_both_eps_each_with_its_expectation():
    assert {e.found["ep_alias"] for e in ENTRIES} >= {"cpu", "openvino"}
    for entry in ENTRIES:
        alias = entry.found["ep_alias"]
        assert alias in entry.expectations, entry.case.id
        expectation = entry.expectations[alias]
        assert expectation.reason and expectation.link.startswith("https://")
        assert entry.found["minimal_elements"] * 20 <= entry.found["original_elements"] or \
            entry.found["minimal_elements"] <= 16, entry.case.id
        assert entry.repro["provider"] == entry.found["ep"] and entry.repro["prints"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.case.id for e in ENTRIES])
def test_every_case_reproduces_with_its_repro_bundle_alone(entry, tmp_path):
    python = _python_for(entry.repro["provider"])
    bundle = tmp_path / "bundle"
    shutil.copytree(os.path.join(entry.path, "repro"), bundle)
    assert sorted(os.listdir(bundle)) == ["actual.npz", "desc.json", "expected.npz", "inputs.npz", "model.onnx",
                                          "repro.py"]
    printed = run_repro(str(bundle), entry.repro["provider"], python=python)
    assert printed == entry.repro["prints"]
    differing = [line for line in printed.splitlines() if "elements differ" in line and not line.split("= ")[1]
                 .startswith("0,")]
    assert differing, printed


def test_the_corpus_runs_next_to_the_catalog_on_cpu_with_every_expectation_met(tmp_path):
    from ep_testbed.harness.cli import main

    out = tmp_path / "cpu"
    assert main(["run", "--ep", "cpu", "-k", "corpus-", "--corpus", HERE, "--out", str(out), "--no-progress"]) == 0
    _, lines, _ = read_run(str(out))
    assert {line["id"] for line in lines} == {e.case.id for e in ENTRIES}
    _check_expectations(lines, "cpu")


def test_the_corpus_runs_on_openvino_with_every_expectation_met(tmp_path):
    python = _python_for("OpenVINOExecutionProvider")
    out = tmp_path / "ov"
    done = subprocess.run([python, "-m", "ep_testbed.harness.cli", "run", "--ep", "openvino", "-k", "corpus-",
                           "--corpus", HERE, "--out", str(out), "--no-progress"], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    _, lines, _ = read_run(str(out))
    _check_expectations(lines, "openvino")


def _check_expectations(lines, alias):
    """Every case that expects to fail on ``alias`` is ``known`` there; the others pass or did not run on it."""
    expected = {e.case.id for e in ENTRIES if alias in e.expectations}
    assert expected and {l["id"] for l in lines if l["outcome"] == "known"} == expected
    assert {l["outcome"] for l in lines if l["id"] not in expected} <= {"pass", "tie-only", "not-on-ep"}
