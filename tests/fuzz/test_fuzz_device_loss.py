"""A fuzz run whose device stays lost stops with exit 2 and an ended results file, instead of
drawing and failing case after case (the worker's planted ``device-lost`` fault)."""

import os

import pytest

pytest.importorskip("hypothesis")

from ep_testbed.harness.cli import main  # noqa: E402
from ep_testbed.harness.core.results import read_run  # noqa: E402
from ep_testbed.harness.run.pool import MAX_DEVICE_LOSSES  # noqa: E402
from ep_testbed.harness.run.worker import FAULT_ENV  # noqa: E402


@pytest.mark.slow
def test_a_device_lost_for_good_stops_the_fuzz_run_with_exit_2(tmp_path, capsys):
    os.environ[FAULT_ENV] = "device-lost=max_pooling2/fuzz-*"
    try:
        code = main(["fuzz", "--ep", "cpu", "--ops", "max_pooling2", "--budget", "30", "--jobs", "1", "--batch", "1",
                     "--out", str(tmp_path / "r"), "--no-progress"])
    finally:
        del os.environ[FAULT_ENV]
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"the device is lost: {MAX_DEVICE_LOSSES} cases in a row" in err and "fuzz again" in err
    _, lines, end = read_run(str(tmp_path / "r"))
    assert end["interrupted"] is True and end["device_lost"]["losses"] == MAX_DEVICE_LOSSES
    assert [line["reason"] for line in lines] == ["device-lost"] * MAX_DEVICE_LOSSES
