"""Windows: a Job object per worker process, so a worker (and whatever it started) dies with the
ep-testbed process, as ``prctl(PR_SET_PDEATHSIG)`` does on Linux, and can be killed as a whole,
as a POSIX process group is.

``JobObject()`` creates a job whose limit flags say JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when the
last handle to the job closes -- at the latest when this process exits, however it exits -- every
process in it is terminated. ``assign(pid)`` puts a started process in it (OpenProcess with
PROCESS_SET_QUOTA | PROCESS_TERMINATE, AssignProcessToJobObject), ``terminate()`` ends them all
(TerminateJobObject), ``close()`` closes the handle. The handle is not inheritable (NULL
security attributes), so no child keeps the job alive. A process already in a job that forbids
nesting (before Windows 8) cannot be assigned: ``assign`` returns False and the caller falls
back to killing the process alone.

Structures and calls as in Microsoft's winnt.h / jobapi2.h documentation
(JOBOBJECT_EXTENDED_LIMIT_INFORMATION, 144 bytes on x64) and the public ctypes use of the same
calls in microsoft/debugpy (src/debugpy/launcher/winapi.py, debuggee.py).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Optional

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
JOB_OBJECT_LIMIT_BREAKAWAY_OK = 0x0800
JobObjectExtendedLimitInformation = 9
PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100


class IO_COUNTERS(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("ReadOperationCount", "WriteOperationCount",
                                                      "OtherOperationCount", "ReadTransferCount",
                                                      "WriteTransferCount", "OtherTransferCount")]


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", ctypes.c_uint32), ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", ctypes.c_uint32),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", ctypes.c_uint32), ("SchedulingClass", ctypes.c_uint32)]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION), ("IoInfo", IO_COUNTERS),
                ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
                ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t)]


def kernel32() -> Any:
    """``kernel32.dll`` with the signatures used here (Windows only)."""
    k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    handle, bool_ = ctypes.c_void_p, ctypes.c_int
    k32.CreateJobObjectW.argtypes, k32.CreateJobObjectW.restype = [ctypes.c_void_p, ctypes.c_wchar_p], handle
    k32.SetInformationJobObject.argtypes = [handle, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
    k32.SetInformationJobObject.restype = bool_
    k32.OpenProcess.argtypes, k32.OpenProcess.restype = [ctypes.c_uint32, bool_, ctypes.c_uint32], handle
    k32.AssignProcessToJobObject.argtypes, k32.AssignProcessToJobObject.restype = [handle, handle], bool_
    k32.TerminateJobObject.argtypes, k32.TerminateJobObject.restype = [handle, ctypes.c_uint], bool_
    k32.CloseHandle.argtypes, k32.CloseHandle.restype = [handle], bool_
    return k32


class JobObject:
    """One kill-on-close job (module docstring). ``api`` is kernel32 or a stand-in with its calls."""

    def __init__(self, api: Any = None):
        """Create the job; OSError (with the Windows error) when CreateJobObjectW or
        SetInformationJobObject fails."""
        self.api = api if api is not None else kernel32()
        self.handle = self.api.CreateJobObjectW(None, None)
        if not self.handle:
            raise OSError(_last_error(), "CreateJobObjectW failed")
        info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not self.api.SetInformationJobObject(self.handle, JobObjectExtendedLimitInformation, ctypes.byref(info),
                                                ctypes.sizeof(info)):
            error = _last_error()
            self.close()
            raise OSError(error, "SetInformationJobObject failed")

    def assign(self, pid: int) -> bool:
        """Put process ``pid`` in the job; False when Windows refuses (the process stays unjobbed)."""
        process = self.api.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
        if not process:
            return False
        try:
            return bool(self.api.AssignProcessToJobObject(self.handle, process))
        finally:
            self.api.CloseHandle(process)

    def terminate(self, exit_code: int = 1) -> None:
        """End every process in the job."""
        if self.handle:
            self.api.TerminateJobObject(self.handle, exit_code)

    def close(self) -> None:
        """Close the handle (the processes in the job end with it: kill on close)."""
        if self.handle:
            handle, self.handle = self.handle, None
            self.api.CloseHandle(handle)


def new_job() -> Optional[JobObject]:
    """A job for the next worker on Windows, None elsewhere or when Windows refuses one."""
    if os.name != "nt":
        return None
    try:
        return JobObject()
    except OSError:
        return None


def _last_error() -> int:
    """The calling thread's last Windows error (``ctypes.get_last_error``; 0 elsewhere, where a
    simulated API stands in for kernel32)."""
    if sys.platform == "win32":
        return ctypes.get_last_error()
    return 0
