"""Output folders: owned by one process at a time, and never overwritten silently.

``claim(folder, command)`` makes a folder this process's for the duration of a ``with`` block:
it creates ``folder/ep-testbed.lock`` exclusively (``O_CREAT | O_EXCL``) holding the owner's
pid, host, process start time, command and start time, and removes it on the way out. A second
``ep-testbed run`` (or ``merge``, or ``model run``) into the same folder is refused with a
``FolderBusy`` naming the other run. A lock left by a process that is gone (same host, pid no
longer running, or running but started at another time: the pid was reused) is stale: it is
removed, and ``Claim.note`` says so. A lock from another host cannot be checked and is refused
with the file to delete if that run is known to be dead.

Whoever claims a folder sweeps it of the temporary files (``atomic_files.TEMP_PREFIX``) that a
process killed outright left behind (``sweep_temporaries``): no other process writes there
while the claim holds, so every such file is a leftover, never a file being written.

``refuse_overwrite(folder, overwrite, flag)`` is the one policy for folders a command fills:
a folder that already holds something is refused unless ``--overwrite`` says to replace it
(``run``'s results, ``model run --out``, ``--save-baseline``, ``gen --out``).
"""

from __future__ import annotations

import glob
import json
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from ..core.atomic_files import TEMP_PREFIX
from ..core.processes import process_alive, process_start
from ..core.results import now
from ..core.terminal import safe
from ..core.untrusted_files import FileRefused, read_json

LOCK_FILE = "ep-testbed.lock"


class FolderBusy(RuntimeError):
    """The folder is in use by another run, holds files a command would overwrite, or is no folder."""


@dataclass
class Claim:
    """A held folder: its lock file, the token written in it, and a note when a stale lock of a
    dead run was removed to take it."""

    folder: str
    path: str
    token: str
    note: str | None = None

    def release(self) -> None:
        """Remove the lock if it is still this claim's (idempotent)."""
        try:
            held = read_json(self.path, "lock file")
        except FileRefused:
            return
        if isinstance(held, dict) and held.get("token") == self.token:
            try:
                os.remove(self.path)
            except OSError:
                pass

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def claim(folder: str | os.PathLike, command: str = "") -> Claim:
    """Own ``folder`` (created if missing) until the returned ``Claim`` is released (use it in a
    ``with``). ``FolderBusy`` naming the other run when a live run holds it."""
    folder = os.fspath(folder)
    if os.path.lexists(folder) and not os.path.isdir(folder):  # checked before any case runs
        raise FolderBusy(f"{safe(folder)} exists and is not a folder, so no run can write into it.\nNote: choose a "
                         "folder for --out (a new one is created)")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, LOCK_FILE)
    note = None
    for _ in range(2):  # a stale lock is removed once, then the claim is tried again
        token = uuid.uuid4().hex
        record = {"pid": os.getpid(), "host": socket.gethostname(), "pid_started": process_start(os.getpid()),
                  "token": token, "command": command, "started": now()}
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_BINARY", 0), 0o644)
        except FileExistsError:
            note = _remove_if_stale(folder, path)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        swept = sweep_temporaries(folder)
        if swept:
            note = "; ".join(filter(None, [note, f"removed {swept} temporary file(s) a killed run left"]))
        return Claim(folder, path, token, note)
    raise FolderBusy(f"{safe(folder)} is in use: its lock file {safe(path)} came back while a stale one was removed")


#: Where in a claimed folder the commands that claim one write whole files: the folder itself
#: and, under ``cases/``, each case's folder and its repro bundle (``cases/<id>/repro/``).
SWEPT = ("", "cases", "cases/*", "cases/*/*")


def sweep_temporaries(folder: str) -> int:
    """Remove every temporary file of ``atomic_files`` (``TEMP_PREFIX*``) in the parts of
    ``folder`` its commands write (``SWEPT``; no other subfolder, which may be another command's
    output), never following a link (a link of that name is removed itself); call it only while
    holding the folder (``claim``). Returns how many were removed."""
    removed = 0
    for pattern in SWEPT:
        for sub in glob.glob(os.path.join(glob.escape(folder), pattern)) if pattern else [folder]:
            if os.path.islink(sub) or not os.path.isdir(sub):
                continue
            try:
                names = os.listdir(sub)
            except OSError:
                continue
            for name in names:
                path = os.path.join(sub, name)
                if name.startswith(TEMP_PREFIX) and (os.path.islink(path) or os.path.isfile(path)):
                    try:
                        os.remove(path)
                        removed += 1
                    except OSError:
                        pass
    return removed


def _remove_if_stale(folder: str, path: str) -> str:
    """Remove the lock at ``path`` if its owner is gone; the note to print. ``FolderBusy``
    naming the owner when it may be alive (or the lock cannot be read)."""
    try:
        held = read_json(path, "lock file")
    except FileRefused as exc:
        raise FolderBusy(f"{safe(folder)} holds a lock file that cannot be read ({exc.problem}).\nNote: if no "
                         f"ep-testbed command is using the folder, delete {safe(path)}") from None
    if not isinstance(held, dict):
        held = {}
    pid, host = held.get("pid"), held.get("host")
    who = (f"pid {pid} on {host}" + (f", started {held.get('started')}" if held.get("started") else "")
           + (f" ({str(held.get('command'))[:200]})" if held.get("command") else ""))
    if host != socket.gethostname():
        raise FolderBusy(f"{safe(folder)} is in use by another ep-testbed run: {who}.\nNote: wait for it to finish or "
                         f"choose another --out; if that run is dead, delete {safe(path)}")
    if isinstance(pid, int) and not isinstance(pid, bool) and process_alive(pid, held.get("pid_started")):
        raise FolderBusy(f"{safe(folder)} is in use by another ep-testbed run: {who}.\nNote: wait for it to finish, "
                         "or choose another --out")
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    return f"removed the stale lock of a run that is no longer running ({who})"


def refuse_overwrite(folder: str | os.PathLike, overwrite: bool, flag: str = "--out",
                     ignore: tuple[str, ...] = (LOCK_FILE,)) -> None:
    """``FolderBusy`` when ``folder`` exists and holds anything (but ``ignore``) and
    ``overwrite`` is not set: a command never replaces files silently."""
    folder = os.fspath(folder)
    if overwrite or not os.path.isdir(folder):
        if not overwrite and os.path.exists(folder):
            raise FolderBusy(f"{flag} {safe(folder)} exists and is not a folder.\nNote: choose another {flag}")
        return
    entries = sorted(e for e in os.listdir(folder) if e not in ignore)
    if entries:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise FolderBusy(f"{flag} {safe(folder)} already holds files ({safe(shown)}).\nNote: pass --overwrite to replace "
                         f"them, or choose another {flag}")


__all__ = ["Claim", "FolderBusy", "LOCK_FILE", "claim", "refuse_overwrite", "sweep_temporaries"]
