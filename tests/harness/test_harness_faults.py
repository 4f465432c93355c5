"""Fault injection: a worker that aborts, segfaults, exits or hangs costs exactly its case, also
when the case shares its session with others (``--batch``: the batch is halved down to the case).

Faults are injected through the documented test hook ``EP_TESTBED_FAULT`` (harness/run/worker.py),
read only by worker processes. Every test checks that all other cases still ran and that no
finished line was lost from results.jsonl.
"""

import os
import subprocess
import sys
import time

import pytest
from local_cases import HERE, MAPPER, max_pool_case

from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.runner import RunOptions, run_cases
from ep_testbed.harness.run.worker import FAULT_ENV, parse_faults

CASES = [max_pool_case(f"max_pooling2/fault-{i}", seed=i) for i in range(6)]


def _run(tmp_path, fault: str, jobs: int = 2, timeout: float = 60.0, batch: int = 1):
    config = CaseConfig(ep=resolve_ep("cpu"), mapper=MAPPER)
    env = dict(os.environ, **{FAULT_ENV: fault})
    options = RunOptions(out_dir=str(tmp_path / "run"), jobs=jobs, timeout=timeout, env=env, extra_paths=(HERE,),
                         progress=False, batch=batch)
    result = run_cases(CASES, config, options)
    header, lines, end = read_run(str(tmp_path / "run"))
    return result, {line["id"]: line for line in lines}, end


#: How each crash reads on this platform: a signal on POSIX; on Windows abort() exits with status 3
#: (Python's os.abort documentation) and the injected access violation is an NTSTATUS.
DEATHS = ({"abort": "exited with status 3", "segfault": "STATUS_ACCESS_VIOLATION"} if os.name == "nt"
          else {"abort": "SIGABRT", "segfault": "SIGSEGV"})


@pytest.mark.parametrize("action, signal_name", sorted(DEATHS.items()))
def test_a_worker_killed_by_a_signal_costs_one_case(tmp_path, action, signal_name):
    result, lines, end = _run(tmp_path, f"{action}=*-2")
    assert len(lines) == len(CASES)  # every case has a line; nothing lost
    crash = lines["max_pooling2/fault-2"]
    assert crash["outcome"] == "crash"
    assert signal_name in crash["message"]
    assert f"injecting {action}" in crash["message"]  # what the worker printed is kept
    assert crash["artifacts"] and os.path.exists(tmp_path / "run" / crash["artifacts"] / "model.onnx")
    assert crash["flags"]  # filled in by the parent, the worker could not
    assert all(lines[c.id]["outcome"] == "pass" for c in CASES if c.id != "max_pooling2/fault-2")
    assert end["counts"]["crash"] == 1 and end["interrupted"] is False


@pytest.mark.parametrize("action, signal_name", sorted(DEATHS.items()))
def test_a_crash_planted_inside_a_batch_costs_exactly_its_case(tmp_path, action, signal_name):
    """All six cases go to one worker as one batch, to run in one session; the case whose session
    crashes the worker is found by halving, and every other case still shares a session."""
    result, lines, end = _run(tmp_path, f"{action}=*-3", jobs=1, batch=6)
    assert sorted(lines) == sorted(c.id for c in CASES) and len(result.lines) == len(CASES)  # none lost, none twice
    crash = lines["max_pooling2/fault-3"]
    assert crash["outcome"] == "crash" and signal_name in crash["message"]
    assert f"injecting {action} for max_pooling2/fault-3" in crash["message"]
    assert "--- session of" not in crash["message"].split("Output:", 1)[1]  # it crashed alone: its own output
    others = [lines[c.id] for c in CASES if c.id != "max_pooling2/fault-3"]
    assert all(line["outcome"] == "pass" for line in others)
    assert max(line["timings"]["shared_by"] for line in others) > 1
    assert end["counts"]["crash"] == 1


def test_a_hang_planted_inside_a_batch_times_out_only_its_case(tmp_path):
    start = time.monotonic()
    _, lines, _ = _run(tmp_path, "hang=*-1", jobs=2, timeout=2.0, batch=4)
    assert time.monotonic() - start < 60  # a batch with no answer for 2 s is halved, not waited on
    hung = lines["max_pooling2/fault-1"]
    assert hung["outcome"] == "timeout" and "no result after 2 s" in hung["message"]
    assert [lines[c.id]["outcome"] for c in CASES].count("pass") == 5


def test_an_exception_planted_inside_a_batch_is_that_case_error(tmp_path):
    _, lines, _ = _run(tmp_path, "raise=*-4", jobs=1, batch=6)
    assert lines["max_pooling2/fault-4"]["outcome"] == "error"
    assert [lines[c.id]["outcome"] for c in CASES].count("pass") == 5
    assert {lines[c.id]["timings"]["shared_by"] for c in CASES if c.id != "max_pooling2/fault-4"} == {5}


def test_several_crashes_in_a_row_each_get_a_fresh_worker(tmp_path):
    _, lines, _ = _run(tmp_path, "exit=*-1;exit=*-3;abort=*-4", jobs=1)
    outcomes = {cid: line["outcome"] for cid, line in lines.items()}
    assert [outcomes[f"max_pooling2/fault-{i}"] for i in range(6)] == ["pass", "crash", "pass", "crash", "crash", "pass"]
    assert "exited with status 3" in lines["max_pooling2/fault-1"]["message"]


def test_a_hanging_case_times_out_and_the_run_goes_on(tmp_path):
    start = time.monotonic()
    result, lines, _ = _run(tmp_path, "hang=*-1", timeout=3.0)
    assert time.monotonic() - start < 40
    hung = lines["max_pooling2/fault-1"]
    assert hung["outcome"] == "timeout"
    assert "no result after 3 s" in hung["message"] and "injecting hang" in hung["message"]
    assert hung["duration_s"] >= 3.0
    assert sum(line["outcome"] == "pass" for line in lines.values()) == 5


def test_an_exception_around_the_case_is_an_error_not_a_crash(tmp_path):
    _, lines, _ = _run(tmp_path, "raise=*-0")
    line = lines["max_pooling2/fault-0"]
    assert line["outcome"] == "error" and "EP_TESTBED_FAULT raise" in line["message"]
    assert line["op"] == "DML_OPERATOR_MAX_POOLING2"  # the parent completes the partial line


@pytest.mark.slow
def test_results_are_on_disk_before_the_run_ends(tmp_path):
    """Lines are flushed as cases finish: read the file while a later case hangs."""
    import threading

    out = tmp_path / "run"
    seen: list[int] = []

    def watch():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            path = out / "results.jsonl"
            if path.exists():
                n = sum(1 for l in path.read_text().splitlines() if '"type": "case"' in l)
                if n >= 5:
                    seen.append(n)
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    _run(tmp_path, "hang=*-5", jobs=1, timeout=3.0)
    watcher.join()
    assert seen and seen[0] >= 5  # five lines were readable while case 5 was still hanging


def test_junk_printed_on_stdout_by_native_code_cannot_corrupt_results(tmp_path):
    _, lines, _ = _run(tmp_path, "noise=*")
    assert len(lines) == len(CASES)
    assert all(line["outcome"] == "pass" for line in lines.values())


def test_fault_spec_is_validated():
    assert parse_faults("abort=a/*; hang=b") == [("abort", "a/*"), ("hang", "b")]
    with pytest.raises(ValueError, match=FAULT_ENV):
        parse_faults("explode=*")


def test_exit_statuses_are_named():
    from ep_testbed.harness.run.pool import describe_exit

    assert describe_exit(-11) == "died of SIGSEGV (signal 11)"
    assert describe_exit(3) == "exited with status 3"
    assert describe_exit(0xC0000005) == "died of STATUS_ACCESS_VIOLATION (status 0xC0000005)"  # Windows


#: A Ctrl-C sent to itself inside ``interrupts_held``, in a fresh interpreter: signals reach the
#: main thread only, and a test runner may run tests in another (pytest-xdist does).
HELD_CTRL_C = """
import os, signal, time
from ep_testbed.harness.run.runner import interrupts_held
finished = []
try:
    with interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the signal is handled (held) here, mid-block
        finished.append("the rest of the block")
except KeyboardInterrupt:
    print("raised after", finished, signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals: os.kill(pid, SIGINT) is not Ctrl-C on Windows")
def test_a_ctrl_c_while_the_header_is_written_lands_once_it_is_whole():
    """The runner writes the header under ``interrupts_held``: a Ctrl-C during the write (the
    fsync takes a while on a loaded disk) arrives after it, inside the part that ends the file."""
    done = subprocess.run([sys.executable, "-c", HELD_CTRL_C], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "raised after ['the rest of the block'] True", done.stdout + done.stderr
