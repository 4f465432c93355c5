"""The fuzz loop: draw, run, record, then shrink what failed, all within one time budget.

``fuzz(config, options, expectations)``:

1. writes a run header (``harness.run.runner.run_header``, with a ``fuzz`` entry: budget, size,
   operators, batch size, Hypothesis version) to ``OUT/results.jsonl``;
2. until the drawing deadline (``Budget``) or ``max_cases`` cases, draws rounds of cases, each
   one batch per operator with the operators' cases interleaved (``harness.fuzz.draw.draw_round``:
   whatever the budget or ``max_cases``, the cases run cover every operator from the first ones
   on), or, with ``replay``, redraws just the fuzzed cases those ids name, and runs them through
   one ``WorkerPool``, a round at a time (its cases sent until the drawing deadline): each case goes
   through the pipeline of ``ep-testbed run`` (mapper, reference, a session on the EP in a
   worker, placement proof, tolerances; up to ``batch`` cases packed into one session, as
   ``run --batch`` packs them), then the EP's expectations; every line is streamed to
   results.jsonl as it finishes (artifacts for failures, as ``run`` writes them); with
   ``also_on``, a failure is re-checked on that second EP beside the run and written once
   labelled (``harness.run.recheck``, as ``run --also-on`` does);
3. then shrinks (``harness.fuzz.shrink``) the first failure of every new ``Signature`` (all of
   them with ``shrink="all"``; ``known`` ones too with ``shrink_known``), those no mapper flag
   explains first, at most ``max_shrinks``, each within ``shrink_time_s`` and what is left of the
   budget, in a pool of its own (``SHRINK_JOBS`` workers at most; those the budget leaves no time for are
   named, not shrunk); each minimal case is
   run once more with its case folder written, gets its own line (``<id>-min``), a record in
   ``shrinks.jsonl`` (``harness.core.shrink_records``) and, with ``corpus_out``, a corpus folder;
4. ends results.jsonl with an ``end`` line (counts, cases run, generation time and rate).

``budget_s`` bounds the whole run, drawing and shrinking (``Budget``): drawing stops early enough
to leave shrinking its time once something failed, and shrinking gets what drawing left. What
runs past the deadline: the first ``CHUNK`` cases (or two batches per worker), when start-up
took the whole budget; the cases in flight (a batch per worker, each within ``timeout``), the
minimal cases' final runs, and the report.

Ctrl-C stops drawing and skips shrinking; every finished line is kept, the end line says
``"interrupted": true``. So does a device that stays lost (``harness.run.pool.DeviceLostError``),
which the end line names (``device_lost``) and ``FuzzResult.device_lost`` holds.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ...graphs.cases.common import LiteralCase, desc_elements
from ...reference import desc_to_dml
from ...reference.registry import BUILT_IN, names, register, spec_named
from ..core import shrink_records as records
from ..core import walltime
from ..core.expectations import Expectations
from ..core.rerun import FUZZ_MINIMAL_FAMILY
from ..core.results import EXPECTED_FAILURE, FAILING, RESULTS_FILE, CaseLine, dumps, end_record, tally_outcomes
from ..core.signature import Signature, same_failure, signature
from ..core.untrusted_files import open_output, output_folder
from ..eps.providers import EpSpec
from ..run.case_loop import CaseLoop, CaseSource, settle, start_recheck
from ..run.case_run import ArtifactPolicy, CaseConfig
from ..run.pool import DeviceLostError, WorkerPool
from ..run.run_folder import FolderBusy, claim
from ..run.runner import RunError, RunOptions, run_header
from . import corpus
from . import draw as draw_mod
from .shrink import Runner, ShrinkResult, shrink

#: Workers a shrink runs its candidates on (at most ``--jobs``): Hypothesis's stage runs one at
#: a time; the shape stage runs this many smaller variants at once (``shrink._Trial.first_failing``).
SHRINK_JOBS = 4
#: The run's first cases, run whatever the budget (at least; with batches, two per worker), and
#: how many lines are written between two syncs of results.jsonl to the disk.
CHUNK = 25
#: The least time worth starting a shrink with (seconds): one candidate runs in about this long.
MIN_SHRINK_S = 1.0
#: What ``FuzzOptions.shrink`` accepts: the first failure of each signature, every one, none.
SHRINK_MODES = ("first", "all", "none")


class FuzzUsageError(ValueError):
    """Options a fuzz run cannot start with (unknown size, shrink mode or operator)."""


@dataclass
class FuzzOptions:
    """How one fuzz run goes (module docstring)."""

    out_dir: str
    ops: Sequence[str]
    budget_s: float
    seed: int = 0
    size: str = "default"
    jobs: int = 1
    timeout: float = 30.0
    shrink: str = "first"
    shrink_known: bool = False
    shrink_time_s: float = 30.0
    max_shrinks: int = 20
    corpus_out: str | None = None
    overwrite: bool = False
    progress: bool | None = None
    command: str = ""
    env: dict[str, str] | None = None
    extra_paths: tuple[str, ...] = ()
    replay: Sequence[str] = ()    # fuzzed case ids to rerun (and shrink) instead of drawing
    batch: int = 1                # cases packed into one session at most (``run --batch``)
    max_cases: int | None = None  # stop drawing after this many cases (None: the budget decides)
    also_on: EpSpec | None = None  # re-check failures on this second EP (``harness.run.recheck``)
    also_on_expectations: Expectations | None = None  # the second EP's own (they name the cause there)
    header_extra: dict[str, Any] = field(default_factory=dict)  # more header keys (the CLI's rerun_args)


@dataclass
class Budget:
    """The run's time budget: one deadline for the whole run, and the part of it drawing may use.

    Until something fails, drawing may use all of it. Once failures wait to be shrunk, drawing
    stops ``reserve_s`` before the deadline: the shrinks' own time (``shrink_time_s`` each, for
    as many as ``_to_shrink`` picks), at most ``SHRINK_SHARE`` of the budget, so drawing keeps
    the rest."""

    budget_s: float
    start: float = field(default_factory=time.monotonic)

    #: The largest part of the budget held back for shrinking.
    SHRINK_SHARE = 0.5

    @property
    def deadline(self) -> float:
        """When the whole run's budget is spent (``time.monotonic`` clock)."""
        return self.start + self.budget_s

    def left(self) -> float:
        """Seconds of the budget left (0 once spent)."""
        return max(0.0, self.deadline - time.monotonic())

    def drawing_over(self, to_shrink: int, shrink_time_s: float) -> bool:
        """Whether drawing must stop now, with ``to_shrink`` failures waiting to be shrunk."""
        reserve = min(to_shrink * shrink_time_s, self.SHRINK_SHARE * self.budget_s)
        return time.monotonic() >= self.deadline - reserve


@dataclass
class Finding:
    """A failing fuzzed case: the case, its raw and its settled line, its signature."""

    case: Any
    raw: CaseLine
    line: CaseLine
    signature: Signature
    found_s: float


@dataclass
class FuzzResult:
    """What a fuzz run did: header, outcome counts, findings, shrink records, times."""

    header: dict[str, Any]
    counts: dict[str, int]
    ran: int
    generation_s: float
    findings: list[Finding] = field(default_factory=list)
    shrinks: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    elapsed_s: float = 0.0
    not_shrunk: list[str] = field(default_factory=list)  # chosen for shrinking, but the budget was spent
    device_lost: DeviceLostError | None = None  # the run stopped: the device stayed lost (harness.run.pool)
    by_op: Counter = field(default_factory=Counter)  # fuzzed cases run per operator (registry name)

    @property
    def cases_per_second(self) -> float:
        """Fuzzed cases run per second of the generation phase (0 when none ran)."""
        return self.ran / self.generation_s if self.generation_s > 0 else 0.0

    def cases_by_op(self, ops: Sequence[str]) -> dict[str, int]:
        """Fuzzed cases run per operator: every one of ``ops`` (0 when none of its cases ran: the
        closing output shows what was announced but not covered), then any other that ran."""
        return {**{op: self.by_op[op] for op in ops}, **{op: n for op, n in self.by_op.items() if op not in ops}}

    @property
    def signatures(self) -> dict[Signature, int]:
        """Each distinct signature and how many findings have it."""
        return dict(Counter(f.signature for f in self.findings))


def fuzz(config: CaseConfig, options: FuzzOptions, expectations: Expectations | None = None) -> FuzzResult:
    """Fuzz ``options.ops`` on ``config.ep`` into ``options.out_dir`` (module docstring).

    Raises ``RunError`` when the folder already holds results and ``overwrite`` is not set, or
    another run owns it (``run_folder``), and ``FuzzUsageError`` for an unknown size, shrink
    mode or operator."""
    try:
        folder = claim(options.out_dir, options.command)
    except FolderBusy as exc:
        raise RunError(str(exc)) from None
    with folder:
        return _fuzz_claimed(config, options, expectations or Expectations())


def _fuzz_claimed(config: CaseConfig, options: FuzzOptions, expectations: Expectations) -> FuzzResult:
    """``fuzz``'s work once the folder is this process's."""
    budget = Budget(options.budget_s)
    _check(options)
    drawing = _batches(options)
    try:
        return _fuzz_drawing(config, options, expectations, budget, drawing)
    finally:
        drawing.close()


def _fuzz_drawing(config: CaseConfig, options: FuzzOptions, expectations: Expectations, budget: Budget,
                  drawing: "_Batches") -> FuzzResult:
    """``_fuzz_claimed``'s work once the drawing process is starting."""
    config = dataclasses.replace(config, run_dir=os.path.abspath(options.out_dir))
    header = _header(config, options, expectations)
    start = time.monotonic()
    result = FuzzResult(header, {}, 0, 0.0)
    counts: Counter = Counter()
    with _Lines(options.out_dir) as writer:
        writer.write(header)
        for step in (functools.partial(_generate, batches=drawing), _shrink_findings):
            if result.interrupted:
                break
            try:
                step(config, options, expectations, writer, result, counts, budget)
            except KeyboardInterrupt:
                result.interrupted = True
            except DeviceLostError as exc:  # no case left can run: the file ends, the CLI exits 2
                result.interrupted, result.device_lost = True, exc
        result.counts, result.elapsed_s = tally_outcomes(counts.elements()), \
            time.monotonic() - start
        walltime.mark("shrinking")  # what came after the fuzzing workers stopped (nothing, when nothing failed)
        lost = result.device_lost
        writer.write(end_record(result.counts, result.interrupted, ran=result.ran,
                                elapsed_s=round(result.elapsed_s, 3),
                                fuzz={"generation_s": round(result.generation_s, 3),
                                      "cases_per_second": round(result.cases_per_second, 1),
                                      "cases_by_op": result.cases_by_op(() if options.replay else options.ops),
                                      "findings": len(result.findings), "shrunk": len(result.shrinks),
                                      "not_shrunk": result.not_shrunk},
                                **({} if lost is None else {"device_lost": {"losses": lost.losses, "last": lost.last}})))
    return result


def _check(options: FuzzOptions) -> None:
    """Refuse what cannot run: unknown size/shrink mode/operator, existing results without overwrite."""
    from ...graphs.cases.fuzzing import SIZES
    from ...reference.registry import names

    if options.size not in SIZES:
        raise FuzzUsageError(f"size {options.size!r}: one of {', '.join(SIZES)}")
    if options.shrink not in SHRINK_MODES:
        raise FuzzUsageError(f"shrink {options.shrink!r}: one of {', '.join(SHRINK_MODES)}")
    unknown = [op for op in options.ops if op not in names()]
    if unknown or not options.ops:
        raise FuzzUsageError(f"operator {unknown[0] if unknown else '(none)'!r}: choose from {', '.join(names())}")
    path = os.path.join(options.out_dir, RESULTS_FILE)
    if os.path.lexists(path) and (os.path.islink(path) or os.path.getsize(path)):
        if not options.overwrite:
            raise RunError(f"{path} already holds results: pass --overwrite to replace them, or choose another --out")
    for name in (RESULTS_FILE, records.SHRINKS_FILE):  # a fuzz run starts its files afresh (never appends)
        if os.path.lexists(os.path.join(options.out_dir, name)):
            os.remove(os.path.join(options.out_dir, name))
    output_folder(options.out_dir)


def _header(config: CaseConfig, options: FuzzOptions, expectations: Expectations) -> dict[str, Any]:
    """The run line of a fuzz run: ``run_header`` plus the fuzz settings (case count unknown: null)."""
    import hypothesis

    extra = {"fuzz": {"budget_s": options.budget_s, "size": options.size, "ops": list(options.ops),
                      "batch_size": draw_mod.BATCH_SIZE, "hypothesis": hypothesis.__version__,
                      "shrink": options.shrink, "shrink_known": options.shrink_known,
                      "shrink_time_s": options.shrink_time_s, "max_shrinks": options.max_shrinks,
                      "max_cases": options.max_cases},
             "selection": {"ops": list(options.ops), "catalog": "fuzz"}, "jobs": options.jobs, "batch": options.batch,
             "timeout_s": options.timeout, "expectations": expectations.source, **options.header_extra}
    run_options = RunOptions(out_dir=options.out_dir, seed=options.seed, command=options.command, header_extra=extra)
    header = run_header(config, run_options, 0)
    header["case_count"] = None
    return header


def _generate(config: CaseConfig, options: FuzzOptions, expectations: Expectations, writer: _Lines,
              result: FuzzResult, counts: Counter, budget: Budget, batches: "_Batches | None" = None) -> None:
    """Step 2 of the module docstring: batches through the pool until drawing's part of the
    ``budget`` is spent, the first ``CHUNK`` cases whatever the budget (start-up, the workers' and
    the first round's, may take it all), and a replay's cases whatever the budget. ``generation_s``, and
    so the rate, starts with the first batch drawn (the drawing process's start-up is not
    fuzzing); the budget started with the run. ``batches``: already drawing (``_batches``; None:
    started here)."""
    jobs = min(options.jobs, len(options.replay) or draw_mod.BATCH_SIZE)  # never more workers than cases to run
    pool = WorkerPool(config, jobs, options.timeout, env=options.env, extra_paths=options.extra_paths,
                      batch=options.batch)
    pool.start()  # the workers start their EP while the first round is drawn
    chunk_size = max(CHUNK, 2 * options.batch * jobs)

    def policy_for(case: Any) -> ArtifactPolicy:
        """A case folder for every case an expectation explains, as ``run`` keeps them."""
        return ArtifactPolicy(expected=expectations.candidates(case))

    status = _Status(options.progress, options.budget_s)
    batches = batches if batches is not None else _batches(options)
    recheck = start_recheck(config, options)

    clock = _Clock()

    def emit(line: CaseLine, case: Any) -> None:
        """Settle, keep and write one line (labelled, when it was re-checked)."""
        _record(line, case, config, expectations, options, result, clock.start or time.monotonic())
        writer.write(line)
        counts[line["outcome"]] += 1
        status.update(result, counts)

    def drawing_over() -> bool:
        """Whether drawing's part of the budget is spent (never before a case ran, nor in a replay)."""
        return not options.replay and result.ran > 0 and budget.drawing_over(
            len(_to_shrink(result.findings, options)), options.shrink_time_s)

    def arrived(line: CaseLine, case: Any) -> None:
        """Count a raw line as it comes; results.jsonl is made durable every ``chunk_size`` lines
        (the workers have their next cases meanwhile) and at the end of each batch."""
        if result.ran and result.ran % chunk_size == 0:
            writer.sync()
        result.ran += 1
        result.by_op[case.id.split("/", 1)[0]] += 1  # ids start with the operator's name

    loop = CaseLoop(config, lambda cases, hold: pool.run(cases, policy_for, keep_workers=True, hold=hold), emit,
                    recheck, on_line=arrived)
    finished = False
    try:
        loop.drive(_rounds(batches, options, result, status, chunk_size, drawing_over, clock), after=writer.sync)
        finished = True
    finally:
        if clock.start is not None:
            walltime.mark("fuzzing", at=clock.start + result.generation_s)
        batches.close()
        pool.close()
        walltime.mark("stopping workers")
        loop.end(finished)  # waits for the --also-on re-checks still out: a part of its own
        if loop.rechecks:
            walltime.mark("re-checks")
        status.close()  # after the re-checked lines, which still update it


class _Clock:
    """When fuzzing started: the first batch drawn (None before)."""

    start: float | None = None


def _rounds(batches: Iterable[list[Any]], options: FuzzOptions, result: FuzzResult, status: "_Status",
            chunk_size: int, drawing_over: Callable[[], bool], clock: _Clock) -> CaseSource:
    """fuzz's case source and stop rule: each batch cut to what ``--max-cases`` leaves, the run's
    first ``chunk_size`` cases whatever the budget, the rest of a round at once, sent until
    drawing's part of the budget is spent (``drawing_over``, the pairs' hold: no worker waits for
    the others in between); it ends when that part is spent, ``--max-cases`` cases ran, or the
    batches end. Keeps ``result.generation_s`` (from the first batch drawn, ``clock.start``)."""
    for batch in batches:
        if clock.start is None:  # the first batch is drawn: fuzzing starts
            walltime.mark("workers and drawing start")
        clock.start = status.start = clock.start or time.monotonic()
        if options.max_cases is not None and not options.replay:
            batch = batch[:options.max_cases - result.ran]
        first = chunk_size if not result.ran else 0
        for cases, hold in ((batch[:first], None), (batch[first:], drawing_over)):
            result.generation_s = time.monotonic() - clock.start
            if drawing_over():
                return
            if cases:
                yield cases, hold
        if drawing_over() or (options.max_cases is not None and not options.replay
                              and result.ran >= options.max_cases):
            result.generation_s = time.monotonic() - clock.start
            return
    result.generation_s = time.monotonic() - (clock.start or time.monotonic())


class _Batches:
    """The batches to run, as an iterator: the ``replay`` cases redrawn from their ids (one batch),
    or the run's rounds, without end (up to the one that holds the ``max_cases``-th case): round 0
    drawn here when it is first asked for, while the workers start (the run has nothing else to do
    then, and a drawing process would first spend as long importing), the rest by a drawing
    process (``Drawer``) started right after it, when more are wanted, so that its start-up
    overlaps the first round's cases; ``close`` stops it, whether or not a batch was taken."""

    def __init__(self, options: FuzzOptions) -> None:
        self._replay = list(options.replay)
        self._options = options
        self._drawer: Drawer | None = None
        self._first = not self._replay  # round 0 is still to be drawn

    def __iter__(self) -> "_Batches":
        return self

    def __next__(self) -> list[Any]:
        if self._first:
            self._first = False
            options = self._options
            cases = draw_mod.draw_round(options.ops, options.seed, 0, options.size, limit=options.max_cases)
            more = None if options.max_cases is None else options.max_cases - len(cases)
            if more is None or more > 0:
                self._drawer = Drawer(options.ops, options.seed, options.size, more, first=1)
            return cases
        if self._drawer is not None:
            return self._drawer.next_batch()
        if self._replay:
            replay, self._replay = self._replay, []
            return [draw_mod.replay(case_id) for case_id in replay]
        raise StopIteration

    def close(self) -> None:
        """Stop the drawing process, if one started (again: nothing)."""
        drawer, self._drawer, self._replay, self._first = self._drawer, None, [], False
        if drawer is not None:
            drawer.close()


def _batches(options: FuzzOptions) -> _Batches:
    """The batches to run (``_Batches``)."""
    return _Batches(options)


def _record(line: CaseLine, case: Any, config: CaseConfig, expectations: Expectations,
            options: FuzzOptions, result: FuzzResult, start: float) -> None:
    """Settle ``line`` (expectations; offline artifacts when the worker died) and keep it as a
    ``Finding`` when its settled outcome is a failure (or a ``known`` one, with ``shrink_known``):
    never a case the EP did not get to run (``not-on-ep``, ``emulation-gap``)."""
    raw = line.copy()
    if line["outcome"] in ("crash", "timeout"):
        settle(line, case, config, expectations)  # also writes the case folder the dead worker could not
    else:
        expectations.settle(case, line)
    found = signature(raw)
    kept = line["outcome"] in FAILING or (line["outcome"] in EXPECTED_FAILURE and options.shrink_known)
    if found is not None and kept:
        result.findings.append(Finding(case, raw, line, found, time.monotonic() - start))


class Drawer:
    """Draws the run's rounds in a process of its own, one round ahead of the one taken last
    (``AHEAD``), so that drawing (Hypothesis: milliseconds a case) overlaps with the workers
    running the previous ones. A round is drawn when the one before it is taken, not sooner: a
    run its budget stops has drawn at most one round it never ran (each costs the cores the
    workers need; two rounds ahead, a 20-second run drew twice the cases it ran). The order is
    fixed: round 0 (batch 0 of every operator, interleaved: ``draw.draw_round``), then round
    1... from round ``first`` on; with ``max_cases``, only the
    rounds that hold that many cases, the last of them only as far as they reach (the draws after
    them would be made for nothing, on the cores the workers need).
    The drawing process is spawned, so it is handed the records of the operators the registry
    module does not register itself (``registry.BUILT_IN``): one registered by the caller's own
    code is registered there too."""

    #: Rounds drawn beyond the ones taken.
    AHEAD = 1
    #: How often a wait for a batch checks that the drawing process is still alive, and the
    #: drawing process that its parent is (seconds).
    POLL_S = 1.0

    def __init__(self, ops: Sequence[str], seed: int, size: str, max_cases: int | None = None, first: int = 0):
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # the parent has threads: never fork it
        self._queue = context.Queue()
        self._wanted = context.Semaphore(self.AHEAD)  # one release per round the drawer may draw
        self._done = False
        records = [spec_named(op) for op in ops if op not in BUILT_IN]
        self._process = context.Process(target=draw_batches, daemon=True,
                                        args=(list(ops), seed, size, self._queue, records, max_cases, first,
                                              self._wanted))
        self._process.start()

    def next_batch(self) -> list[Any]:
        """The next round of cases; StopIteration once the rounds ``max_cases`` needs are all
        taken (RuntimeError with the drawer's traceback if it failed, or saying that it died: a
        process killed, or one that could not start, reports nothing itself)."""
        import queue

        if self._done:
            raise StopIteration
        while True:
            ended = not self._process.is_alive()  # before the wait: all it put is then in the pipe
            try:
                kind, payload = self._queue.get(timeout=self.POLL_S)
                break
            except queue.Empty:
                if ended:
                    raise RuntimeError(
                        f"drawing fuzzed cases failed: the drawing process ended (exit code {self._process.exitcode}) "
                        "without a batch; its own error, if any, is on stderr above (a script that runs a fuzz "
                        "must guard its entry point with `if __name__ == \"__main__\":`, as multiprocessing's "
                        "spawn start requires)") from None
        if kind == "error":
            raise RuntimeError(f"drawing fuzzed cases failed:\n{payload}")
        if kind == "done":
            self._done = True
            raise StopIteration
        self._wanted.release()  # the next round may be drawn while this one runs
        return payload

    def close(self) -> None:
        """Stop the drawing process."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(timeout=10)
        self._queue.close()
        self._queue.cancel_join_thread()


def draw_batches(ops: Sequence[str], seed: int, size: str, queue: Any, records: Sequence[Any] = (),
                 max_cases: int | None = None, first: int = 0, wanted: Any = None) -> None:
    """The drawing process: every round from round ``first`` on, in ``Drawer``'s order, into
    ``queue``, each once ``wanted`` (a semaphore; None: at once) lets it, after registering each
    of the operator ``records`` this process does not know yet; with ``max_cases``, the rounds up
    to the one that holds the ``max_cases``-th case it draws, then ``done``. It returns when its
    parent has ended (a run killed leaves no drawer waiting)."""
    import multiprocessing
    import traceback

    try:
        for record in records:
            if record.name not in names():
                register(record)
        drawn = 0
        parent = multiprocessing.parent_process()
        for number in itertools.count(first):  # the last round drawn only as far as max_cases reaches
            while wanted is not None and not wanted.acquire(timeout=Drawer.POLL_S):
                if parent is not None and not parent.is_alive():
                    return
            cases = draw_mod.draw_round(ops, seed, number, size, limit=None if max_cases is None else max_cases - drawn)
            queue.put(("batch", cases))
            drawn += len(cases)
            if max_cases is not None and drawn >= max_cases:
                queue.put(("done", None))
                return
    except Exception:
        queue.put(("error", traceback.format_exc()))


class _Lines:
    """``results.jsonl`` of a fuzz run: each record flushed as it is written (a killed run keeps
    it), fsync'ed at each ``sync`` (once per ``CHUNK`` lines, rather than per line, which halves
    the throughput) by a thread of its own, so the run answers its workers while the disk syncs;
    ``__exit__`` waits for that thread and syncs once more. A sync that failed is raised by the
    next ``sync`` or at the exit (where no thread can start, each ``sync`` syncs in place)."""

    def __init__(self, run_dir: str):
        self._file = open_output(os.path.join(output_folder(run_dir), RESULTS_FILE), "w", atomic=False)  # a stream
        self._wanted = threading.Event()
        self._closing = False
        self._failed: OSError | None = None
        self._syncer: threading.Thread | None = None

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record and flush it."""
        self._file.write(dumps(record) + "\n")
        self._file.flush()

    def sync(self) -> None:
        """Make everything written so far durable, in the background."""
        self._raise_failure()
        if self._syncer is None:
            syncer = threading.Thread(target=self._sync_loop, name="results.jsonl sync", daemon=True)
            try:
                syncer.start()
            except RuntimeError:  # "can't start new thread": a limit on threads (a cgroup's pids.max)
                os.fsync(self._file.fileno())
                return
            self._syncer = syncer
        self._wanted.set()

    def _sync_loop(self) -> None:
        """The thread: fsync each time a sync is wanted, until the file closes or a sync fails."""
        fd = self._file.fileno()
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._closing:
                return
            try:
                os.fsync(fd)
            except OSError as exc:
                self._failed = exc
                return

    def _raise_failure(self) -> None:
        """Raise the ``OSError`` a background sync met, if one did."""
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed

    def __enter__(self) -> "_Lines":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._syncer is not None:
                self._closing = True
                self._wanted.set()
                self._syncer.join()
            self._raise_failure()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()


def _candidate_runner(pool: WorkerPool, expectations: Expectations, finding: Finding) -> Runner:
    """How ``shrink`` runs a candidate of ``finding`` (``_CandidateRunner``)."""
    return _CandidateRunner(pool, expectations, finding.line["outcome"] in FAILING)


class _CandidateRunner:
    """Runs shrink candidates on ``pool``: a failure no expectation explains stays one only in a
    candidate no expectation explains either (its readings tried, then settled: one the readings
    reproduce is ``known``, no longer this failure, so the shrink refuses it); a known finding
    (``--shrink-known``, ``settles`` False) keeps its raw failure. ``many`` runs a handful at once,
    one per worker of the pool (``width``)."""

    def __init__(self, pool: WorkerPool, expectations: Expectations, settles: bool):
        self.pool, self.expectations, self.settles = pool, expectations, settles
        self.width = max(1, int(getattr(pool, "jobs", 1)))

    def _policy(self, case: Any) -> ArtifactPolicy:
        return ArtifactPolicy(expected=self.expectations.candidates(case)) if self.settles else ArtifactPolicy()

    def __call__(self, case: Any) -> CaseLine:
        return self._settled(case, self.pool.run_one(case, self._policy(case)))

    def many(self, cases: Sequence[Any]) -> list[CaseLine]:
        """The raw lines of ``cases`` (settled as ``__call__`` does), in their order."""
        lines = {line["id"]: line for line in self.pool.run(list(cases), self._policy, keep_workers=True)}
        return [self._settled(case, lines[case.id]) for case in cases]

    def _settled(self, case: Any, line: CaseLine) -> CaseLine:
        """``line`` as the shrink compares it: its raw outcome, or the settled one where the
        expectations explain the candidate (then no longer the failure being shrunk)."""
        if not self.settles:
            return line
        settled = line.copy()
        self.expectations.settle(case, settled)
        if settled["outcome"] in FAILING:
            return line
        reported = line.copy()
        reported["outcome"] = settled["outcome"]
        return reported


def _to_shrink(findings: list[Finding], options: FuzzOptions) -> list[Finding]:
    """The findings to shrink: the first of each signature (every one with ``shrink="all"``),
    at most ``max_shrinks``; failures no mapper flag explains (no ``diverging`` field) first,
    each group in the order found."""
    if options.shrink == "none":
        return []
    chosen, seen = [], set()
    for finding in findings:
        if options.shrink == "all" or finding.signature not in seen:
            chosen.append(finding)
            seen.add(finding.signature)
    chosen.sort(key=lambda f: bool(f.signature.diverging))  # stable: discovery order within each group
    return chosen[:options.max_shrinks]


def _shrink_findings(config: CaseConfig, options: FuzzOptions, expectations: Expectations, writer: _Lines,
                     result: FuzzResult, counts: Counter, budget: Budget) -> None:
    """Step 3 of the module docstring: each shrink in turn gets ``shrink_time_s`` or what is
    left of ``budget``, whichever is less; those left no time (less than ``MIN_SHRINK_S``) are
    named in ``result.not_shrunk`` and said on stderr."""
    chosen = _to_shrink(result.findings, options)
    if not chosen:
        return
    quiet = dataclasses.replace(config, run_dir=None)  # candidates leave no case folders
    pool = WorkerPool(quiet, max(1, min(options.jobs, SHRINK_JOBS)), options.timeout, env=options.env,
                      extra_paths=options.extra_paths)
    shrunk: list[tuple[Finding, ShrinkResult]] = []
    try:
        for done, finding in enumerate(chosen):
            seconds = min(options.shrink_time_s, budget.left())  # in order: unexplained failures first
            if seconds < MIN_SHRINK_S:
                result.not_shrunk = [f.case.id for f in chosen[done:]]
                _say(options, f"shrinking stopped at the --budget of {options.budget_s:g} s: {len(result.not_shrunk)} "
                              f"of {len(chosen)} failure kind(s) not shrunk (first: {result.not_shrunk[0]}); a larger "
                              "--budget shrinks them, or `fuzz --replay ID` shrinks one")
                break
            _say(options, f"shrinking {finding.case.id} (at most {seconds:.0f} s): {finding.signature.describe()}")
            shrunk.append((finding, shrink(finding.case, finding.signature, _candidate_runner(pool, expectations, finding),
                                           seconds)))
    finally:
        pool.close()
    _finish_minimal(config, options, expectations, writer, result, counts, shrunk)


def _finish_minimal(config: CaseConfig, options: FuzzOptions, expectations: Expectations, writer: _Lines,
                    result: FuzzResult, counts: Counter, shrunk: list[tuple[Finding, ShrinkResult]]) -> None:
    """Run every minimal case once more with its case folder written, record its line and its
    ``shrinks.jsonl`` record, and write it to the corpus when asked."""
    if not shrunk:
        return
    minimal = {s.minimal.id: (finding, s) for finding, s in shrunk}
    cases = {case_id: _tagged(s.minimal, finding) for case_id, (finding, s) in minimal.items()}
    pool = WorkerPool(config, min(options.jobs, len(cases)), options.timeout, env=options.env,
                      extra_paths=options.extra_paths, batch=options.batch)
    for line in pool.run(list(cases.values()), lambda case: ArtifactPolicy(force=True, expected=expectations.candidates(case))):
        finding, shrink_result = minimal[line["id"]]
        raw = line.copy()
        settle(line, cases[line["id"]], config, expectations)
        writer.write(line)
        counts[line["outcome"]] += 1
        corpus_path = None
        if options.corpus_out and same_failure(finding.signature, raw):
            corpus_path = corpus.write_entry(options.corpus_out, cases[line["id"]], line, result.header,
                                             finding.signature, shrink_result, options.out_dir)
        record = _shrink_record(finding, shrink_result, raw, corpus_path)
        records.append_shrink(options.out_dir, record)
        result.shrinks.append(record)


def _tagged(case: LiteralCase, finding: Finding) -> LiteralCase:
    """The minimal case tagged as such (family ``fuzz-minimal``, ``shrunk_from``, its size)."""
    tags = {"dtype": case.desc.input_tensor.data_type.lower(), "family": FUZZ_MINIMAL_FAMILY,
            "shrunk_from": finding.case.id, "elements": str(desc_elements(case.desc))}
    return dataclasses.replace(case, tags=tags)


def _shrink_record(finding: Finding, s: ShrinkResult, raw: CaseLine, corpus_path: str | None) -> dict[str, Any]:
    """The ``shrinks.jsonl`` record of one shrink (``harness.core.shrink_records``)."""
    return records.shrink_record(
        original=finding.case.id, minimal=s.minimal.id, found_s=round(finding.found_s, 3),
        signature=finding.signature.to_json(),
        same_failure=same_failure(finding.signature, raw), original_elements=s.original_elements,
        minimal_elements=s.minimal_elements, reduction=round(s.original_elements / max(1, s.minimal_elements), 1),
        seconds=round(s.seconds, 3), candidates=s.candidates, accepted=s.accepted, stages=s.stages,
        changes=desc_changes(finding.case.desc, s.minimal.desc), notes=s.notes, corpus=corpus_path)


def desc_changes(original: Any, minimal: Any) -> list[dict[str, Any]]:
    """The DML fields (``InputTensor.Sizes``, ``WindowSize``...) whose values differ between two descs."""
    a, b = _flat(desc_to_dml(original)), _flat(desc_to_dml(minimal))
    return [{"field": k, "original": a.get(k), "minimal": b.get(k)} for k in sorted(set(a) | set(b))
            if repr(a.get(k)) != repr(b.get(k))]


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    """A nested desc dict flattened to ``Outer.Inner`` keys (lists kept as values)."""
    if not isinstance(d, dict):
        return {prefix: d}
    flat: dict[str, Any] = {}
    for key, value in d.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _say(options: FuzzOptions, text: str) -> None:
    """One line of what the run is doing on stderr (not with ``--no-progress``)."""
    if options.progress is not False:
        print(f"ep-testbed fuzz: {text}", file=sys.stderr, flush=True)


class _Status:
    """A live status line on stderr (only on a terminal, or when ``enabled``): cases, findings, rate."""

    def __init__(self, enabled: bool | None, budget_s: float):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.budget_s, self.start, self.last = budget_s, time.monotonic(), 0.0

    def update(self, result: FuzzResult, counts: Counter) -> None:
        """Redraw the line, at most twice a second."""
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.5:
            return
        self.last, elapsed = now, now - self.start
        sys.stderr.write(f"\rfuzz: {result.ran} cases, {len(result.findings)} failing "
                         f"({len(result.signatures)} kinds), {result.ran / max(elapsed, 1e-9):.0f} cases/s fuzzing, "
                         f"{max(0.0, self.budget_s - elapsed):.0f} s left\x1b[K")
        sys.stderr.flush()

    def close(self) -> None:
        """End the line."""
        if self.enabled:
            sys.stderr.write("\n")
