"""``RUN_DIR/results.jsonl``: the one record of a run, and its schema.

Line 1 is ``{"type": "run", ...}`` (EP, ONNX Runtime flavour and version, machine, seed,
command, tolerances, case count); then one ``{"type": "case", ...}`` line per finished case,
flushed as it is written, so a killed run keeps every finished case (and fsync'ed at least every
``ResultsWriter.SYNC_S`` seconds and when the file closes, so a machine that loses power loses
at most the last of them); an optional
last ``{"type": "end", ...}`` line has the counts and whether the run was interrupted.

This module is the schema every writer and reader shares (the harness's runner, merge, summary
and progress line; the reports; ``ep-testbed gen``): the file name, the record types, the keys
of a case line (``CASE_KEYS``), every outcome (``OUTCOMES``) and which of them fail a run, count
as a pass or did not test the EP, the report order, how numbers JSON cannot hold are written,
and the name of a case's folder. It imports neither onnx nor onnxruntime: the reports import it.

Numbers that JSON cannot hold (NaN, +-inf in errors or worst elements) are written as the
strings ``"nan"``, ``"inf"``, ``"-inf"``; ``decode_number`` reads them back.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from types import UnionType
from typing import (
    Any,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    TypedDict,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

import numpy as np

from .memory import check_fits, headroom
from .untrusted_files import (
    BadLine,
    FileRefused,
    LinesRead,
    inside,
    memory_refused,
    open_output,
    read_json_lines,
    read_json_lines_at,
    read_json_lines_placed,
)

RESULTS_FILE = "results.jsonl"
#: The folder of a run that holds one folder per case (see ``case_dir``).
CASES_DIR = "cases"

#: The ``type`` of each record: the header, one line per case, the closing line.
RUN, CASE, END = "run", "case", "end"
RECORD_TYPES = (RUN, CASE, END)

#: JSON value kinds of the schema below (``number``: an int or float, or the spelling of a
#: non-finite float that ``jsonable`` writes; never a bool).
STR, OBJECT, LIST, INT, NUMBER, BOOL, NULL = "string", "object", "list", "integer", "number", "boolean", "null"


class CaseLine(TypedDict, total=False):
    """One case line: every key, in the order the harness writes them, with the Python type of its
    value. This is the one list of case-line keys: ``CASE_SCHEMA`` (the JSON kinds each value may
    have, which ``check_record`` holds every line read back to) and ``CASE_KEYS`` are derived from
    it, and ``case_record`` builds a line with exactly these keys. Writers write every key; readers
    accept lines of older writers that lack all but ``REQUIRED_KEYS`` (each reader has a meaning
    for a missing key), and a reader that keeps only part of each line (``load_records``'
    ``project``) holds a ``CaseLine`` with fewer keys. A ``float`` is a JSON number: an int or
    float, or (in a line read back) the spelling of a non-finite float that ``jsonable`` writes
    (``decode_number``)."""

    type: str
    id: str
    op: str
    dtype: str | None
    tags: dict[str, Any] | None
    outcome: str
    ep: str | None
    placement: dict[str, Any] | None
    placement_source: str | None
    errors: dict[str, Any] | None
    worst: list[dict[str, Any]] | None
    mismatches: int | None
    ties: int | None
    tolerance_used: float | None
    bound: dict[str, Any] | None
    knife_edges: list[dict[str, Any]] | None
    flags: list[dict[str, Any]] | None
    message: str | None
    expected_outcome: dict[str, Any] | None
    duration_s: float | None
    artifacts: str | None
    # How a compared case failed, beyond the largest errors: of ``mismatches``, the NaN/inf ones and
    # the index ones; per output, the error distribution and the smallest passing tolerance
    # (``harness.core.error_stats``).
    nonfinite_mismatches: int | None
    index_mismatches: int | None
    error_stats: dict[str, Any] | None
    # Why a failed case failed (``harness.run.attribution``): ``cause`` (operator, helper,
    # composition, unknown), ``reason`` (one sentence), each operator node judged on its own EP
    # inputs (``nodes``), the helper named and the size of its change.
    attribution: dict[str, Any] | None
    # A failure re-checked on a second EP (``harness.run.recheck``, ``run --also-on``): ``scope``
    # is "shared with <EP>" or "only on <EP>", ``also_on`` what the second EP did.
    scope: str | None
    also_on: dict[str, Any] | None
    # Where the case's time went (``harness.run.case_run``): ``prepare_s`` (of it ``reference_s``,
    # the expected outputs and their bounds), its share of the ``build_s`` and ``run_s`` of every
    # session it took part in, ``judge_s``, and ``shared_by`` (how many cases shared the session
    # its outputs came from: 1 unbatched, up to ``--batch``).
    timings: dict[str, Any] | None
    # Which extreme values the case's inputs hold (``harness.core.signature.input_extremes``:
    # nan, inf, -inf, huge), for an expectation whose cause only such inputs can show.
    input_extremes: list[str] | None
    # Why a case ended as it did when its outcome alone does not say (``harness.run.pool``):
    # ``reason`` ``device-lost`` on a ``crash`` whose device was removed or lost
    # (``harness.eps.device_loss``), ``detail`` what the EP said.
    reason: str | None
    detail: str | None
    # Which readings of the reference reproduce a failed case's differing elements
    # (``harness.run.readings``): ``tried``, ``mismatches``, ``explained`` (reading or "a+b"
    # combination -> elements), ``unexplained`` and ``first_unexplained``; what a ``known`` rests on.
    readings: dict[str, Any] | None


#: The JSON kind of each Python type a schema's annotations use.
_KIND_OF_TYPE: dict[type, str] = {str: STR, dict: OBJECT, list: LIST, int: INT, float: NUMBER, bool: BOOL,
                                  type(None): NULL}


def schema_of(record_type: type) -> dict[str, tuple[str, ...]]:
    """Key -> the JSON kinds its value may have, for every key of the TypedDict ``record_type`` in
    its order: each member of an annotation's union (``str | None`` is ``(string, null)``; a
    ``dict[...]`` an object, a ``list[...]`` a list, a ``float`` a number). ``TypeError`` for an
    annotation that is no such union, so a key of a kind JSON cannot hold is found at import."""
    schema = {}
    for key, hint in get_type_hints(record_type).items():
        members = get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,)
        kinds = tuple(_KIND_OF_TYPE.get(get_origin(member) or member, "") for member in members)
        if "" in kinds:
            raise TypeError(f"{record_type.__name__}.{key}: {hint} is not a union of "
                            f"{', '.join(t.__name__ for t in _KIND_OF_TYPE)}")
        schema[key] = kinds
    return schema


#: Every key of a case line, in the order the harness writes them, with the JSON kinds its value
#: may have (from ``CaseLine``). ``case_record`` builds a line from them, so a line never lacks one
#: and never carries another; ``check_record`` holds every line read back to them.
CASE_SCHEMA: dict[str, tuple[str, ...]] = schema_of(CaseLine)
CASE_KEYS = tuple(CASE_SCHEMA)
#: The kinds the keys of a run header may hold (a header may carry more keys: the EP's
#: identity, the selection, limits; readers ignore what they do not know).
HEADER_SCHEMA: dict[str, tuple[str, ...]] = {
    "type": (STR,), "ep": (STR, NULL), "seed": (INT, NULL), "tolerances": (OBJECT, NULL),
    "ep_alias": (STR, NULL), "ep_options": (OBJECT, NULL), "ort_flavour": (STR, NULL), "ort_version": (STR, NULL),
    "command": (STR, NULL), "started": (STR, NULL), "case_count": (INT, NULL), "shard": (STR, NULL),
    "session_options": (OBJECT, NULL), "machine": (OBJECT, NULL), "selection": (OBJECT, NULL),
    "available_providers": (LIST, NULL), "rerun_args": (LIST, NULL), "also_on": (STR, NULL), "ep_flag": (STR, NULL),
    "gpu": (OBJECT, NULL), "fuzz": (OBJECT, NULL),
}
#: The header keys that list text (readers join the words or pass them on as a command line).
HEADER_WORDS = ("available_providers", "rerun_args")
#: The kinds the keys of an end line may hold.
END_SCHEMA: dict[str, tuple[str, ...]] = {"type": (STR,), "counts": (OBJECT, NULL), "interrupted": (BOOL, NULL),
                                          "finished": (STR, NULL)}
#: The keys a line read back must have: its type, and a case line its id. Writers write every
#: key of the schema; readers accept lines of older writers that lack the others (each reader
#: has a meaning for a missing key), but never a key holding a kind the schema does not allow.
REQUIRED_KEYS = {CASE: ("type", "id"), RUN: ("type",), END: ("type",)}
#: The keys of a case line's ``errors``.
ERROR_KEYS = ("max_abs", "max_rel", "max_ulp")

# Each outcome is named once, in the group that says what it means; OUTCOMES and REPORT_ORDER
# are built from the groups, so no second list can disagree.
#: Counted as a pass (``tie-only``: some MaxPool indices point at an equal maximum).
PASSING = ("pass", "tie-only")
#: Failing outcomes without a verdict on the EP's numbers: the worker died (``crash``), ran past
#: ``--timeout``, or the mapper, the reference or the harness raised (``error``). JUnit ``<error>``.
NO_VERDICT = ("crash", "timeout", "error")
#: The EP (or the harness) got the case wrong: ``fail`` is out of tolerance, a wrong shape or
#: dtype, or the EP raised. A run-to-run diff counts these as a case going bad.
WRONG = ("fail",) + NO_VERDICT
#: Outcomes that fail a run: exit code 1, a JUnit failure or error, summary.json's ``bad`` and
#: ``failing``, the report's verdict. ``fixed`` (an expectation says the case fails, but it
#: passed) fails too, like pytest's strict xpass, so the stale expectation gets removed.
FAILING = WRONG + ("fixed",)
#: Failed as an expectation says (``known``): reported, does not fail a run (like an xfail).
EXPECTED_FAILURE = ("known",)
#: Did not test the EP: an op node ran elsewhere, ONNX cannot express the desc, or an emulated
#: device could not run the EP's kernel (``emulation-gap``: DirectML under Wine, where vkd3d
#: refused one of DirectML's shaders; the device failed, not DirectML). Never a pass; a failure
#: only with ``--fail-on-not-on-ep`` / ``--fail-on-inexpressible``.
NOT_TESTED = ("not-on-ep", "inexpressible", "emulation-gap")
#: Every outcome a case line may carry (the order of the end line's and the summary table's counts).
OUTCOMES = PASSING + FAILING + EXPECTED_FAILURE + NOT_TESTED
#: The order reports list outcomes in: what needs a person first (counts, matrix colours, case
#: sections); a known divergence comes before a case that never reached the EP because its
#: repro bundle is what goes into a bug report.
REPORT_ORDER = FAILING + EXPECTED_FAILURE + NOT_TESTED + PASSING[::-1]

#: How the non-finite floats are spelled in a results file.
_NONFINITE_TEXT = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def now() -> str:
    """The current UTC time as ISO 8601 to the second (the ``started``/``finished`` stamps)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def jsonable(value: Any) -> Any:
    """``value`` with NumPy scalars/arrays as Python values and non-finite floats as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def decode_number(value: Any) -> Any:
    """Inverse of ``jsonable`` for one number: ``"nan"``, ``"inf"``, ``"-inf"`` become floats.

    Other spellings of them that ``float()`` reads (``NaN``, ``+inf``, ``Infinity``; any case) are
    read too, so a hand-edited file still loads; any other value is returned unchanged.
    """
    if isinstance(value, str) and value.lower() in (*_NONFINITE_TEXT, "+inf", "infinity", "+infinity",
                                                      "-infinity"):
        return float(value)
    return value


def dumps(record: Mapping[str, Any]) -> str:
    """One record as one JSON line (no newline); non-finite numbers as ``jsonable`` spells them."""
    return json.dumps(jsonable(record), allow_nan=False, separators=(", ", ": "))


def case_record(**fields: Any) -> CaseLine:
    """A case line with exactly ``CASE_KEYS``, in that order: ``fields`` set, the rest ``None``.

    Raises ``KeyError`` for a field the schema does not list, so no writer adds a key that the
    readers do not know about.
    """
    unknown = sorted(set(fields) - set(CASE_KEYS))
    if unknown:
        raise KeyError(f"case line field(s) {unknown} are not in harness.core.results.CASE_KEYS {list(CASE_KEYS)}. "
                       "Note: add a new key to CASE_KEYS (and the readers) first.")
    return cast(CaseLine, {key: CASE if key == "type" else fields.get(key) for key in CASE_KEYS})


def keep_keys(line: CaseLine, keys: Iterable[str]) -> CaseLine:
    """The projection of ``line`` on ``keys`` (those it has, in the order of ``keys``): what a
    reader that needs a few keys keeps of each line (``load_records``' ``project``)."""
    fields: Mapping[str, Any] = line
    return cast(CaseLine, {key: fields[key] for key in keys if key in fields})


def safe_id(case_id: str) -> str:
    """A folder name for a case id, portable to Windows, unique via a short hash of the id.

    ``ep-testbed run`` (``RUN_DIR/cases/<safe id>/``) and ``ep-testbed gen`` (``OUT/<safe id>/``)
    both name a case's folder with it, so the two folders of one case have the same name.
    """
    readable = re.sub(r"[^A-Za-z0-9._+=-]+", "_", case_id).strip("._")[:120]
    # surrogatepass: the same bytes as UTF-8 for every id, and an id holding a lone surrogate
    # (valid JSON) still gets a folder instead of a UnicodeEncodeError
    return f"{readable}-{hashlib.sha1(case_id.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def case_dir(case_id: str) -> str:
    """The artifacts path of a case relative to the run folder (as written in result lines)."""
    return f"{CASES_DIR}/{safe_id(case_id)}"


class ResultsWriter:
    """Appends records to ``results.jsonl``: every line flushed as it is written (a process killed
    after ``write`` returned loses nothing), fsync'ed at least every ``SYNC_S`` seconds and on
    ``close``. An fsync per line took 8 ms here, a third of a whole CPU catalog run."""

    #: The longest a written line waits to be made durable against a machine that loses power.
    SYNC_S = 0.5

    def __init__(self, run_dir: str):
        """Open ``run_dir/results.jsonl`` for appending (made if missing; never through a link)."""
        os.makedirs(run_dir, exist_ok=True)
        self.path = os.path.join(run_dir, RESULTS_FILE)
        self._file = open_output(self.path, "a")
        self._synced = time.monotonic()

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record and flush it (class docstring: when it is also fsync'ed)."""
        self._file.write(dumps(record) + "\n")
        self._file.flush()
        if time.monotonic() - self._synced >= self.SYNC_S:
            self.sync()

    def sync(self) -> None:
        """Make every record written so far durable."""
        os.fsync(self._file.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        """Make everything written durable and close the file (idempotent)."""
        if not self._file.closed:
            try:
                self.sync()
            finally:
                self._file.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def part(record: Any, key: str) -> dict[str, Any]:
    """``record[key]`` when ``record`` is a dict and that value is an object (a dict), else ``{}``:
    a read line's sub-record, which an old or hand-edited file may lack or hold as another kind."""
    value = record.get(key) if isinstance(record, dict) else None
    return value if isinstance(value, dict) else {}


def kind_of(value: Any) -> str:
    """The schema kind of a decoded JSON value (``number`` for floats and for the strings
    ``jsonable`` writes for non-finite floats; ``integer`` for ints, which are numbers too)."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float) or (isinstance(value, str) and decode_number(value) is not value):
        return NUMBER
    kinds: dict[type, str] = {str: STR, dict: OBJECT, list: LIST}
    return kinds.get(type(value), type(value).__name__)


def a_kind(kind: str) -> str:
    """``kind`` (``kind_of``'s word) with its article: ``"an integer"``, ``"a string"``."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def check_record(record: Mapping[str, Any]) -> str | None:
    """What is wrong with one decoded line of a results file, or None when it fits the schema:
    a ``type`` that is not a record type, a key missing, or a value of a kind its key does not
    allow (``CASE_SCHEMA``, ``HEADER_SCHEMA``, ``END_SCHEMA``)."""
    kind = record.get("type")
    schema = {CASE: CASE_SCHEMA, RUN: HEADER_SCHEMA, END: END_SCHEMA}.get(kind) if isinstance(kind, str) else None
    if schema is None or not isinstance(kind, str):
        return f"type {str(kind)[:40]!r} is not one of {', '.join(RECORD_TYPES)}"
    for key in REQUIRED_KEYS[kind]:
        if key not in record:
            return f"{kind} line without {key!r}"
    for key, kinds in schema.items():
        if key not in record:
            continue
        found = kind_of(record[key])
        if found not in kinds and not (found == INT and NUMBER in kinds):
            return f"{key} is {a_kind(found)}; a {kind} line's {key} is {' or '.join(kinds)}"
    if kind == CASE:
        return _check_case_parts(record)
    if kind == RUN:
        return next((f"{key} holds {a_kind(kind_of(bad))}; its entries are strings" for key in HEADER_WORDS
                     for bad in record.get(key) or [] if not isinstance(bad, str)), None)
    return None


def _check_case_parts(line: Mapping[str, Any]) -> str | None:
    """What is wrong inside a case line's containers: ``errors`` values are numbers (or null),
    ``worst`` and ``flags`` entries objects, ``placement`` values and ``tags`` values text or
    numbers (never containers), and the id is not empty."""
    if not line["id"]:
        return "id is empty"
    for key in ERROR_KEYS:
        value = (line.get("errors") or {}).get(key)
        if kind_of(value) not in (NUMBER, INT, NULL):
            return f"errors.{key} is {a_kind(kind_of(value))}; it is a number or null"
    for key in ("worst", "flags"):
        bad = next((kind_of(v) for v in line.get(key) or [] if not isinstance(v, dict)), None)
        if bad:
            return f"{key} holds {a_kind(bad)}; its entries are objects"
    for key in ("placement", "tags"):
        bad = next((kind_of(v) for v in (line.get(key) or {}).values() if isinstance(v, (dict, list))), None)
        if bad:
            return f"{key} holds {a_kind(bad)}; its values are text or numbers"
    return None


@dataclass
class RunRecords:
    """A results file read back: the first run header, every case line (the last per id wins),
    the last end line, every header line seen, and every line that was not a record of the
    schema (``BadLine``: a torn last line is what a killed run leaves; any other is damage)."""

    header: dict[str, Any] | None = None
    cases: dict[str, CaseLine] = field(default_factory=dict)
    end: dict[str, Any] | None = None
    headers: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    #: Case id -> the numbers of its lines, for every id with more than one case line: a file
    #: ``run`` wrote never has one (a resume rewrites it with one line per id), so each is two
    #: results under one id, which readers that keep the last (``cases``) must not lose silently.
    repeated: dict[str, list[int]] = field(default_factory=dict)
    #: Case id -> (line number, byte offset) of the line ``cases`` keeps for it: where
    #: ``read_cases_at`` reads it whole again when ``cases`` holds only a projection of it.
    where: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: What this read saw of the file (its stamp, each line's digest): ``read_cases_at`` holds a
    #: second pass to it, so a file that changed in between is refused, never half-used.
    seen: LinesRead = field(default_factory=LinesRead)

    @property
    def damaged(self) -> list[BadLine]:
        """The bad lines that a killed writer cannot explain (all but a torn last line)."""
        return [line for line in self.bad_lines if not line.torn]


#: Bytes of Python objects one byte of a results file becomes when every line is parsed and kept
#: (3.9 measured on a CPU catalog run): what ``load_records`` checks against free memory first.
PARSED_BYTES_PER_BYTE = 4


def load_records(path: str, project: Callable[[CaseLine], CaseLine] | None = None) -> RunRecords:
    """Every line of the results file ``path`` (read through ``untrusted_files``: a regular
    file, size-capped, strict JSON), sorted into a ``RunRecords``; nothing is dropped silently:
    a line that is not a record of the schema is kept in ``bad_lines`` with its number and why.

    Lines are parsed one at a time; ``project`` (a case line -> the part the reader keeps, e.g.
    the diff's few keys) is applied to each case line before it is kept, so a reader that needs
    little holds little. A whole file kept whole must fit in memory (``PARSED_BYTES_PER_BYTE``):
    ``FileRefused`` saying how much it needs, before parsing, and the same if parsing runs out."""
    size = os.stat(path).st_size if os.path.isfile(path) else 0
    what = "reading its lines"
    if project is None and check_fits(what, size * PARSED_BYTES_PER_BYTE) is not None:
        raise memory_refused(path, what, size * PARSED_BYTES_PER_BYTE)
    have = headroom()
    try:
        return _sorted_records(path, project)
    except MemoryError:
        pass  # out of the handler first, so the lines read so far are freed before the message
    raise memory_refused(path, f"{what} ({size} bytes)", None, have)


def _sorted_records(path: str, project: Callable[[CaseLine], CaseLine] | None) -> RunRecords:
    """``load_records`` without its memory checks."""
    out, first_line = RunRecords(), dict[str, int]()
    for number, offset, item in read_json_lines_placed(path, "results file", out.seen):
        problem = item.reason if isinstance(item, BadLine) else check_record(item)
        if problem is not None:
            out.bad_lines.append(item if isinstance(item, BadLine) else BadLine(number, problem, torn=False))
        elif item["type"] == RUN:
            out.headers.append(item)
            out.header = out.header or item
        elif item["type"] == CASE:
            line = cast(CaseLine, item)  # held to CASE_SCHEMA by check_record
            if line["id"] in out.cases:
                out.repeated.setdefault(line["id"], [first_line[line["id"]]]).append(number)
            first_line.setdefault(line["id"], number)
            out.cases[line["id"]] = project(line) if project else line
            out.where[line["id"]] = (number, offset)
        else:
            out.end = item
    return out


def read_cases_at(path: str, places: Iterable[tuple[str, int, int]], seen: LinesRead | None = None
                  ) -> Iterator[CaseLine]:
    """The whole case lines at ``places`` (``(id, line number, byte offset)`` from
    ``RunRecords.where``), in the order given: the second pass of a reader that kept only a
    projection of each line. Each is held to the schema again and must still be that id's case
    line: ``FileRefused`` naming the line when the file changed between the passes; with ``seen``
    (``RunRecords.seen``) ``FileChanged`` for any change to the file or to a line read (its size,
    modification time, identity, or the line's bytes: one outcome edited in place)."""
    places = iter(places)
    ids: list[str] = []

    def numbered() -> Iterator[tuple[int, int]]:
        for case_id, number, offset in places:
            ids.append(case_id)
            yield number, offset

    for number, item in read_json_lines_at(path, numbered(), "results file", seen):
        case_id = ids.pop()
        problem = item.reason if isinstance(item, BadLine) else check_record(item)
        if problem is None and (item.get("type") != CASE or item.get("id") != case_id):
            problem = f"it no longer holds case {case_id[:120]!r}"
        if problem is not None:
            raise FileRefused(path, f"line {number} changed while it was being read ({problem})",
                              hint="read the folder again once nothing writes into it (a run or a --resume "
                                   "still going)")
        yield cast(CaseLine, item)  # held to CASE_SCHEMA by check_record


def read_records(path: str) -> Iterator[dict[str, Any]]:
    """The records of a results file that fit the schema, in file order; a torn or damaged line
    is skipped (``load_records`` says which and why)."""
    for _, item in read_json_lines(path, "results file"):
        if not isinstance(item, BadLine) and check_record(item) is None:
            yield item


def results_path(run_dir: str | os.PathLike) -> str:
    """``run_dir/results.jsonl``, if it stays inside ``run_dir`` (``FileRefused`` for a link
    that leads out of it: a run folder is data, and only its own file is read)."""
    return str(inside(run_dir, RESULTS_FILE, "results file"))


def read_run(run_dir: str) -> tuple[dict[str, Any] | None, list[CaseLine], dict[str, Any] | None]:
    """``(run header, case lines, end line)`` of a run folder (the last case line wins per id;
    lines that do not fit the schema are skipped: ``load_records`` reports them)."""
    records = load_records(results_path(run_dir))
    return records.header, list(records.cases.values()), records.end


def rewrite_for_resume(run_dir: str, records: RunRecords | None = None
                       ) -> tuple[dict[str, Any] | None, list[CaseLine]]:
    """Prepare an interrupted run for ``--resume``: keep its header and finished case lines,
    drop the old end line and any bad line (atomic replace). Returns (header, cases)."""
    records = records or load_records(results_path(run_dir))
    header, cases = records.header, list(records.cases.values())
    path = os.path.join(run_dir, RESULTS_FILE)
    with open_output(path, "w") as f:  # a temporary file renamed over the old one once whole
        if header is not None:
            f.write(dumps(header) + "\n")
        for case in cases:
            f.write(dumps(case) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return header, cases


def count_outcomes(cases: Iterable[CaseLine]) -> dict[str, int]:
    """Outcome -> number of cases, every outcome listed (zeros included), in ``OUTCOMES`` order;
    an outcome the schema does not know (a newer writer) is counted after them."""
    return tally_outcomes(c.get("outcome") for c in cases)


def tally_outcomes(outcomes: Iterable[Any]) -> dict[str, int]:
    """``count_outcomes`` of the cases whose outcomes are ``outcomes`` (one per case)."""
    counter = Counter(outcomes)
    counts = {o: counter.get(o, 0) for o in OUTCOMES}
    for other, n in counter.items():
        if other not in counts:
            counts[str(other)] = n
    return counts


def end_record(counts: dict[str, int], interrupted: bool, **extra: Any) -> dict[str, Any]:
    """The closing ``end`` line: finish time, ``counts`` (see ``count_outcomes``), ``interrupted``."""
    return {"type": END, "finished": now(), "counts": counts, "interrupted": interrupted, **extra}
