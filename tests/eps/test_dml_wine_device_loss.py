"""A lost device on the real DirectML EP under Wine (``--ep dml-wine``): the worker's planted
``device-lost`` fault raises DirectML's device-removed error right before a packed session; that
case is ``crash`` with reason ``device-lost``, a fresh worker (with a fresh DirectML host) runs
the rest, and every other case ends as it does without the fault."""

from __future__ import annotations

import os

import pytest
from dml_wine_kit import needs_host

from ep_testbed.harness.cli import main
from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.run.worker import FAULT_ENV

pytestmark = pytest.mark.slow

PLANTED = "max_pooling2/grid-float32-3d-w3-s3-p0_2-d1-idxuint64"


def _run(out, fault=None):
    if fault:
        os.environ[FAULT_ENV] = fault
    try:
        return main(["run", "--ep", "dml-wine", "--ops", "max_pooling2", "-k", "grid-float", "--jobs", "1",
                     "--batch", "4", "--out", str(out), "--no-progress", "--also-on", "none"])
    finally:
        os.environ.pop(FAULT_ENV, None)


def test_a_lost_dml_device_costs_one_case_and_the_host_is_restarted(tmp_path):
    needs_host()
    _run(tmp_path / "plain")
    code = _run(tmp_path / "lost", f"device-lost={PLANTED}")
    _, plain, _ = read_run(str(tmp_path / "plain"))
    _, lost, end = read_run(str(tmp_path / "lost"))
    before = {line["id"]: line["outcome"] for line in plain}
    after = {line["id"]: line for line in lost}
    assert code == 1 and sorted(before) == sorted(after) and len(lost) == len(plain)
    line = after[PLANTED]
    assert line["outcome"] == "crash" and line["reason"] == "device-lost" and "887A0005" in line["detail"]
    assert {i: a["outcome"] for i, a in after.items() if i != PLANTED} == {i: o for i, o in before.items()
                                                                         if i != PLANTED}
    assert end["interrupted"] is False
