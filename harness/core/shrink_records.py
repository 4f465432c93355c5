"""``RUN_DIR/shrinks.jsonl``: one line per shrunk failure of a fuzz run, original next to minimal.

A fuzz run's ``results.jsonl`` is an ordinary run (``harness.core.results``): every fuzzed case has
its line, and every minimal case its own line too (id ``<original id>-min``, tags
``family: fuzz-minimal`` and ``shrunk_from``), with its case folder, so ``report``, ``diff`` and
``merge`` read a fuzz run unchanged. What ties an original to its minimal case is this file,
written as each shrink finishes, with exactly ``SHRINK_KEYS``:

- ``original`` / ``minimal``: the two case ids (both have lines in results.jsonl);
- ``found_s``: seconds into the run the original finished (the time to find it);
- ``signature``: how both fail (``harness.core.signature``); ``same_failure``: whether the
  minimal case's own run (the one in results.jsonl) still shows it;
- ``original_elements`` / ``minimal_elements`` / ``reduction``: elements of every input and
  output together, and their ratio;
- ``seconds``, ``candidates``, ``accepted``, ``stages``: what shrinking cost, per stage;
- ``changes``: the DML fields whose values differ (``{"field", "original", "minimal"}``);
- ``notes``: anything the shrink wants a reader to know (budget reached, replay diverged);
- ``corpus``: the corpus folder the minimal case was written to, or null.

It imports nothing but the standard library, ``harness.core.results`` and ``harness.core.untrusted_files``:
the reports read it.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

from .results import dumps
from .untrusted_files import FileRefused, inside, open_output, read_json_lines

SHRINKS_FILE = "shrinks.jsonl"
SHRINK_KEYS = ("original", "minimal", "found_s", "signature", "same_failure", "original_elements", "minimal_elements",
               "reduction", "seconds", "candidates", "accepted", "stages", "changes", "notes", "corpus")


def shrink_record(**fields: Any) -> dict[str, Any]:
    """A record with exactly ``SHRINK_KEYS`` (missing ones None); KeyError for any other key."""
    unknown = sorted(set(fields) - set(SHRINK_KEYS))
    if unknown:
        raise KeyError(f"shrink record field(s) {unknown} are not in SHRINK_KEYS {list(SHRINK_KEYS)}")
    return {key: fields.get(key) for key in SHRINK_KEYS}


def append_shrink(run_dir: str, record: dict[str, Any]) -> None:
    """Append one record to ``run_dir/shrinks.jsonl`` and make it durable."""
    with open_output(os.path.join(run_dir, SHRINKS_FILE), "a") as f:
        f.write(dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_shrinks(run_dir: str) -> Iterator[dict[str, Any]]:
    """The records of ``run_dir/shrinks.jsonl`` (none when the file is absent), read through
    ``untrusted_files`` (a regular file inside the run folder, lines capped); unreadable lines
    and lines that are not objects with an ``original`` and a ``minimal`` id are skipped."""
    if not os.path.lexists(os.path.join(run_dir, SHRINKS_FILE)):
        return
    try:
        for _number, record in read_json_lines(inside(run_dir, SHRINKS_FILE, "shrinks file"), "shrinks file"):
            if isinstance(record, dict) and isinstance(record.get("original"), str) \
                    and isinstance(record.get("minimal"), str):
                yield {key: record.get(key) for key in SHRINK_KEYS}
    except FileRefused:
        return
