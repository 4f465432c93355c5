"""Running the catalog and a fixed fuzz sample with a reference fault planted (``mutants``), in this
process (``--jobs 0``: the planted function is this process's), with the EP's bundled expectations
on, as ``ep-testbed run`` judges them. A mutant is *killed* when the run fails (exit code 1: some
case ``fail`` or ``fixed``: ``Judged.killed``); ``survivors`` are what the oracle would have let through."""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

from mutants import Mutant, planted

from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import DEFAULT_CATALOG, run_command
from ep_testbed.harness.core.results import FAILING, read_run

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

    @property
    def killed(self) -> bool:
        """The run failed on a verdict: some case ``fail`` or ``fixed``. A case that errs or
        crashes says the planted function itself broke (a replacement whose signature no longer
        matches its target), which proves nothing about the oracle."""
        return self.code == 1 and any(outcome in VERDICTS for _, outcome in self.failing)


#: The failing outcomes a comparison decides (``FAILING`` less those of a case that did not run through).
VERDICTS = ("fail", "fixed")


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
        lines = read_run(folder)[1]
    failing = [(line["id"], line["outcome"]) for line in lines if line["outcome"] in FAILING]
    return Judged(mutant.name if mutant else None, ep, source, code, failing)
