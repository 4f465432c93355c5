"""Fuzzed cases of seed 2 that the CPU EP once failed, each a knife edge the reference now holds
(DECISIONS.md FP-3); replayed, neither may fail, each notes its decision, and a ``known`` one has
every element explained:

* ``roi_align/fuzz-s2-b0-006``: float16 RoiAlign mode=max with an adaptive count whose exact ratio
  is 2.00000006 (3 samples) where ONNX Runtime's float32 takes 2, beside a run of -inf pixels; the
  ``corner-term-max`` reading's alternatives must hold that reading's own output at 2 samples.
* ``roi_align1/fuzz-s2-b2-033``: ROI_ALIGN1 MAX (RoiAlign(avg, sampling_ratio=1) then MaxPool) over
  a column holding +inf, where a sample the page puts at 3.9999999 is computed by ONNX Runtime's
  float32 as 4 exactly and becomes NaN (``0 * inf``); under MAX a NaN sample loses (NAN-1), so the
  element's range reaches the max of the samples that stay numbers (2.5, where the reference's is 7.125)."""

from __future__ import annotations

import pytest
from fuzz_kit import replay_on_cpu


@pytest.mark.parametrize("case_id, decision", [("roi_align/fuzz-s2-b0-006", "samples per output along X"),
                                               ("roi_align1/fuzz-s2-b2-033", "region 8: LINEAR sample Y")])
def test_knife_edge_cases_of_seed_2_do_not_fail_on_the_cpu_ep(tmp_path, case_id, decision):
    pytest.importorskip("hypothesis")
    pytest.importorskip("onnxruntime")
    code, cases = replay_on_cpu(tmp_path / "r", case_id)
    case = cases[case_id]
    assert case["outcome"] != "fail", case["message"]
    assert code == 0
    assert any(decision in edge["decision"] for edge in case["knife_edges"]), case["knife_edges"]
    if case["outcome"] == "known":
        assert case["readings"]["unexplained"] == 0, case["readings"]
