"""The attack suite's command runner: a long-lived process that runs one ``ep-testbed`` command
per request in a forked child, fenced in.

Started by ``sandbox.Sandbox`` as ``python sandbox_server.py`` with JSON requests on stdin and
JSON answers on stdout, one per line. It imports everything a command needs once (numpy, onnx,
onnxruntime, the ep_testbed packages), so a forked child starts in milliseconds, and it never
creates an ONNX Runtime session itself (the child may). Per request the child:

- gets its own process group (so a hang is killed with everything it started), working
  folder, ``TMPDIR`` and an address-space limit (``RLIMIT_AS``: its size at the start plus the
  request's ``mem`` bytes), so an allocation nobody capped fails as ``MemoryError`` instead of
  eating the machine;
- records every file it opens (and for what) and every file-system change it makes, with an
  audit hook (``sys.addaudithook``; Python-level only: ONNX Runtime is only ever handed bytes);
- runs ``ep_testbed.harness.cli.main(argv)`` (or, for ``run`` on the test catalog, the handler
  with the local catalog and mapper seams), with stdout and stderr going to files;
- writes ``{"code", "traceback", "events"}`` to a result file and exits at once.

The child hangs when its process group has used ``limit_s`` seconds of CPU (a loop that never
ends), or when ``BLOCKED_FACTOR`` times that has passed on the clock (blocked for good, using
none): the server then kills the group and answers ``"hang": true``. Counting CPU rather than
the clock keeps a slow machine from calling a command that still works a hang: at load 8 on two
cores a command gets a quarter of a core, and its 20 s of work take 80 s.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback

# Everything a command imports, loaded once before any fork.
import numpy  # noqa: F401
import onnx  # noqa: F401
import onnxruntime  # noqa: F401

from ep_testbed.graphs import catalog  # noqa: F401
from ep_testbed.harness.cli import main, parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.installed import ort_flavour
from ep_testbed.reports import rendering

rendering.environment()  # the Jinja environment and its templates, parsed once


def _warm_up() -> None:
    """Fill the per-process caches once (ONNX Runtime's IR/opset probe, the parser, the
    registry's type hints), then freeze every object so that forked children do not copy the
    heap page by page when their garbage collector walks it (``gc.freeze``)."""
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "roi_align1.json")
    with contextlib.redirect_stdout(io.StringIO()):
        main(["map", example])
        main(["reference", "--desc", example])
    ort_flavour()  # what is installed, read once (every run header names it)
    catalog.build_catalog()  # the pairwise grids, drawn once (every run's preflight builds a catalog)
    gc.collect()
    gc.freeze()

LOCAL = {"catalog": "local_cases:build_catalog", "mapper": "local_cases:to_onnx"}
_WRITE_EVENTS = {"os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "shutil.copyfile", "shutil.copytree",
                 "shutil.rmtree", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.utime", "shutil.move"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _vm_size() -> int:
    """This process's address-space size in bytes (Linux ``/proc/self/status``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _opened_for_writing(mode, flags) -> bool:
    """Whether an ``open`` audit event writes: a mode with w/a/x/+, or flags asking for it."""
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


#: Where an event's directory file descriptor is, for events that take one (a relative path
#: is relative to that folder, as shutil.rmtree uses them).
_DIR_FD_AT = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 2, "os.rename": 2, "os.replace": 2}


def _absolute(path, dir_fd) -> str:
    """``path`` made absolute: against ``dir_fd``'s folder when one is given, else the cwd."""
    path = os.fsdecode(path)
    if not os.path.isabs(path) and isinstance(dir_fd, int) and dir_fd >= 0:
        try:
            return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        except OSError:
            pass
    return os.path.abspath(path)


def _audit(events: list, active: list) -> callable:
    """The hook recording ``["read"|"write", path]`` for file opens and changes while
    ``active[0]`` is true (the command runs; the child's own bookkeeping is not recorded)."""
    def hook(event: str, args: tuple) -> None:
        if not active[0]:
            return
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            kind = "write" if _opened_for_writing(args[1] if len(args) > 1 else None,
                                                  args[2] if len(args) > 2 else None) else "read"
            events.append([kind, _absolute(args[0], None)])
        elif event in _WRITE_EVENTS:
            at = _DIR_FD_AT.get(event)
            dir_fd = args[at] if at is not None and len(args) > at else None
            for arg in args[:2]:
                if isinstance(arg, (str, bytes, os.PathLike)):
                    events.append(["write", _absolute(arg, dir_fd)])
    return hook


def _child(request: dict, result_path: str) -> None:
    """Run one command (module docstring) and ``os._exit``; never returns."""
    os.setpgid(0, 0)
    for key, value in request.get("env", {}).items():
        os.environ[key] = value
    tempfile.tempdir = None  # re-read TMPDIR
    os.chdir(request["cwd"])
    mem = request.get("mem")
    if mem:
        limit = _vm_size() + int(mem)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    events: list = []
    active = [True]
    code, tb = None, None
    sys.addaudithook(_audit(events, active))
    try:
        if request.get("api") == "run-local":
            code = run_command(parse_args(["run", *request["argv"]]), **{**LOCAL, **request.get("seams", {})},
                               worker_paths=tuple(request.get("worker_paths", ())))
        else:
            code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException:
        tb = traceback.format_exc()
    active[0] = False
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    with open(result_path, "w") as f:
        json.dump({"code": code, "traceback": tb, "events": events}, f)
    os._exit(0)


#: Clock seconds a child may take per second of its CPU limit before it counts as blocked.
BLOCKED_FACTOR = 10
#: Seconds between two reads of the child's CPU time.
CPU_POLL_S = 0.25


def group_cpu_seconds(pgid: int) -> float | None:
    """CPU seconds the live processes of group ``pgid`` have used, with the children they have
    reaped; None where ``/proc`` cannot tell (the clock alone then limits the child)."""
    try:
        entries = os.listdir("/proc")
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    ticks = 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone between the listing and the read
        if len(fields) > 14 and int(fields[2]) == pgid:  # pgrp; utime, stime, cutime, cstime
            ticks += sum(int(x) for x in fields[11:15])
    return ticks / tick


def serve_one(request: dict) -> dict:
    """Fork a child for ``request`` and wait for it until it hangs (module docstring); the answer."""
    result_path = request["stdout"] + ".result.json"
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            _child(request, result_path)
        finally:
            os._exit(70)
    limit = float(request.get("limit_s", 30))
    deadline, next_poll = started + limit * BLOCKED_FACTOR, started + CPU_POLL_S
    status = None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        now = time.monotonic()
        spent = None
        if not done and now >= next_poll:
            spent, next_poll = group_cpu_seconds(pid), now + CPU_POLL_S
            if spent is None:  # no CPU count here: the clock is the limit
                deadline = started + limit
        if done:
            status = raw
        elif now > deadline or (spent is not None and spent > limit):
            for target in (-pid, pid):
                try:
                    os.kill(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            os.waitpid(pid, 0)
            return {"hang": True, "seconds": time.monotonic() - started, "cpu_seconds": spent}
        else:
            time.sleep(0.002)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything the command left running
    except (ProcessLookupError, PermissionError):
        pass
    answer = {"hang": False, "seconds": time.monotonic() - started, "status": status}
    try:
        with open(result_path) as f:
            answer.update(json.load(f))
    except (OSError, ValueError):
        answer["died"] = True  # killed by a signal or os._exit before writing its result
    return answer


def main_loop() -> None:
    """Answer requests until stdin closes."""
    _warm_up()
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        print(json.dumps(serve_one(json.loads(line))), flush=True)


if __name__ == "__main__":
    main_loop()
