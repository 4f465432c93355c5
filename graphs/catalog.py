"""The case catalog: named, reproducible cases (a desc, a seed, tags) for every registered operator.

``build_catalog(ops, seed)`` lists, per operator (its cases module in ``graphs/cases/``, named
by the operator registry):

* ``grid``: every value of every field at least once, pairwise where the full product
  explodes (``pairwise.all_pairs``); the grid does not depend on ``seed``;
* ``random``: descs drawn from ``seed``;
* ``edge-*``: ROIs partly / wholly outside the input, one-pixel and whole-image ROIs, empty and
  inverted regions, ties, NaN/Inf inputs, large ROI and batch counts.

Inputs (``case.inputs()``) are derived from ``(id, seed)`` and drawn well conditioned, so that
a mismatch means a different computation, not a rounding accident (each cases module says how).

Cases whose inputs deliberately trigger a known data-dependent divergence carry
``tags["expect"] = "diverges"`` and ``tags["why"]``. The default catalog is a few hundred
cases of under 50k elements each.

Tiers (``tier=``, ``ep-testbed run --tier``): ``default`` is the catalog above; ``smoke`` the
catalog cases each cases module's ``SMOKE`` patterns name (a few per operator: seconds, for a
pre-commit check); ``stress`` each cases module's ``stress_cases`` (``STRESS``: detection- and
classifier-sized shapes and the sizes where GPU dispatch and index arithmetic change), each
tagged ``memory_mb`` with what one case needs (``cases.common.memory_need``) so that a run can
skip what does not fit its machine.
"""

from __future__ import annotations

from typing import Iterable, Optional

from ..reference.registry import names
from .cases.common import TIERS, Case, tier_cases

__all__ = ["TIERS", "Case", "build_catalog"]


def build_catalog(ops: Optional[Iterable[str]] = None, seed: int = 0, tier: str = "default") -> list[Case]:
    """All cases of ``ops`` (registry names, ``reference.registry.names()``; None = every
    registered operator) in ``tier`` (``TIERS``: ``smoke``, a
    few catalog cases per operator for a pre-commit check; ``default``, the catalog; ``stress``,
    detection-, classifier- and GPU-boundary-sized cases, each tagged ``memory_mb``), ids unique
    and stable for a seed."""
    chosen = list(names()) if ops is None else list(ops)
    for op in chosen:
        if op not in names():
            raise ValueError(f"op = {op!r}: one of {', '.join(names())}")
    if tier not in TIERS:
        raise ValueError(f"tier = {tier!r}: one of {', '.join(TIERS)}")
    cases: list[Case] = []
    for op in chosen:
        cases.extend(tier_cases(op, seed, tier))
    ids = [c.id for c in cases]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise AssertionError(f"duplicate case ids: {sorted(dupes)[:5]}")
    return cases
