"""A fuzzed case of seed 2 that the CPU EP once failed: ROI_ALIGN1 MAX (RoiAlign(avg,
sampling_ratio=1) then MaxPool) over a column holding +inf, where a sample the page puts at
3.9999999 is computed by ONNX Runtime's float32 as 4 exactly and becomes NaN (``0 * inf``), and
the max of the other samples, 2.5, is the output where the reference's is 7.125. Under MAX a NaN
sample loses (NAN-1), so the element's knife-edge range reaches the max of the samples that stay
numbers (DECISIONS.md FP-3): the case must not fail."""

from __future__ import annotations

import pytest
from fuzz_kit import replay_on_cpu

CASE = "roi_align1/fuzz-s2-b2-033"


def test_max_nan_sample_case_of_seed_2_does_not_fail_on_the_cpu_ep(tmp_path):
    pytest.importorskip("hypothesis")
    pytest.importorskip("onnxruntime")
    code, cases = replay_on_cpu(tmp_path / "r", CASE)
    case = cases[CASE]
    assert case["outcome"] != "fail", case["message"]
    assert code == 0
    assert any("region 8: LINEAR sample Y" in edge["decision"] for edge in case["knife_edges"]), case["knife_edges"]
    if case["outcome"] == "known":
        assert case["readings"]["unexplained"] == 0, case["readings"]
