"""A lost device (a TDR, a driver reset) is one case, not the rest of the run.

The worker's planted ``device-lost`` fault (``EP_TESTBED_FAULT``, harness/run/worker.py) raises
what ONNX Runtime's DirectML EP raises after a device removal, right before the session of the
case it names; the worker handles it as any real loss. Each test checks the case's line
(``crash``, ``reason`` ``device-lost``, the EP's text as ``detail``), that a fresh worker took
over, and that no finished line was lost or written twice.
"""

import json
import os
import re
import time

import pytest
from local_cases import HERE, MAPPER, max_pool_case

from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.eps import device_loss
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run import runner
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.pool import MAX_DEVICE_LOSSES, DeviceLostError, WorkerPool
from ep_testbed.harness.run.runner import RunOptions, run_cases
from ep_testbed.harness.run.worker import DEVICE_LOST_TEXT, FAULT_ENV, parse_faults

CASES = [max_pool_case(f"max_pooling2/lost-{i}", seed=i) for i in range(8)]
IDS = [c.id for c in CASES]

#: What EPs print when their device is gone (each from the public page the pattern cites) and,
#: after them, errors that must never read as a lost device.
LOST = [DEVICE_LOST_TEXT, "D3D12 call failed: DXGI_ERROR_DEVICE_REMOVED", "HRESULT 0x887A0006",
        "Exception(1) tid(28e8) 887A0007 The GPU will not respond", "CUDA failure 719: unspecified launch failure",
        "cudaErrorDevicesUnavailable", "vkQueueSubmit: VK_ERROR_DEVICE_LOST", "WebGPU: Device lost (reason 1)",
        "[ONNXRuntimeError] : 1 : FAIL : device was lost"]
NOT_LOST = ["[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running MaxPool node",
            "CUDA failure 2: out of memory", "887A00051 is not an HRESULT", "the device list is empty",
            "lost precision converting float64 to float16"]


@pytest.mark.parametrize("text", LOST)
def test_every_device_loss_string_is_recognised(text):
    assert device_loss.device_lost(text) is not None, text


@pytest.mark.parametrize("text", NOT_LOST)
def test_other_errors_are_not_a_lost_device(text):
    assert device_loss.device_lost(text) is None, text


def test_every_pattern_cites_a_public_source_and_the_fault_is_documented():
    assert all(p.source.startswith("https://") and p.means for p in device_loss.PATTERNS)
    assert parse_faults("device-lost=a/*") == [("device-lost", "a/*")]


def _run(tmp_path, fault: str, jobs: int = 1, batch: int = 1, out: str = "run"):
    config = CaseConfig(ep=resolve_ep("cpu"), mapper=MAPPER)
    env = dict(os.environ, **{FAULT_ENV: fault}) if fault else dict(os.environ)
    options = RunOptions(out_dir=str(tmp_path / out), jobs=jobs, timeout=60.0, env=env, extra_paths=(HERE,),
                         progress=False, batch=batch, resume=not fault)
    return run_cases(CASES, config, options)


def _lines(run_dir):
    _, lines, end = read_run(str(run_dir))
    assert len({line["id"] for line in lines}) == len(lines)  # no case twice
    return {line["id"]: line for line in lines}, end


def _assert_lost(line):
    assert line["outcome"] == "crash" and line["reason"] == device_loss.REASON, line
    assert "887A0005" in line["detail"] and "device was lost" in line["message"]


@pytest.mark.parametrize("batch", [1, 8])
def test_a_loss_at_case_k_is_that_case_crash_and_the_run_goes_on(tmp_path, batch):
    """With ``batch`` 8 the loss hits a session of all eight: the pack is halved in fresh workers
    (never retried on the lost device) down to the case, and every other case still passes."""
    result, = [_run(tmp_path, "device-lost=*-5", batch=batch)]
    lines, end = _lines(tmp_path / "run")
    assert sorted(lines) == sorted(IDS) and len(result.lines) == len(CASES)
    _assert_lost(lines["max_pooling2/lost-5"])
    assert all(lines[i]["outcome"] == "pass" for i in IDS if i != "max_pooling2/lost-5")
    assert end["counts"]["crash"] == 1 and end["interrupted"] is False and "device_lost" not in end


def test_the_worker_that_lost_its_device_is_replaced_by_a_fresh_one(tmp_path):
    pool = WorkerPool(CaseConfig(ep=resolve_ep("cpu"), mapper=MAPPER), 1, 60.0,
                      env=dict(os.environ, **{FAULT_ENV: "device-lost=*-2"}), extra_paths=(HERE,))
    try:
        lines = {line["id"]: line for line in pool.run(CASES[:4])}
        assert pool._count == 2, pool._count  # the first worker, then one fresh worker after the loss
    finally:
        pool.close()
    _assert_lost(lines["max_pooling2/lost-2"])
    assert [lines[i]["outcome"] for i in IDS[:4]] == ["pass", "pass", "crash", "pass"]


@pytest.mark.parametrize("batch", [1, 8])
def test_losses_in_a_row_stop_the_run_with_its_file_ended_and_resume_finishes_it(tmp_path, batch):
    start = time.monotonic()
    with pytest.raises(DeviceLostError) as info:
        _run(tmp_path, "device-lost=*-[3-7]", batch=batch)
    assert time.monotonic() - start < 60  # a pack on a lost device is not retried forever
    assert f"the device is lost: {MAX_DEVICE_LOSSES} cases in a row" in str(info.value)
    lines, end = _lines(tmp_path / "run")
    assert end["interrupted"] is True and end["device_lost"]["losses"] == MAX_DEVICE_LOSSES
    assert all(lines[i]["outcome"] == "pass" for i in IDS[:3])
    assert all(line["reason"] == device_loss.REASON for line in lines.values() if line["outcome"] == "crash")
    kept = dict(lines)
    _run(tmp_path, "")  # the device is back: --resume runs what is left, nothing twice
    resumed, end = _lines(tmp_path / "run")
    assert sorted(resumed) == sorted(IDS) and end["interrupted"] is False
    assert all(resumed[i] == kept[i] for i in kept)  # finished lines kept as they were


def test_the_cli_exits_2_naming_the_loss_and_how_to_resume(tmp_path, capsys, monkeypatch):
    from ep_testbed.harness.cli import main

    monkeypatch.setenv(FAULT_ENV, "device-lost=max_pooling2/*")
    out = tmp_path / "cli"
    code = main(["run", "--ep", "cpu", "--ops", "max_pooling2", "--jobs", "1", "--no-progress", "--also-on", "none",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert re.search(r"the device is lost: 3 cases in a row .*finished cases are kept in results.jsonl; resume with "
                     r"--resume once the device is back", err), err
    assert json.loads((out / "results.jsonl").read_text().splitlines()[-1])["type"] == "end"
    assert (out / "report.html").exists()


def test_in_this_process_a_loss_is_a_crash_the_held_sessions_are_dropped_and_three_stop(tmp_path, monkeypatch):
    """``--jobs 0``: no worker to restart, so the adapters that hold sessions are dropped instead."""
    real, dropped = runner.run_batch, []

    def losing(requests, config, emit=None, **kwargs):
        lost = [case.id for case, _, _ in requests if case.id in ("max_pooling2/lost-1", "max_pooling2/lost-4",
                                                                   "max_pooling2/lost-5", "max_pooling2/lost-6")]
        if lost:
            raise device_loss.loss_of(RuntimeError(DEVICE_LOST_TEXT), lost[:1])
        return real(requests, config, emit=emit, **kwargs)

    monkeypatch.setattr(runner, "run_batch", losing)
    monkeypatch.setattr(runner, "forget_adapters", lambda: dropped.append(1))
    with pytest.raises(DeviceLostError):
        _run(tmp_path, "device-lost=nothing", jobs=0)
    lines, end = _lines(tmp_path / "run")
    _assert_lost(lines["max_pooling2/lost-1"])
    assert [lines[i]["outcome"] for i in IDS[:4]] == ["pass", "crash", "pass", "pass"]
    assert len(dropped) == 4 and end["device_lost"]["losses"] == 3
