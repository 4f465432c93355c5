"""Read a run folder's ``results.jsonl`` into plain Python objects.

The file and its schema (record types, case-line keys, outcomes, the spelling of NaN and
infinities) are defined once, in ``harness.results``; this module only reads it: a ``run``
header line, one ``case`` line per finished case (flushed as it finishes), and an optional
``end`` line.  An interrupted run may end in a half-written line; it is skipped and counted in
``Run.unreadable_lines`` so nothing that *was* finished is lost.  Nothing here interprets
numbers beyond reading them.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ep_testbed.harness.results import (
    CASE,
    END,
    ERROR_KEYS,
    RESULTS_FILE,
    RUN,
    decode_number,
)


@dataclass
class CaseResult:
    """One ``case`` line.  ``raw`` keeps the whole line; the attributes are the fields reports use."""

    raw: dict[str, Any]

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
        tags = self.raw.get("tags") or {}
        return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}

    @property
    def errors(self) -> dict[str, float | None]:
        """``ERROR_KEYS`` -> number or None, NaN/infinities decoded."""
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
        """The mapper's flags, as written."""
        return list(self.raw.get("flags") or [])

    @property
    def worst(self) -> list[dict[str, Any]]:
        """The worst elements, NaN/infinities decoded; entries that are not objects are dropped."""
        return [{k: decode_number(v) for k, v in w.items()} for w in self.raw.get("worst") or []
                if isinstance(w, dict)]

    @property
    def placement(self) -> dict[str, str]:
        """Node name -> the provider it ran on."""
        return dict(self.raw.get("placement") or {})

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
    def expected_outcome(self) -> dict[str, Any] | None:
        """The expectation that matched the case, None if none did."""
        return self.raw.get("expected_outcome") or None


@dataclass
class Run:
    """A whole run: header, cases in file order, optional end line."""

    path: Path
    header: dict[str, Any]
    cases: list[CaseResult]
    end: dict[str, Any] | None = None
    unreadable_lines: list[int] = field(default_factory=list)

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


def load_run(run_dir: str | Path) -> Run:
    """Read ``run_dir/results.jsonl``.

    Raises ``ResultsError`` when the file is missing or has no run header.  A line that is not
    JSON (an interrupted write) is skipped and its number kept in ``Run.unreadable_lines``.
    """
    run_dir = Path(run_dir)
    path = run_dir / RESULTS_FILE
    if not path.is_file():
        raise ResultsError(f"{path} does not exist: pass a folder written by `ep-testbed run --out`.")
    header: dict[str, Any] | None = None
    cases: list[CaseResult] = []
    end = None
    bad: list[int] = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                bad.append(number)
                continue
            if not isinstance(obj, dict):
                bad.append(number)
                continue
            kind = obj.get("type")
            if kind == RUN and header is None:
                header = obj
            elif kind == CASE:
                cases.append(CaseResult(obj))
            elif kind == END:
                end = obj
            else:
                bad.append(number)
    if header is None:
        raise ResultsError(f"{path} has no run header line ({{\"type\": \"run\", ...}}); "
                           "it was not written by `ep-testbed run`.")
    # A resumed run may repeat an id; keep the last result but the first position.
    seen: dict[str, int] = {}
    unique: list[CaseResult] = []
    for c in cases:
        if c.id in seen:
            unique[seen[c.id]] = c
        else:
            seen[c.id] = len(unique)
            unique.append(c)
    return Run(path=run_dir, header=header, cases=unique, end=end, unreadable_lines=bad)
