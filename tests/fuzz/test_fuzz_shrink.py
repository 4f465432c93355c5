"""Shrinking keeps the failure: every step is judged by the runner, and the minimal case still fails
the same way (here with runners that fail on a known property, so the minimum is known too)."""

import numpy as np
import pytest

pytest.importorskip("hypothesis")

from ep_testbed.graphs.cases.common import LiteralCase, desc_elements  # noqa: E402
from ep_testbed.graphs.catalog import build_catalog  # noqa: E402
from ep_testbed.harness.core.signature import Signature, same_failure, signature  # noqa: E402
from ep_testbed.harness.fuzz import draw  # noqa: E402
from ep_testbed.harness.fuzz.shrink import shrink  # noqa: E402

pytestmark = pytest.mark.slow  # every test here runs cases in worker processes: -m "not slow" skips them


def _line(case, failing: bool) -> dict:
    worst = [{"output": "OutputTensor", "index": [0], "expected": 1.0, "actual": 2.0, "failed": True}]
    return {"id": case.id, "op": case.op, "outcome": "fail" if failing else "pass", "flags": [],
            "worst": worst if failing else [], "message": ""}


class Runner:
    """A stand-in EP: a case fails when ``predicate(case)``; it records every case it ran."""

    def __init__(self, predicate):
        self.predicate, self.ran = predicate, []

    def __call__(self, case):
        self.ran.append(case)
        return _line(case, self.predicate(case))


def _output_count(case) -> int:
    return case.desc.output_tensor.element_count


@pytest.fixture(scope="module")
def big_fuzzed_case():
    cases = draw.draw_batch("max_pooling2", 11, 4)
    return max(cases, key=_output_count)


def test_a_fuzzed_failure_shrinks_to_the_boundary_it_needs_and_still_fails(big_fuzzed_case):
    runner = Runner(lambda case: _output_count(case) > 64)
    target = signature(_line(big_fuzzed_case, True))
    assert _output_count(big_fuzzed_case) > 300
    result = shrink(big_fuzzed_case, target, runner, budget_s=60)
    assert result.stages["structure"]["replayed"] is True
    assert runner.predicate(result.minimal) and same_failure(target, result.minimal_line)
    assert 64 < _output_count(result.minimal) <= 96
    assert result.minimal_elements * 3 < result.original_elements
    assert result.candidates == len(runner.ran) and result.accepted >= 1
    assert all(case.id.startswith(big_fuzzed_case.id + "-shrink") for case in runner.ran)


def test_a_failure_that_needs_nothing_shrinks_to_the_smallest_desc_and_zero_inputs(big_fuzzed_case):
    result = shrink(big_fuzzed_case, signature(_line(big_fuzzed_case, True)), Runner(lambda case: True), budget_s=60)
    desc = result.minimal.desc
    assert desc.input_tensor.sizes[:2] == (1, 1) and set(desc.window_size) == {1}
    assert desc.output_indices_tensor is None and desc.input_tensor.data_type == "FLOAT32"
    assert desc_elements(desc) <= 2 * 1 * 1 * 1 * 1 + 1 and not np.any(result.minimal.arrays["InputTensor"])


def test_the_values_stage_keeps_only_the_elements_the_failure_needs():
    case = next(c for c in build_catalog(["roi_pooling"]) if c.id == "roi_pooling/edge-whole-image")
    x = case.inputs()["InputTensor"]
    position = tuple(int(i) for i in np.argwhere(x != 0)[-1])
    value = x[position]
    runner = Runner(lambda c: c.inputs()["InputTensor"][position] == value)
    result = shrink(case, signature(_line(case, True)), runner, budget_s=60)
    kept = result.minimal.arrays["InputTensor"]
    assert kept[position] == value and np.count_nonzero(kept) == 1
    assert isinstance(result.minimal, LiteralCase) and result.minimal.id == case.id + "-min"


def test_a_step_that_fails_another_way_is_not_taken(big_fuzzed_case):
    def run(case):
        line = _line(case, True)
        if _output_count(case) <= 64:  # smaller cases fail too, but in another output: a different failure
            line["worst"][0]["output"] = "OutputIndicesTensor"
        return line

    target = signature(_line(big_fuzzed_case, True))
    result = shrink(big_fuzzed_case, target, run, budget_s=60)
    assert _output_count(result.minimal) > 64 and same_failure(target, result.minimal_line)


def test_past_the_budget_nothing_more_runs_and_the_best_case_so_far_is_kept(big_fuzzed_case):
    runner = Runner(lambda case: True)
    result = shrink(big_fuzzed_case, signature(_line(big_fuzzed_case, True)), runner, budget_s=0)
    assert runner.ran == [] and result.minimal.desc == big_fuzzed_case.desc
    assert any("budget" in note for note in result.notes)


def test_signatures_tell_outcome_output_value_classes_and_diverging_fields_apart():
    base = {"op": "X", "outcome": "fail", "message": "", "flags": [{"field": "InputTensor", "kind": "diverges"},
                                                                   {"field": "Strides", "kind": "exact"}],
            "worst": [{"output": "OutputTensor", "failed": True, "expected": "-inf", "actual": -3.4e38}]}
    sig = signature(base)
    assert sig == Signature("X", "fail", "values", ("OutputTensor",), "-inf -> number", ("InputTensor",))
    assert signature({**base, "outcome": "pass"}) is None
    assert signature({**base, "worst": [], "message": "X could not build the session: boom"}).kind == "build"
    assert signature({"op": "X", "outcome": "crash", "flags": []}) == Signature("X", "crash")
    other = {**base, "worst": [{"output": "OutputTensor", "failed": True, "expected": 1.0, "actual": 2.0}]}
    assert not same_failure(sig, other)
