"""One run: cases in, ``RUN_DIR/results.jsonl`` out, nothing finished ever lost.

``run_cases(cases, config, options)`` writes the run header (or, with ``resume``, keeps the
previous one and skips the ids already finished), runs the cases in worker processes
(``harness.pool``; ``jobs=0`` runs them in this process, without crash isolation, for
debugging), applies the EP's expectations, writes artifacts for crashes and timeouts (the
worker writes the others), streams every line to disk as it finishes, and on Ctrl-C stops
the workers and closes the file with an ``end`` line that says ``"interrupted": true``.
"""

from __future__ import annotations


import heapq
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator

from ep_testbed.reference import execute

from . import expectations as expectations_mod
from .artifacts import write_artifacts
from .case_run import ArtifactPolicy, CaseConfig, load_mapper, run_case, severity
from .expectations import Expectations
from .pool import WorkerPool
from .progress import Progress
from .providers import runtime_info
from .results import (
    PASSING,
    RESULTS_FILE,
    ResultsWriter,
    count_outcomes,
    end_record,
    now,
    rewrite_for_resume,
)


class RunError(RuntimeError):
    """A run cannot start as asked (existing results without --resume, EP mismatch on resume...)."""


@dataclass
class RunOptions:
    out_dir: str
    jobs: int = 1
    timeout: float = 120.0
    resume: bool = False
    overwrite: bool = False
    keep_worst: int = 5
    progress: bool | None = None   # None: only when stderr is a terminal
    seed: int = 0
    command: str = ""
    header_extra: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] | None = None        # worker environment (default: this process's)
    extra_paths: tuple[str, ...] = ()        # added to the workers' PYTHONPATH


@dataclass
class RunResult:
    header: dict[str, Any]
    lines: list[dict[str, Any]]
    counts: dict[str, int]
    interrupted: bool
    elapsed_s: float
    ran: int          # cases run now (not resumed)

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

    Raises ``RunError`` when the folder already holds results and neither ``resume`` nor
    ``overwrite`` is set, or when a resumed run was made on another EP. Ctrl-C ends the run
    with an ``end`` line that says ``"interrupted": true`` (``RunResult.interrupted``).
    """
    cases = list(cases)
    expectations = expectations or Expectations()
    header, done = _open_run(cases, config, options)
    finished = {line["id"] for line in done}
    todo = [case for case in cases if case.id not in finished]
    config = replace(config, run_dir=os.path.abspath(options.out_dir))

    lines = list(done)
    worst: list[float] = []  # min-heap of the keep_worst largest severities of passing cases
    interrupted = False
    progress = Progress(len(todo), options.progress)
    start = time.monotonic()
    with ResultsWriter(options.out_dir) as writer:
        if not done:
            writer.write(header)

        def policy_for(case: Any) -> ArtifactPolicy:
            """Keep the folder of a case with an expectation, a failure, or a pass among the worst N."""
            threshold = (worst[0] if len(worst) >= options.keep_worst else 0.0) if options.keep_worst else None
            return ArtifactPolicy(force=expectations.match_case(case) is not None, threshold=threshold)

        by_id = {case.id: case for case in todo}
        try:
            for line in _execute(todo, config, options, policy_for):
                _settle(line, by_id[line["id"]], config, expectations)
                _keep_worst(worst, line, options.keep_worst)
                writer.write(line)
                lines.append(line)
                progress.update(line)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            progress.close()
            counts = count_outcomes(lines)
            writer.write(end_record(counts, interrupted or len(lines) < len(cases),
                                    ran=len(lines) - len(done), elapsed_s=round(time.monotonic() - start, 3)))
    return RunResult(header, lines, counts, interrupted, time.monotonic() - start, len(lines) - len(done))


def _open_run(cases: list[Any], config: CaseConfig, options: RunOptions
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run header and the case lines already finished (only with ``resume``).

    Existing results are continued (``resume``), replaced (``overwrite``) or refused; a new or
    replaced run gets a fresh header, which the caller writes.
    """
    path = os.path.join(options.out_dir, RESULTS_FILE)
    os.makedirs(options.out_dir, exist_ok=True)
    if os.path.exists(path) and os.path.getsize(path) and not options.overwrite:
        if not options.resume:
            raise RunError(f"{path} already holds results: pass --resume to continue that run, "
                           "--overwrite to replace it, or choose another --out")
        header, done = rewrite_for_resume(options.out_dir)
        if header and header.get("ep") != config.ep.provider:
            raise RunError(f"--resume: {path} was run on {header.get('ep')}, not {config.ep.provider}")
        return header or run_header(config, options, len(cases)), done
    if os.path.exists(path):
        os.remove(path)
    return run_header(config, options, len(cases)), []


#: Outcomes where the worker died, so its case folder was never written.
_WORKER_DIED = ("crash", "timeout")
#: Outcomes an expectation produces; their case folder goes into the bug report or the fix.
_FROM_EXPECTATION = ("known", "fixed")


def _settle(line: dict[str, Any], case: Any, config: CaseConfig, expectations: Expectations) -> None:
    """Apply the case's expectation to its raw ``line`` (``expected_outcome``, ``known``/``fixed``)
    and write the case folder the worker could not (it died) or was not asked to write."""
    if line["outcome"] in _WORKER_DIED:
        _offline_artifacts(case, config, line)  # also fills in the mapper's flags
    expectation = expectations.match_case(case, line["flags"])
    line["expected_outcome"] = expectation.to_json() if expectation else None
    line["outcome"] = expectations_mod.apply(line["outcome"], expectation)
    if line["artifacts"] is None and line["outcome"] in _FROM_EXPECTATION:
        _offline_artifacts(case, config, line)


def _keep_worst(worst: list[float], line: dict[str, Any], keep: int) -> None:
    """Track the ``keep`` largest severities of passing cases in the min-heap ``worst``."""
    if keep and line["outcome"] in PASSING and severity(line) > 0:
        heapq.heappush(worst, severity(line))
        if len(worst) > keep:
            heapq.heappop(worst)


def _execute(cases: list[Any], config: CaseConfig, options: RunOptions, policy_for: Any) -> Iterator[dict[str, Any]]:
    """Raw result lines of ``cases`` as they finish (worker processes, or this one with ``jobs=0``)."""
    if not cases:
        return
    if options.jobs == 0:  # in-process: for debugging only, a crashing EP takes the run down
        mapper = load_mapper(config.mapper)
        for case in cases:
            yield run_case(case, config, policy_for(case), mapper)
        return
    pool = WorkerPool(config, min(options.jobs, len(cases)), options.timeout, env=options.env,
                      extra_paths=options.extra_paths)
    yield from pool.run(cases, policy_for)


def _offline_artifacts(case: Any, config: CaseConfig, line: dict[str, Any]) -> None:
    """Artifacts of a case whose worker died: everything but the EP's outputs, built here."""
    state: dict[str, Any] = {"desc": case.desc}
    try:
        mapping = load_mapper(config.mapper)(case.desc, opset=getattr(case, "opset", None))
        line["flags"] = line["flags"] or [f.to_json() for f in mapping.flags]
        if mapping.expressible:
            inputs = case.inputs()
            state["model"] = mapping.model
            state["feeds"] = mapping.feeds(inputs)
            state["expected"] = execute(case.desc, inputs)
    except Exception as exc:
        line["message"] += f"\n(artifacts incomplete: {type(exc).__name__}: {exc})"
    try:
        line["artifacts"] = write_artifacts(config.run_dir, case.id, **state)
    except Exception as exc:
        line["message"] += f"\n(writing artifacts failed: {exc})"

