"""A fuzzed case of seed 2 that the CPU EP once failed: float16 RoiAlign mode=max with an adaptive
count whose exact ratio is 2.00000006 (3 samples) where ONNX Runtime's float32 takes 2, beside a
run of -inf pixels. The ``corner-term-max`` reading's alternatives must hold that reading's own
output at 2 samples (DECISIONS.md FP-3): the case is ``known``, every element explained."""

from __future__ import annotations

import pytest
from fuzz_kit import replay_on_cpu

CASE = "roi_align/fuzz-s2-b0-006"


def test_count_knife_edge_case_of_seed_2_does_not_fail_on_the_cpu_ep(tmp_path):
    pytest.importorskip("hypothesis")
    pytest.importorskip("onnxruntime")
    code, cases = replay_on_cpu(tmp_path / "r", CASE)
    case = cases[CASE]
    assert case["outcome"] != "fail", case["message"]
    assert code == 0
    assert any("samples per output along X" in edge["decision"] for edge in case["knife_edges"]), case["knife_edges"]
    if case["outcome"] == "known":
        assert case["readings"]["unexplained"] == 0, case["readings"]
