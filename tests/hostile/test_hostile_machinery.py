"""The testbed's own machinery as the attack: the process that forks workers (harness/run/forker.py)
killed mid-run, at the point where it hurts most, and again and again.

A worker the testbed lost is never a verdict on the case it ran: its cases run again, each line
is written once, and a run that cannot run a case again (its workers lost each time) ends with
exit 2 saying so, never 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import run_watch
from environment_kit import CLI, check, clean_env
from sandbox import ROOT

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run import pool as pool_module
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.pool import WorkerPool, WorkerStartError
from ep_testbed.harness.run.worker import FAULT_ENV

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks, reads /proc")]

LOCAL = str(ROOT / "tests" / "harness")
sys.path.insert(0, LOCAL)
from local_cases import max_pool_case  # noqa: E402

#: How many times the pool runs a case again whose worker it lost (its own constant where it has one).
LOST_RUNS = getattr(pool_module, "MAX_LOST_RUNS", 3)
CONFIG = CaseConfig(ep=resolve_ep("cpu"))
IDS = [c.id for c in build_catalog(["max_pooling2"]) if "/grid-" in c.id][:12]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _forkers_of(pid: int) -> list[int]:
    """The worker forkers process ``pid`` started."""
    mine = []
    for child in _children(pid):
        try:
            if b"ep_testbed.harness.run.forker" in Path(f"/proc/{child}/cmdline").read_bytes():
                mine.append(child)
        except OSError:
            pass
    return mine


def test_a_worker_whose_forker_was_killed_between_two_cases_is_not_the_next_cases_crash():
    """The forker dies while the pool is between two cases: the worker dies with it, and the
    case sent to it next had been its ``crash`` (the old pool's verdict on an EOF)."""
    cases = [max_pool_case(f"local/lost-{i}", seed=i) for i in range(4)]
    pool = WorkerPool(CONFIG, 1, 120, extra_paths=[LOCAL])
    try:
        results = pool.run(cases)
        lines = [next(results)]
        worker = pool._workers[0].proc
        os.kill(worker.forker._proc.pid, signal.SIGKILL)
        run_watch.wait_until(lambda: _gone(worker.pid), "the worker ending with its forker")
        lines += list(results)
    finally:
        pool.close()
    assert sorted(line["id"] for line in lines) == sorted(c.id for c in cases)
    assert [line["outcome"] for line in lines] == ["pass"] * 4, [line.get("message") for line in lines]


def test_a_case_whose_worker_is_lost_every_time_stops_the_pool_saying_so(tmp_path):
    """Each time the case runs (it hangs, so it is surely running), its forker is killed: after
    ``LOST_RUNS`` times the pool raises ``WorkerStartError`` (exit 2 in every front end)."""
    case = max_pool_case("local/always-lost")
    pool = WorkerPool(CONFIG, 1, 600, env=clean_env(**{FAULT_ENV: f"hang={case.id}"}), extra_paths=[LOCAL])
    stop = threading.Event()
    killed: list[int] = []

    def killer():
        while not stop.is_set():
            logs = Path(pool._logs.name).glob("worker-*.log")
            hangs = sum(log.read_text(errors="replace").count(f"injecting hang for {case.id}") for log in logs)
            if hangs > len(killed):  # only this pool's forker: others of this process are other tests'
                for held in {getattr(w.proc, "forker", None) for w in list(pool._workers)} - {None}:
                    if not held.gone and held._proc.pid not in killed:
                        os.kill(held._proc.pid, signal.SIGKILL)
                        killed.append(held._proc.pid)
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        with pytest.raises(WorkerStartError) as raised:
            list(pool.run([case]))
    finally:
        stop.set()
        thread.join()
        pool.close()
    assert len(killed) == LOST_RUNS
    assert "was lost 3 times, not by the case" in str(raised.value) and "SIGKILL" in str(raised.value)


def _argv(out, *extra):
    return ["run", "--ops", "max_pooling2", "-k", ",".join(IDS), "--jobs", "2", "--out", out, "--no-progress", *extra]


def _case_lines(out):
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [r for r in records if r["type"] == "case"]


@pytest.mark.parametrize("after", [1, 6])
def test_a_run_whose_forker_is_killed_loses_no_case_and_crashes_none(tmp_path, after):
    out = tmp_path / "r"
    run = subprocess.Popen([*CLI, *map(str, _argv(out))], cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    run_watch.wait_until(run_watch.has_lines(out / "results.jsonl", "case", after), f"{after} cases written", run)
    forkers = _forkers_of(run.pid)
    for pid in forkers:
        os.kill(pid, signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=300)
    done = check(subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr), (0,))
    lines = _case_lines(out)
    assert sorted(line["id"] for line in lines) == sorted(IDS), done.stderr
    assert not [line for line in lines if line["outcome"] != "pass"]
    assert forkers or len(lines) == len(IDS)  # no forker left to kill only once every case was written


def test_fuzz_whose_forker_is_killed_crashes_no_case(tmp_path):
    out = tmp_path / "f"
    argv = ["fuzz", "--ep", "cpu", "--ops", "max_pooling2", "--max-cases", "30", "--budget", "600", "--jobs", "2",
            "--shrink", "none", "--also-on", "none", "--out", out]
    run = subprocess.Popen([*CLI, *map(str, argv)], cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    run_watch.wait_until(run_watch.has_lines(out / "results.jsonl", "case", 3), "3 fuzzed cases written", run)
    for pid in _forkers_of(run.pid):
        os.kill(pid, signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=300)
    check(subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr), (0, 1))
    lines = _case_lines(out)
    assert len(lines) == len({line["id"] for line in lines}) == 30
    assert not [line for line in lines if line["outcome"] == "crash"], [line.get("message") for line in lines]


def test_a_run_that_cannot_run_a_case_again_exits_2_saying_so(tmp_path):
    """The forker is killed each time one case runs (it hangs, so it is surely running): the
    run ends with exit 2, one message naming the case, the cases finished before kept once."""
    out, temp = tmp_path / "r", tmp_path / "tmp"
    temp.mkdir()
    run = subprocess.Popen([*CLI, *map(str, _argv(out, "--jobs", "1"))], cwd=ROOT,
                           env=clean_env(TMPDIR=str(temp), **{FAULT_ENV: f"hang={IDS[2]}"}), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    note = f"injecting hang for {IDS[2]}"
    for n in range(1, LOST_RUNS + 1):
        run_watch.wait_until(lambda: sum(log.read_text(errors="replace").count(note)
                                         for log in temp.glob("ep-testbed-workers-*/worker-*.log")) >= n,
                             f"the hanging case running a {n}th time", run)
        for pid in _forkers_of(run.pid):
            os.kill(pid, signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=300)
    done = check(subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr), (2,))
    assert IDS[2] in done.stderr and "was lost 3 times" in done.stderr and "--resume" in done.stderr
    lines = _case_lines(out)
    assert sorted(line["id"] for line in lines) == sorted(IDS[:2]) and {line["outcome"] for line in lines} == {"pass"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_sandbox_counts_the_cpu_a_command_uses_not_the_clock():
    """A hostile call hangs when its process group has spent its limit in CPU seconds
    (``sandbox_server.serve_one``): a group that spins adds CPU seconds, one that sleeps adds none,
    so a loaded machine that gives a working command a quarter of a core never calls it a hang."""
    from sandbox_server import group_cpu_seconds

    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                             "while time.process_time() - t < 0.5: pass\ntime.sleep(60)"], start_new_session=True)
    try:
        spent = 0.0
        while spent < 0.5 and spin.poll() is None:  # however long the machine takes to give it that CPU
            spent = group_cpu_seconds(spin.pid) or 0.0
            time.sleep(0.05)
        assert spent >= 0.5
        asleep = group_cpu_seconds(spin.pid) or 0.0
        time.sleep(0.3)
        assert (group_cpu_seconds(spin.pid) or 0.0) - asleep < 0.1
    finally:
        spin.kill()
        spin.wait()
