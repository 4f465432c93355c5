"""``RUN_DIR/results.jsonl``: the one record of a run, written as it happens.

Line 1 is ``{"type": "run", ...}`` (EP, ONNX Runtime flavour and version, machine, seed,
command, tolerances, case count); then one ``{"type": "case", ...}`` line per finished case,
flushed and fsync'ed as it is written, so a killed run keeps every finished case; an optional
last ``{"type": "end", ...}`` line has the counts and whether the run was interrupted.

Numbers that JSON cannot hold (NaN, +-inf in errors or worst elements) are written as the
strings ``"nan"``, ``"inf"``, ``"-inf"``; ``decode_number`` reads them back.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections import Counter
from typing import Any, Iterable, Iterator

import numpy as np

RESULTS_FILE = "results.jsonl"

#: Every outcome a case line may carry, in report order.
OUTCOMES = ("pass", "tie-only", "fail", "crash", "timeout", "error", "fixed", "known", "not-on-ep", "inexpressible")
#: Outcomes that make ``ep-testbed run`` exit non-zero (``not-on-ep`` / ``inexpressible`` only on request).
FAILING = ("fail", "crash", "timeout", "error", "fixed")


def now() -> str:
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
    """Inverse of ``jsonable`` for one number."""
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return value


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(jsonable(record), allow_nan=False, separators=(", ", ": "))


class ResultsWriter:
    """Appends records to ``results.jsonl``; every line is flushed and fsync'ed."""

    def __init__(self, run_dir: str):
        os.makedirs(run_dir, exist_ok=True)
        self.path = os.path.join(run_dir, RESULTS_FILE)
        self._file = open(self.path, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(dumps(record) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_records(path: str) -> Iterator[dict[str, Any]]:
    """The records of a results file; a torn last line (a run killed mid-write) is skipped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def read_run(run_dir: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, Any] | None]:
    """``(run header, case lines, end line)`` of a run folder (the last case line wins per id)."""
    header = end = None
    cases: dict[str, dict[str, Any]] = {}
    for record in read_records(os.path.join(run_dir, RESULTS_FILE)):
        kind = record.get("type")
        if kind == "run" and header is None:
            header = record
        elif kind == "case":
            cases[record["id"]] = record
        elif kind == "end":
            end = record
    return header, list(cases.values()), end


def rewrite_for_resume(run_dir: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Prepare an interrupted run for ``--resume``: keep its header and finished case lines,
    drop the old end line and any torn line (atomic replace). Returns (header, cases)."""
    header, cases, _ = read_run(run_dir)
    path = os.path.join(run_dir, RESULTS_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        if header is not None:
            f.write(dumps(header) + "\n")
        for case in cases:
            f.write(dumps(case) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return header, cases


def count_outcomes(cases: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Outcome -> number of cases, every outcome listed (zeros included), in ``OUTCOMES`` order."""
    counter = Counter(c.get("outcome") for c in cases)
    counts = {o: counter.get(o, 0) for o in OUTCOMES}
    for other, n in counter.items():
        if other not in counts:
            counts[str(other)] = n
    return counts


def end_record(counts: dict[str, int], interrupted: bool, **extra: Any) -> dict[str, Any]:
    return {"type": "end", "finished": now(), "counts": counts, "interrupted": interrupted, **extra}
