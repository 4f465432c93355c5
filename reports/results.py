"""Read a run folder's ``results.jsonl`` into plain Python objects.

The file and its schema (record types, case-line keys, outcomes, the spelling of NaN and
infinities) are defined once, in ``harness.core.results``; this module only reads it: a ``run``
header line, one ``case`` line per finished case (flushed as it finishes), and an optional
``end`` line.  The file is read through ``harness.core.results.load_records`` (and so through
``harness.core.untrusted_files``: a regular file, size-capped, strict JSON, each line held to the
schema).  An interrupted run may end in a half-written line, and a damaged file may hold lines
that are not records of the schema; each is skipped and its number kept in
``Run.unreadable_lines`` (``Run.unreadable`` says why), so nothing that *was* finished is lost
and nothing malformed reaches a renderer.  Nothing here interprets numbers beyond reading them.

``load_run_summary`` keeps only each case line's ``SummaryView`` (what counts, matrices and
summaries read) and ``Run.whole`` reads whole lines again by their byte offset, one at a time:
how the renderers read a run, so a results file larger than memory still renders. A file of at
most ``KEEP_WHOLE_BYTES`` that fits in memory parsed is kept whole by that first pass as well
(``Run.kept``): ``Run.whole`` then reads nothing again, after making sure the file is still the
one the first pass read (the second pass's own check), so the three renderers of a run parse each
line once instead of three times.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, cast

from ..harness.core import memory
from ..harness.core.results import (
    ERROR_KEYS,
    PARSED_BYTES_PER_BYTE,
    RESULTS_FILE,
    CaseLine,
    decode_number,
    load_records,
    read_cases_at,
    results_path,
)
from ..harness.core.terminal import safe
from ..harness.core.untrusted_files import (
    BadLine,
    FileChanged,
    FileRefused,
    LinesRead,
    OutOfMemory,
    open_regular,
)


@dataclass(slots=True)
class CaseResult:
    """One ``case`` line.  ``raw`` keeps the whole line; the attributes are the fields reports use,
    the decoded ones (``tags``, ``flags``, ``errors``, ``worst``) worked out once per instance (a
    report reads each many times; nothing changes a line once read)."""

    raw: CaseLine
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def derived(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, worked out on the first call with ``key`` and kept with this case."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @property
    def id(self) -> str:
        """The case id ("" if missing)."""
        return str(self.raw.get("id", ""))

    @property
    def op(self) -> str:
        """The DML operator type, e.g. ``DML_OPERATOR_ROI_ALIGN1`` ("" if missing)."""
        return str(self.raw.get("op", ""))

    @property
    def dtype(self) -> str:
        """The line's ``dtype``, else its ``dtype`` tag, else ""."""
        return str(self.raw.get("dtype") or self.tags.get("dtype") or "")

    @property
    def outcome(self) -> str:
        """The outcome; a line without one reads as ``error`` (something went wrong writing it)."""
        return str(self.raw.get("outcome", "error"))

    @property
    def tags(self) -> dict[str, str]:
        """The catalog tags as text ({} if missing or not an object)."""
        value: dict[str, str] = self.derived("tags", self._decode_tags)
        return value

    def _decode_tags(self) -> dict[str, str]:
        tags = self.raw.get("tags") or {}
        return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}

    @property
    def errors(self) -> dict[str, float | None]:
        """``ERROR_KEYS`` -> number or None, NaN/infinities decoded."""
        value: dict[str, float | None] = self.derived("errors", self._decode_errors)
        return value

    def _decode_errors(self) -> dict[str, float | None]:
        errs = self.raw.get("errors") or {}
        return {k: decode_number(errs.get(k)) for k in ERROR_KEYS}

    @property
    def max_abs(self) -> float | None:
        """The largest absolute error as a float, None when the case was not compared."""
        v = self.errors["max_abs"]
        return float(v) if isinstance(v, (int, float)) else None

    @property
    def message(self) -> str:
        """What the harness said about the case ("" if nothing)."""
        return str(self.raw.get("message") or "")

    @property
    def flags(self) -> list[dict[str, Any]]:
        """The mapper's flags: the objects of the line's list (anything else in it is dropped; a
        results line is data)."""
        value: list[dict[str, Any]] = self.derived("flags", self._decode_flags)
        return value

    def _decode_flags(self) -> list[dict[str, Any]]:
        return [{**f, **{k: str(f.get(k, "")) for k in ("field", "kind", "reason")}}
                for f in self.raw.get("flags") or [] if isinstance(f, dict)]

    @property
    def worst(self) -> list[dict[str, Any]]:
        """The worst elements, NaN/infinities decoded; entries that are not objects are dropped,
        an ``index`` that is not a list of integers is shown empty (a results line is data)."""
        value: list[dict[str, Any]] = self.derived("worst", self._decode_worst)
        return value

    def _decode_worst(self) -> list[dict[str, Any]]:
        entries = []
        for w in self.raw.get("worst") or []:
            if not isinstance(w, dict):
                continue
            entry = {k: decode_number(v) for k, v in w.items()}
            index = entry.get("index")
            if not (isinstance(index, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in index)):
                entry["index"] = []
            entry["output"] = str(entry.get("output", ""))
            entries.append(entry)
        return entries

    @property
    def placement(self) -> dict[str, str]:
        """Node name -> the provider it ran on (as text)."""
        placement = self.raw.get("placement") or {}
        return {str(k): str(v) for k, v in placement.items()} if isinstance(placement, dict) else {}

    @property
    def duration_s(self) -> float:
        """Seconds the case took (0.0 if missing)."""
        v = self.raw.get("duration_s")
        return float(v) if isinstance(v, (int, float)) else 0.0

    @property
    def artifacts(self) -> str | None:
        """The case folder relative to the run folder, None when none was written."""
        return self.raw.get("artifacts") or None

    @property
    def attribution(self) -> dict[str, Any] | None:
        """Why a failed case failed (``harness.run.attribution``): the line's object with ``cause``
        and ``reason`` as text and ``nodes`` as a list of objects; None when the line has none."""
        value = self.raw.get("attribution")
        if not isinstance(value, dict):
            return None
        nodes = [n for n in value.get("nodes") or [] if isinstance(n, dict)] if isinstance(value.get("nodes"), list) \
            else []
        return {**value, "cause": str(value.get("cause") or "unknown"), "reason": str(value.get("reason") or ""),
                "nodes": nodes}

    @property
    def scope(self) -> str:
        """Where a failure occurs, from the re-check on a second EP: ``shared with <EP>`` or
        ``only on <EP>``; "" when the case was not re-checked."""
        value = self.raw.get("scope")
        return value if isinstance(value, str) else ""

    @property
    def also_on(self) -> dict[str, Any] | None:
        """What the second EP did with the case (``harness.run.recheck``), None if not re-checked."""
        value = self.raw.get("also_on")
        return value if isinstance(value, dict) else None

    @property
    def expected_outcome(self) -> dict[str, Any] | None:
        """The expectation that matched the case, None if none did (or the line's is not an object)."""
        expected = self.raw.get("expected_outcome")
        return expected if isinstance(expected, dict) and expected else None


@dataclass
class Run:
    """A whole run: header, cases in file order, optional end line."""

    path: Path
    header: dict[str, Any]
    cases: list[CaseResult]
    end: dict[str, Any] | None = None
    unreadable_lines: list[int] = field(default_factory=list)
    unreadable: list[BadLine] = field(default_factory=list)
    #: Case id -> the numbers of its lines, for each id with more than one (the last one counts):
    #: no run writes that, so every reader says so (``repeated_note``); ``diff`` refuses it.
    repeated: dict[str, list[int]] = field(default_factory=dict)
    #: Case id -> (line number, byte offset) of its line, and whether ``cases`` hold only a
    #: projection of each line (``load_run(..., project=...)``): ``whole`` then reads lines again.
    where: dict[str, tuple[int, int]] = field(default_factory=dict)
    projected: bool = False
    #: What the first read saw of the file (``harness.core.results.RunRecords.seen``): ``whole``
    #: refuses a file that changed since (``ResultsChanged``), so no report mixes two files.
    seen: LinesRead | None = None
    #: Case id -> its whole line, when the first pass kept them beside the projections
    #: (``load_run_summary``, a small file); None: ``whole`` reads them again.
    kept: dict[str, CaseLine] | None = None

    def whole(self, cases: Iterable[CaseResult]) -> Iterator[CaseResult]:
        """``cases`` (of this run) with their whole lines, in the order given: the cases
        themselves when the run was read whole, the lines the first pass kept (``kept``), else
        each line read again from the file, one at a time, so a caller that walks every case
        holds one whole line at a time. ``ResultsError`` when the file changed since it was read."""
        if not self.projected:
            yield from cases
            return
        if self.kept is not None:
            self._unchanged()
            for c in cases:
                yield CaseResult(self.kept[c.id])
            return
        places = ((c.id, *self.where[c.id]) for c in cases)
        try:
            for line in read_cases_at(str(self.path / RESULTS_FILE), places, self.seen):
                yield CaseResult(line)
        except OutOfMemory:
            raise
        except FileChanged as exc:
            raise ResultsChanged(str(exc)) from None
        except FileRefused as exc:
            raise ResultsError(str(exc)) from None

    def _unchanged(self) -> None:
        """``ResultsChanged`` unless results.jsonl is still the file the first pass read, whole
        and unchanged (its identity, size and modification time then and now: what a second pass
        checks before it reads a line again)."""
        path = str(self.path / RESULTS_FILE)
        try:
            with open_regular(path, "results file") as f:
                if self.seen is not None:
                    self.seen.check(f, path, "results file")
        except FileChanged as exc:
            raise ResultsChanged(str(exc)) from None
        except FileRefused as exc:
            raise ResultsError(str(exc)) from None

    @property
    def counts(self) -> Counter:
        """Outcome -> number of cases (only outcomes that occur)."""
        return Counter(c.outcome for c in self.cases)

    @property
    def interrupted(self) -> bool:
        """True when the run did not write its end line, or the end line says so."""
        if self.end is None:
            return True
        return bool(self.end.get("interrupted"))

    @property
    def ep_alias(self) -> str:
        """The ``--ep`` alias the run used (for rerun lines); ``ep`` or ``cpu`` when not recorded."""
        return str(self.header.get("ep_alias") or self.header.get("ep") or "cpu")

    def by_id(self) -> dict[str, CaseResult]:
        """Cases keyed by id; if a resumed run wrote a case twice, the last line wins."""
        return {c.id: c for c in self.cases}


class ResultsError(ValueError):
    """The run folder has no readable results.jsonl; the message says what to do."""


class ResultsChanged(ResultsError):
    """results.jsonl changed between two reads of it (``Run.whole``): read the run again
    (``read_stable``), or refuse it."""


#: Times a reader reads a run again whose results.jsonl changed under it before it refuses it.
READS = 3


def read_stable(read: Callable[[], Any]) -> Any:
    """``read()``, again while it raises ``ResultsChanged`` (the file changed between its two
    passes), at most ``READS`` times; then ``ResultsError`` saying the file keeps changing."""
    for attempt in range(READS):
        try:
            return read()
        except ResultsChanged as exc:
            last = exc
            if attempt == READS - 1:
                raise ResultsError(f"{last} (read {READS} times, changed each time)") from None
    raise AssertionError("unreachable")  # pragma: no cover


def load_run(run_dir: str | Path, project: Callable[[CaseLine], CaseLine] | None = None) -> Run:
    """Read ``run_dir/results.jsonl``; ``project`` keeps only part of each case line
    (``harness.core.results.load_records``: a reader that needs a few keys holds only those).

    Raises ``ResultsError`` when the file is missing, cannot be read (not a regular file, over
    the size cap) or has no run header; ``OutOfMemory`` (a ``FileRefused``: exit 2 with its
    message) when it would not fit in what this process may still allocate.  A line that is not a record of the schema (an
    interrupted write, damage) is skipped and listed in ``Run.unreadable_lines``/``unreadable``.
    """
    run_dir = Path(run_dir)
    path = run_dir / RESULTS_FILE
    if not path.is_file():
        raise ResultsError(f"{path} does not exist: pass a folder written by `ep-testbed run --out`.")
    try:
        records = load_records(results_path(run_dir), project)
    except OutOfMemory:
        raise  # not a damaged file: the caller says what is kept and how to finish
    except FileRefused as exc:
        raise ResultsError(str(exc)) from None
    if records.header is None:
        damaged = records.damaged[0] if records.damaged else None
        raise ResultsError(f"{path} has no run header line ({{\"type\": \"run\", ...}}); " + (
            f"its first damaged line, {damaged.number}, may have been it: {safe(damaged.reason)}.\nNote: repair "
            "that line, or rerun into an empty folder" if damaged else "it was not written by `ep-testbed run`."))
    return Run(path=run_dir, header=records.header, cases=[CaseResult(c) for c in records.cases.values()],
               end=records.end, unreadable_lines=[b.number for b in records.bad_lines], repeated=records.repeated,
               unreadable=list(records.bad_lines), where=records.where, projected=project is not None,
               seen=records.seen)


def skipped_line(bad: BadLine) -> str:
    """What a reader says of a line of results.jsonl it skipped: torn (an interrupted write) or damaged, and why."""
    return "torn last line (an interrupted write)" if bad.torn else f"damaged line: {safe(bad.reason, 200)}"


def repeated_note(run: Run) -> str | None:
    """One line saying which case ids of ``run`` have more than one result (the last is kept), or None."""
    if not run.repeated:
        return None
    case_id, numbers = next(iter(run.repeated.items()))
    return (f"{len(run.repeated)} case id(s) of {safe(run.path / RESULTS_FILE)} have more than one result, e.g. "
            f"{safe(case_id, 120)!r} on lines {', '.join(map(str, numbers))}: the last line of each counts "
            "(no run writes two; delete the wrong line, or rerun into an empty folder)")


#: The keys of a case line that the summary views of a report read for every case (counts,
#: matrices, summary.json, the JUnit totals, which cases get a section), kept whole.
SUMMARY_KEYS = ("type", "id", "op", "dtype", "tags", "outcome", "mismatches", "ties", "nonfinite_mismatches",
                "index_mismatches", "duration_s", "artifacts", "scope")
#: Of these, the values many cases share (an operator, a data type, a tag set): held once.
SHARED_KEYS = frozenset({"type", "op", "dtype", "tags", "outcome", "scope"})


class SummaryView:
    """A case line cut to what the summary views read (``SUMMARY_KEYS``; of ``errors`` its
    ``ERROR_KEYS``; of each flag its field and value; of ``error_stats`` the elements compared,
    as ``figures.compared_elements`` sums them; of ``attribution`` its cause), so a report holds
    every case small and reads a whole line again only where it shows one (``Run.whole``).
    Every property of ``CaseResult`` that those views use reads the same from it as from the
    whole line; the message, worst elements, statistics and the rest are left out.

    One instance per file read: values that many lines repeat (operator, data type, tags, each
    flag) are held once, up to ``SHARED_MAX`` distinct ones, so a case costs about its id and
    a few numbers. Views are read, never changed, so sharing is safe."""

    SHARED_MAX = 100_000

    def __init__(self) -> None:
        """An empty table of shared values."""
        self._shared: dict[str, Any] = {}

    def share(self, value: Any) -> Any:
        """``value``, or an equal one seen before (the one held), keyed by its ``repr``: of a
        decoded JSON value it tells types apart as its JSON text does (``1``, ``1.0``, ``True``,
        ``"1"``), at a quarter of the cost of ``json.dumps``."""
        if isinstance(value, (int, float)) or value is None:
            return value
        key = repr(value)
        held = self._shared.get(key)
        if held is not None:
            return held
        if len(self._shared) < self.SHARED_MAX:
            self._shared[key] = value
        return value

    def __call__(self, line: CaseLine) -> CaseLine:
        """The view of one case line (class docstring): a ``CaseLine`` with fewer keys."""
        fields: Mapping[str, Any] = line  # read key by key
        view = {key: self.share(fields[key]) if key in SHARED_KEYS else fields[key] for key in SUMMARY_KEYS
                if key in fields}
        errors = line.get("errors")
        if isinstance(errors, dict):
            view["errors"] = {key: errors[key] for key in ERROR_KEYS if key in errors}
        flags = line.get("flags")
        if isinstance(flags, list):
            view["flags"] = [self.share({k: f[k] for k in ("field", "value") if k in f})
                             for f in flags if isinstance(f, dict)]
        stats = line.get("error_stats")
        if isinstance(stats, dict) and stats:
            total = sum(s.get("elements", 0) for s in stats.values()
                        if isinstance(s, dict) and isinstance(s.get("elements"), int))
            view["error_stats"] = self.share({"all": {"elements": total}})
        attribution = line.get("attribution")
        if isinstance(attribution, dict):
            view["attribution"] = self.share({"cause": attribution.get("cause")})
        return cast(CaseLine, view)



#: A results file up to this size is kept whole by the first pass of ``load_run_summary`` too,
#: when it fits in memory parsed (``PARSED_BYTES_PER_BYTE``): a 1000-case fuzz run writes about 5 MB.
KEEP_WHOLE_BYTES = 32 * 2**20


def load_run_summary(run_dir: str | Path) -> Run:
    """``load_run`` keeping each case line's ``SummaryView`` (memory: the cases times a small
    view, not the file parsed whole); ``Run.whole`` reads a case's line again, or, for a file of
    at most ``KEEP_WHOLE_BYTES`` that fits in memory parsed, takes it from ``Run.kept``."""
    view = SummaryView()
    kept: dict[str, CaseLine] = {}

    def keeping(line: CaseLine) -> CaseLine:
        """The view of ``line``, the line itself kept (the last line of an id wins, as in ``cases``)."""
        kept[line["id"]] = line
        return view(line)

    keep = _small(Path(run_dir) / RESULTS_FILE)
    run = load_run(run_dir, keeping if keep else view)
    run.kept = kept if keep else None
    return run


def _small(path: Path) -> bool:
    """Whether the results file ``path`` is small enough to keep whole beside its views."""
    try:
        size = path.stat().st_size
    except OSError:
        return False  # load_run says what is wrong with it
    return size <= KEEP_WHOLE_BYTES and memory.check_fits("keeping its lines", size * PARSED_BYTES_PER_BYTE) is None
