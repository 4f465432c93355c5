import json
import xml.etree.ElementTree as ET

import synthetic_run

from ep_testbed.harness.core.results import FAILING, REPORT_ORDER
from ep_testbed.reports import render_junit, render_summary_json
from ep_testbed.reports.results import load_run


def test_junit_one_testcase_per_case_with_outcome_mapping(small_run):
    root = ET.parse(render_junit(small_run)).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    run = load_run(small_run)
    assert [c.get("name") for c in cases] == [c.id for c in run.cases]
    by_name = {c.get("name"): c for c in cases}
    counts = {"failure": 0, "error": 0, "skipped": 0}
    for case in run.cases:
        el = by_name[case.id]
        kinds = [child.tag for child in el if child.tag in counts]
        expected = {"fail": ["failure"], "fixed": ["failure"], "crash": ["error"], "timeout": ["error"],
                    "error": ["error"], "not-on-ep": ["skipped"], "inexpressible": ["skipped"], "known": ["skipped"],
                    "pass": [], "tie-only": []}[case.outcome]
        assert kinds == expected, (case.outcome, kinds)
        for k in kinds:
            counts[k] += 1
            assert el.find(k).get("type") == case.outcome
    assert int(suite.get("tests")) == len(run.cases)
    assert int(suite.get("failures")) == counts["failure"] == 6
    assert int(suite.get("errors")) == counts["error"] == 9
    assert int(suite.get("skipped")) == counts["skipped"] == 9


def test_junit_failure_carries_error_summary_and_worst_elements(small_run):
    root = ET.parse(render_junit(small_run)).getroot()
    failure = next(tc.find("failure") for tc in root.iter("testcase")
                   if tc.find("failure") is not None and tc.find("failure").get("type") == "fail")
    assert failure.get("message").startswith("fail — outside tolerance 2; max_abs=0.0")
    assert "OutputTensor(1, 0," in failure.text


def test_junit_survives_control_characters_from_a_crashed_worker(tmp_path):
    run_dir = synthetic_run.write_run(tmp_path / "r", 1, pattern=["crash"])
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    case = json.loads(lines[1])
    case["message"] = "segfault\x00\x07 in driver\x1b[31m"
    lines[1] = json.dumps(case)
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    error = ET.parse(render_junit(run_dir)).getroot().find(".//error")
    assert "segfault\ufffd\ufffd in driver\ufffd[31m" in error.text


def test_summary_json_counts_and_failing_list(small_run):
    s = json.loads(render_summary_json(small_run).read_text())
    assert s["total"] == 120 and sum(s["counts"].values()) == 120
    assert list(s["counts"]) == list(REPORT_ORDER)
    assert s["bad"] == 15 == len(s["failing"])  # 3 each of fail, crash, timeout, error, fixed
    assert [f["outcome"] for f in s["failing"]][:3] == ["fail"] * 3
    assert {f["outcome"] for f in s["failing"]} == set(FAILING)
    assert sum(n for by in s["by_op_dtype"].values() for cell in by.values() for n in cell.values()) == 120
    assert s["interrupted"] is False and s["run"]["seed"] == 0
