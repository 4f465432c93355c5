"""Example counts that follow the Hypothesis profile in force (registered in tests/conftest.py).

A test states how many examples it needs on every run (``@settings(max_examples=examples(300))``);
the ``long`` profile, for scheduled soaks, multiplies that by ``LONG_FACTOR``.
"""

from __future__ import annotations

from hypothesis import settings

#: The environment variable that selects a profile (Hypothesis's own spelling).
PROFILE_ENV = "HYPOTHESIS_PROFILE"
#: How many times more examples the ``long`` profile draws.
LONG_FACTOR = 10


def long_profile() -> bool:
    """Whether the ``long`` profile is in force (its default example count is the marker)."""
    return settings().max_examples >= 100 * LONG_FACTOR


def examples(n: int) -> int:
    """``n`` examples, or ``LONG_FACTOR`` times as many under the ``long`` profile."""
    return n * LONG_FACTOR if long_profile() else n
