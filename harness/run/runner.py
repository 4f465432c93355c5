"""One run: cases in, ``RUN_DIR/results.jsonl`` out, nothing finished ever lost.

``run_cases(cases, config, options)`` owns the run folder for as long as it runs
(``run_folder.claim``: a second run into it is refused, naming this one), writes the run header
(or, with ``resume``, keeps the previous one and skips the ids already finished: only when
every option that can change an outcome, ``RESUME_MUST_MATCH``, is the same, and the folder
holds exactly one readable header), runs the cases in worker processes
(``harness.run.pool``; ``jobs=0`` runs them in this process, without crash isolation, for
debugging), applies the EP's expectations, writes artifacts for crashes and timeouts (the
worker writes the others), streams every line to disk as it finishes, and on Ctrl-C stops
the workers and closes the file with an ``end`` line that says ``"interrupted": true``.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import shutil
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generator, Iterable, Iterator

from ..core import walltime
from ..core.expectations import Expectations
from ..core.results import (
    PASSING,
    RESULTS_FILE,
    CaseLine,
    ResultsWriter,
    case_dir,
    count_outcomes,
    end_record,
    load_records,
    now,
    results_path,
    rewrite_for_resume,
)
from ..core.terminal import safe
from ..core.untrusted_files import FileRefused
from ..eps.adapters import forget_adapters
from ..eps.device_loss import DeviceLost
from ..eps.gpu import identity_key, runtime_info
from ..eps.providers import EpSpec
from .case_loop import CaseLoop, settle, start_recheck
from .case_run import ArtifactPolicy, CaseConfig, Memory, load_mapper, run_batch, severity
from .pool import MAX_DEVICE_LOSSES, DeviceLostError, WorkerPool, device_lost_line
from .progress import Progress
from .run_folder import FolderBusy, claim


class RunError(RuntimeError):
    """A run cannot start as asked (existing results without --resume, EP mismatch on resume...)."""


@dataclass
class RunOptions:
    out_dir: str
    jobs: int = 1
    timeout: float = 120.0
    batch: int = 1                 # cases sent to a worker at once, packed into shared sessions where they can be
    resume: bool = False
    overwrite: bool = False
    keep_worst: int = 5
    progress: bool | None = None   # None: only when stderr is a terminal
    seed: int = 0
    command: str = ""
    header_extra: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] | None = None        # worker environment (default: this process's)
    extra_paths: tuple[str, ...] = ()        # added to the workers' PYTHONPATH
    #: Called once the folder is claimed and opened, with (cases to run now, cases selected):
    #: a front end announces the run here, so a run refused at the start prints one message.
    announce: Callable[[int, int], None] | None = None
    #: The second EP failures are re-checked on (``harness.run.recheck``), and its expectations;
    #: None: no re-check.
    also_on: EpSpec | None = None
    also_on_expectations: Expectations | None = None
    #: Workers already starting for this run (``start_workers``); ``run_cases`` runs on them and
    #: stops them whatever happens. None: ``run_cases`` starts its own.
    pool: WorkerPool | None = None


@dataclass
class RunResult:
    header: dict[str, Any]
    lines: list[CaseLine]
    counts: dict[str, int]
    interrupted: bool
    elapsed_s: float  # from the run's start to its last line; the workers' teardown after it is not in it
    ran: int          # cases run now (not resumed)
    notes: list[str] = field(default_factory=list)  # what the run repaired or removed (printed)

    @property
    def cases_per_second(self) -> float:
        """Cases run now per second of this run (0 when none ran)."""
        return self.ran / self.elapsed_s if self.elapsed_s > 0 else 0.0


def run_header(config: CaseConfig, options: RunOptions, case_count: int) -> dict[str, Any]:
    """The ``run`` line: EP, the installed ONNX Runtime, machine and GPU identity (``gpu``), seed,
    command, tolerances, session options and ``case_count``, plus ``options.header_extra``."""
    info = runtime_info(config.ep)
    return {
        "type": "run", "ep": config.ep.provider, "ep_alias": config.ep.alias, "ep_options": config.ep.options,
        **info, "seed": options.seed, "command": options.command, "started": now(),
        "tolerances": config.tolerances.to_json(), "case_count": case_count,
        "session_options": config.session.to_json(config.ep), **options.header_extra,
    }


def run_cases(cases: Iterable[Any], config: CaseConfig, options: RunOptions,
              expectations: Expectations | None = None) -> RunResult:
    """Run ``cases`` (objects with graphs.catalog.Case's contract) and record them in ``options.out_dir``.

    Raises ``RunError`` when another run holds the folder, when it already holds results and
    neither ``resume`` nor ``overwrite`` is set, or when the run to resume differs in an option
    of ``RESUME_MUST_MATCH`` or has no single readable header. Ctrl-C ends the run with an
    ``end`` line that says ``"interrupted": true`` (``RunResult.interrupted``). The workers of
    ``options.pool`` are stopped on return, as are those it starts itself.
    """
    try:
        try:
            folder = claim(options.out_dir, options.command)
        except FolderBusy as exc:
            raise RunError(str(exc)) from None
        with folder:
            result = _run_claimed(list(cases), config, options, expectations or Expectations())
    finally:
        if options.pool is not None:
            options.pool.close()
    if folder.note:
        result.notes.insert(0, folder.note)
    return result


def start_workers(config: CaseConfig, options: RunOptions, case_count: int) -> WorkerPool | None:
    """The workers of a run of ``case_count`` cases, started now and not waited for: each starts
    its EP (the warm-up session) while the caller does what must come first (a preflight, the
    catalog's references). Give the pool to ``run_cases`` as ``options.pool``, or ``close()`` it.
    None when the run is in this process (``jobs=0``), has no case, or will be refused before any
    (``_refused_at_once``)."""
    if not options.jobs or not case_count or _refused_at_once(options):
        return None
    pool = WorkerPool(_in_folder(config, options), min(options.jobs, case_count), options.timeout,
                      env=options.env, extra_paths=options.extra_paths, batch=options.batch)
    pool.start()
    return pool


def _refused_at_once(options: RunOptions) -> bool:
    """Whether ``run_cases`` will refuse the run before its first case, as ``_open_run`` does: its
    folder holds results and neither ``resume`` nor ``overwrite`` is set (no worker need start)."""
    return os.path.lexists(os.path.join(options.out_dir, RESULTS_FILE)) and not (options.resume or options.overwrite)


def _in_folder(config: CaseConfig, options: RunOptions) -> CaseConfig:
    """``config`` with the run folder its workers write case folders into."""
    return replace(config, run_dir=os.path.abspath(options.out_dir))


def _run_claimed(cases: list[Any], config: CaseConfig, options: RunOptions,
                 expectations: Expectations) -> RunResult:
    """``run_cases``' work once the folder is this process's. The workers start first (unless
    already started: ``options.pool``), so that they start their EP while the run header is read
    (the installed wheels, the device)."""
    config = _in_folder(config, options)
    pool = options.pool or start_workers(config, options, len(cases))
    try:
        return _run_started(cases, config, options, expectations, pool)
    finally:
        if pool is not None:
            pool.close()


def _run_started(cases: list[Any], config: CaseConfig, options: RunOptions, expectations: Expectations,
                 pool: WorkerPool | None) -> RunResult:
    """``_run_claimed``'s work once its workers are starting (``pool``; None: in this process)."""
    header, done, fresh, notes = _open_run(cases, config, options)
    finished = {line["id"] for line in done}
    todo = [case for case in cases if case.id not in finished]
    if options.announce is not None:
        options.announce(len(todo), len(cases))

    lines = list(done)
    worst: list[float] = []  # min-heap of the keep_worst largest severities of passing cases
    interrupted = False
    progress = Progress(len(todo), options.progress)
    start = time.monotonic()
    walltime.mark("run header", at=start)  # the folder claimed, the header read (the device's identity)

    def policy_for(case: Any) -> ArtifactPolicy:
        """Keep the folder of a case with an expectation, a failure, or a pass among the worst N."""
        threshold = (worst[0] if len(worst) >= options.keep_worst else 0.0) if options.keep_worst else None
        return ArtifactPolicy(threshold=threshold, expected=expectations.candidates(case))

    recheck = start_recheck(config, options, start=bool(todo))
    header_on_disk = not fresh
    lost: DeviceLostError | None = None
    with ResultsWriter(options.out_dir) as writer:

        def record(line: CaseLine, case: Any) -> None:
            """Settle a line (its expectation, its case folder), write it, count it."""
            settle(line, case, config, expectations)
            _prune_passing_folder(line, worst, options.keep_worst, options.out_dir)
            _keep_worst(worst, line, options.keep_worst)
            writer.write(line)
            lines.append(line)
            progress.update(line)

        loop = CaseLoop(config, lambda batch, hold: _execute(batch, config, options, policy_for, pool), record, recheck)
        try:  # a Ctrl-C once the header is on disk ends the file with an end line
            if fresh:
                with interrupts_held():  # the header is written whole before a Ctrl-C lands
                    writer.write(header)
                    header_on_disk = True
            loop.drive(iter([(todo, None)]))  # run's source: its selected cases, once
            loop.labelled(wait=True)
        except KeyboardInterrupt:
            if not header_on_disk:  # nothing written: nothing to end
                raise
            interrupted = True
        except DeviceLostError as exc:  # the run stops; its file ends, and --resume continues it
            lost = exc
        finally:
            elapsed = time.monotonic() - start  # the cases' time: the workers' teardown below is none of it
            _mark_cases(pool, start, elapsed)
            loop.end(finished=False, can_write=header_on_disk)  # a line whose re-check never finished: unlabelled
            progress.close()
            counts = count_outcomes(lines)
            if header_on_disk:
                stopped = {} if lost is None else {"device_lost": {"losses": lost.losses, "last": lost.last}}
                writer.write(end_record(counts, interrupted or len(lines) < len(cases),
                                        ran=len(lines) - len(done), elapsed_s=round(elapsed, 3),
                                        **stopped, **_warm_up(pool, start)))
            walltime.mark("stopping workers")
    if lost is not None:
        raise lost
    return RunResult(header, lines, counts, interrupted, elapsed, len(lines) - len(done), notes)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (and a SIGTERM that a front end turned into one) off for the block, then
    deliver it: the block runs whole. A no-op outside the main thread, where Python delivers
    no signal anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    held = [s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None
            and callable(signal.getsignal(s))]  # SIG_DFL/SIG_IGN: nothing of ours to hold
    previous = {s: signal.signal(s, lambda signum, frame: arrived.append(signum)) for s in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for signum in arrived[:1]:
        handler = previous[signum]
        if callable(handler):  # Python's handler raises KeyboardInterrupt
            handler(signum, None)


def _open_run(cases: list[Any], config: CaseConfig, options: RunOptions
              ) -> tuple[dict[str, Any], list[CaseLine], bool, list[str]]:
    """``(header, finished case lines, fresh, notes)``: ``fresh`` when the caller must write the
    header (a new or replaced run), ``notes`` what resuming repaired.

    Existing results are continued (``resume``, see ``_resume``), replaced (``overwrite``) or
    refused.
    """
    path = os.path.join(options.out_dir, RESULTS_FILE)
    header = run_header(config, options, len(cases))
    if os.path.lexists(path) and not options.overwrite:
        if not options.resume:
            raise RunError(f"{safe(path)} already holds results: pass --resume to continue that run, "
                           "--overwrite to replace it, or choose another --out")
        return _resume(options.out_dir, path, header, {case.id for case in cases})
    if os.path.lexists(path):
        os.remove(path)
    return header, [], True, []


#: Run header keys whose difference can change a case's outcome: ``--resume`` refuses to add
#: cases run with other values to a run (``session_options`` without the thread count, which
#: follows ``--jobs`` and changes only speed).
RESUME_MUST_MATCH = ("ep", "ep_options", "seed", "selection", "shard", "case_count", "tolerances",
                     "precision_model", "expectations_sha256", "session_options", "ort_flavour", "ort_version",
                     "gpu", "also_on")


def _resume(run_dir: str, path: str, new: dict[str, Any], selected: set[str]
            ) -> tuple[dict[str, Any], list[CaseLine], bool, list[str]]:
    """Continue the run in ``run_dir`` under the new header ``new`` (see ``_open_run``).

    Deterministic whatever the file holds: no readable header and no case -> a fresh start; no
    readable header but cases, two different headers, or a difference in ``RESUME_MUST_MATCH``
    -> ``RunError`` listing what differs; a finished case outside ``selected`` (an edited line)
    -> ``RunError``; damaged lines are dropped (their cases run again) and
    named in the notes; a torn last line is dropped silently (a killed run leaves one)."""
    try:
        records = load_records(results_path(run_dir))
    except FileRefused as exc:
        raise RunError(f"--resume: {exc}") from None
    if records.header is None and not records.cases:
        os.remove(path)  # what it held (a torn header) must not run into the new one
        return new, [], True, [f"{safe(path)} held no run header and no finished case: started afresh"]
    if records.header is None:
        first = records.bad_lines[0] if records.bad_lines else None
        why = f" (line {first.number}: {safe(first.reason)})" if first else ""
        raise RunError(f"--resume: {safe(path)} has no readable run header{why}, so the options its {len(records.cases)} "
                       "finished cases ran with are unknown.\nNote: pass --overwrite to start again, or choose "
                       "another --out")
    header: dict[str, Any] = records.header
    if any(h != header for h in records.headers[1:]):
        raise RunError(f"--resume: {safe(path)} holds {len(records.headers)} different run headers (two runs wrote into "
                       "it).\nNote: pass --overwrite to start again, or choose another --out")
    differences = header_differences(header, new)
    if differences:
        raise RunError(f"--resume: {safe(path)} was run with other options; resuming would mix cases run two ways:\n  "
                       + "\n  ".join(differences)
                       + "\nNote: resume with the same options, pass --overwrite to start again, or choose another --out")
    foreign = sorted(set(records.cases) - selected)
    if foreign:  # same options, so the same selection: the line was edited or comes from elsewhere
        raise RunError(f"--resume: {safe(path)} holds {len(foreign)} finished case(s) this run does not select, e.g. "
                       f"{safe(foreign[0], 120)!r}; its lines were edited or written by another run.\nNote: pass "
                       "--overwrite to start again, or choose another --out")
    if records.repeated:  # a resume keeps one line per id: the other result would be dropped unseen
        case_id, numbers = next(iter(records.repeated.items()))
        raise RunError(f"--resume: {safe(path)} holds {len(records.repeated)} case id(s) with more than one result, e.g. "
                       f"{safe(case_id, 120)!r} on lines {', '.join(map(str, numbers))}; resuming keeps one result per "
                       "id and would drop the others, so the file is left as it is.\nNote: keep the results "
                       "(ep-testbed report reads them), then pass --overwrite to start again, or choose another --out")
    _, done = rewrite_for_resume(run_dir, records)  # the header it keeps is ``header``
    notes = [f"{path} line {b.number} was damaged ({safe(b.reason)}); its case runs again"
             for b in records.damaged]
    return header, done, False, notes


def header_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``"KEY: OLD -> NEW"`` for each key of ``RESUME_MUST_MATCH`` where the headers differ."""
    def comparable(key: str, header: dict[str, Any]) -> Any:
        """The value of ``key`` as far as outcomes depend on it."""
        value = header.get(key)
        if key == "session_options" and isinstance(value, dict):
            return {k: v for k, v in value.items() if k != "intra_op_num_threads"}
        if key == "gpu":  # the device, not the adapter's slot or LUID (which change across reboots)
            return identity_key(value)
        return value

    return [f"{key}: {safe(repr(comparable(key, old)), 160)} -> {safe(repr(comparable(key, new)), 160)}"
            for key in RESUME_MUST_MATCH if comparable(key, old) != comparable(key, new)]


def _prune_passing_folder(line: CaseLine, worst: list[float], keep: int, run_dir: str) -> None:
    """Remove the case folder a worker wrote for a passing ``line`` that is not among the ``keep``
    worst passing cases recorded so far (``worst``), and say so in the line: a worker decides on
    the bar of when its batch was sent, before the lines of the cases sent beside it raised it."""
    if line["outcome"] not in PASSING or not line.get("artifacts"):
        return
    if keep and (len(worst) < keep or severity(line) >= worst[0]):
        return
    shutil.rmtree(os.path.join(run_dir, case_dir(line["id"])), ignore_errors=True)
    line["artifacts"] = None


def _keep_worst(worst: list[float], line: CaseLine, keep: int) -> None:
    """Track the ``keep`` largest severities of passing cases in the min-heap ``worst``."""
    if keep and line["outcome"] in PASSING and severity(line) > 0:
        heapq.heappush(worst, severity(line))
        if len(worst) > keep:
            heapq.heappop(worst)


def _mark_cases(pool: WorkerPool | None, start: float, elapsed: float) -> None:
    """Cut the run's ``elapsed`` time into the command's wall-time parts (``core.walltime``): until
    the first worker had started its EP (``EP start``; nothing when it was ready before the run
    began), then ``cases``."""
    at = pool.first_ready_at() if pool is not None else None
    if at is not None:
        walltime.mark("EP start", at=min(max(at, start), start + elapsed))
    walltime.mark("cases", at=start + elapsed)


def _warm_up(pool: WorkerPool | None, start: float) -> dict[str, float]:
    """``{"warm_up_s": S}``: how far into the run (``start``) the first worker had started its EP,
    time in ``elapsed_s`` when no case could run, which a warm EP would not spend; empty when no
    worker said ready (in-process, or nothing ran)."""
    at = pool.first_ready_at() if pool is not None else None
    return {} if at is None else {"warm_up_s": round(max(0.0, at - start), 3)}


def _execute(cases: list[Any], config: CaseConfig, options: RunOptions, policy_for: Any,
             pool: WorkerPool | None) -> Generator[CaseLine, None, None]:
    """Raw result lines of ``cases`` as they finish (``pool``'s worker processes, or this one when
    it is None: ``jobs=0``), up to ``options.batch`` of them to a session."""
    if not cases:
        return
    if pool is None:  # in-process: for debugging only, a crashing EP takes the run down
        step = max(1, options.batch)
        yield from _in_process(deque(cases[i:i + step] for i in range(0, len(cases), step)), config, policy_for)
        return
    yield from pool.run(cases, policy_for)


def _in_process(batches: deque, config: CaseConfig, policy_for: Any) -> Iterator[CaseLine]:
    """Raw lines of ``batches`` run in this process. A lost device (``DeviceLost``) is handled as
    the pool does (``harness.run.pool``): the adapters' cached sessions and hosts are dropped so
    the next session gets a fresh device, one lost case is ``crash``, a lost pack is halved, and
    ``MAX_DEVICE_LOSSES`` losses in a row raise ``DeviceLostError``."""
    mapper, memory, losses = load_mapper(config.mapper), Memory(), 0
    while batches:
        batch = batches.popleft()
        emitted: list[CaseLine] = []
        start = time.monotonic()
        try:
            run_batch([(case, policy_for(case), mapper) for case in batch], config, emit=emitted.append, memory=memory)
        except DeviceLost as lost:
            yield from emitted
            forget_adapters()
            losses += 1
            done = {line["id"] for line in emitted}
            hit = [c for c in batch if c.id in lost.case_ids and c.id not in done]
            rest = [c for c in batch if c.id not in done and c not in hit]
            if rest:
                batches.appendleft(rest)
            if len(hit) > 1:
                batches.extendleft([hit[len(hit) // 2:], hit[:len(hit) // 2]])
            elif hit:
                yield device_lost_line(hit[0], config.ep, lost.pattern.means, lost.pattern.source, lost.detail,
                                       time.monotonic() - start, "the sessions this process held were dropped, so "
                                       "the next case makes a fresh device")
            if losses >= MAX_DEVICE_LOSSES:
                raise DeviceLostError(losses, lost.detail) from None
            continue
        losses = 0 if any(line.get("placement") for line in emitted) else losses
        yield from emitted
