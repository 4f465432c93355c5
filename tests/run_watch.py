"""Waiting on what a running ``ep-testbed run`` shows, never on the clock.

Tests that signal or race a run wait for observable conditions: a number of case lines (or the
end line) in its ``results.jsonl``, or the worker's own note that a fault is being injected
(``EP_TESTBED_FAULT: injecting hang for <id>``, in a worker log under the run's ``TMPDIR``).
``GUARD_S`` bounds every wait only so that a real hang fails the test instead of blocking the
suite; on a loaded machine a run may take long, and the guard is far above that.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from ep_testbed.harness.run.pool import POOL_PREFIX

#: Seconds after which a condition that never came is a failure (a hang), not a slow machine.
GUARD_S = 600.0


def wait_until(condition: Callable[[], bool], what: str, proc: subprocess.Popen | None = None) -> None:
    """Return once ``condition()`` holds; fail naming ``what`` if ``proc`` ends first or the guard passes."""
    deadline = time.monotonic() + GUARD_S
    while not condition():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {what}:\n{err[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {GUARD_S:g} s")
        time.sleep(0.05)


def lines_of(results: Path, kind: str) -> list[str]:
    """The complete lines of ``results`` of record type ``kind`` ("run", "case", "end")."""
    if not results.exists():
        return []
    text = results.read_text()
    complete = text[: text.rfind("\n") + 1]  # a line being written is not there yet
    return [line for line in complete.splitlines() if f'"type": "{kind}"' in line]


def has_lines(results: Path, kind: str, count: int = 1) -> Callable[[], bool]:
    """A condition: ``results`` holds at least ``count`` complete lines of type ``kind``."""
    return lambda: len(lines_of(results, kind)) >= count


def fault_injected(temp: Path, action: str, case_id: str) -> Callable[[], bool]:
    """A condition: a worker (whose ``TMPDIR`` is ``temp``) has started injecting ``action`` into
    ``case_id``: for ``hang``, the case is running and will not finish."""
    note = f"injecting {action} for {case_id}"
    return lambda: any(note in log.read_text(errors="replace") for log in temp.glob(f"{POOL_PREFIX}*/worker-*.log"))


def stop(proc: subprocess.Popen, results: Path, signum: int = signal.SIGINT) -> tuple[str, str]:
    """Send ``signum`` to the run, wait for the end line it writes on the way out, then for it to
    exit; its ``(stdout, stderr)``."""
    proc.send_signal(signum)
    wait_until(has_lines(results, "end"), f"the end line after signal {signum}", proc)
    return proc.communicate(timeout=GUARD_S)
