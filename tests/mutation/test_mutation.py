"""The oracle checked the way a test oracle is checked: faults planted in the reference
(``mutants.py``, one at a time) must each fail a case on the CPU EP with the bundled expectations
on, where they can show at all (``equivalent_on`` says where they cannot, and why). The suite runs
each mutant on the few catalog cases that catch it (its ``witness``), after checking that those
cases pass unmutated; ``python tools/mutation_test.py`` runs every mutant on the whole catalog and
the fixed fuzz sample, on the CPU EP and on DirectML under Wine (``tests/eps/test_dml_wine_mutation.py``
runs its witnesses there)."""

from __future__ import annotations

import contextlib
import inspect
import io
import sys
from pathlib import Path

import pytest
from mutants import MUTANTS, planted
from mutation_kit import OPS, judge

from ep_testbed.graphs.catalog import build_catalog


def judged(mutant, ep: str):
    """The mutant's witness cases on ``ep``, run quietly in this process."""
    source, selection = mutant.witness if mutant is not None else ("catalog", "")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return judge(mutant, ep, OPS[mutant.op], source, select=selection)


def test_there_are_enough_mutants_of_every_kind():
    """At least 20 faults, over the four operators and the kinds of field the readings touch."""
    assert len(MUTANTS) >= 20 and len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert {m.op for m in MUTANTS} == set(OPS)
    assert {"window bounds", "rounding", "sample counts", "sample spacing", "weights", "offsets", "scale axes",
            "padding side", "NaN rule", "out-of-bounds value", "index base", "accumulation type"} <= {m.kind for m in MUTANTS}


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_replacement_takes_its_targets_arguments(mutant):
    """A replacement called as its target is called: one whose signature went stale would raise,
    and its cases would end ``error``, which is a broken mutant, not a caught fault."""
    target = inspect.signature(mutant.target)
    positional = [p for p in target.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    replacement = inspect.signature(mutant.make(mutant.target))
    replacement.bind(*[None] * len(positional))
    replacement.bind(*[None] * sum(p.default is p.empty for p in positional))


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in MUTANTS if "cpu" not in m.equivalent_on], ids=lambda m: m.name)
def test_every_planted_fault_fails_a_case_on_the_cpu_ep(mutant):
    """Each fault that can show fails its witness cases (``fail``, or ``fixed`` where it makes the
    reference compute the CPU EP's own reading); the same cases pass without it."""
    result = judged(mutant, "cpu")
    assert result.killed, (mutant.name, result.code)


@pytest.mark.slow
def test_the_witness_cases_pass_without_a_planted_fault():
    """A kill means something only where the unmutated reference passes the same cases."""
    for selection in sorted({(m.op, m.witness) for m in MUTANTS if "cpu" not in m.equivalent_on}):
        op, (source, pattern) = selection
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            clean = judge(None, "cpu", OPS[op], source, select=pattern)
        assert clean.code == 0 and not clean.failing, (op, pattern, clean.failing)


def test_a_fault_only_knife_edges_show_is_caught_by_the_bounds_oracle():
    """``rp-scale-float64`` leaves the outputs as they are (they round each region's float32
    product) and changes only the bounds' knife-edge candidates, where the product is within its
    float32 rounding of a half: it drops one alternative, a rule stricter by one element that no EP
    here lands on, so its witness case passes on the CPU EP with and without it. The per-region
    oracle of the bounds still tells it from the reference, on that very case."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
    from test_bounds_oracle import check_case

    mutant = next(m for m in MUTANTS if m.name == "rp-scale-float64")
    case = next(c for c in build_catalog(["roi_pooling"]) if c.id.endswith(mutant.witness[1]))
    verdicts = judged(mutant, "cpu")
    assert verdicts.code == 0 and not verdicts.failing
    check_case(case.desc, case.inputs(), [], "fp32", case.id)
    with planted(mutant):
        with pytest.raises(AssertionError, match="not equal"):
            check_case(case.desc, case.inputs(), [], "fp32", case.id)


def test_a_fault_only_cases_the_ep_does_not_run_clean_would_show_is_told_from_a_gap():
    """A survivor is a gap in the oracle only where the fault changes a case the EP runs and the
    unmutated reference passes or explains there; elsewhere the tool says what became of them."""
    from mutation_kit import Judged, changed_cases, hidden_reason, shown_on_the_ep

    mutant = next(m for m in MUTANTS if m.name == "rp-batch-ignored")
    changed = changed_cases(mutant, ["roi_pooling"])
    assert changed and set(changed) < {c.id for c in build_catalog(["roi_pooling"])}
    refused = Judged(None, "some-ep", "catalog", 0, [], {case: "not-on-ep" for case in changed})
    assert shown_on_the_ep(changed, refused) == []
    assert f"{len(changed)} not-on-ep" in hidden_reason(changed, refused)
    ran = Judged(None, "some-ep", "catalog", 0, [], {changed[0]: "pass", changed[1]: "fail"})
    assert shown_on_the_ep(changed, ran) == [changed[0]]
    unchanged = next(m for m in MUTANTS if m.name == "rp-nan-propagates")
    assert set(changed_cases(unchanged, ["roi_pooling"])) <= {c.id for c in build_catalog(["roi_pooling"])
                                                              if "nan" in c.id}
