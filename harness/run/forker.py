"""POSIX: workers forked from a process that has already imported what each of them imports first.

A worker started as ``python -m ep_testbed.harness.run.worker`` spends most of its start in
Python's own start and in importing NumPy and ONNX (measured on a 2-core machine: 0.3 s of CPU of
the 0.37 s it takes to say ready on the CPU EP), and a run starts one a job, one more for each
crash or hang, and one for the re-check. ``spawn`` asks a forker instead: a process started once
(per interpreter and ``PYTHONPATH``, for the life of the process that asked) that has imported
them and forks a worker on request. The child makes itself a session of its own, takes the pipes
and the log it was sent as its stdin, stdout and stderr, takes the pool's environment and working
folder, and runs ``worker.main``: from there it is the worker a subprocess would have been.

What the forker imports starts no EP and no thread of ONNX Runtime's (importing ``onnxruntime``
starts one, and a fork copies only the thread that forks), so ONNX Runtime and every EP start in
the child, as in a fresh process. The forker reaps its children and sends their exit statuses
back (``ForkedWorker.wait``, as ``subprocess.Popen.wait`` gives them: a negative number for a
signal). It exits when the process that started it closes its end of the socket, or dies; its
workers then get SIGKILL (``worker._die_with_parent``). A worker that ends because its forker
did (anything killed the forker: an OOM killer, a stray ``kill``) was lost to the testbed, not to
its case: ``ForkedWorker.lost_with_forker`` says so, and the pool runs its cases again; the next
``spawn`` starts a new forker. A forked copy of the process that started
it (multiprocessing's default start on Linux) starts a forker of its own rather than talk over
its parent's socket. Anything that fails on the way returns
None from ``spawn``, and the pool starts that worker as a subprocess.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

from .worker import read_frame, write_frame

#: What the forker imports before it forks: the imports every worker starts with that start no
#: thread of their own that a fork would lose (not ``onnxruntime``: see the module docstring),
#: down to the case pipeline a worker runs (``case_run``: the mapper, the reference, the judging),
#: which would otherwise cost each worker a quarter of a second of CPU before its first case.
PRELOAD = ("numpy", "onnx", "ep_testbed.harness.run.worker", "ep_testbed.harness.run.case_run")
#: Seconds ``spawn`` waits for the forker to say which process it started.
SPAWN_TIMEOUT = 60.0

#: The byte that carries a request's fds; the request itself follows as a frame (``worker.write_frame``).
_FDS = b"F"


def spawn(env: dict[str, str], log_fd: int) -> "ForkedWorker | None":
    """A worker process forked with ``env`` (its ``PYTHONPATH`` chooses the forker), this
    process's working folder, a fresh stdin and stdout pipe and ``log_fd`` as its stderr; None on
    Windows or when no forker can start it (the caller starts a subprocess instead)."""
    if os.name != "posix":
        return None
    try:
        return _forker(env).spawn(env, log_fd)
    except (OSError, RuntimeError, ValueError):
        return None


def start_early(env: dict[str, str]) -> None:
    """Start the forker ``spawn`` will use for ``env`` now, without waiting for it (nothing on
    Windows, when one is up, or when none can start): a command that will start workers calls
    this as it starts, so the forker's imports run beside the command's own instead of before its
    first worker."""
    if os.name != "posix":
        return
    try:
        _forker(env)
    except (OSError, RuntimeError, ValueError):
        pass


_FORKERS: dict[tuple[str, str | None], "Forker"] = {}
_LOCK = threading.Lock()


def _forker(env: dict[str, str]) -> "Forker":
    """The live forker for this interpreter and ``env``'s ``PYTHONPATH`` (started if none is)."""
    key = (sys.executable, env.get("PYTHONPATH"))
    with _LOCK:
        forker = _FORKERS.get(key)
        if forker is None or forker.gone or forker.owner != os.getpid():  # a forked copy of this process
            forker = _FORKERS[key] = Forker(env)  # must not talk over its parent's socket
        return forker


class ForkedWorker:
    """A forked worker, with what the pool uses of ``subprocess.Popen``: ``pid``, ``stdin``,
    ``stdout``, ``returncode``, ``poll``, ``wait`` and ``kill``."""

    def __init__(self, forker: "Forker", pid: int, stdin: Any, stdout: Any):
        self.forker, self.pid, self.stdin, self.stdout = forker, pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status once the forker has reported it, else None."""
        if self.returncode is None:
            self.returncode = self.forker.status(self.pid, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, waiting up to ``timeout`` seconds (``subprocess.TimeoutExpired``)."""
        if self.returncode is None:
            self.returncode = self.forker.status(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
        return self.returncode

    def lost_with_forker(self) -> str | None:
        """How the forker ended, when this worker ended with it (``worker._die_with_parent``:
        killed by the testbed's own machinery, whatever case it ran), else None. Call it once
        the worker's exit status is known (``wait``)."""
        return self.forker.lost(self.pid)

    def kill(self) -> None:
        """SIGKILL to the worker (nothing if it is gone)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


class Forker:
    """The client end of one forker process: ``spawn`` a worker, read exit statuses."""

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ep_testbed.harness.run.forker", str(theirs.fileno())], env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self._sock = ours
        self._requests = ours.makefile("wb")
        self.owner = os.getpid()
        self._lock = threading.Lock()  # one spawn at a time: its answer is the next "started"
        self._started: list[int] = []
        self._statuses: dict[int, int] = {}
        self._changed = threading.Condition()
        self.gone = False
        threading.Thread(target=self._read, name="forker", daemon=True).start()

    def spawn(self, env: dict[str, str], log_fd: int) -> ForkedWorker:
        """Fork a worker (``spawn``); RuntimeError when the forker does not answer."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        try:
            with self._lock:
                socket.send_fds(self._sock, [_FDS], [stdin_r, stdout_w, log_fd])
                write_frame(self._requests, {"env": env, "cwd": os.getcwd()})
                pid = self._next_started()
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        return ForkedWorker(self, pid, os.fdopen(stdin_w, "wb", buffering=0), os.fdopen(stdout_r, "rb", buffering=0))

    def _next_started(self) -> int:
        """The pid of the next child the forker says it started (RuntimeError if none comes)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._started or self.gone, SPAWN_TIMEOUT) or not self._started:
                raise RuntimeError("the worker forker did not start a worker")
            return self._started.pop(0)

    def status(self, pid: int, timeout: float | None) -> int | None:
        """The exit status of child ``pid``, waiting up to ``timeout`` seconds for it; a child of
        a forker that is gone was killed with it (``worker._die_with_parent``): -SIGKILL."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._statuses or self.gone, timeout)
            if pid in self._statuses:
                return self._statuses[pid]
            return -signal.SIGKILL if self.gone else None

    def lost(self, pid: int) -> str | None:
        """How this forker ended (``"died of SIGKILL (signal 9)"``) when it is gone without
        having reported child ``pid``'s exit: the child was killed with it. None otherwise."""
        with self._changed:
            if not self.gone or pid in self._statuses:
                return None
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - its socket closed, the process lingers
            return "closed its socket"
        if code is not None and code < 0:
            try:
                return f"died of {signal.Signals(-code).name} (signal {-code})"
            except ValueError:
                return f"died of signal {-code}"
        return f"exited with status {code}"

    def _read(self) -> None:
        """The thread: file the forker's messages until its socket closes."""
        stream = self._sock.makefile("rb")
        try:
            while (message := read_frame(stream)) is not None:
                with self._changed:
                    if message[0] == "started":
                        self._started.append(int(message[1]))
                    elif message[0] == "exit":
                        self._statuses[int(message[1])] = int(message[2])
                    self._changed.notify_all()
        except (OSError, ValueError):
            pass
        with self._changed:
            self.gone = True
            self._changed.notify_all()
        self._proc.wait()


# -- the forker process -------------------------------------------------------------------


def serve(sock: socket.socket) -> None:
    """The forker: preload, then fork one worker per request and report every child's exit,
    until the socket closes."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # the child imports what it needs itself, and reports what fails
            pass
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w)
    requests, answers = sock.makefile("rb", buffering=0), sock.makefile("wb")
    while True:
        watched: list[Any] = [sock, wake_r]
        readable, _, _ = select.select(watched, [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap(answers)
        if sock in readable:
            request = _receive(sock, requests)
            if request is None:
                return
            env, cwd, fds = request
            pid = os.fork()
            if pid == 0:
                _child(env, cwd, fds, (sock.fileno(), wake_r, wake_w))
            for fd in fds:
                os.close(fd)
            write_frame(answers, ("started", pid))


def _receive(sock: socket.socket, requests: Any) -> tuple[dict[str, str], str, list[int]] | None:
    """The next request: (env, cwd, [stdin, stdout, stderr fds]); None when the socket closed.
    ``requests`` reads the socket unbuffered, so no read runs ahead into the next request's fds."""
    marker, fds, _, _ = socket.recv_fds(sock, len(_FDS), 3)
    request = read_frame(requests) if marker == _FDS else None
    if request is None:
        for fd in fds:
            os.close(fd)
        return None
    return request["env"], request["cwd"], list(fds)


def _reap(answers: Any) -> None:
    """Report each child that has exited."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        write_frame(answers, ("exit", pid, os.waitstatus_to_exitcode(status)))


def _child(env: dict[str, str], cwd: str, fds: list[int], forker_fds: tuple[int, ...]) -> None:
    """In the forked child: become the worker ``python -m ep_testbed.harness.run.worker`` would
    be, with the sent pipes and log as fds 0, 1 and 2; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in forker_fds:
            os.close(fd)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, _max_fd())
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        from . import worker

        sys.argv = [worker.__file__]
        code = worker.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()  # what a worker's own exit runs (its scratch folder goes)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 1024


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
