"""A ``known`` names its cause by evidence: on a real fuzz run of the CPU EP (every operator, the
bundled expectations), every known case's readings reproduce all of its failing elements, and its
``expected_outcome.explained_by`` counts exactly them; no case is known by a failure's shape."""

from __future__ import annotations

import json

import pytest

from ep_testbed.harness.cli import main


@pytest.mark.slow
def test_every_known_case_of_a_fuzz_run_is_explained_element_by_element(tmp_path):
    pytest.importorskip("hypothesis")
    code = main(["fuzz", "--ep", "cpu", "--max-cases", "400", "--budget", "300", "--shrink", "none", "--also-on",
                 "none", "--out", str(tmp_path / "r"), "--no-progress"])
    assert code in (0, 1)
    lines = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    cases = [line for line in lines if line["type"] == "case"]
    known = [c for c in cases if c["outcome"] == "known"]
    assert known, "the fuzz sample holds known ONNX Runtime divergences to check"
    for case in known:
        explained = case["expected_outcome"]["explained_by"]
        assert case["readings"]["unexplained"] == 0, case["id"]
        assert sum(explained.values()) == case["mismatches"] == case["readings"]["mismatches"], case["id"]
        named = {r for key in explained for r in key.split("+")}
        assert named <= set(case["readings"]["tried"][0].split("+")) | {r for k in case["readings"]["tried"]
                                                                       for r in k.split("+")}, case["id"]
