"""Running the catalog and a fixed fuzz sample with a reference fault planted (``mutants``), in this
process (``--jobs 0``: the planted function is this process's), with the EP's bundled expectations
on, as ``ep-testbed run`` judges them. A mutant is *killed* when the run fails (exit code 1: some
case ``fail`` or ``fixed``: ``Judged.killed``); ``survivors`` are what the oracle would have let through."""

from __future__ import annotations

import collections
import functools
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Sequence

from mutants import Mutant, planted

from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import DEFAULT_CATALOG, run_command
from ep_testbed.harness.core.results import EXPECTED_FAILURE, FAILING, NO_VERDICT, PASSING, read_run

HERE = os.path.dirname(os.path.abspath(__file__))
#: The fixed fuzz sample: the first cases of batch 0 of fuzz seed 0, per operator (the same cases on
#: any machine for one Hypothesis version: harness/fuzz/draw.py).
FUZZ_PER_OP = 60


@functools.lru_cache(maxsize=8)
def _drawn(ops: tuple[str, ...], seed: int) -> tuple[Any, ...]:
    from ep_testbed.harness.fuzz.draw import draw_batch

    return tuple(case for op in ops for case in draw_batch(op, seed, 0)[:FUZZ_PER_OP])


def fuzz_sample(ops: Sequence[str] | None = None, seed: int = 0, **_: Any) -> list[Any]:
    """The fixed fuzz sample of ``ops`` (a catalog source: ``build_catalog``'s signature)."""
    from ep_testbed.reference.registry import names

    return list(_drawn(tuple(ops or names()), seed))


@dataclass
class Judged:
    """One run under one mutant (None: none): its exit code and the cases that failed it."""

    mutant: str | None
    ep: str
    source: str
    code: int
    failing: list[tuple[str, str]]
    #: Every case's outcome, by id
    outcomes: dict[str, str] = field(default_factory=dict)

    @property
    def killed(self) -> bool:
        """The run failed on a verdict: some case ``fail`` or ``fixed``. A case that errs or
        crashes says the planted function itself broke (a replacement whose signature no longer
        matches its target), which proves nothing about the oracle."""
        return self.code == 1 and any(outcome in VERDICTS for _, outcome in self.failing)


#: The failing outcomes a comparison decides (``FAILING`` less those of a case that did not run through).
VERDICTS = tuple(outcome for outcome in FAILING if outcome not in NO_VERDICT)


def judge(mutant: Mutant | None, ep: str, ops: Sequence[str], source: str = "catalog",
          out: str | None = None, select: str = "") -> Judged:
    """Run ``source`` ("catalog" or "fuzz") of ``ops`` (only the ids ``-k select`` picks, when
    given) on ``ep`` in this process with ``mutant`` planted, expectations on, no second EP; what
    failed."""
    argv = ["run", "--ep", ep, "--ops", ",".join(ops), "--jobs", "0", "--no-progress", "--also-on", "none",
            "--keep-worst", "0", *(["-k", select] if select else [])]
    catalog = "mutation_kit:fuzz_sample" if source == "fuzz" else DEFAULT_CATALOG
    with tempfile.TemporaryDirectory() as scratch:
        folder = out or os.path.join(scratch, "run")
        args = parse_args([*argv, "--out", folder])
        if mutant is None:
            code = run_command(args, catalog=catalog, worker_paths=(HERE,))
        else:
            with planted(mutant):
                code = run_command(args, catalog=catalog, worker_paths=(HERE,))
        # a run refused before it starts (exit 2: the EP is not here) writes no results file
        lines = read_run(folder)[1] if os.path.exists(os.path.join(folder, "results.jsonl")) else []
    failing = [(line["id"], line["outcome"]) for line in lines if line["outcome"] in FAILING]
    outcomes = {line["id"]: line["outcome"] for line in lines if line.get("type") == "case"}
    return Judged(mutant.name if mutant else None, ep, source, code, failing, outcomes)


def changed_cases(mutant: Mutant, ops: Sequence[str], source: str = "catalog") -> list[str]:
    """The ids of ``source``'s cases of ``ops`` whose expected result the mutant changes: what a
    verdict reads, ``execute_with_bounds``' outputs, bounds and knife-edge alternatives (NaN equal
    to NaN; a case the reference refuses one way and not the other counts as changed). A fault
    in the bounds alone leaves the outputs as they are and changes what the rule accepts."""
    import numpy as np

    from ep_testbed.graphs.catalog import build_catalog
    from ep_testbed.reference import execute_with_bounds

    def expected(case: Any) -> Any:
        try:
            with np.errstate(all="ignore"):
                e = execute_with_bounds(case.desc, case.inputs())
        except Exception as exc:  # noqa: BLE001 - a refusal is an answer to compare
            return type(exc).__name__
        return {**{("out", k): v for k, v in e.outputs.items()}, **{("bound", k): v for k, v in e.bounds.items()},
                **{("nan", k): v for k, v in e.nan_alternatives.items()},
                **{(side, k): v[i] for k, v in e.alternatives.items() for i, side in enumerate(("low", "high"))}}

    changed = []
    for case in (fuzz_sample(ops) if source == "fuzz" else build_catalog(list(ops))):
        before = expected(case)
        with planted(mutant):
            after = expected(case)
        same = (before == after if isinstance(before, str) or isinstance(after, str) else
                before.keys() == after.keys() and all(np.array_equal(before[k], after[k], equal_nan=True) for k in before))
        if not same:
            changed.append(case.id)
    return changed


#: The reference functions each mutant's operator is run as: ROI_ALIGN's faults show in both versions.
OPS = {"roi_pooling": ["roi_pooling"], "max_pooling2": ["max_pooling2"], "roi_align": ["roi_align", "roi_align1"]}


def shown_on_the_ep(changed: Sequence[str], clean: Judged) -> list[str]:
    """Of the ``changed`` cases, those ``clean``'s EP ran and the unmutated reference passed or
    explained there: where a verdict can catch the mutant (none: no verdict on this EP can)."""
    return [case for case in changed if clean.outcomes.get(case) in PASSING + EXPECTED_FAILURE]


def hidden_reason(changed: Sequence[str], clean: Judged) -> str:
    """Why no verdict on ``clean``'s EP can catch a mutant none of whose ``changed`` cases is
    ``shown_on_the_ep``: what became of them there."""
    became = collections.Counter(clean.outcomes.get(case, "not in this source") for case in changed)
    words = ", ".join(f"{n} {outcome}" for outcome, n in sorted(became.items()))
    return (f"it changes the reference on {len(changed)} case(s), none of which {clean.ep} runs and the unmutated "
            f"reference passes or explains there ({words or 'none'}; a fail is the EP's own finding)")
