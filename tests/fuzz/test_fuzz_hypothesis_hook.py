"""The private Hypothesis hook the fuzz drawer swaps is still where it expects it, and still the
one that feeds draws: when a Hypothesis release moves it, these tests fail naming the hook and
the version (pyproject.toml pins the range where it holds).

``harness/fuzz/draw.py``'s ``_no_local_constants`` replaces
``hypothesis.internal.conjecture.providers._get_local_constants`` (and clears ``CONSTANTS_CACHE``)
for the time of a batch, so that the literals Hypothesis harvests from whatever local modules a
process imported never enter a draw: one seed then draws one batch in every process.
"""

import importlib
import sys

import pytest

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ep_testbed.harness.fuzz.draw import _no_local_constants  # noqa: E402

HOOK = "hypothesis.internal.conjecture.providers"
NAMES = ("_get_local_constants", "CONSTANTS_CACHE", "Constants")
#: A literal no other module holds: found in a draw only when Hypothesis harvested it from a local module.
MAGIC = 9182736451
#: Seeds searched for one whose draws hold MAGIC: one in three or four did with the project's
#: modules loaded (a lottery, so a margin of tenfold).
SEEDS_SEARCHED = 40


def _moved(what: str) -> str:
    return (f"Hypothesis {hypothesis.__version__}: {what}. harness/fuzz/draw.py's _no_local_constants swaps "
            f"{HOOK}._get_local_constants for the time of a batch; without it one fuzz seed draws different "
            "batches in different processes.\nNote: pin Hypothesis to the range in pyproject.toml, or port "
            "_no_local_constants to this version and widen the pin.")


def test_the_hook_and_the_cache_are_where_the_drawer_swaps_them():
    try:
        providers = importlib.import_module(HOOK)
    except ImportError as exc:
        pytest.fail(_moved(f"{HOOK} does not import ({exc})"))
    missing = [name for name in NAMES if not hasattr(providers, name)]
    assert not missing, _moved(f"{HOOK} has no {', '.join(missing)}")
    assert callable(providers._get_local_constants), _moved(f"{HOOK}._get_local_constants is not a function")
    assert hasattr(providers.CONSTANTS_CACHE, "cache"), _moved(f"{HOOK}.CONSTANTS_CACHE has no .cache to clear")
    providers.Constants()  # the empty set of constants the swap hands Hypothesis


def _draws(swapped: bool, run_seed: int) -> list[int]:
    """1000 integers Hypothesis draws with seed ``run_seed``, with or without the swap."""
    seen: list[int] = []

    @seed(run_seed)
    @settings(max_examples=1000, database=None, phases=[Phase.generate], deadline=None)
    @given(st.integers())
    def collect(value):
        seen.append(value)

    if swapped:
        with _no_local_constants():
            collect()
    else:
        collect()
    return seen


@pytest.mark.slow
def test_the_swap_keeps_a_local_modules_literal_out_of_the_draws(tmp_path, monkeypatch):
    (tmp_path / "ep_testbed_local_literals.py").write_text(f"LITERAL = {MAGIC}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("ep_testbed_local_literals")  # a local module Hypothesis harvests literals from
    try:
        # Hypothesis mixes a harvested literal into a run's draws now and then, the more rarely the more
        # literals the local modules this process imported hold (a few hundred once a fuzz run has run
        # here): find a seed where it does
        found = next((s for s in range(SEEDS_SEARCHED) if MAGIC in _draws(swapped=False, run_seed=s)), None)
        assert found is not None, _moved(
            "a local module's literal is no longer drawn through the hook (Hypothesis harvests local literals "
            "elsewhere now, or not at all; in the latter case the swap is moot)")
        assert MAGIC not in _draws(swapped=True, run_seed=found), _moved(
            "a local module's literal was drawn with the hook swapped")
    finally:
        sys.modules.pop("ep_testbed_local_literals", None)
