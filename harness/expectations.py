"""Known divergences as data: ``harness/expectations/<ep-alias>.json``.

A file holds a list of expectations, each::

    {"id": "roi_pooling/*",            # fnmatch pattern over case ids (case-sensitive)
     "tags": {"dtype": "float32"},     # optional: every listed tag must equal the case's
     "flags": [{"field": "ReductionFunction", "value": "MAX", "kind": "diverges"}],
                                       # optional: the mapper must have raised each of these flags
                                       # (only the keys given are compared)
     "outcome": "fail",                # or a list, e.g. ["fail", "crash"]
     "strict": true,                   # optional, default true (see below)
     "reason": "one sentence: what differs and why",
     "link": "https://github.com/... (the public issue, or the source line when there is none)"}

The first expectation that matches a case applies. A case whose outcome is one it expects
becomes ``known``; one that passes (``pass``/``tie-only``) becomes ``fixed`` -- counted as a
failure, like a strict xfail, so a fix is noticed and the entry removed -- unless the entry
says ``"strict": false`` (a divergence that only some inputs reveal), where a pass stays a
pass. Any other outcome stays as it is (a crash where a numeric failure was expected is news).

Entries with ``flags`` can only be decided once the case has been mapped, i.e. on its result
line; ``match`` without flags treats them as not matching.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .results import OUTCOMES, PASSING
from .untrusted_files import FileRefused, read_json

EXPECTATIONS_DIR = os.path.join(os.path.dirname(__file__), "expectations")



@dataclass(frozen=True)
class Expectation:
    """One entry of an expectations file."""

    id: str
    outcome: tuple[str, ...]
    reason: str
    link: str
    tags: tuple[tuple[str, str], ...] = ()
    flags: tuple[tuple[tuple[str, Any], ...], ...] = ()
    strict: bool = True

    def matches(self, case_id: str, tags: Mapping[str, str] | None = None,
                flags: list[Mapping[str, Any]] | None = None) -> bool:
        if not fnmatch.fnmatchcase(case_id, self.id):
            return False
        tags = tags or {}
        if not all(str(tags.get(k)) == v for k, v in self.tags):
            return False
        if self.flags:
            if flags is None:
                return False
            return all(any(all(f.get(k) == v for k, v in wanted) for f in flags) for wanted in self.flags)
        return True

    def to_json(self) -> dict[str, Any]:
        outcome: Any = self.outcome[0] if len(self.outcome) == 1 else list(self.outcome)
        return {"outcome": outcome, "reason": self.reason, "link": self.link, "pattern": self.id,
                "strict": self.strict}


class Expectations:
    """The expectations of one EP, in file order."""

    def __init__(self, entries: Iterable[Expectation] = (), source: str | None = None, digest: str | None = None):
        """``entries`` in file order; ``source`` the file; ``digest`` a sha256 of its content
        (recorded in run headers, so ``--resume`` notices an edited file)."""
        self.entries = list(entries)
        self.source = source
        self.digest = digest

    def match(self, case_id: str, tags: Mapping[str, str] | None = None,
              flags: list[Mapping[str, Any]] | None = None) -> Expectation | None:
        for entry in self.entries:
            if entry.matches(case_id, tags, flags):
                return entry
        return None

    def __len__(self) -> int:
        return len(self.entries)


def apply(outcome: str, expectation: Expectation | None) -> str:
    """The reported outcome of a case whose raw outcome is ``outcome``."""
    if expectation is None:
        return outcome
    if outcome in expectation.outcome:
        return "known"
    if outcome in PASSING:
        return "fixed" if expectation.strict else outcome
    return outcome


def parse(data: Any, source: str = "<expectations>") -> Expectations:
    """Expectations from the decoded JSON of a file; ValueError naming the entry and field on
    bad data (a field of the wrong type, an unknown outcome, a key no entry has)."""
    items = data.get("expectations") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError(f"{source}: expected {{\"expectations\": [...]}}")
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return Expectations([_entry(item, f"{source}: expectations[{n}]") for n, item in enumerate(items)], source,
                        digest)


#: Every key an entry may have (the module docstring says what each means).
ENTRY_KEYS = ("id", "tags", "flags", "outcome", "strict", "reason", "link")


def _entry(item: Any, where: str) -> Expectation:
    """One entry of an expectations file, each field's type checked; ValueError naming it."""
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object")
    unknown = sorted(str(k) for k in item if k not in ENTRY_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(ENTRY_KEYS)})")
    missing = [k for k in ("id", "outcome", "reason", "link") if not item.get(k)]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)} (id, outcome, reason and link are required)")
    for key in ("id", "reason", "link"):
        if not isinstance(item[key], str):
            raise ValueError(f"{where}: {key} must be a string")
    outcome = item["outcome"]
    outcomes = tuple(outcome) if isinstance(outcome, list) else (outcome,)
    bad = [o for o in outcomes if not isinstance(o, str) or o not in EXPECTABLE]
    if bad or not outcomes:
        raise ValueError(f"{where}: outcome {bad[0] if bad else outcome!r} is not one of {', '.join(EXPECTABLE)}")
    tags = item.get("tags") or {}
    if not isinstance(tags, dict) or not all(isinstance(v, (str, int, float, bool)) for v in tags.values()):
        raise ValueError(f"{where}: tags must be an object of tag -> value, e.g. {{\"dtype\": \"float32\"}}")
    flags = item.get("flags") or []
    if not isinstance(flags, list) or not all(isinstance(f, dict) and f for f in flags):
        raise ValueError(f"{where}: flags must be a list of objects like "
                         '{"field": "ReductionFunction", "value": "MAX", "kind": "diverges"}')
    strict = item.get("strict", True)
    if not isinstance(strict, bool):
        raise ValueError(f"{where}: strict must be true or false")
    return Expectation(id=item["id"], outcome=outcomes, reason=item["reason"], link=item["link"],
                       tags=tuple(sorted((str(k), str(v)) for k, v in tags.items())),
                       flags=tuple(tuple(sorted(f.items())) for f in flags), strict=strict)


def load(path: str) -> Expectations:
    """The expectations in ``path``, read through ``untrusted_files``; ``FileRefused`` naming the
    file (and the entry and field) when it is not an expectations file."""
    data = read_json(path, "expectations file")
    try:
        return parse(data, path)
    except ValueError as exc:
        raise FileRefused(path, f"not an expectations file: {str(exc).removeprefix(f'{path}: ')}",
                          hint='each entry is {"id": GLOB, "outcome": ..., "reason": ..., "link": ...}') from None


def for_ep(alias: str) -> Expectations:
    """The bundled expectations of an EP alias (empty when there is no file for it)."""
    path = os.path.join(EXPECTATIONS_DIR, f"{alias}.json")
    return load(path) if os.path.exists(path) else Expectations((), None)


#: Outcomes an expectation may name: raw outcomes other than a plain pass (``known`` and ``fixed``
#: are what applying one produces, not inputs; ``inexpressible`` is decided before any EP runs).
EXPECTABLE = tuple(o for o in OUTCOMES if o not in ("pass", "inexpressible", "known", "fixed"))
