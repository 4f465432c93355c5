"""The tolerance rule and the comparison: every branch of harness/core/tolerances.py's rule.

Expected values here are built from the rule's own definition (e.g. "the next float32 after
1.0 is one ULP away", numpy.nextafter), not copied from a run.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ep_testbed.harness.cli.options import load_tolerances
from ep_testbed.harness.core.compare import compare_outputs, ulp_distance
from ep_testbed.harness.core.tolerances import DEFAULT_TOLERANCES, Tolerance, Tolerances
from ep_testbed.reference.registry import spec_named

#: MaxPool's index output, as its operator record declares it.
INDEX = spec_named("max_pooling2").index_outputs

EXACT_FLOATS = Tolerances({"FLOAT32": Tolerance(), "FLOAT16": Tolerance()})


def out(x):
    return {"OutputTensor": np.asarray(x)}


def test_ulp_distance_counts_representable_values_and_ignores_zero_sign():
    one = np.float32(1.0)
    steps = np.array([one, np.nextafter(one, np.float32(2)), np.nextafter(np.nextafter(one, np.float32(2)), np.float32(2))])
    assert ulp_distance(steps, np.full(3, one)).tolist() == [0, 1, 2]
    assert ulp_distance(np.array([0.0], np.float32), np.array([-0.0], np.float32)).tolist() == [0]
    smallest = np.array([np.float32(1e-45)])  # the smallest subnormal, one step above +0
    assert ulp_distance(smallest, -smallest).tolist() == [2]  # across zero: -min, (-)0, +min
    half = np.array([1.0], np.float16)
    assert ulp_distance(np.nextafter(half, np.float16(2)), half).tolist() == [1]


def test_ulp_distance_is_the_count_of_float16_values_between_for_every_pair_of_neighbours_and_extremes():
    # the oracle: every finite float16 in order of value (-0 and +0 one value), its position
    values = np.arange(2**16, dtype=np.uint16).view(np.float16)
    ordered = np.unique(values[np.isfinite(values)].astype(np.float64))  # sorted; -0 == +0 merges
    position = {v: i for i, v in enumerate(ordered.tolist())}
    finite = values[np.isfinite(values)]
    rng = np.random.default_rng(0)
    partners = np.concatenate([np.roll(finite, 1), rng.permutation(finite), np.full(finite.size, finite.max()),
                               np.full(finite.size, finite.min())])
    mine = np.tile(finite, 4)
    expect = [abs(position[float(a)] - position[float(b)]) for a, b in zip(mine.tolist(), partners.tolist())]
    assert ulp_distance(mine, partners).tolist() == expect


def test_exact_match_passes_with_zero_errors():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = compare_outputs(out(x), out(x.copy()), Tolerances.defaults())
    assert c.passed and c.mismatches == 0 and c.compared == 6
    assert c.errors() == {"max_abs": 0.0, "max_rel": 0.0, "max_ulp": 0.0}
    assert c.worst == []


def test_ulp_budget_alone_accepts_a_few_ulp_and_rejects_more():
    e = np.full(4, 1000.0, np.float32)
    a = e.copy()
    for _ in range(3):
        a = np.nextafter(a, np.float32(np.inf))
    only_ulp = Tolerances({"FLOAT32": Tolerance(atol=0, rtol=0, ulp=3)})
    assert compare_outputs(out(e), out(a), only_ulp).passed
    a4 = np.nextafter(a, np.float32(np.inf))
    c = compare_outputs(out(e), out(a4), only_ulp)
    assert not c.passed and c.mismatches == 4 and c.max_ulp == 4


def test_abs_rel_formula_is_atol_plus_rtol_times_expected():
    tol = Tolerances({"FLOAT32": Tolerance(atol=0.5, rtol=0.1, ulp=None)})
    e = np.array([10.0, 10.0], np.float32)
    a = np.array([11.5, 11.51], np.float32)  # bound is 0.5 + 0.1*10 = 1.5
    c = compare_outputs(out(e), out(a), tol)
    assert c.mismatches == 1
    assert c.worst[0]["index"] == [1] and c.worst[0]["failed"] is True
    assert c.max_rel == pytest.approx(0.151, rel=1e-3)


def test_nan_and_inf_rules():
    e = np.array([np.nan, np.inf, -np.inf, 1.0, 2.0, np.nan], np.float32)
    a = np.array([np.nan, np.inf, -np.inf, np.nan, np.inf, 0.0], np.float32)
    c = compare_outputs(out(e), out(a), Tolerances.defaults())
    # positions 0-2 agree; 3 (NaN for 1), 4 (inf for 2) and 5 (number for NaN) fail
    assert c.mismatches == 3
    assert sorted(w["index"][0] for w in c.worst if w["failed"]) == [3, 4, 5]
    assert c.max_abs == math.inf
    inf_sign = compare_outputs(out(np.array([np.inf], np.float32)), out(np.array([-np.inf], np.float32)),
                               Tolerances.defaults())
    assert inf_sign.mismatches == 1 and inf_sign.max_abs == math.inf
    # an infinity expected where a finite number came back (e.g. -FLT_MAX for -inf) is infinitely off
    clipped = compare_outputs(out(np.array([-np.inf, 1.0], np.float32)),
                              out(np.array([np.finfo(np.float32).min, 1.0], np.float32)), Tolerances.defaults())
    assert clipped.mismatches == 1 and clipped.max_abs == math.inf


def test_worst_elements_are_sorted_and_positioned():
    e = np.zeros((2, 3), np.float32)
    a = e.copy()
    a[1, 2] = 5.0
    a[0, 1] = 3.0
    a[1, 0] = 1e-7  # within tolerance, still listed after the failures
    c = compare_outputs(out(e), out(a), Tolerances.defaults())
    assert c.mismatches == 2
    assert [w["index"] for w in c.worst] == [[1, 2], [0, 1], [1, 0]]
    assert c.worst[0] == {"output": "OutputTensor", "index": [1, 2], "expected": 0.0, "actual": 5.0,
                          "abs": 5.0, "failed": True, "ulp": c.worst[0]["ulp"]}


def test_fp16_uses_its_own_default_tolerance():
    e = np.array([1.0], np.float16)
    two_ulp = np.nextafter(np.nextafter(e, np.float16(2)), np.float16(2))
    assert compare_outputs(out(e), out(two_ulp), Tolerances.defaults()).passed  # 2 ulp = 0.00195 < atol 5e-3
    far = np.array([1.01], np.float16)
    assert not compare_outputs(out(e), out(far), Tolerances.defaults()).passed


def test_integer_outputs_are_exact_by_default():
    e = np.array([1, 2, 3], np.int32)
    c = compare_outputs(out(e), out(np.array([1, 2, 4], np.int32)), Tolerances.defaults())
    assert c.mismatches == 1 and c.max_abs == 1.0 and c.max_ulp is None


def test_structural_problems_fail_the_case():
    e = np.zeros(3, np.float32)
    assert compare_outputs(out(e), out(np.zeros(4, np.float32)), Tolerances.defaults()).problems
    assert compare_outputs(out(e), out(np.zeros(3, np.float16)), Tolerances.defaults()).problems
    missing = compare_outputs(out(e), {}, Tolerances.defaults())
    assert not missing.passed and "missing" in missing.summary()


def _pool_outputs(x, index):
    return {"OutputTensor": np.array([x.ravel()[index]], x.dtype), "OutputIndicesTensor": np.array([index], np.uint64)}


def test_index_pointing_at_an_equal_maximum_is_a_tie_not_a_failure():
    x = np.array([[1.0, 7.0], [7.0, 2.0]], np.float32)  # one window, the max 7 at flat 1 and 2
    expected = _pool_outputs(x, 1)
    actual = _pool_outputs(x, 2)
    c = compare_outputs(expected, actual, Tolerances.defaults(), {"InputTensor": x}, index_outputs=INDEX)
    assert c.passed and c.ties == 1 and c.mismatches == 0
    assert c.worst[0]["tie"] is True and c.worst[0]["failed"] is False


def test_index_pointing_at_a_smaller_element_or_outside_fails():
    x = np.array([[1.0, 7.0], [7.0, 2.0]], np.float32)
    expected = _pool_outputs(x, 1)
    wrong = {"OutputTensor": expected["OutputTensor"], "OutputIndicesTensor": np.array([3], np.uint64)}
    c = compare_outputs(expected, wrong, Tolerances.defaults(), {"InputTensor": x}, index_outputs=INDEX)
    assert c.mismatches == 1 and c.ties == 0
    outside = {"OutputTensor": expected["OutputTensor"], "OutputIndicesTensor": np.array([99], np.uint64)}
    assert compare_outputs(expected, outside, Tolerances.defaults(), {"InputTensor": x}, index_outputs=INDEX).mismatches == 1
    no_inputs = compare_outputs(expected, _pool_outputs(x, 2), Tolerances.defaults(), index_outputs=INDEX)
    assert no_inputs.mismatches == 1  # without the input a tie cannot be shown


def test_nan_maximum_ties_with_another_nan():
    x = np.array([np.nan, np.nan], np.float32)
    expected = {"OutputTensor": np.array([np.nan], np.float32), "OutputIndicesTensor": np.array([0], np.uint64)}
    actual = {"OutputTensor": np.array([np.nan], np.float32), "OutputIndicesTensor": np.array([1], np.uint64)}
    c = compare_outputs(expected, actual, Tolerances.defaults(), {"InputTensor": x}, index_outputs=INDEX)
    assert c.passed and c.ties == 1


def test_tolerance_overrides_and_their_errors():
    t = Tolerances.defaults().override("fp16:atol=0.1,ulp=8")
    assert t.for_dtype("FLOAT16") == Tolerance(atol=0.1, rtol=DEFAULT_TOLERANCES["FLOAT16"].rtol, ulp=8)
    assert t.for_dtype("FLOAT32") == DEFAULT_TOLERANCES["FLOAT32"]
    assert t.override("int32:atol=1").for_dtype("INT32") == Tolerance(atol=1.0)
    for bad in ("fp16", "fp16:atol", "fp16:speed=1", "fp16:atol=x", "fp16:atol=-1"):
        with pytest.raises(ValueError, match="--tol"):
            Tolerances.defaults().override(bad)


def test_tolerance_file_round_trips(tmp_path):
    t = Tolerances.defaults().override("fp32:rtol=0.5")
    path = tmp_path / "tol.json"
    import json

    path.write_text(json.dumps(t.to_json()))
    loaded = load_tolerances(str(path), ["fp16:ulp=none"])
    assert loaded.for_dtype("FLOAT32").rtol == 0.5
    assert loaded.for_dtype("FLOAT16").ulp is None


def test_tolerance_used_ranks_how_close_a_case_came_to_failing():
    tol = Tolerances({"FLOAT32": Tolerance(atol=1.0, rtol=0.0, ulp=None)})
    e = np.zeros(3, np.float32)
    assert compare_outputs(out(e), out(e), tol).tolerance_used == 0.0
    half = compare_outputs(out(e), out(np.array([0.5, 0.25, 0], np.float32)), tol)
    assert half.passed and half.tolerance_used == pytest.approx(0.5)
    over = compare_outputs(out(e), out(np.array([2.0, 0, 0], np.float32)), tol)
    assert not over.passed and over.tolerance_used == pytest.approx(2.0)
    nan = compare_outputs(out(e), out(np.array([np.nan, 0, 0], np.float32)), tol)
    assert nan.tolerance_used == math.inf
    with_ulp = Tolerances({"FLOAT32": Tolerance(atol=0.0, rtol=0.0, ulp=4)})
    one = np.array([1.0], np.float32)
    two_ulp = np.nextafter(np.nextafter(one, np.float32(2)), np.float32(2))
    assert compare_outputs(out(one), out(two_ulp), with_ulp).tolerance_used == pytest.approx(0.5)


def test_a_tie_must_lie_in_the_window_when_the_reference_says_where_windows_are():
    """An index pointing at an equal value *outside* its window is wrong, not a tie: with the
    reference's window membership (reference.max_pooling2.window_contains) it fails."""
    from ep_testbed.reference import desc_from_dml
    from ep_testbed.reference.max_pooling2 import window_contains

    desc = desc_from_dml({"Type": "DML_OPERATOR_MAX_POOLING2",
                          "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4]},
                          "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2]},
                          "OutputIndicesTensor": {"DataType": "UINT64", "Sizes": [1, 1, 1, 2]},
                          "DimensionCount": 2, "Strides": [1, 2], "WindowSize": [1, 2], "StartPadding": [0, 0],
                          "EndPadding": [0, 0], "Dilations": [1, 1]})
    x = np.array([5, 5, 5, 5], np.float32).reshape(1, 1, 1, 4)
    values = np.full((1, 1, 1, 2), 5, np.float32)
    expected = {"OutputTensor": values, "OutputIndicesTensor": np.array([0, 2], np.uint64).reshape(1, 1, 1, 2)}
    in_window = {"OutputTensor": values, "OutputIndicesTensor": np.array([1, 3], np.uint64).reshape(1, 1, 1, 2)}
    elsewhere = {"OutputTensor": values, "OutputIndicesTensor": np.array([3, 0], np.uint64).reshape(1, 1, 1, 2)}
    rule = lambda positions, indices: window_contains(desc, positions, indices)  # noqa: E731
    ok = compare_outputs(expected, in_window, Tolerances.defaults(), {"InputTensor": x}, in_window=rule, index_outputs=INDEX)
    assert ok.passed and ok.ties == 2
    wrong = compare_outputs(expected, elsewhere, Tolerances.defaults(), {"InputTensor": x}, in_window=rule, index_outputs=INDEX)
    assert not wrong.passed and wrong.mismatches == 2 and wrong.ties == 0
    by_value = compare_outputs(expected, elsewhere, Tolerances.defaults(), {"InputTensor": x}, index_outputs=INDEX)
    assert by_value.ties == 2  # without the window rule, equal values are all it can check


def test_worst_count_above_five_is_honoured():
    e = np.zeros(12, np.float32)
    a = np.arange(1, 13, dtype=np.float32)  # every element fails, each by a different amount
    c = compare_outputs(out(e), out(a), Tolerances.defaults(), worst_count=9)
    assert len(c.worst) == 9
    assert [w["actual"] for w in c.worst] == sorted(a.tolist(), reverse=True)[:9]


def test_a_nan_mismatch_has_no_ulp_figure():
    c = compare_outputs(out(np.array([1.0, 2.0], np.float32)), out(np.array([np.nan, 2.0], np.float32)),
                        Tolerances.defaults())
    nan_entry = next(w for w in c.worst if w["index"] == [0])
    assert "ulp" not in nan_entry and nan_entry["failed"]
    assert c.nonfinite_mismatches == 1 and c.mismatches == 1


def test_an_infinite_max_abs_keeps_the_largest_finite_difference_in_view():
    e = np.array([np.inf, 1.0, 2.0], np.float32)
    a = np.array([1.0, 1.5, 2.0], np.float32)  # inf answered with a number, and one element 0.5 off
    c = compare_outputs(out(e), out(a), Tolerances.defaults())
    assert c.max_abs == math.inf and c.max_abs_finite == 0.5
    assert "largest finite |a-e|=0.5" in c.summary()


def test_the_message_states_the_tolerance_that_was_applied():
    tol = Tolerances.defaults().override("fp32:atol=0.001,rtol=0,ulp=none")
    c = compare_outputs(out(np.array([1.0], np.float32)), out(np.array([1.5], np.float32)), tol)
    assert c.summary().endswith("tolerance OutputTensor FLOAT32: |a-e| <= 0.001 + 0*|e|")
    exact = compare_outputs(out(np.array([1], np.int32)), out(np.array([2], np.int32)), Tolerances.defaults())
    assert "tolerance OutputTensor INT32: exact" in exact.summary()
    passing = compare_outputs(out(np.array([1.0], np.float32)), out(np.array([1.0], np.float32)), tol)
    assert "; tolerance" not in passing.summary()  # a passing comparison states no rule


def test_an_output_without_elements_next_to_one_with_them_is_compared():
    """A model run over zero regions has empty outputs beside full ones: the empty one adds no
    figure (it once met the other's as max(x, None), a TypeError)."""
    expected = {"scores": np.array([1.0, 2.0], np.float32), "boxes": np.zeros((0, 4), np.float32)}
    c = compare_outputs(expected, {"scores": np.array([1.0, 2.5], np.float32), "boxes": np.zeros((0, 4), np.float32)},
                        Tolerances.defaults())
    assert not c.passed and c.mismatches == 1 and c.max_abs == 0.5
    assert compare_outputs(expected, dict(expected), Tolerances.defaults()).passed


def test_the_worst_elements_are_a_stable_sort_by_size_without_sorting_them_all():
    from ep_testbed.harness.core.compare import largest_first

    rng = np.random.default_rng(1)
    for size, count in ((10, 3), (5000, 5), (5000, 1), (300, 40)):
        values = rng.integers(0, 6, size).astype(np.float64)  # many ties
        values[rng.choice(size, size // 50 + 1, replace=False)] = np.nan
        values[rng.choice(size, 2, replace=False)] = np.inf
        positions = np.sort(rng.choice(10 * size, size, replace=False))
        oracle = positions[np.lexsort((-values,))][:count]  # the definition: a stable sort by -value
        assert largest_first(positions, values, count).tolist() == oracle.tolist()
    few = np.array([np.nan, np.nan, 1.0] + [np.nan] * 200)  # NaN among the first: every value takes part
    assert largest_first(np.arange(few.size), few, 3).tolist() == [2, 0, 1]


def test_the_share_of_the_allowance_is_the_rules_definition_element_by_element():
    rng = np.random.default_rng(2)
    absdiff = np.concatenate([np.zeros(50), rng.exponential(1e-3, 200), [np.inf, np.nan]])
    allowed = np.concatenate([rng.choice([0.0, 1e-4, 1e-3, np.nan], absdiff.size - 2), [1e-3, 1e-3]])
    ulp = rng.integers(0, 9, absdiff.size)
    for budget in (None, 0, 4):
        tol = Tolerance(atol=1e-5, rtol=1e-4, ulp=budget)
        with np.errstate(divide="ignore", invalid="ignore"):  # the docstring's rule, spelled out
            expect = np.where(absdiff == 0, 0.0, np.where(allowed > 0, absdiff / np.where(allowed > 0, allowed, 1.0),
                                                          np.inf))
            if budget is not None:
                expect = np.minimum(expect, np.where(ulp == 0, 0.0, ulp / budget if budget else np.inf))
        np.testing.assert_array_equal(tol.share(absdiff, ulp, allowed), expect)


@pytest.mark.parametrize("seed", range(6))
def test_maxima_taken_a_slice_at_a_time_equal_one_maximum_over_the_output(monkeypatch, seed):
    """``max_rel`` and ``tolerance_used`` are maxima taken over slices of an output (no
    output-sized work array): with slices of 7 elements they equal one slice over everything, with
    NaNs, infinities, zeros, a bound and knife-edge ranges in the output."""
    from ep_testbed.harness.core import compare
    from ep_testbed.harness.core.compare import Allowance

    rng = np.random.default_rng(seed)
    n = 1000
    expected = rng.standard_normal(n).astype(np.float32)
    expected[rng.random(n) < 0.05] = 0.0
    actual = (expected + rng.standard_normal(n).astype(np.float32) * np.float32(10.0 ** rng.integers(-8, -2))
              ).astype(np.float32)
    specials = rng.choice(n, 30, replace=False)
    expected[specials[:10]] = np.nan
    actual[specials[5:15]] = np.inf
    actual[specials[15:20]] = np.nan
    bound = np.abs(expected.astype(np.float64)) * 1e-6
    low, high = expected - np.float32(1e-3), expected + np.float32(1e-3)
    allowance = Allowance(bounds={"o": bound}, alternatives={"o": (low, high)} if seed % 2 else {}, rule="r")
    tolerances = Tolerances(dict(DEFAULT_TOLERANCES))

    def judged(slice_elements):
        monkeypatch.setattr(compare, "SLICE_ELEMENTS", slice_elements)
        r = compare_outputs({"o": expected}, {"o": actual}, tolerances, allowance=allowance)
        return r.max_rel, r.tolerance_used, r.mismatches

    sliced, whole = judged(7), judged(2**40)
    assert sliced[2] == whole[2]
    for a, b in zip(sliced[:2], whole[:2]):
        assert (a == b) or (math.isnan(a) and math.isnan(b)), (sliced, whole)


def _differences_whole(exp: np.ndarray, act: np.ndarray):
    """``differences`` by its definition, over the whole output at once in float64 (the form it had
    before it was worked out in slices; ``e`` and ``a`` as the output holds them)."""
    e, a = exp.astype(np.float64).ravel(), act.astype(np.float64).ravel()
    both_finite = np.isfinite(e) & np.isfinite(a)
    with np.errstate(invalid="ignore", over="ignore"):
        absdiff = np.where(both_finite, np.abs(a - e), np.inf)
    same_special = (np.isnan(e) & np.isnan(a)) | (np.isinf(e) & (a == e))
    absdiff[same_special] = 0.0
    ulp = np.zeros(e.shape, dtype=np.int64)
    ulp[both_finite] = ulp_distance(act.ravel()[both_finite], exp.ravel()[both_finite])
    return exp.ravel(), act.ravel(), absdiff, ulp, both_finite, same_special


OUT = "OutputTensor"
_SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 3.4e38, 1e-45, 6e-8]


@given(st.sampled_from([np.float32, np.float16]), st.integers(1, 40), st.integers(0, 2**32 - 1),
       st.sampled_from([1, 3, 7, 2**18]))
def test_differences_in_slices_are_those_of_the_whole_output_bit_for_bit(dtype, size, seed, slice_elements):
    """Slices of 1, 3 and 7 elements (and one slice) over outputs with NaN, infinities, signed
    zeros, the type's extremes and finite pairs, in slices where every pair is finite and where
    none or some are: the same six arrays as the whole-output form."""
    from ep_testbed.harness.core import compare

    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore", invalid="ignore"):  # 3.4e38 is infinite in float16: one more special
        exp = rng.choice(np.array(_SPECIALS, dtype=np.float64), size).astype(dtype)
        act = np.where(rng.random(size) < 0.5, rng.choice(np.array(_SPECIALS), size),
                       exp.astype(np.float64) * (1 + rng.standard_normal(size) * 1e-3)).astype(dtype)
    if rng.random() < 0.5:  # a stretch of finite pairs, so that some slices take the all-finite path
        exp[: size // 2], act[: size // 2] = np.float32(0.5).astype(dtype), np.float32(0.75).astype(dtype)
    original = compare.SLICE_ELEMENTS
    compare.SLICE_ELEMENTS = slice_elements
    try:
        sliced = compare.differences(exp.reshape(1, -1), act.reshape(1, -1))
    finally:
        compare.SLICE_ELEMENTS = original
    for got, want in zip(sliced, _differences_whole(exp, act)):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def _comparison_text(comparison) -> dict:
    """Every field of a ``Comparison``, arrays as their bytes and numbers as their repr (NaN
    equal to NaN), so that two comparisons can be held equal field by field."""
    import dataclasses

    fields = {}
    for f in dataclasses.fields(comparison):
        value = getattr(comparison, f.name)
        if f.name in ("failing", "differences"):
            value = {k: [np.asarray(x).tobytes() for x in (v if isinstance(v, tuple) else (v,))]
                     for k, v in value.items()}
        fields[f.name] = repr(value)
    return fields


@given(st.sampled_from([np.float32, np.float16]), st.integers(1, 60), st.integers(0, 2**32 - 1),
       st.sampled_from([1, 3, 7]), st.booleans(), st.booleans())
def test_a_comparison_in_slices_is_the_whole_outputs(dtype, size, seed, slice_elements, ranged, flagged):
    """``compare_outputs`` judges a float output a slice at a time: with slices of 1, 3 or 7
    elements it finds what one slice over the whole output finds, field by field (counts, maxima
    with NaN and infinities, the bound's largest acceptance, tolerance used, the worst elements
    in their order, the failing elements), under a bound with NaN, negative and infinite
    elements, knife-edge ranges with infinite ends and NaN alternatives."""
    from ep_testbed.harness.core import compare

    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore", invalid="ignore"):
        exp = rng.choice(np.array(_SPECIALS), size).astype(dtype)
        near = exp.astype(np.float64) * (1 + rng.choice([0, 1e-7, 1e-4, 1e-2], size))
        act = np.where(rng.random(size) < 0.3, rng.choice(np.array(_SPECIALS), size), near).astype(dtype)
        bound = rng.choice(np.array([0.0, 1e-3, 1.0, -1.0, np.nan, np.inf, 1e-6]), size).astype(np.float32)
        low = np.minimum(exp, act).astype(np.float64) - rng.choice([0.0, 1e-3, np.inf], size)
        high = np.maximum(exp, act).astype(np.float64) + rng.choice([0.0, 1e-3, np.inf], size)
    shape = (1, size)
    allowance = compare.Allowance(bounds={OUT: bound.reshape(shape)},
                                  alternatives={OUT: (low.reshape(shape), high.reshape(shape))} if ranged else {},
                                  rule="test bound",
                                  nan_alternatives={OUT: (rng.random(size) < 0.3).reshape(shape)} if flagged else {})

    def judged(elements):
        original = compare.SLICE_ELEMENTS
        compare.SLICE_ELEMENTS = elements
        try:
            return compare_outputs({OUT: exp.reshape(shape)}, {OUT: act.reshape(shape)}, Tolerances.defaults(),
                                   allowance=allowance, worst_count=4, keep_differences=True)
        finally:
            compare.SLICE_ELEMENTS = original

    assert _comparison_text(judged(slice_elements)) == _comparison_text(judged(2**18))


def test_the_largest_bound_acceptance_over_slices_is_the_first_of_equals():
    """Two elements outside the rule by the same |a - e|, each within its own bound, in slices of
    one element: the summary names the first one's bound, as one pass over the output does."""
    from ep_testbed.harness.core import compare

    exp = np.array([[1.0, 1.0, 0.5]], np.float32)
    act = np.array([[1.01, 1.01, 0.5]], np.float32)
    bound = np.array([[0.5, 0.25, 0.0]], np.float32)
    allowance = compare.Allowance(bounds={OUT: bound}, rule="test bound")
    found = []
    for elements in (1, 2**18):
        original = compare.SLICE_ELEMENTS
        compare.SLICE_ELEMENTS = elements
        try:
            found.append(compare_outputs({OUT: exp}, {OUT: act}, Tolerances.defaults(),
                                         allowance=allowance).largest_bound_accepted)
        finally:
            compare.SLICE_ELEMENTS = original
    assert found[0] == found[1] and found[0][1] == 0.5
