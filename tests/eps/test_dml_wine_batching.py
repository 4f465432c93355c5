"""The catalog on the real DirectML EP under Wine (``--ep dml-wine``), alone and sixteen cases a
session: the same outcome for every case, fewer sessions, and a worker that starts its DirectML
host before its first case is timed."""

from __future__ import annotations

import re

import pytest
from dml_wine_kit import needs_host

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.core import expectations
from ep_testbed.harness.eps.adapters import resolve
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.runner import RunOptions, run_cases

pytestmark = pytest.mark.slow

#: DirectML's and vkd3d's messages name the thread and count exceptions: not part of a verdict.
RUNNING_NUMBERS = re.compile(r"Exception\(\d+\) tid\([0-9a-f]+\)|vkd3d:[0-9a-f]+:")


def _catalog(out, batch):
    options = RunOptions(out_dir=str(out), jobs=2, timeout=300, progress=False, keep_worst=0, batch=batch)
    ep = resolve("dml-wine")
    result = run_cases(build_catalog(), CaseConfig(ep=ep), options, expectations.for_ep(ep.alias, ep))
    return {line["id"]: line for line in result.lines}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    needs_host()
    root = tmp_path_factory.mktemp("dml-wine-batching")
    return _catalog(root / "alone", 1), _catalog(root / "shared", 16)


def test_the_catalog_has_the_same_outcomes_and_lines_batched(runs):
    alone, shared = runs
    assert sorted(alone) == sorted(shared)
    assert {i: l["outcome"] for i, l in shared.items()} == {i: l["outcome"] for i, l in alone.items()}
    assert max(line["timings"]["shared_by"] for line in shared.values()) > 1

    def steady(line):
        kept = {k: v for k, v in line.items() if k not in ("duration_s", "timings")}
        return RUNNING_NUMBERS.sub("#", repr(kept))

    assert [i for i in alone if steady(alone[i]) != steady(shared[i])] == []


def test_batching_takes_fewer_sessions(runs):
    # Each line says how many cases shared its session: alone, one each; sixteen a session, the
    # passing cases' sessions (the sum of 1/shared_by) are far fewer than the cases (a case that
    # fails or is refused in a pack is run again alone, so only passes are counted). Counted, not
    # timed: what fewer sessions buy is measured by benchmarks/bench_throughput.py --ep dml-wine.
    alone, shared = runs

    def sessions(lines):
        return sum(1 / line["timings"]["shared_by"] for line in lines.values() if line["outcome"] == "pass")

    assert {line["timings"].get("shared_by", 1) for line in alone.values()} == {1}
    assert sessions(shared) <= sessions(alone) / 2


def test_no_case_pays_for_starting_the_directml_host(runs, host):
    """Starting a host (Xvfb, Wine, Direct3D 12, DirectML) takes over a second here; every worker
    does it in its warm-up session, before its first case is sent. A case that paid for it would
    take at least as long as starting one (``host``, started on this machine under the same load)."""
    alone, _ = runs
    assert max(line["duration_s"] for line in alone.values()) < host.start_seconds
