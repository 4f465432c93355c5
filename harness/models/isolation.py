"""Child-process isolation of model runs: owns the ``model run`` command line a child repeats,
running it under a time limit, and the fault-injection test hook.

``model demo`` runs each model in a child process (``ep-testbed model run`` with the same
options) with a time limit, so an EP that crashes or hangs on one model costs that model only,
and every model already finished keeps its folder; ``model run`` does the same for its model
(with no time limit unless ``--timeout S``; ``--in-process`` opts out), so that an EP crashing
the process is reported by ep-testbed rather than only by the shell. A child that exits with one
of ``core.exit_codes`` (0, 1, 2, an internal error, an interrupt) has said what happened itself,
and its code is passed on; any other end is a ``crash``, and one past its time limit a
``timeout`` (killed), both exit code 1.

Test hook (fault injection), read only from the environment, like the harness worker's:
``EP_TESTBED_MODEL_FAULT="abort=<glob>;hang=<glob>"`` makes ``model run`` abort or hang right
before running a model whose file name matches ``<glob>``.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple, Sequence

from ..core import exit_codes
from ..core.rerun import action_argv
from ..core.terminal import safe, safe_message
from ..run.pool import describe_exit

FAULT_ENV = "EP_TESTBED_MODEL_FAULT"
#: A child's exit code -> the outcome the demo summary prints for it.
OUTCOMES = {exit_codes.OK: "pass", exit_codes.FAILED: "fail", exit_codes.USAGE: "refused", exit_codes.INTERNAL: "internal error",
            exit_codes.INTERRUPTED: "interrupted", exit_codes.TERMINATED: "interrupted"}


#: ``model run`` options a parent sets for its child itself (the model, its folder, inputs and
#: baseline, the child's own isolation) instead of repeating its own value.
CHILD_SETS = ("model", "out", "shape", "inputs", "save_baseline", "baseline", "timeout", "in_process", "ep_crashed")


def child_argv(model: str, args: argparse.Namespace, *, shapes: Sequence[str] = (), inputs_path: str | None = None,
               save_baseline: str | None = None, baseline_dir: str | None = None,
               out: str | None = None) -> list[str]:
    """The ``ep-testbed model run`` command line that repeats ``args`` for ``model`` in a child
    (which runs it in its own process: ``--in-process``): every option of the ``model run``
    parser (``args.child_parser``, set by the command's parser) that ``args`` holds, written back
    by the parser's own actions (``core.rerun.action_argv``), then what the parent sets itself."""
    argv = ["model", "run", model, "--in-process"]
    for action in args.child_parser._actions:
        if action.option_strings and action.dest not in CHILD_SETS and hasattr(args, action.dest):
            argv += action_argv(action, getattr(args, action.dest))
    for item in shapes:
        argv += ["--shape", item]
    for flag, value in (("--out", out or args.out), ("--inputs", inputs_path), ("--save-baseline", save_baseline),
                        ("--baseline", baseline_dir)):
        if value:
            argv += [flag, str(value)]
    return argv


def run_isolated(argv: list[str], timeout: float | None, label: str) -> int:
    """Run ``ep-testbed <argv>`` in a child process; relay its output; a crash or timeout is exit 1."""
    return isolated(argv, timeout, label)[0]


def isolated(argv: list[str], timeout: float | None, label: str) -> tuple[int, str]:
    """``run_isolated``, returning ``(exit code, outcome)``: outcome is pass, fail, refused,
    crash or timeout (``label`` names the model in the messages)."""
    end = child_run(argv, timeout, label)
    return end.code, end.outcome


class ChildEnd(NamedTuple):
    """How a child process ended: its exit code for ours, the outcome, and for a crash what happened."""

    code: int
    outcome: str
    detail: str = ""


def child_run(argv: list[str], timeout: float | None, label: str, env: dict[str, str] | None = None) -> ChildEnd:
    """Run ``ep-testbed <argv>`` in a child process (no time limit when ``timeout`` is None; its
    environment ``env``, default this one's), relay what it printed, and report a crash or a
    timeout on stderr, naming ``label``."""
    command = [sys.executable, "-m", "ep_testbed.harness.cli", *argv]
    try:
        child = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        relay(exc.stdout, exc.stderr)
        print(f"ep-testbed model: {safe(label)}: timeout - no result after {timeout:g} s; the child process was killed",
              file=sys.stderr)
        return ChildEnd(exit_codes.FAILED, "timeout")
    relay(child.stdout, child.stderr)
    if child.returncode in OUTCOMES:
        return ChildEnd(child.returncode, OUTCOMES[child.returncode])
    tail = (child.stderr or "").strip()[-2000:]
    detail = f"the process running it {describe_exit(child.returncode)}"
    print(f"ep-testbed model: {safe(label)}: crash - {detail}" + (f"; it printed: {safe_message(tail)}" if tail else ""),
          file=sys.stderr)
    return ChildEnd(exit_codes.FAILED, "crash", detail + (f"; its last words: {tail[-600:]}" if tail else ""))


def relay(out: str | bytes | None, err: str | bytes | None) -> None:
    """Write what a child printed to this process's stdout and stderr."""
    for text, stream in ((out, sys.stdout), (err, sys.stderr)):
        if text:
            stream.write(text if isinstance(text, str) else text.decode("utf-8", "replace"))
            stream.flush()


def fault_hook(model: str) -> None:
    """Fault injection for the isolation tests (module docstring); does nothing unless the variable is set."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    name = Path(model).name
    for item in spec.split(";"):
        action, _, pattern = item.partition("=")
        if pattern and fnmatch.fnmatch(name, pattern):
            if action == "abort":
                os.abort()
            if action == "hang":
                while True:
                    time.sleep(60)


__all__ = ["CHILD_SETS", "ChildEnd", "FAULT_ENV", "child_argv", "child_run", "fault_hook",
           "isolated", "relay", "run_isolated"]
