"""Choosing cases: ``-k`` filters over case ids and ``--shard K/N``."""

from __future__ import annotations

import fnmatch
from typing import Any, Iterable, Sequence


def matches(case_id: str, pattern: str) -> bool:
    """A glob (``*``, ``?``, ``[``) matches the whole id; anything else is a substring."""
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(case_id, pattern)
    return pattern in case_id


def select(cases: Iterable[Any], include: Sequence[str] = (), exclude: Sequence[str] = ()) -> list[Any]:
    """Cases whose id matches any ``include`` pattern (all if none given) and no ``exclude`` one.

    Each pattern may hold several alternatives separated by commas (``-k "fp16,max_pool*"``). A
    pattern that is exactly a case's id selects that case alone (so a report's rerun line,
    ``-k <id>``, never picks up ``<id>``-prefixed neighbours such as ``random-s0-015``).
    """
    cases = list(cases)
    ids = {c.id for c in cases}

    def hit(case_id: str, pattern: str) -> bool:
        return case_id == pattern if pattern in ids else matches(case_id, pattern)

    inc = [p for item in include for p in item.split(",") if p]
    exc = [p for item in exclude for p in item.split(",") if p]
    return [c for c in cases
            if (not inc or any(hit(c.id, p) for p in inc)) and not any(hit(c.id, p) for p in exc)]


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``; K counts from 1. ValueError with the allowed form otherwise."""
    k, sep, n = text.partition("/")
    try:
        index, count = int(k), int(n)
    except ValueError:
        index = count = 0
    if not sep or count < 1 or not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return index, count


def shard(cases: Iterable[Any], index: int, count: int) -> list[Any]:
    """The K-th of N disjoint shards (K from 1): every N-th case of the id-sorted list.

    Deterministic (depends only on the ids), balanced (sizes differ by at most one) and mixed
    (each operator and dtype is spread over all shards, so shards take similar time). The
    shards of 1..N together are the whole list, each case exactly once.
    """
    ordered = sorted(cases, key=lambda c: c.id)
    return ordered[index - 1::count]
