"""What the attack suite's environment tests share: the command in a real subprocess, the
contract every hostile call must keep, and the hostile environments themselves (tmpfs folders
full or read-only, cgroups, broken copies of onnxruntime, fake plugin libraries built with gcc).

These tests change what the sandbox cannot: the file system under a command, the process's
memory and pids limits, its streams, the onnxruntime it imports, the native libraries it
loads. So each call is a fresh ``python -m ep_testbed.harness.cli`` process, judged by
``check`` with the sandbox's own rules (``sandbox.one_message``; no traceback, no control
character printed, an exit code among those allowed).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Iterator

import pytest
from sandbox import ROOT, one_message

from ep_testbed.harness.run.worker import FAULT_ENV

#: Seconds one command may take before it counts as a hang (a run of a few cases takes seconds).
LIMIT_S = float(os.environ.get("EP_TESTBED_HOSTILE_LIMIT_S", "120"))
#: The line ``run`` and ``fuzz`` print before any case (what runs where), not a message.
ANNOUNCE = re.compile(r"^ep-testbed: .+ on \S+ \(\d+ workers.*\) -> ")
CLI = [sys.executable, "-m", "ep_testbed.harness.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without fault injection, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env.update(extra)
    return env


def cli(*argv, env: dict[str, str] | None = None, timeout: float = LIMIT_S, **kwargs) -> subprocess.CompletedProcess:
    """``ep-testbed ARGV`` in a subprocess (text output captured unless ``kwargs`` redirect it);
    a call that outlives ``timeout`` fails the test as a hang."""
    kwargs.setdefault("capture_output", True)
    try:
        return subprocess.run([*CLI, *map(str, argv)], cwd=ROOT, env=env or clean_env(), text=True,
                              timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"hang: {argv!r} ran past {timeout:g} s") from exc


def check(done: subprocess.CompletedProcess, codes=(0, 1, 2)) -> subprocess.CompletedProcess:
    """The hostile contract: an exit code in ``codes``, never a traceback, 70 or a signal; exit 2
    is one message; nothing a terminal would interpret printed."""
    where = f"argv={done.args!r} code={done.returncode}\n--- stdout\n{(done.stdout or '')[-3000:]}\n" \
            f"--- stderr\n{(done.stderr or '')[-3000:]}"
    for text in (done.stdout or "", done.stderr or ""):
        assert "Traceback (most recent call last)" not in text, "traceback: " + where
        assert "RecursionError" not in text, "recursion: " + where
        bad = [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")]
        assert not bad, f"control characters printed {bad[:5]!r}: " + where
    assert done.returncode in codes, "exit code: " + where
    if done.returncode == 2 and done.stderr is not None:
        said = "\n".join(line for line in done.stderr.splitlines() if not ANNOUNCE.match(line))
        assert one_message(said), "not one message: " + where
    return done


# --- file systems ------------------------------------------------------------------------------

@contextlib.contextmanager
def tmpfs(where: Path, *, size: str = "16m", nr_inodes: int | None = None) -> Iterator[Path]:
    """A tmpfs mounted at ``where`` for the block (unmounted after); the test is skipped, with the
    kernel's reason, where mounting is refused (not root, no CAP_SYS_ADMIN)."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (f",nr_inodes={nr_inodes}" if nr_inodes else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def read_only(where: Path) -> None:
    """Remount the tmpfs at ``where`` read-only (root cannot be kept out of a folder otherwise)."""
    done = subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot remount a tmpfs read-only here: {done.stderr.strip()}")


def fill_inodes(where: Path) -> int:
    """Create empty files in ``where`` until the file system has no inode left; how many."""
    n = 0
    while True:
        try:
            (where / f"filler-{n}").touch()
        except OSError:
            return n
        n += 1


def copy_run(run: Path, to: Path) -> Path:
    """A copy of run folder ``run`` at ``to`` (a lock file left out)."""
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("ep-testbed.lock"))
    return to
