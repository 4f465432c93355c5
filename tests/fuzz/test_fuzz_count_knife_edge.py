"""A fuzzed case of seed 2 that the CPU EP once failed: float16 RoiAlign mode=max with an adaptive
count whose exact ratio is 2.00000006 (3 samples) where ONNX Runtime's float32 takes 2, beside a
run of -inf pixels. The ``corner-term-max`` reading's alternatives must hold that reading's own
output at 2 samples (DECISIONS.md FP-3): the case is ``known``, every element explained."""

from __future__ import annotations

import json

import pytest

from ep_testbed.harness.cli import main

CASE = "roi_align/fuzz-s2-b0-006"


def test_count_knife_edge_case_of_seed_2_does_not_fail_on_the_cpu_ep(tmp_path):
    pytest.importorskip("hypothesis")
    pytest.importorskip("onnxruntime")
    code = main(["fuzz", "--ep", "cpu", "--replay", CASE, "--shrink", "none", "--out", str(tmp_path / "r"),
                 "--no-progress", "--jobs", "1"])
    lines = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    cases = {line["id"]: line for line in lines if line["type"] == "case"}
    assert sorted(cases) == [CASE]
    case = cases[CASE]
    assert case["outcome"] != "fail", case["message"]
    assert code == 0
    assert any("samples per output along X" in edge["decision"] for edge in case["knife_edges"]), case["knife_edges"]
    if case["outcome"] == "known":
        assert case["readings"]["unexplained"] == 0, case["readings"]
