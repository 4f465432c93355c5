"""The one loop of ``run`` and ``fuzz``: cases in, settled lines recorded, re-checks labelled.

Both commands hand a ``CaseSource`` to a ``CaseLoop`` (``drive``); they differ only in the source,
which says where the cases come from and when to stop (``run``: its selected cases, once;
``fuzz``: rounds drawn until its budget or ``--max-cases``). For each batch the loop takes every raw line as it comes from
``execute`` (the worker pool, or this process with ``--jobs 0``): a failure the ``--also-on``
re-check wants goes to it first, with its case folder built here if its worker died (the label
reads the mapper's flags), and is recorded once labelled; every other line is recorded at once.
The command's ``record(line, case)`` settles the line (``settle``: its expectation, the case
folder nobody wrote) and writes it. ``end`` records what the re-check still holds, labelled or,
when the run was cut short, as it was, so no line is ever lost.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from ...reference import execute as reference_execute
from ...reference.workers import usable_cpus
from ..core.expectations import Expectations
from ..core.results import CaseLine
from .artifacts import write_artifacts
from .case_run import CaseConfig, load_mapper
from .recheck import Recheck, recheck_jobs

#: Runs one batch: ``(cases, hold)`` -> raw lines as they finish (``WorkerPool.run``'s ``hold``:
#: once it says True, cases not sent yet stay unrun).
Execute = Callable[[list[Any], "Callable[[], bool] | None"], Iterator[CaseLine]]
#: Records one raw line of a case: settles it and writes it (the command's own bookkeeping too).
Record = Callable[[CaseLine, Any], None]
#: A command's cases and its stop rule in one: ``(cases, hold)`` pairs, run in turn, the source
#: ending when the command is done (``run``: its selected cases, once; ``fuzz``: rounds until its
#: budget or ``--max-cases``, ``fuzz.engine._rounds``). ``hold``: once it says True, the pair's
#: cases not sent yet stay unrun (None: all are sent).
CaseSource = Iterator[tuple[list[Any], "Callable[[], bool] | None"]]

#: Outcomes where the worker died, so its case folder was never written.
WORKER_DIED = ("crash", "timeout")
#: Outcomes an expectation produces; their case folder goes into the bug report or the fix.
FROM_EXPECTATION = ("known", "fixed")


class CaseLoop:
    """Batches of cases through ``execute``, each raw line to ``record`` (after the re-check when
    ``recheck`` wants it); ``on_line(line, case)`` sees every raw line first, as it arrives."""

    def __init__(self, config: CaseConfig, execute: Execute, record: Record, recheck: Recheck | None = None,
                 on_line: Callable[[CaseLine, Any], None] | None = None) -> None:
        self._config, self._execute, self._record = config, execute, record
        self._recheck, self._on_line = recheck, on_line
        self._waiting: dict[str, Any] = {}  # the cases of lines out for re-checking, by id

    @property
    def rechecks(self) -> bool:
        """Whether failures are re-checked on a second EP (``--also-on``)."""
        return self._recheck is not None

    def drive(self, source: CaseSource, after: Callable[[], None] | None = None) -> None:
        """Run every ``(cases, hold)`` the command's ``source`` gives, in turn, until it ends;
        ``after()`` once each has run (``fuzz`` makes its results durable there)."""
        for cases, hold in source:
            self.run(cases, hold)
            if after is not None:
                after()

    def run(self, cases: list[Any], hold: Callable[[], bool] | None = None) -> None:
        """Run ``cases`` (none sent once ``hold`` says so), taking each line as it comes; the
        batch's execution is stopped (its workers too) whatever ends the loop early."""
        if not cases:
            return
        by_id = {case.id: case for case in cases}
        with contextlib.closing(self._execute(cases, hold)) as lines:  # type: ignore[type-var]
            for line in lines:
                self._take(line, by_id[line["id"]])

    def _take(self, line: CaseLine, case: Any) -> None:
        """One raw line: to the re-check, or recorded; then what the re-check has labelled."""
        if self._on_line is not None:
            self._on_line(line, case)
        if self._recheck is not None and self._recheck.wants(line):
            died_artifacts(line, case, self._config)  # also the mapper's flags, which the label reads
            self._waiting[line["id"]] = case
            self._recheck.submit(case, line)
        else:
            self._record(line, case)
        self.labelled()

    def labelled(self, wait: bool = False) -> None:
        """Record the re-checked lines that are back (``wait``: every one still out, waiting)."""
        for line in self._recheck.finished(wait=wait) if self._recheck is not None else ():
            self._record(line, self._waiting.pop(line["id"]))

    def end(self, finished: bool, can_write: bool = True) -> None:
        """Record the re-checked lines still out and stop the re-check: once the cases
        ``finished``, each labelled (waiting for them); after a Ctrl-C, a lost device or a
        failed write, those back and the rest unlabelled, at once. ``can_write`` False (nothing
        of the run is on disk) records none. A disk that refuses them raises only when the run
        had finished (otherwise they run again on ``--resume`` / ``--replay``); a Ctrl-C while
        waiting is raised after the rest are recorded."""
        if self._recheck is None:
            return
        interrupted: KeyboardInterrupt | None = None
        if finished:
            try:
                self.labelled(wait=True)
            except KeyboardInterrupt as exc:
                interrupted = exc
        rest = self._recheck.close()
        if can_write:
            try:
                for line in rest:
                    self._record(line, self._waiting.pop(line["id"]))
            except OSError:
                if finished and interrupted is None:
                    raise
        if interrupted is not None:
            raise interrupted


def start_recheck(config: CaseConfig, options: Any, start: bool = True) -> Recheck | None:
    """The re-check of failures on ``options.also_on`` (``--also-on``; None when there is no
    second EP) with ``options``' time limit, expectations for that EP and worker environment
    (``RunOptions`` and ``FuzzOptions`` both hold them); with ``start``, its worker starts its EP
    now, beside the run's, before any failure needs it."""
    if options.also_on is None:
        return None
    recheck = Recheck(config, options.also_on, options.timeout, options.also_on_expectations or Expectations(),
                      env=options.env, extra_paths=options.extra_paths,
                      jobs=recheck_jobs(usable_cpus(), max(1, options.jobs)))
    if start:
        recheck.start()
    return recheck


def settle(line: CaseLine, case: Any, config: CaseConfig, expectations: Expectations) -> None:
    """Apply the case's expectation to its raw ``line`` (``expected_outcome``, ``known``/``fixed``)
    and write the case folder the worker could not (it died) or was not asked to write."""
    died_artifacts(line, case, config)
    expectations.settle(case, line)
    if line["artifacts"] is None and line["outcome"] in FROM_EXPECTATION:
        offline_artifacts(case, config, line)


def died_artifacts(line: CaseLine, case: Any, config: CaseConfig) -> None:
    """The case folder of a case whose worker died (crash, timeout), built here once; it also
    fills in the mapper's flags."""
    if line["outcome"] in WORKER_DIED and line["artifacts"] is None:
        offline_artifacts(case, config, line)


def offline_artifacts(case: Any, config: CaseConfig, line: CaseLine) -> None:
    """Artifacts of a case whose worker died: everything but the EP's outputs, built here."""
    state: dict[str, Any] = {"desc": case.desc}
    try:
        mapping = load_mapper(config.mapper)(case.desc, opset=getattr(case, "opset", None))
        line["flags"] = line["flags"] or [f.to_json() for f in mapping.flags]
        if mapping.expressible:
            inputs = case.inputs()
            state["model"] = mapping.model
            state["feeds"] = mapping.feeds(inputs)
            state["expected"] = reference_execute(case.desc, inputs)
    except Exception as exc:
        line["message"] = (line["message"] or "") + f"\n(artifacts incomplete: {type(exc).__name__}: {exc})"
    if config.run_dir is None:  # the run keeps no case folders
        return
    try:
        line["artifacts"] = write_artifacts(config.run_dir, case.id, **state)
    except Exception as exc:
        line["message"] = (line["message"] or "") + f"\n(writing artifacts failed: {exc})"
