"""``fuzz --also-on``: a fuzz run re-checks its failures on a second EP, as ``run`` does
(harness/run/recheck.py), so a failure on a GPU EP is labelled "shared with <EP>" or "only on
<EP>" there too; every drawn case still gets exactly one line.

Only the CPU EP exists here: the EP under test is the CPU EP with the worker's ``perturb`` fault
planted (one output element changed), and the second EP is the CPU EP with the same fault, so
each failure is the same failure there: shared."""

from __future__ import annotations

import json
import os

import pytest
from fuzz_kit import fuzz_cpu

from ep_testbed.harness.core.expectations import Expectations
from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.fuzz.engine import FuzzOptions, fuzz
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.worker import FAULT_ENV

pytestmark = pytest.mark.slow

CPU = resolve_ep("cpu")
#: The fuzzed MaxPool cases whose EP output the planted fault changes.
PLANTED = "max_pooling2/fuzz-s0-b0-0[5-9]*"


def test_fuzz_labels_each_failure_from_its_recheck_and_loses_no_line(tmp_path):
    out = tmp_path / "fuzz"
    env = dict(os.environ, **{FAULT_ENV: f"perturb={PLANTED}"})
    options = FuzzOptions(out_dir=str(out), ops=["max_pooling2"], budget_s=120, jobs=1, shrink="none",
                          max_cases=60, env=env, also_on=CPU, also_on_expectations=Expectations(),
                          header_extra={"also_on": CPU.provider})
    result = fuzz(CaseConfig(ep=CPU), options, Expectations())
    header, lines, end = read_run(str(out))
    cases = [line for line in lines if line.get("type") == "case"]
    assert header["also_on"] == CPU.provider and end["ran"] == result.ran == 60
    assert len(cases) == 60 and len({line["id"] for line in cases}) == 60  # each drawn case once
    failing = [line for line in cases if line["outcome"] == "fail"]
    assert failing and result.findings
    for line in failing:
        assert line["scope"] == "shared with CPUExecutionProvider", line["id"]
        assert line["also_on"]["same_failure"] is True and line["also_on"]["outcome"] == "fail"
    assert all(line["scope"] is None for line in cases if line["outcome"] != "fail")


def test_fuzz_takes_also_on_as_run_does(tmp_path, capsys):
    code = fuzz_cpu(tmp_path / "same", "--also-on", "cpu", max_cases="5")
    assert code == 2 and "--also-on cpu: that is the EP under test" in capsys.readouterr().err
    assert fuzz_cpu(tmp_path / "plain", "--shrink", "none", max_cases="5") == 0
    header = json.loads((tmp_path / "plain" / "results.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert header["also_on"] is None  # the CPU EP under test has no second EP by default
