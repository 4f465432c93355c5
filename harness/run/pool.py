"""Worker processes that survive the EP: a crash or a hang costs one case, never the run.

``WorkerPool(config, jobs, timeout, batch=K).run(cases, policy_for)`` yields one result line per
case as cases finish (completion order). Each worker is a ``python -m ep_testbed.harness.run.worker``
process (on POSIX forked from a process that has already imported NumPy and ONNX,
``harness.run.forker``; a subprocess where no forker can start it) in its own session / process
group (Ctrl-C reaches only the parent), fed batches of
up to ``batch`` pickled cases on stdin (run in shared sessions where they can be:
``harness.run.case_run``) and answering one line per case on its stdout pipe; everything it
prints goes to a log file. When a worker

- dies (segfault, abort, ``exit``): with one case unanswered, that case becomes ``crash`` with
  the exit status and the tail of what the worker printed for it; with several, they are split
  in two halves that run again (first, each half in a worker of its own), halving down to
  single cases, so a crash costs exactly the case that causes it;
- is lost to the testbed's own machinery (its worker forker died, taking it along:
  ``forker.ForkedWorker.lost_with_forker``): its unanswered cases run again in a fresh worker,
  unjudged; a case lost so ``MAX_LOST_RUNS`` times stops the run (``WorkerLostError``, a
  ``WorkerStartError``: exit 2 saying so);
- answers nothing for ``timeout`` seconds (since its batch was sent, or since its last
  answer): it (its process group on POSIX, its Job object on Windows: with whatever it started)
  is killed; one unanswered case becomes ``timeout`` (with the same output tail), several are
  halved as above;

and a fresh worker takes the next batch. A batch the worker cannot read is halved too, and a
single unreadable case is an ``error``. When a worker says its device is lost
(``harness.eps.device_loss``: a TDR, a driver reset; the worker names the cases of the session
that was running), it is killed and a fresh worker (a fresh device) takes over: one such case is
``crash`` with ``reason`` ``device-lost`` and the EP's text as ``detail``; a pack of several is
halved and run again in fresh workers (never retried on the lost device); the worker's other
unanswered cases are sent again. After ``MAX_DEVICE_LOSSES`` losses with no case run on the
device in between, ``run`` raises ``DeviceLostError`` (after yielding the last loss's line, if
any): the device is not coming back by itself, and every case left would fail the same way.
A case is yielded once: an answer for a case the worker was not waiting on is dropped. Closing the generator (or an exception such as
``KeyboardInterrupt`` in the consumer) kills every worker; the cases not yet answered have
no line, so ``--resume`` runs them. Workers never outlive this process:
on Linux the worker asks for SIGKILL when its parent dies (``harness.run.worker``), on Windows each
worker is put in a kill-on-close Job object (``harness.run.winjob``) whose only handle this process
holds.

The pool's folder in the temp folder (``ep-testbed-workers-<pid>-*``: worker logs, and each
worker's profiling scratch folder, ``session.SCRATCH_ENV``) goes with the pool; a dead
worker's scratch folder goes at once, and the folder of a pool whose process was killed
outright goes when the next pool starts (``session.sweep_stale``).
"""

from __future__ import annotations

import errno
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, cast

from ..core.results import CaseLine
from ..eps.adapters import early_providers
from ..eps.device_loss import REASON as DEVICE_LOST_REASON
from ..eps.session import SCRATCH_ENV, SCRATCH_PREFIX, sweep_stale
from . import forker
from .case_run import ArtifactPolicy, CaseConfig, new_line, warm_up_model
from .winjob import new_job
from .worker import read_frame, write_frame

#: Seconds a new worker may take to import ONNX Runtime and say it is ready.
STARTUP_TIMEOUT = 120.0
#: Characters of a dead worker's output kept in the result message.
OUTPUT_TAIL = 4000
#: Consecutive workers that die before becoming ready before the run gives up.
MAX_STARTUP_FAILURES = 3
#: The name of a pool's folder in the temp folder, before the owner's pid.
POOL_PREFIX = "ep-testbed-workers-"
#: Times the testbed's own machinery may lose the worker running one case (the case runs again
#: each time: a lost worker is never the case's verdict) before the run stops (``WorkerLostError``).
MAX_LOST_RUNS = 3
#: Device losses in a row (no case run on the device in between) before a run stops
#: (``DeviceLostError``): one TDR is one case; three in a row is a device that stays lost.
MAX_DEVICE_LOSSES = 3


class WorkerStartError(RuntimeError):
    """Workers cannot start at all (e.g. the harness cannot be imported in a subprocess)."""


class WorkerLostError(WorkerStartError):
    """The testbed itself lost the worker running the same case ``MAX_LOST_RUNS`` times (its
    worker forker died each time): the run cannot finish that case and says so (exit 2)."""


class DeviceLostError(RuntimeError):
    """The device was lost ``MAX_DEVICE_LOSSES`` times in a row (the message says so; the front
    end adds what to do next); ``last`` is what the EP said the last time."""

    def __init__(self, losses: int, last: str):
        """``losses``: how many in a row; ``last``: the EP's text of the last one."""
        self.losses, self.last = losses, last
        super().__init__(f"the device is lost: {losses} cases in a row (last: {last}); finished cases are kept in "
                         "results.jsonl")


@dataclass
class _Worker:
    number: int
    proc: Any  # a subprocess.Popen, or a forker.ForkedWorker (the same calls)
    results: Any
    log_path: str
    started: float
    ready: bool = False
    batch: list[Any] = field(default_factory=list)  # cases sent and not yet answered
    deadline: float = 0.0
    log_offset: int = 0
    dispatched: float = 0.0
    dead: bool = False
    reader: threading.Thread | None = field(default=None, repr=False)
    job: Any = None  # Windows: the worker's Job object (harness.run.winjob)


class WorkerPool:
    """Up to ``jobs`` worker processes running cases under ``config``."""

    def __init__(self, config: CaseConfig, jobs: int, timeout: float, env: dict[str, str] | None = None,
                 extra_paths: Iterable[str] = (), batch: int = 1):
        """``jobs`` workers at most, ``timeout`` seconds without an answer before a worker is
        killed, up to ``batch`` cases sent to a worker at once; ``env`` and ``extra_paths`` (added
        to PYTHONPATH) for the workers."""
        self.config = config
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.batch = max(1, batch)
        self._env = self._child_env(env, extra_paths)
        self._events: queue.Queue = queue.Queue()
        self._workers: list[_Worker] = []
        self._count = 0
        self.device_losses = 0  # losses in a row (``MAX_DEVICE_LOSSES``)
        self._lost_runs: dict[str, int] = {}  # case id -> workers the testbed lost while running it
        self._start_error: WorkerStartError | None = None  # why the last worker could not start
        self._first_ready: float | None = None  # when the first worker said ready (``time.monotonic``)
        sweep_stale(tempfile.gettempdir(), POOL_PREFIX)
        self._logs = _Scratch(f"{POOL_PREFIX}{os.getpid()}-")
        self._env[SCRATCH_ENV] = self._logs.name

    @staticmethod
    def _child_env(env: dict[str, str] | None, extra_paths: Iterable[str]) -> dict[str, str]:
        child = dict(os.environ if env is None else env)
        paths = list(extra_paths)
        if child.get("PYTHONPATH"):
            paths.append(child["PYTHONPATH"])
        if paths:
            child["PYTHONPATH"] = os.pathsep.join(paths)
        return child

    # -- worker lifecycle ---------------------------------------------------------------

    def _start(self) -> _Worker:
        """Start one worker (own process group/session, its own Job object on Windows), send it
        the config and start the thread that reads its answers."""
        self._count += 1
        log_path = os.path.join(self._logs.name, f"worker-{self._count}.log")
        isolation: dict[str, Any]
        if sys.platform == "win32":  # Ctrl-C is delivered to the whole console group: keep workers out of it
            isolation = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
        else:
            isolation = {"start_new_session": True}
        try:
            with open(log_path, "wb") as log:
                proc: Any = forker.spawn(self._env, log.fileno())  # POSIX: forked, imports done (harness.run.forker)
                if proc is None:
                    proc = subprocess.Popen([sys.executable, "-m", "ep_testbed.harness.run.worker"],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=self._env,
                                            close_fds=True, bufsize=0, **isolation)
        except OSError as exc:  # no process can be made: a process limit, no memory for one
            raise WorkerStartError(_cannot_start("a worker process", exc)) from None
        worker = _Worker(self._count, proc, proc.stdout, log_path, time.monotonic(), job=self._job_for(proc))
        worker.reader = threading.Thread(target=self._read, args=(worker,), daemon=True)
        try:
            worker.reader.start()
        except RuntimeError as exc:  # "can't start new thread": a limit on threads (a cgroup's pids.max)
            self._workers.append(worker)
            self._kill(worker)
            self._retire(worker)
            raise WorkerStartError(_cannot_start("a thread to read a worker's answers", exc)) from None
        try:
            write_frame(proc.stdin, ("early-start", early_providers(self.config.ep), warm_up_model()[0]))
            write_frame(proc.stdin, self.config)
            write_frame(proc.stdin, ("warm-up", *warm_up_model()))
        except (BrokenPipeError, OSError):
            pass  # it died at once; the reader reports the EOF
        self._workers.append(worker)
        return worker

    @staticmethod
    def _job_for(proc: subprocess.Popen) -> Any:
        """A Job object holding ``proc`` (Windows), or None (elsewhere, or when Windows refuses)."""
        job = new_job()
        if job is not None and not job.assign(proc.pid):
            job.close()
            return None
        return job

    def _read(self, worker: _Worker) -> None:
        """The worker's reader thread: file each of its frames as an event until its pipe ends.

        The thread alone closes the pipe, after its last read. Were the pool to close it while
        the thread sat between two reads, the fd number would be free for the next worker's
        pipe, and this thread's next read would take that worker's frames (its "ready" among
        them) for a worker already gone."""
        try:
            while True:
                message = read_frame(worker.results)
                if message is None:
                    break
                self._events.put((worker, message))
        except Exception as exc:  # a garbled frame: treat as death
            self._events.put((worker, ("garbled", str(exc))))
        finally:
            _close_quietly(worker.results)
        self._events.put((worker, None))

    def _kill(self, worker: _Worker) -> None:
        """Kill a worker with whatever it started (its Job object on Windows, its session on
        POSIX), wait for it and close its pipes."""
        worker.dead = True
        if worker.proc.poll() is None:
            try:
                if worker.job is not None:  # the worker and anything it started
                    worker.job.terminate()
                if os.name == "nt":
                    worker.proc.kill()
                else:  # the whole session: also anything the EP spawned
                    os.killpg(worker.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                worker.proc.kill()
        try:
            worker.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable process
            pass
        self._close_pipes(worker)

    def _close_pipes(self, worker: _Worker) -> None:
        """Close a finished worker's pipes (the answers' pipe only when no thread reads it) and
        remove its profiling scratch folder."""
        _close_quietly(worker.proc.stdin)
        if worker.reader is None or not worker.reader.is_alive():  # else its reader closes it (``_read``)
            _close_quietly(worker.results)
        # a worker that did not exit by itself could not remove its scratch folder
        shutil.rmtree(os.path.join(self._logs.name, f"{SCRATCH_PREFIX}{worker.proc.pid}"), ignore_errors=True)

    def _retire(self, worker: _Worker) -> None:
        """Forget a worker that is gone and close its Job object."""
        if worker in self._workers:
            self._workers.remove(worker)
        if worker.job is not None:  # closing the last handle ends whatever is left in the job
            worker.job.close()
            worker.job = None

    def close(self) -> None:
        """Stop every worker. The pool can be used again (new workers start on demand).

        Idle workers are asked to leave (their stdin closes, so they exit and clean up after
        themselves), all at once: an EP's teardown (a device, a DirectML host) takes each the same
        time, so they wait for it together; one that has not left within a couple of seconds of
        the first ask is killed."""
        leaving = [w for w in self._workers if w.proc.poll() is None and not w.dead]
        for worker in leaving:
            try:
                worker.proc.stdin.close()
            except Exception:  # already gone: killed below
                pass
        deadline = time.monotonic() + 2
        for worker in list(self._workers):
            if worker in leaving:
                try:
                    worker.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except Exception:  # busy, hung or already gone: killed below
                    pass
            self._kill(worker)
            self._retire(worker)

    def __del__(self) -> None:
        try:
            self.close()
            self._logs.cleanup()
        except Exception:
            pass

    # -- the run --------------------------------------------------------------------------

    def start(self, count: int | None = None) -> None:
        """Start up to ``count`` (default ``jobs``) workers now, without waiting for them: they
        start their EP (the warm-up session) while the caller prepares the run; ``run`` uses them."""
        live = sum(1 for w in self._workers if not w.dead)
        for _ in range(max(0, min(self.jobs, self.jobs if count is None else count) - live)):
            self._replace()

    def _replace(self) -> None:
        """Start a worker; when none can start (``WorkerStartError``), remember why: the run goes on
        with the workers it has and raises it once it has none (``run``)."""
        try:
            self._start()
            self._start_error = None
        except WorkerStartError as exc:
            self._start_error = exc

    def first_ready_at(self) -> float | None:
        """When the first worker said ready (``time.monotonic``): before it, no case could run
        (every worker was still starting its EP). None while none has."""
        return self._first_ready

    def run_one(self, case: Any, policy: ArtifactPolicy = ArtifactPolicy()) -> CaseLine:
        """Run one case on a worker that stays alive for the next call (pytest uses this)."""
        lines = list(self.run([case], lambda c: policy, keep_workers=True))
        return lines[0]

    def run(self, cases: Iterable[Any], policy_for: Callable[[Any], ArtifactPolicy] = lambda case: ArtifactPolicy(),
            keep_workers: bool = False, hold: Callable[[], bool] | None = None) -> Iterator[CaseLine]:
        """Yield one result line per case (raw outcome) in completion order.

        ``hold`` is asked before cases not sent yet go to a worker: once it says True, they are
        left unrun (no line: the run ends with the answers of the cases sent), so a caller that
        stops on a budget can hand over all its cases at once, and no worker waits for the others
        between one handful of cases and the next. Workers are stopped at the end unless
        ``keep_workers`` (they are always stopped when the consumer stops early or raises, e.g. on
        Ctrl-C); ``close()`` stops kept workers."""
        queue_ = _Queue(deque(cases), hold)
        startup_failures = 0
        finished = False
        try:
            live = sum(1 for w in self._workers if not w.dead)
            for _ in range(max(0, min(self.jobs, len(queue_)) - live)):
                self._replace()
            while queue_ or any(w.batch for w in self._workers):
                if not any(not w.dead for w in self._workers):  # every worker gone, none could replace it
                    if self._start_error is not None:
                        raise self._start_error
                    self._start()
                self._dispatch(queue_, policy_for)
                try:
                    worker, message = self._events.get(timeout=self._wait_time())
                except queue.Empty:
                    yield from self._expire(queue_)
                    continue
                if worker.dead or worker not in self._workers:
                    continue  # a worker already killed and replaced
                if message is None or message[0] == "garbled":
                    line, startup_failures = self._on_death(worker, message, queue_, startup_failures)
                    if line is not None:
                        yield line
                    continue
                if message[0] == "ready":
                    worker.ready = True
                    if self._first_ready is None:
                        self._first_ready = time.monotonic()
                    startup_failures = 0
                elif message[0] == "result":  # the worker gets its next batch before its line is handled
                    lines = list(self._answer(worker, message, queue_))
                    self._dispatch(queue_, policy_for)
                    yield from lines
                else:
                    yield from self._answer(worker, message, queue_)
            finished = True
        finally:
            if not (finished and keep_workers):
                self.close()

    def _answer(self, worker: _Worker, message: Any, queue_: "_Queue") -> Iterator[CaseLine]:
        """A worker's ``result`` (one case's line) or ``broken`` (its batch unreadable) message."""
        kind = message[0]
        if kind == "device-lost":
            yield from self._device_lost(worker, message[1] if isinstance(message[1], dict) else {}, queue_)
            return
        if kind == "broken" and len(worker.batch) > 1:
            queue_.split(worker.batch)  # which case could not be read is found by halving
            worker.batch = []
            return
        if kind == "broken" and worker.batch:
            case = worker.batch.pop()
            line = new_line(case, self.config.ep)
            line.update({"outcome": "error", "message": f"the worker could not read the case: {message[1]}",
                         "duration_s": round(time.monotonic() - worker.dispatched, 6)})
            yield line
            return
        answer = message[1] if kind == "result" and isinstance(message[1], dict) else {}
        case = next((c for c in worker.batch if c.id == answer.get("id")), None)
        if case is None:
            return  # not a case this worker was waiting on: never yield a case twice
        worker.batch.remove(case)
        worker.deadline = time.monotonic() + self.timeout  # an answer is progress: the rest get a fresh limit
        if answer.get("placement"):  # a session ran on the device: it is back
            self.device_losses = 0
        line = new_line(case, self.config.ep)
        line.update(cast(CaseLine, answer))  # the worker's line (worker.emit): what it decided
        yield line

    def _device_lost(self, worker: _Worker, info: dict[str, Any], queue_: "_Queue") -> Iterator[CaseLine]:
        """A worker's ``device-lost`` message (module docstring): kill it, decide or requeue its
        cases, start a fresh worker; ``DeviceLostError`` at the ``MAX_DEVICE_LOSSES``-th in a row."""
        named = set(info.get("cases") or [])
        lost = [c for c in worker.batch if c.id in named] or list(worker.batch)
        rest = [c for c in worker.batch if c not in lost]
        detail = str(info.get("detail") or "(the EP said no more)")
        self._kill(worker)
        self._retire(worker)
        self.device_losses += 1
        if rest:
            queue_.again(rest)
        if len(lost) > 1:  # which case lost the device is found by halving, in fresh workers
            queue_.split(lost)
        if queue_:
            self._replace()
        if len(lost) == 1:
            yield device_lost_line(lost[0], self.config.ep, str(info.get("means") or "the device was lost"),
                                   str(info.get("source") or ""), detail, time.monotonic() - worker.dispatched)
        if self.device_losses >= MAX_DEVICE_LOSSES:
            raise DeviceLostError(self.device_losses, detail)

    def _run_again(self, worker: _Worker, how: str, queue_: "_Queue") -> None:
        """Queue the unanswered cases of a worker the testbed lost (``how`` its forker ended) to
        run again as they were; ``WorkerLostError`` when one of them was lost ``MAX_LOST_RUNS`` times."""
        for case in worker.batch:
            self._lost_runs[case.id] = self._lost_runs.get(case.id, 0) + 1
        worst = max(worker.batch, key=lambda c: self._lost_runs[c.id], default=None)
        if worst is not None and self._lost_runs[worst.id] >= MAX_LOST_RUNS:
            raise WorkerLostError(f"the worker running {worst.id} was lost {self._lost_runs[worst.id]} times, not "
                                  f"by the case: the process that starts workers (harness/run/forker.py) {how} each "
                                  "time; finished cases are kept in results.jsonl.\nNote: find what ends it (the "
                                  "kernel's OOM killer in dmesg, a process limit, a stray kill), then run the same "
                                  "command with --resume")
        if worker.batch:
            queue_.again(worker.batch)

    def _dispatch(self, queue_: "_Queue", policy_for: Callable[[Any], ArtifactPolicy]) -> None:
        """Send each idle, ready worker its next batch (``_Queue.take``)."""
        for worker in self._workers:
            if not queue_:
                return
            if worker.ready and not worker.batch and not worker.dead:
                batch = queue_.take(self.batch, self.jobs)
                if not batch:  # held: nothing more is sent
                    return
                worker.batch = list(batch)
                worker.dispatched = time.monotonic()
                worker.deadline = worker.dispatched + self.timeout
                worker.log_offset = _size(worker.log_path)
                try:
                    write_frame(worker.proc.stdin, [(case, policy_for(case)) for case in batch])
                except (BrokenPipeError, OSError):
                    pass  # it is dying; the reader's EOF turns the batch into a crash (or halves)

    def _wait_time(self) -> float:
        """Seconds until the nearest deadline (a batch's answer, a worker's start), at least 10 ms."""
        now = time.monotonic()
        deadlines = [w.deadline for w in self._workers if w.batch]
        deadlines += [w.started + STARTUP_TIMEOUT for w in self._workers if not w.ready]
        return max(0.01, min(deadlines) - now) if deadlines else 1.0

    def _expire(self, queue_: "_Queue") -> Iterator[CaseLine]:
        """Kill each worker past its deadline: one unanswered case is its ``timeout`` line, several
        are halved (module docstring); a worker that never got ready stops the run."""
        now = time.monotonic()
        for worker in list(self._workers):
            if worker.batch and now >= worker.deadline:
                batch = worker.batch
                self._kill(worker)
                self._retire(worker)
                if queue_ or len(batch) > 1:
                    self._replace()
                if len(batch) > 1:  # which case hangs is found by halving
                    queue_.split(batch)
                    continue
                line = new_line(batch[0], self.config.ep)
                line.update({"outcome": "timeout", "duration_s": round(now - worker.dispatched, 6),
                             "message": f"no result after {self.timeout:g} s; worker killed. Output:\n"
                                        + _tail(worker.log_path, worker.log_offset)})
                yield line
            elif not worker.ready and now >= worker.started + STARTUP_TIMEOUT:
                self._kill(worker)
                self._retire(worker)
                raise WorkerStartError(f"a worker did not start within {STARTUP_TIMEOUT:g} s:\n"
                                       + _tail(worker.log_path, 0))

    def _on_death(self, worker: _Worker, message: Any, queue_: "_Queue", startup_failures: int
                  ) -> tuple[CaseLine | None, int]:
        """A worker's pipe closed (or carried garbage): one unanswered case is its ``crash`` line,
        several are halved (module docstring); too many deaths before ready stop the run."""
        try:
            code = worker.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._kill(worker)
            code = worker.proc.returncode
        worker.dead = True
        self._close_pipes(worker)
        self._retire(worker)
        line = None
        lost = _lost_to_testbed(worker.proc)
        if lost is not None:  # not the case's doing: it runs again, unjudged
            self._run_again(worker, lost, queue_)
        elif not worker.ready:
            startup_failures += 1
            if startup_failures >= MAX_STARTUP_FAILURES:
                raise WorkerStartError(f"workers die before they are ready ({describe_exit(code)}):\n"
                                       + _tail(worker.log_path, 0))
        elif len(worker.batch) > 1:  # which case kills the worker is found by halving
            queue_.split(worker.batch)
        elif worker.batch:
            line = new_line(worker.batch[0], self.config.ep)
            garbled = f" (garbled result: {message[1]})" if message else ""
            line.update({"outcome": "crash", "duration_s": round(time.monotonic() - worker.dispatched, 6),
                         "message": f"worker {describe_exit(code)} while running the case{garbled}. Output:\n"
                                    + _tail(worker.log_path, worker.log_offset)})
        if queue_:
            self._replace()
        return line, startup_failures


class _Scratch:
    """A pool's folder in the temp folder, removed with the pool or, at the latest, as the
    process exits, quietly (``tempfile.TemporaryDirectory`` warns when it is left to the exit,
    and ``-W error`` would turn that warning into a traceback)."""

    def __init__(self, prefix: str):
        """A fresh folder named ``<prefix>*``."""
        self.name = tempfile.mkdtemp(prefix=prefix)
        self._remove = weakref.finalize(self, shutil.rmtree, self.name, ignore_errors=True)

    def cleanup(self) -> None:
        """Remove the folder (once)."""
        self._remove()


def _close_quietly(stream: Any) -> None:
    """Close ``stream``; one already closed, or failing to close, is left as it is."""
    try:
        stream.close()
    except Exception:
        pass


def _cannot_start(what: str, exc: BaseException) -> str:
    """The message of a worker that could not be started for want of a process, a thread, a
    file descriptor or memory, naming the limit that was reached."""
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    code = getattr(exc, "errno", None)
    if code in (errno.EMFILE, errno.ENFILE):
        limit = "limit on open files was reached (ulimit -n)"
    elif code == errno.ENOMEM:
        limit = "memory ran out for a new process (a cgroup's memory limit, ulimit -v)"
    else:
        limit = "limit on processes or threads was reached (a cgroup's pids.max, ulimit -u)"
    return (f"cannot start {what} ({why}); finished cases are kept in results.jsonl, the rest did not run.\n"
            f"Note: this machine's {limit}: raise it or run with fewer --jobs, then run the same command with "
            "--resume")


def _lost_to_testbed(proc: Any) -> str | None:
    """How the testbed's own machinery ended the worker ``proc`` (its forker died:
    ``forker.ForkedWorker.lost_with_forker``), or None when the worker ended by itself."""
    lost = getattr(proc, "lost_with_forker", None)
    return lost() if callable(lost) else None


def device_lost_line(case: Any, ep: Any, means: str, source: str, detail: str, seconds: float,
                     restarted: str = "its worker was restarted, with a fresh device") -> CaseLine:
    """The ``crash`` line of a case whose device was lost while it ran (``reason``
    ``device-lost``, ``detail`` the EP's text), for the pool and for a run in this process
    (``restarted`` says what was done about it)."""
    line = new_line(case, ep)
    line.update({"outcome": "crash", "reason": DEVICE_LOST_REASON, "detail": detail, "duration_s": round(seconds, 6),
                 "message": f"the device was lost while running the case: {means} ({source}); {restarted}. "
                            f"The EP said: {detail}"})
    return line


class _Queue:
    """The cases still to send: the halves of batches taken apart (sent first, each as it is) and
    the fresh cases, sent in batches."""

    def __init__(self, fresh: deque, hold: Callable[[], bool] | None = None):
        """``fresh``: the cases in the order given; ``hold``: once it says True (asked before
        fresh cases are taken), the fresh cases left are dropped (``WorkerPool.run``)."""
        self.fresh, self.halves, self.hold = fresh, deque[list[Any]](), hold

    def __len__(self) -> int:
        return len(self.fresh) + sum(len(h) for h in self.halves)

    def again(self, cases: list[Any]) -> None:
        """Queue ``cases`` again as they are, ahead of everything else (they never ran)."""
        self.halves.appendleft(list(cases))

    def split(self, batch: list[Any]) -> None:
        """Queue ``batch`` again as two halves, ahead of everything else (first half first)."""
        half = len(batch) // 2
        self.halves.appendleft(list(batch[half:]))
        self.halves.appendleft(list(batch[:half]))

    def take(self, batch: int, jobs: int) -> list[Any]:
        """The next batch: a queued half, else up to ``batch`` fresh cases, fewer near the end so
        that the last ones spread over the ``jobs`` workers; none, with every fresh case dropped,
        once ``hold`` says so."""
        if self.halves:
            return self.halves.popleft()
        if self.hold is not None and self.fresh and self.hold():
            self.fresh.clear()
            return []
        size = min(batch, max(1, -(-len(self.fresh) // jobs)))
        return [self.fresh.popleft() for _ in range(min(size, len(self.fresh)))]


def describe_exit(code: int | None) -> str:
    """``-11`` -> ``"died of SIGSEGV (signal 11)"``; ``3`` -> ``"exited with status 3"``."""
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"died of {name} (signal {-code})"
    if code in _NTSTATUS:
        return f"died of {_NTSTATUS[code]} (status 0x{code:08X})"
    return f"exited with status {code}"


#: Windows exit statuses of a crashed process (NTSTATUS), as Popen.returncode reports them.
_NTSTATUS = {0xC0000005: "STATUS_ACCESS_VIOLATION", 0xC000001D: "STATUS_ILLEGAL_INSTRUCTION",
             0xC00000FD: "STATUS_STACK_OVERFLOW", 0xC0000409: "STATUS_STACK_BUFFER_OVERRUN",
             0xC0000374: "STATUS_HEAP_CORRUPTION", 0xC0000094: "STATUS_INTEGER_DIVIDE_BY_ZERO"}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _tail(path: str, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return "(no output captured)"
    text = data.decode("utf-8", errors="replace").strip()
    if len(text) > OUTPUT_TAIL:
        text = "..." + text[-OUTPUT_TAIL:]
    return text or "(no output)"
