"""harness.core.error_stats: the error distribution and the smallest passing tolerance of a case,
held to the comparison's verdict (harness.core.compare) element by element."""

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from ep_testbed.harness.core import error_stats
from ep_testbed.harness.core.compare import compare_outputs
from ep_testbed.harness.core.tolerances import Tolerance, Tolerances

OUT = "OutputTensor"


@st.composite
def float_pairs(draw):
    """An expected array and an EP-like answer: mostly close, some far off, some NaN/inf."""
    dtype = draw(st.sampled_from([np.float32, np.float16]))
    n = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    e = (rng.standard_normal(n) * draw(st.sampled_from([1e-3, 1.0, 1e3]))).astype(dtype)
    noise = rng.standard_normal(n) * draw(st.sampled_from([0.0, 1e-7, 1e-4, 1e-2]))
    a = (e.astype(np.float64) * (1 + noise)).astype(dtype)
    specials = [np.nan, np.inf, -np.inf, 0.0, float(np.finfo(dtype).max), -float(np.finfo(dtype).max)]
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, n - 1))
        side = draw(st.sampled_from(["e", "a", "both"]))
        value = draw(st.sampled_from(specials))
        if side in ("e", "both"):
            e[i] = value
        if side in ("a", "both"):
            a[i] = value
    return e, a


tolerances = st.builds(Tolerance, atol=st.sampled_from([0.0, 1e-6, 1e-3]), rtol=st.sampled_from([0.0, 1e-4, 1e-2]),
                       ulp=st.sampled_from([None, 0, 2, 64]))


def _tolerances(dtype, tol: Tolerance) -> Tolerances:
    return Tolerances({np.dtype(dtype).name.upper(): tol})


@settings(max_examples=examples(300), deadline=None)
@given(float_pairs(), tolerances)
def test_counts_and_share_agree_with_the_comparison(pair, tol):
    e, a = pair
    tols = _tolerances(e.dtype, tol)
    verdict = compare_outputs({OUT: e}, {OUT: a}, tols)
    stats = error_stats.error_statistics({OUT: e}, {OUT: a}, tols)[OUT]
    assert stats["outside"] == verdict.mismatches
    assert stats["nonfinite"] == verdict.nonfinite_mismatches
    assert stats["share_max"] == verdict.tolerance_used
    assert (stats["min_tolerance"] is None) == verdict.passed
    if stats["abs"] is not None:
        assert stats["abs"]["max"] == verdict.max_abs_finite
        assert stats["ulp"]["max"] == verdict.max_ulp


@settings(max_examples=examples(200), deadline=None)
@given(float_pairs(), tolerances)
def test_statistics_from_the_comparisons_own_differences_are_those_computed_afresh(pair, tol):
    e, a = pair
    tols = _tolerances(e.dtype, tol)
    verdict = compare_outputs({OUT: e}, {OUT: a}, tols, keep_differences=True)
    assert set(verdict.differences) == {OUT} and compare_outputs({OUT: e}, {OUT: a}, tols).differences == {}
    fresh = error_stats.error_statistics({OUT: e}, {OUT: a}, tols)
    reused = error_stats.error_statistics({OUT: e}, {OUT: a}, tols, computed=verdict.differences)
    assert json.dumps(reused, sort_keys=True) == json.dumps(fresh, sort_keys=True)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(float_pairs(), tolerances)
def test_the_minimum_tolerance_passes_and_a_smaller_one_does_not(pair, tol):
    e, a = pair
    tols = _tolerances(e.dtype, tol)
    stats = error_stats.error_statistics({OUT: e}, {OUT: a}, tols)[OUT]
    minimum = stats["min_tolerance"]
    assume(minimum is not None)  # the pair already passes: no smallest passing tolerance to check
    dtype = np.dtype(e.dtype).name.upper()
    if stats["nonfinite"]:
        assert minimum == {"atol": None, "rtol": None, "ulp": None}
        return
    for part in ("atol", "rtol", "ulp"):
        value = minimum[part]
        if value is None:
            continue
        spec = f"{dtype}:{part}={value}"  # as a person pastes it into --tol
        assert compare_outputs({OUT: e}, {OUT: a}, tols.override(spec)).passed, spec
        smaller = value - 1 if part == "ulp" else value * 0.98
        if value > 0 and not (part == "ulp" and tol.ulp is None):
            assert not compare_outputs({OUT: e}, {OUT: a}, tols.override(f"{dtype}:{part}={smaller}")).passed, part


def test_statistics_are_numpy_percentiles_of_the_finite_pairs():
    e = np.array([1.0, 2.0, 3.0, 4.0, np.nan], np.float32)
    a = np.array([1.5, 2.0, 3.25, 3.0, np.nan], np.float32)
    stats = error_stats.error_statistics({OUT: e}, {OUT: a}, Tolerances.defaults())[OUT]
    diffs = np.abs(a[:4].astype(np.float64) - e[:4])
    assert stats["abs"] == {"mean": diffs.mean(), "p50": np.percentile(diffs, 50), "p90": np.percentile(diffs, 90),
                            "p99": np.percentile(diffs, 99), "max": diffs.max()}
    assert stats["elements"] == 5 and stats["outside"] == 3 and stats["nonfinite"] == 0


def test_expected_minus_infinity_got_lowest_float_is_a_non_finite_mismatch_no_tolerance_fixes():
    lowest = np.finfo(np.float32).min
    e = np.array([-np.inf, 1.0], np.float32)
    a = np.array([lowest, 1.0], np.float32)
    stats = error_stats.error_statistics({OUT: e}, {OUT: a}, Tolerances.defaults())[OUT]
    assert stats["outside"] == stats["nonfinite"] == 1
    assert stats["share_max"] == math.inf
    assert stats["min_tolerance"] == {"atol": None, "rtol": None, "ulp": None}


def test_index_outputs_report_differing_elements_only():
    e = np.array([0, 1, 2], np.uint32)
    a = np.array([0, 2, 2], np.uint32)
    stats = error_stats.error_statistics({"OutputIndicesTensor": e}, {"OutputIndicesTensor": a}, Tolerances.defaults(),
                                         {"OutputIndicesTensor": ("OutputTensor", "InputTensor")})
    assert stats == {"OutputIndicesTensor": {"dtype": "UINT32", "elements": 3, "differing": 1}}


def test_round_up_never_goes_below_and_keeps_three_digits():
    for value in (1.0, 0.0012341, 123456.0, 9.999e-5, 3.0000000000000004, 1e-30):
        r = error_stats.round_up(value)
        assert r >= value and len(f"{r:.3g}".replace(".", "").lstrip("0").split("e")[0]) <= 3


def test_a_summary_of_errors_that_are_all_zero_is_numpys_own_figures():
    """Most outputs of a passing case differ by nothing: their summary is written without
    NumPy's percentiles, and must read exactly as NumPy computes it, signs of zero included
    (a -0.0 anywhere takes NumPy's path)."""
    from ep_testbed.harness.core.error_stats import PERCENTILES, _summary

    for values in (np.zeros(1), np.zeros(7, np.float32), np.zeros(1000), np.array([0.0, -0.0]), np.array([0.0, 5e-324])):
        v = values.astype(np.float64)
        numpy_says = {"mean": float(v.mean()), **{f"p{p}": float(q) for p, q in zip(PERCENTILES, np.percentile(v, PERCENTILES))},
                      "max": float(v.max())}
        ours = _summary(values)
        assert json.dumps(ours) == json.dumps(numpy_says)  # keys, order, values and the sign of each zero


@settings(max_examples=examples(200), deadline=None)
@given(float_pairs(), tolerances, st.sampled_from([1, 3, 7]))
def test_statistics_in_slices_are_those_of_the_whole_output(pair, tol, slice_elements):
    """The statistics work the passing elements, the largest share and the smallest passing
    tolerance out a slice at a time: slices of 1, 3 or 7 elements give what one slice gives
    (NaN and infinite figures included)."""
    from ep_testbed.harness.core import compare

    e, a = pair
    tols = _tolerances(e.dtype, tol)
    found = []
    for elements in (slice_elements, 2**18):
        original = compare.SLICE_ELEMENTS
        compare.SLICE_ELEMENTS = elements
        try:
            found.append(repr(error_stats.error_statistics({OUT: e}, {OUT: a}, tols)))
        finally:
            compare.SLICE_ELEMENTS = original
    assert found[0] == found[1]
