"""Two fuzzed cases of seed 0 that the CPU EP once failed: a LINEAR sample exactly on x = 4 (and
x = 8) in exact arithmetic, beside -inf taps, where ONNX Runtime's float32 coordinate falls just
below the integer and its weighted sum gives -inf instead of the reference's ``0 * -inf`` = NaN.
That is a knife edge (DECISIONS.md FP-3): neither case may fail, and both note the decision."""

from __future__ import annotations

import pytest
from fuzz_kit import replay_on_cpu

CASES = ("roi_align1/fuzz-s0-b1-013", "roi_align1/fuzz-s0-b1-015")


def test_cell_edge_cases_of_seed_0_do_not_fail_on_the_cpu_ep(tmp_path):
    pytest.importorskip("hypothesis")
    pytest.importorskip("onnxruntime")
    code, cases = replay_on_cpu(tmp_path / "r", *CASES)
    for case_id, case in cases.items():
        assert case["outcome"] != "fail", (case_id, case["message"])
    assert code == 0
    for case in cases.values():
        found = [edge["decision"] for edge in case["knife_edges"]]
        assert any("on the cell edge" in decision for decision in found), found
