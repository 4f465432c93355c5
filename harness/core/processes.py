"""Whether a recorded process still runs: the one test behind stale run-folder locks and stale
scratch folders (a pid alone is not enough, pids are reused)."""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any


def process_alive(pid: int, started: Any = None) -> bool:
    """Whether process ``pid`` runs on this host and (where start times are known: ``started``
    from ``process_start``) is the one that was recorded."""
    if pid <= 0:
        return False
    if sys.platform == "win32":
        return _alive_windows(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    now = process_start(pid)
    return started is None or now is None or now == started


def _alive_windows(pid: int) -> bool:
    """Windows: ``OpenProcess`` + ``GetExitCodeProcess`` (``STILL_ACTIVE`` is 259)."""
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return ctypes.get_last_error() == 5  # type: ignore[attr-defined]  # ERROR_ACCESS_DENIED: it exists
    try:
        code = ctypes.c_ulong()
        return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259
    finally:
        kernel32.CloseHandle(handle)


def process_start(pid: int) -> int | None:
    """Linux: the process's start time in clock ticks since boot (``/proc/PID/stat`` field 22),
    which tells a reused pid from the original; None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
        return int(text.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


__all__ = ["process_alive", "process_start"]
