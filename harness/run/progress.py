"""A one-line live progress display on stderr: cases done, failures so far, rate, ETA.

Its rate counts from the run's start and says so ("in the run"); the command's closing line
(``core.walltime``) gives the rate over the whole wall time.

Silent when stderr is not a terminal (CI logs, pytest), so logs hold only the summary.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

from ..core.results import EXPECTED_FAILURE, FAILING, NOT_TESTED, CaseLine


class Progress:
    """The live line for a run of ``total`` cases; ``enabled`` None: only on a terminal."""

    def __init__(self, total: int, enabled: bool | None = None, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = total
        self.done = 0
        self.counts: Counter = Counter()
        self.start = time.monotonic()
        self._last = 0.0

    def update(self, line: CaseLine) -> None:
        """Count one finished case line; redraw at most ten times a second (and at the last case)."""
        self.done += 1
        self.counts[line.get("outcome")] += 1
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.1 or self.done == self.total):
            self._last = now
            # the carriage return and erase are this line's own: written past the stream's escaping
            getattr(self.stream, "write_control", self.stream.write)("\r" + self.render(now) + "\x1b[K")
            self.stream.flush()

    def render(self, now: float | None = None) -> str:
        """The line: bar, done/total, failing cases (``results.FAILING``), the outcomes that do
        not fail a run but need a look (known, not tested) when present, rate and ETA."""
        elapsed = (now or time.monotonic()) - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        failing = sum(self.counts[o] for o in FAILING)
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        parts = [f"[{bar}] {self.done}/{self.total}", f"failed {failing}"]
        for outcome in EXPECTED_FAILURE + NOT_TESTED:
            if self.counts[outcome]:
                parts.append(f"{outcome} {self.counts[outcome]}")
        parts.append(f"{rate:.1f} cases/s in the run")  # the command's start-up is in its closing line
        parts.append(f"ETA {_clock(eta)}")
        return " | ".join(parts)

    def close(self) -> None:
        """End the live line so the summary starts on a fresh line."""
        if self.enabled and self.done:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour); ``--:--`` for an unknown ETA."""
    if seconds == float("inf"):
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"
