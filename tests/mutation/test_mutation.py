"""The oracle checked the way a test oracle is checked: faults planted in the reference
(``mutants.py``, one at a time) must each fail a case on the CPU EP with the bundled expectations
on, where they can show at all (``equivalent_on`` says where they cannot, and why). The suite runs
each mutant on the few catalog cases that catch it (its ``witness``), after checking that those
cases pass unmutated; ``python tools/mutation_test.py`` runs every mutant on the whole catalog and
the fixed fuzz sample, on the CPU EP and on DirectML under Wine (``tests/eps/test_dml_wine_mutation.py``
runs its witnesses there)."""

from __future__ import annotations

import contextlib
import io

import pytest
from mutants import MUTANTS
from mutation_kit import judge

OPS = {"roi_pooling": ["roi_pooling"], "max_pooling2": ["max_pooling2"], "roi_align": ["roi_align", "roi_align1"]}


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
