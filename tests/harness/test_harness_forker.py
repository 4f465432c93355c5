"""Workers forked from a process that has already imported NumPy and ONNX (harness/run/forker.py):
each is the worker a subprocess would have been (its own session, the pool's environment and
working folder, its log, its exit status as Popen reports it); one forker serves every pool of
a process with the same PYTHONPATH; it and its workers end with the process that started them;
and when no forker can start a worker, the pool starts a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from local_cases import max_pool_case

from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run import forker
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.pool import WorkerPool
from ep_testbed.harness.run.worker import FAULT_ENV

pytestmark = pytest.mark.skipif(os.name != "posix", reason="workers are forked on POSIX only")

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = CaseConfig(ep=resolve_ep("cpu"))
CASE = max_pool_case("local/forked")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, seconds: float = 30.0) -> bool:
    """Whether process ``pid`` has ended (or is a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pools_with_one_pythonpath_share_a_forker_and_each_worker_gets_its_pools_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plain = WorkerPool(CONFIG, 1, 60, extra_paths=[HERE])
    faulty = WorkerPool(CONFIG, 1, 60, env=dict(os.environ, **{FAULT_ENV: f"perturb={CASE.id}"}), extra_paths=[HERE])
    try:
        assert plain.run_one(CASE)["outcome"] == "pass"
        assert faulty.run_one(CASE)["outcome"] == "fail"  # the fault is in the second pool's environment only
        workers = [pool._workers[0].proc for pool in (plain, faulty)]
        assert all(isinstance(proc, forker.ForkedWorker) for proc in workers)
        parents = {_parent(proc.pid) for proc in workers}
        assert len(parents) == 1 and parents != {os.getpid()}  # both forked by one forker
        assert os.getsid(workers[0].pid) == workers[0].pid  # a session of its own, as start_new_session gives
        assert "warm-up session" in open(plain._workers[0].log_path, encoding="utf-8").read()  # its stderr
    finally:
        plain.close()
        faulty.close()
    assert all(proc.poll() is not None for proc in workers)


def test_a_forked_worker_reports_its_exit_as_popen_does(tmp_path):
    pool = WorkerPool(CONFIG, 1, 60, extra_paths=[HERE])
    try:
        pool.run_one(CASE)
        proc = pool._workers[0].proc
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)  # alive: waiting times out, as Popen.wait does
        assert proc.poll() is None
        proc.kill()
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        pool.close()


def test_a_crash_in_a_forked_worker_is_that_case_crash_naming_the_signal(tmp_path):
    env = dict(os.environ, **{FAULT_ENV: f"segfault={CASE.id}"})
    pool = WorkerPool(CONFIG, 1, 60, env=env, extra_paths=[HERE])
    try:
        line = pool.run_one(CASE)
    finally:
        pool.close()
    assert line["outcome"] == "crash" and "SIGSEGV" in line["message"], line["message"]


def test_the_forker_and_its_workers_end_with_the_process_that_started_them(tmp_path):
    script = (f"import sys; sys.path.insert(0, {HERE!r})\n"
              "from test_harness_forker import CONFIG, CASE, HERE\n"
              "from ep_testbed.harness.run.pool import WorkerPool\n"
              "pool = WorkerPool(CONFIG, 1, 60, extra_paths=[HERE])\n"
              "assert pool.run_one(CASE)['outcome'] == 'pass'\n"
              "proc = pool._workers[0].proc\n"
              "print(proc.pid, proc.forker._proc.pid, flush=True)\n"
              "import os; os._exit(0)  # no close: the workers are left to the forker\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    worker_pid, forker_pid = map(int, out.stdout.split())
    assert _gone(forker_pid) and _gone(worker_pid)


def test_a_forker_that_is_gone_is_replaced_and_its_workers_read_as_killed(tmp_path):
    pool = WorkerPool(CONFIG, 1, 60, extra_paths=[HERE])
    try:
        pool.run_one(CASE)
        proc = pool._workers[0].proc
        os.kill(proc.forker._proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL  # its worker went with it (PR_SET_PDEATHSIG)
        assert proc.forker.gone
        pool.close()
        assert pool.run_one(CASE)["outcome"] == "pass"  # a fresh forker
        assert pool._workers[0].proc.forker is not proc.forker
    finally:
        pool.close()


def test_a_pool_starts_a_subprocess_when_no_forker_can(monkeypatch):
    monkeypatch.setattr(forker, "spawn", lambda env, log_fd: None)
    pool = WorkerPool(CONFIG, 1, 60, extra_paths=[HERE])
    try:
        assert pool.run_one(CASE)["outcome"] == "pass"
        assert isinstance(pool._workers[0].proc, subprocess.Popen)
    finally:
        pool.close()


def test_a_forked_copy_of_the_process_gets_a_forker_of_its_own(tmp_path):
    """A process that forks after its pools started workers (multiprocessing's default start on
    Linux) holds a copy of its forker's socket: the copy's pools start a forker of their own."""
    script = (f"import os, sys; sys.path.insert(0, {HERE!r})\n"
              "from test_harness_forker import CONFIG, CASE, HERE\n"
              "from ep_testbed.harness.run.pool import WorkerPool\n"
              "def used():\n"
              "    pool = WorkerPool(CONFIG, 1, 60, extra_paths=[HERE])\n"
              "    try:\n"
              "        assert pool.run_one(CASE)['outcome'] == 'pass'\n"
              "        return pool._workers[0].proc.forker\n"
              "    finally:\n"
              "        pool.close()\n"
              "first = used()\n"
              "child = os.fork()\n"
              "if child == 0:\n"
              "    mine = used()\n"
              "    os._exit(0 if mine is not first and mine.owner == os.getpid() else 3)\n"
              "_, status = os.waitpid(child, 0)\n"
              "assert os.waitstatus_to_exitcode(status) == 0, status\n"
              "assert used() is first  # the parent's own forker serves it still\n"
              "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_retired_workers_pipe_is_closed_by_its_reader_never_under_it(tmp_path, monkeypatch):
    """A reader thread between two reads whose pipe the pool closed would read the next pipe given
    that fd number: a new worker's, whose "ready" it would file under the retired worker (the new
    one then "did not start"). The pool leaves the pipe to its reader."""
    from ep_testbed.harness.run import pool as pool_module

    real, calls = pool_module.read_frame, []
    between, release = threading.Event(), threading.Event()

    def reading(stream):
        calls.append(stream)
        if stream is calls[0] and calls.count(stream) == 2:  # the first worker's reader, after its "ready"
            between.set()
            release.wait(60)
        return real(stream)

    monkeypatch.setattr(pool_module, "read_frame", reading)
    monkeypatch.chdir(tmp_path)
    pool = WorkerPool(CONFIG, 1, 60, extra_paths=[HERE])
    try:
        pool.start(1)
        assert between.wait(60)
        old = pool._workers[0]
        pool._kill(old)
        pool._retire(old)
        assert not old.results.closed  # its reader may be about to read it
        release.set()
        old.reader.join(30)
        assert not old.reader.is_alive() and old.results.closed  # the reader met the end and closed it
        assert pool.run_one(CASE)["outcome"] == "pass"  # a fresh worker, ready and heard
    finally:
        release.set()
        pool.close()


def test_what_the_forker_preloads_starts_no_thread_and_no_onnx_runtime():
    """A fork copies only the thread that forks: every module the forker imports before it forks
    (``forker.PRELOAD``, down to the case pipeline) must start no thread, and must not import
    ONNX Runtime, which starts one; a worker imports it after the fork, as a fresh process would."""
    script = ("import sys, threading\nfrom ep_testbed.harness.run import forker\nimport importlib\n"
              "for name in forker.PRELOAD:\n    importlib.import_module(name)\n"
              "print(threading.active_count(), 'onnxruntime' in sys.modules, len(forker.PRELOAD))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "False", str(len(forker.PRELOAD))]
    assert "ep_testbed.harness.run.case_run" in forker.PRELOAD  # what each worker would import itself


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_fuzz_command_starts_its_forker_before_it_imports_the_command_line(tmp_path):
    """The launcher, held at its seam before the command line is imported, already has the
    forker its workers will come from; an interrupt there ends both."""
    from ep_testbed.harness.launch import WAIT_ENV

    pipe = tmp_path / "start"
    os.mkfifo(pipe)
    launch = ("import signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
              "signal.signal(signal.SIGINT, signal.default_int_handler); "
              "from ep_testbed.harness.launch import main; sys.exit(main())")
    proc = subprocess.Popen([sys.executable, "-c", launch, "fuzz", "--ep", "cpu", "--out", str(tmp_path / "f")],
                            env={**os.environ, WAIT_ENV: str(pipe)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    held: list[int] = []

    def forkers() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and _parent(int(entry)) == proc.pid and \
                        b"ep_testbed.harness.run.forker" in open(f"/proc/{entry}/cmdline", "rb").read():
                    found.append(int(entry))
            except OSError:
                pass
        return found

    deadline = time.monotonic() + 60
    while not held and time.monotonic() < deadline:  # the launcher opens the pipe once it waits at the seam
        try:
            held.append(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            time.sleep(0.02)
    try:
        assert held, "the launcher never reached its seam"
        started = forkers()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        for fd in held:
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert len(started) == 1 and _gone(started[0])
