"""The Windows-only process code, run here against stand-ins for kernel32 and the C runtime:
the kill-on-close Job object per worker (harness/run/winjob.py, as winnt.h/jobapi2.h and
microsoft/debugpy's launcher use it), the crash-dialog switch and the injected segfault of
harness/run/worker.py."""

import ctypes
import os
import signal
import subprocess
import sys

import pytest
from local_cases import HERE, MAPPER, max_pool_case

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run import pool as pool_mod
from ep_testbed.harness.run import winjob, worker
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.worker import FAULT_ENV


class FakeKernel32:
    """The five kernel32 calls the job uses; records them and the limits it was given."""

    def __init__(self, open_ok=True, assign_ok=True):
        self.calls, self.limits, self.open_ok, self.assign_ok = [], None, open_ok, assign_ok

    def CreateJobObjectW(self, attributes, name):
        self.calls.append(("CreateJobObjectW", attributes, name))
        return 0x100

    def SetInformationJobObject(self, job, klass, info, size):
        self.limits = (klass, info._obj.BasicLimitInformation.LimitFlags, size)
        self.calls.append(("SetInformationJobObject", job))
        return 1

    def OpenProcess(self, access, inherit, pid):
        self.calls.append(("OpenProcess", access, inherit, pid))
        return 0x200 if self.open_ok else 0

    def AssignProcessToJobObject(self, job, process):
        self.calls.append(("AssignProcessToJobObject", job, process))
        return 1 if self.assign_ok else 0

    def TerminateJobObject(self, job, code):
        self.calls.append(("TerminateJobObject", job, code))
        return 1

    def CloseHandle(self, handle):
        self.calls.append(("CloseHandle", handle))
        return 1


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the x64 layout")
def test_extended_limit_information_has_the_x64_size():
    assert ctypes.sizeof(winjob.JOBOBJECT_EXTENDED_LIMIT_INFORMATION) == 144
    assert winjob.JOBOBJECT_EXTENDED_LIMIT_INFORMATION.IoInfo.offset == 64


def test_the_job_kills_on_close_and_holds_the_worker():
    api = FakeKernel32()
    job = winjob.JobObject(api)
    assert api.calls[0] == ("CreateJobObjectW", None, None)  # NULL security attributes: not inheritable
    assert api.limits == (9, 0x2000, ctypes.sizeof(winjob.JOBOBJECT_EXTENDED_LIMIT_INFORMATION))
    assert job.assign(4242)
    assert ("OpenProcess", 0x0100 | 0x0001, False, 4242) in api.calls
    assert ("AssignProcessToJobObject", 0x100, 0x200) in api.calls and ("CloseHandle", 0x200) in api.calls
    job.terminate()
    job.close()
    job.close()  # idempotent
    assert api.calls[-2:] == [("TerminateJobObject", 0x100, 1), ("CloseHandle", 0x100)]
    assert not winjob.JobObject(FakeKernel32(open_ok=False)).assign(1)
    assert not winjob.JobObject(FakeKernel32(assign_ok=False)).assign(1)
    assert winjob.new_job() is None or os.name == "nt"


class RecordingJob:
    jobs: list = []

    def __init__(self):
        self.events = []
        RecordingJob.jobs.append(self)

    def assign(self, pid):
        self.events.append(("assign", pid))
        return True

    def terminate(self, exit_code=1):
        self.events.append(("terminate",))

    def close(self):
        self.events.append(("close",))


@pytest.mark.slow
def test_each_worker_gets_a_job_that_kills_it_on_timeout_and_is_closed(monkeypatch):
    """The pool's Windows path, with the job stood in: every worker is assigned right after it
    starts; a hung worker is ended through its job; every job is closed when its worker retires."""
    RecordingJob.jobs = []
    monkeypatch.setattr(pool_mod, "new_job", RecordingJob)
    env = dict(os.environ, **{FAULT_ENV: "hang=*-1"})
    cases = [max_pool_case(f"max_pooling2/win-{i}", seed=i) for i in range(3)]
    the_pool = pool_mod.WorkerPool(CaseConfig(ep=resolve_ep("cpu"), mapper=MAPPER), jobs=1, timeout=3, env=env,
                                   extra_paths=(HERE,))
    lines = {line["id"]: line for line in the_pool.run(cases)}
    assert lines["max_pooling2/win-1"]["outcome"] == "timeout"
    assert [lines[f"max_pooling2/win-{i}"]["outcome"] for i in (0, 2)] == ["pass", "pass"]
    assert len(RecordingJob.jobs) == 2  # the hung worker's and its replacement's
    hung, fresh = RecordingJob.jobs
    assert hung.events[0][0] == "assign" and hung.events[1:] == [("terminate",), ("close",)]
    assert fresh.events[0][0] == "assign" and fresh.events[-1] == ("close",)
    assert hung.events[0][1] != fresh.events[0][1]  # two processes


def test_crash_dialogs_are_switched_off_on_windows_only():
    calls = []

    class Api:
        def SetErrorMode(self, mode):
            calls.append(("SetErrorMode", mode))

    class Crt:
        def _set_abort_behavior(self, flags, mask):
            calls.append(("_set_abort_behavior", flags, mask))

    worker.quiet_crash_reports(Api(), Crt())
    assert calls == [("SetErrorMode", 0x8003), ("_set_abort_behavior", 0, 3)]
    if os.name != "nt":
        worker.quiet_crash_reports()  # nothing to do, and no error, off Windows


@pytest.mark.skipif(os.name == "nt", reason="the POSIX signal; on Windows the same read is STATUS_ACCESS_VIOLATION")
def test_the_injected_segfault_is_a_real_crash_not_an_exception():
    p = subprocess.run([sys.executable, "-c", "from ep_testbed.harness.run.worker import segfault; segfault()"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGSEGV, (p.returncode, p.stderr)


@pytest.mark.slow
def test_a_console_that_cannot_encode_a_path_does_not_fail_the_run(tmp_path):
    """Windows writes redirected output in its ANSI code page; a results path outside it must not
    turn a finished run into a UnicodeEncodeError."""
    case_id = build_catalog(["roi_pooling"])[0].id
    out = tmp_path / "r\u2264\u03c0"
    env = dict(os.environ, PYTHONIOENCODING="cp1252")
    env.pop(FAULT_ENV, None)
    p = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "run", "--ops", "roi_pooling", "-k", case_id,
                        "--out", str(out), "--no-progress", "--jobs", "1"], capture_output=True, text=True,
                       encoding="cp1252", errors="replace", env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "\\u2264\\u03c0" in p.stdout and (out / "results.jsonl").exists()
