"""The conformance suite as a user runs it: ``pytest tests/conformance --ep cpu [-n 2] [--junitxml]``."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from local_cases import HERE

from ep_testbed.graphs.catalog import build_catalog

pytestmark = pytest.mark.slow  # every test here runs pytest in a subprocess: -m "not slow" skips them

ROOT = os.path.dirname(os.path.dirname(HERE))


def pytest_run(*args):
    return subprocess.run([sys.executable, "-m", "pytest", "tests/conformance", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_collects_one_readable_test_per_case_with_op_and_dtype_markers():
    p = pytest_run("--ops", "max_pooling2", "-m", "float16", "--co", "-q")
    ids = [l.split("[", 1)[1].rstrip("]") for l in p.stdout.splitlines() if "test_case[" in l]
    expected = [c.id for c in build_catalog(["max_pooling2"]) if c.tags.get("dtype") == "float16"]
    assert ids and sorted(ids) == sorted(expected)


@pytest.fixture(scope="module")
def parallel_roi_pooling(tmp_path_factory):
    """One run of ROI_POOLING's catalog on the CPU EP over two pytest workers, with a junit file:
    ``(completed process, junit path)``, read by the tests below."""
    pytest.importorskip("xdist")
    junit = tmp_path_factory.mktemp("parallel") / "junit.xml"
    return pytest_run("--ep", "cpu", "--ops", "roi_pooling", "-q", "-n", "2", f"--junitxml={junit}"), junit


def _junit_outcomes(junit) -> dict[str, list[str]]:
    """Per test name of a junit file, the tags of its children (failure, skipped, ...)."""
    return {t.attrib["name"]: [c.tag for c in t] for t in ET.parse(junit).getroot().iter("testcase")}


def test_parallel_run_gives_one_junit_testcase_per_case(parallel_roi_pooling):
    p, junit = parallel_roi_pooling
    cases = build_catalog(["roi_pooling"])
    testcases = list(ET.parse(junit).getroot().iter("testcase"))
    names = sorted(t.attrib["name"] for t in testcases)
    assert names == sorted(f"test_case[{c.id}]" for c in cases)
    xfailed = [t for t in testcases if t.find("skipped") is not None and "xfail" in t.find("skipped").attrib.get("type", "")]
    assert any("edge-nan-inf" in t.attrib["name"] for t in xfailed)  # a known CPU divergence: strict xfail
    assert p.returncode in (0, 1), p.stdout[-2000:]


def test_inexpressible_cases_are_skipped_with_the_reason_never_passed():
    p = pytest_run("--ops", "roi_align1", "-k", "nearest", "-rs", "-q")
    assert "passed" not in p.stdout.splitlines()[-1]
    assert "skipped" in p.stdout.splitlines()[-1]
    assert "inexpressible: InterpolationMode=NEAREST_NEIGHBOR" in p.stdout


def test_a_known_divergence_that_passes_fails_the_suite(tmp_path):
    case = next(c for c in build_catalog(["roi_pooling"]) if c.id.startswith("roi_pooling/grid-fp32"))
    path = tmp_path / "exp.json"
    path.write_text(json.dumps({"expectations": [
        {"id": case.id, "outcome": "fail", "readings": ["std-max-fold"], "reason": "pretend",
         "link": "https://example.org/x"}]}))
    p = pytest_run("--ops", "roi_pooling", "-k", case.id, "--expectations", str(path), "-q")
    assert p.returncode == 1 and "fixed: expected fail (pretend" in p.stdout


@pytest.mark.parametrize("batch", ["1", "4"])
def test_a_crash_and_a_hang_fail_only_their_own_tests(batch):
    """Alone, and with --batch 4, where the four cases run ahead together with the first test."""
    ids = sorted(c.id for c in build_catalog(["roi_pooling"]) if c.id.startswith("roi_pooling/grid-fp32"))[:4]
    env = dict(os.environ, EP_TESTBED_FAULT=f"abort={ids[0]};hang={ids[1]}")
    selection = " or ".join(f"[{i}]" for i in ids)
    p = subprocess.run([sys.executable, "-m", "pytest", "tests/conformance", "-p", "no:cacheprovider", "--ops",
                        "roi_pooling", "--case-timeout", "2", "-k", selection, "-q", "--batch", batch],
                       capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    tail = p.stdout.splitlines()[-1]
    assert "2 failed, 2 passed" in tail, p.stdout[-3000:]
    assert "CaseCrashed" in p.stdout and "SIGABRT" in p.stdout
    assert "CaseTimedOut" in p.stdout and "no result after 2 s" in p.stdout


TIGHT_FP16 = "fp16:atol=0,rtol=0,ulp=0"  # no rounding slack: an fp32-accumulating EP misses by 1 ULP


def test_tol_and_tolerances_change_a_case_outcome(tmp_path):
    """The rule alone (--strict-tolerance): the reference's bound would accept the 1 ULP miss."""
    selection = ("--ops", "roi_align", "-k", "grid-avg-linear-fp16", "-q", "--strict-tolerance")
    default = pytest_run(*selection)
    assert default.returncode == 0 and "2 passed" in default.stdout.splitlines()[-1], default.stdout[-2000:]
    tight = pytest_run(*selection, "--tol", TIGHT_FP16)
    assert tight.returncode == 1 and "CaseFailed" in tight.stdout and "outside tolerance" in tight.stdout
    assert "failed" in tight.stdout.splitlines()[-1]
    table = tmp_path / "tight.json"
    table.write_text(json.dumps({"FLOAT16": {"atol": 0, "rtol": 0, "ulp": 0}}))
    from_file = pytest_run(*selection, "--tolerances", str(table))
    assert from_file.returncode == 1 and "CaseFailed" in from_file.stdout
    loosened = pytest_run(*selection, "--tolerances", str(table), "--tol", "fp16:atol=0.01")  # --tol applies last
    assert loosened.returncode == 0, loosened.stdout[-2000:]


def test_bad_shared_options_are_one_usage_error(tmp_path):
    for args, words in ((["--tol", "fp16:atol"], "--tol 'fp16:atol'"), (["--ep", "dml"], "--ep dml"),
                        (["--tolerances", str(tmp_path / "none.json")], "cannot read it")):
        p = pytest_run(*args, "--co", "-q")
        assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]
        assert words in p.stderr and "Traceback" not in p.stderr + p.stdout


def test_batched_tests_read_the_same_outcomes(tmp_path, parallel_roi_pooling):
    """--batch 8: each test reads its case's line, run ahead with others in shared sessions; the
    outcomes are those of the unbatched run over two workers."""
    junit = tmp_path / "junit-8.xml"
    p = pytest_run("--ep", "cpu", "--ops", "roi_pooling", "--batch", "8", f"--junitxml={junit}", "-q")
    assert p.returncode in (0, 1), p.stdout[-2000:]
    batched, unbatched = _junit_outcomes(junit), _junit_outcomes(parallel_roi_pooling[1])
    assert len(batched) == len(build_catalog(["roi_pooling"])) and batched == unbatched


def pytest_counts(stdout: str) -> dict[str, int]:
    """pytest's closing counts (``3 passed, 2 skipped, 4 xfailed``), every kind, absent ones 0."""
    import re

    found = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed|error)",
                                                          stdout.strip().splitlines()[-1]))
    return {kind: found.get(kind, 0) for kind in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")}


def run_counts_as_pytest(lines) -> dict[str, int]:
    """``ep-testbed run``'s outcomes grouped as the plugin maps them (its module docstring)."""
    from ep_testbed.harness.pytest_plugin import OUTCOME_TO_PYTEST

    counts = {kind: 0 for kind in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")}
    for line in lines:
        counts[OUTCOME_TO_PYTEST[line["outcome"]]] += 1
    return counts


def test_run_and_the_plugin_count_the_same_catalog_the_same_way(tmp_path, parallel_roi_pooling):
    """ROI_POOLING on the CPU EP holds passes, known divergences (each settled on
    its result) and no untested case; the plugin's counts are run's outcomes grouped."""
    from ep_testbed.harness.cli import main
    from ep_testbed.harness.core.results import OUTCOMES, read_run
    from ep_testbed.harness.pytest_plugin import OUTCOME_TO_PYTEST

    assert set(OUTCOME_TO_PYTEST) == set(OUTCOMES)
    assert main(["run", "--ep", "cpu", "--ops", "roi_pooling", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    lines = [line for line in read_run(str(tmp_path / "run"))[1] if line.get("type") == "case"]
    p = parallel_roi_pooling[0]
    assert pytest_counts(p.stdout) == run_counts_as_pytest(lines), p.stdout[-1500:]
    assert {line["outcome"] for line in lines} >= {"pass", "known"}
