"""Shrinking keeps the failure: every step is judged by the runner, and the minimal case still fails
the same way (here with runners that fail on a known property, so the minimum is known too)."""

import numpy as np
import pytest

pytest.importorskip("hypothesis")

from ep_testbed.graphs.cases.common import LiteralCase, desc_elements  # noqa: E402
from ep_testbed.graphs.catalog import build_catalog  # noqa: E402
from ep_testbed.harness.core.signature import Signature, same_failure, signature  # noqa: E402
from ep_testbed.harness.fuzz import draw  # noqa: E402
from ep_testbed.harness.fuzz.shrink import SMALL_ELEMENTS, STRUCTURE_STALL, shrink  # noqa: E402
from ep_testbed.harness.run.case_run import ArtifactPolicy  # noqa: E402
from ep_testbed.reference import DescError, execute, validate  # noqa: E402

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
    # the failure needs the whole feature map (no smaller variant of the shape stage fails)
    runner = Runner(lambda c: c.inputs()["InputTensor"].shape == x.shape and c.inputs()["InputTensor"][position] == value)
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


#: What the default CPU fuzz found (``ep-testbed fuzz --ep cpu --budget 60``, seed 0): an
#: infinite input where the reference (DirectML's interpolation, a + t*(b - a), with inf - inf
#: NaN) gives NaN and ONNX Runtime's CPU RoiAlign (a weighted sum of the corners) gives +-inf.
INF_INPUT = "roi_align/fuzz-s0-b3-026"


def _cpu_inf_where_the_reference_has_nan(case) -> bool:
    """The case's model on ONNX Runtime's CPU EP (in this process) gives +-inf where the reference
    gives NaN: the failure itself, read off the EP's outputs without the verdict code."""
    import onnxruntime as ort

    from ep_testbed.graphs import to_onnx

    mapping = to_onnx(case.desc, case.opset)
    if mapping.model is None:
        return False
    tensors = case.inputs()
    session = ort.InferenceSession(mapping.model.SerializeToString(), providers=["CPUExecutionProvider"])
    with np.errstate(all="ignore"):
        got = mapping.outputs(session.run(None, mapping.feeds(tensors)))
        expected = execute(case.desc, tensors)
    return any(bool((np.isnan(e) & np.isinf(got[name])).any()) for name, e in expected.items() if name in got)


def test_a_fuzzed_failure_that_needs_one_infinity_shrinks_to_a_few_elements():
    """A fuzzed case's values are drawn over its whole shape, so every smaller draw holds other
    values: Hypothesis's shrinker alone stopped this failure at 994 elements. The shape stage cuts
    regions, channels, images and pixels out of the case itself, keeping the values it holds."""
    case = draw.replay(INF_INPUT)
    assert _cpu_inf_where_the_reference_has_nan(case), f"{INF_INPUT} no longer gives inf where the reference has NaN"
    runner = Runner(_cpu_inf_where_the_reference_has_nan)
    result = shrink(case, signature(_line(case, True)), runner, budget_s=120)
    assert runner.predicate(result.minimal)
    assert result.minimal_elements <= SMALL_ELEMENTS < result.original_elements, result.stages
    assert result.stages["shape"]["candidates"] > 0 and not result.notes


def test_a_minimal_case_left_large_says_why():
    case = draw.replay(INF_INPUT)
    runner = Runner(lambda c: desc_elements(c.desc) >= 1000)
    result = shrink(case, signature(_line(case, True)), runner, budget_s=120)
    assert SMALL_ELEMENTS < result.minimal_elements
    assert any("smaller variants" in note and "failed the same way" in note for note in result.notes)


@pytest.mark.parametrize("op", ["roi_align", "roi_align1", "roi_pooling", "max_pooling2"])
def test_every_smaller_variant_the_cases_modules_offer_is_smaller_and_runs(op):
    from ep_testbed.graphs.cases.common import cases_module
    from ep_testbed.reference.registry import spec_named

    moves = cases_module(spec_named(op).dml_type).shrink_moves
    offered = 0
    for case in draw.draw_batch(op, 2, 0)[:12]:
        for desc, smaller in moves(case.desc, case.inputs()):
            assert desc_elements(desc) <= desc_elements(case.desc)
            try:
                validate(desc)
            except DescError:
                continue  # the shrinker never runs these
            offered += 1
            with np.errstate(all="ignore"):
                outputs = execute(desc, smaller)
            assert outputs["OutputTensor"].shape == tuple(desc.output_tensor.sizes)
    assert offered > 12


def test_a_candidate_the_readings_explain_is_not_the_unexplained_failure_being_shrunk():
    """A fuzz failure no reading explains shrinks only through candidates no reading explains
    either: one whose elements a named reading reproduces settles ``known`` and is refused (it
    would hand the user a minimal case of another cause); a ``--shrink-known`` finding keeps its
    raw failure as the target."""
    from ep_testbed.harness.core.signature import same_failure, signature
    from ep_testbed.harness.fuzz.engine import Finding, _candidate_runner

    raw = {"op": "DML_OPERATOR_ROI_ALIGN", "outcome": "fail", "flags": [], "message": "",
           "worst": [{"output": "OutputTensor", "failed": True, "expected": 1.0, "actual": 0.5}]}
    target = signature(raw)

    class Pool:
        def __init__(self):
            self.policies = []

        def run_one(self, case, policy=None):
            self.policies.append(policy)
            return dict(raw)

    class Explaining:
        def candidates(self, case):
            return ("entry",)

        def settle(self, case, line):
            line["outcome"] = "known" if case == "explained" else "fail"

    pool = Pool()
    unexplained = Finding("c", raw, {**raw, "outcome": "fail"}, target, 0.0)
    run = _candidate_runner(pool, Explaining(), unexplained)
    assert same_failure(target, run("still-unexplained")) and not same_failure(target, run("explained"))
    assert pool.policies[-1].expected == ("entry",)  # the worker tries the readings on the candidate
    known = Finding("c", raw, {**raw, "outcome": "known"}, target, 0.0)
    kept = _candidate_runner(pool, Explaining(), known)("explained")
    assert same_failure(target, kept) and kept["outcome"] == "fail"  # the raw failure, never settled
    assert pool.policies[-1] == ArtifactPolicy()


class Together(Runner):
    """A stand-in EP with ``width`` workers: ``many`` answers a group, the last case first (as a
    pool answers in completion order), and records each group's size."""

    def __init__(self, predicate, width):
        super().__init__(predicate)
        self.width, self.groups = width, []

    def many(self, cases):
        self.groups.append(len(cases))
        return [self(case) for case in reversed(cases)][::-1]


@pytest.mark.parametrize("width", [2, 3])
def test_variants_run_together_take_the_first_failing_one_in_order(width):
    """With several workers the shape stage runs that many variants at once; of a group it takes
    the first that fails in the moves' order, as running them one by one does, and a later one run
    beside it is a candidate, never accepted."""
    from ep_testbed.harness.fuzz.shrink import _Trial

    cases = draw.draw_batch("max_pooling2", 3, 0)[:5]
    failing = {repr(cases[1].desc), repr(cases[2].desc)}
    runner = Together(lambda case: repr(case.desc) in failing, width)
    original = cases[0]
    trial = _Trial(original, signature(_line(original, True)), runner, deadline=float("inf"))
    found, offered = trial.first_failing(iter(cases))
    assert found is cases[1] and offered == 2
    assert runner.groups == [width] and trial.candidates == width and trial.accepted == 1
    assert trial.best_line["id"] == f"{original.id}-shrink2"
    assert [c.id for c in runner.ran] == [f"{original.id}-shrink{i}" for i in range(width, 0, -1)]
    none, offered = trial.first_failing(iter(cases[3:]))
    assert none is None and offered == 2 and trial.accepted == 1


def test_a_shrink_on_several_workers_keeps_the_case_one_worker_keeps(big_fuzzed_case):
    predicate = lambda case: _output_count(case) > 64  # noqa: E731
    target = signature(_line(big_fuzzed_case, True))
    alone = shrink(big_fuzzed_case, target, Runner(predicate), budget_s=60)
    runner = Together(predicate, 2)
    together = shrink(big_fuzzed_case, target, runner, budget_s=60)
    assert together.minimal.desc == alone.minimal.desc and together.accepted == alone.accepted
    assert all(np.array_equal(together.minimal.arrays[k], alone.minimal.arrays[k]) for k in alone.minimal.arrays)
    assert max(runner.groups) == 2 and together.stages["shape"]["offered"] == alone.stages["shape"]["offered"]


def test_hypothesis_stops_after_a_run_of_candidates_that_do_not_fail(big_fuzzed_case):
    """Past ``STRUCTURE_STALL`` candidates in a row that do not fail the same way, the structure
    stage ends (its later moves are cuts the shape stage makes faster) and says so."""
    runner = Runner(lambda case: False)
    result = shrink(big_fuzzed_case, signature(_line(big_fuzzed_case, True)), runner, budget_s=60)
    stage = result.stages["structure"]
    assert stage["replayed"] is True and stage["stalled"] is True
    assert stage["candidates"] == STRUCTURE_STALL
    assert result.minimal.desc == big_fuzzed_case.desc and result.accepted == 0


def test_candidates_run_together_come_back_in_their_order_and_settled():
    """The shrink's runner sends a group of candidates to the pool at once; the pool answers in
    completion order, the runner in the cases' order, each settled as a single candidate is."""
    from ep_testbed.harness.fuzz.engine import Finding, _candidate_runner

    raw = {"op": "DML_OPERATOR_ROI_ALIGN", "outcome": "fail", "flags": [], "message": ""}

    class Case:
        def __init__(self, case_id):
            self.id = case_id

    class Pool:
        jobs = 3

        def run(self, cases, policy_for, keep_workers=False):
            assert keep_workers and all(policy_for(c).expected == ("entry",) for c in cases)
            return [{**raw, "id": case.id} for case in reversed(cases)]

    class Explaining:
        def candidates(self, case):
            return ("entry",)

        def settle(self, case, line):
            line["outcome"] = "known" if case.id == "b" else "fail"

    run = _candidate_runner(Pool(), Explaining(), Finding("c", raw, raw, signature(raw), 0.0))
    lines = run.many([Case("a"), Case("b"), Case("c")])
    assert run.width == 3
    assert [(line["id"], line["outcome"]) for line in lines] == [("a", "fail"), ("b", "known"), ("c", "fail")]
