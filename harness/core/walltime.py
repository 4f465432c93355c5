"""A command's wall time, from the start of its process, and where it went: owns the one clock
every closing line reads, and the closing line itself.

A rate over the time inside a run leaves out what a user waits for besides: the interpreter and
the imports, the catalog, the preflight and the EP's or its host's start, stopping the workers,
writing the reports. So each command's last line divides by the whole wall time and names the
parts (``closing_line``), e.g.::

    259 cases in 8.33 s of wall time from the process's start, 31.1 cases/s: start-up 0.38 s,
    catalog 0.31 s, preflight 1.24 s, run header 0.05 s, EP start 0.00 s, cases 4.96 s (52.2 cases/s
    in it alone), stopping workers 0.21 s, reports 1.18 s

The parts are cut at marks on one monotonic clock (``mark``), so they add up to the wall time.
Where the command started, in order of preference (``command_start``):

- ``EP_TESTBED_COMMAND_STARTED`` (``ENV``): the wall-clock start of a parent ``ep-testbed`` that
  runs its command in this child process (``model run``), so the child's line covers both;
- the kernel's record of this process's start (Linux: ``/proc/self/stat``, against the boot
  clock), which includes the interpreter's own start-up;
- the launcher's stamp (``harness.launch`` marks the time before it imports anything);
- the time this module was imported (then the line says that the start-up before it is not in
  the figure).

A command called in an existing process (``cli.main([...])`` from a test or a script) starts at
that call, and its line says so. This module imports only the standard library: the launcher
imports it before anything else.
"""

from __future__ import annotations

import os
import re
import time
from typing import NamedTuple

#: The parent command's start (seconds since the epoch), for a child process that finishes it.
ENV = "EP_TESTBED_COMMAND_STARTED"
#: How far back a parent's start may lie and still be believed (a stale variable is ignored).
PARENT_LIMIT_S = 7 * 24 * 3600.0
#: What the line says about where its wall time starts, by source.
SINCE = {"parent": "from the command's start (its first process)",
         "process": "from the process's start",
         "launcher": "from the launcher's start (the interpreter's own start-up is not in it)",
         "import": "from the start of ep-testbed's timing (the start-up before it is not in it)",
         "call": "from the call (a command run inside a running process, whose start-up is not in it)"}

_IMPORTED = time.monotonic()
_launched: list[float] = []


def mark_launch() -> None:
    """The launcher's stamp: called first thing by ``harness.launch`` and ``python -m
    ep_testbed.harness.cli``, before any import that takes time (only the first call counts)."""
    if not _launched:
        _launched.append(time.monotonic())


def launched() -> bool:
    """Whether this process was started as the ``ep-testbed`` command (``mark_launch`` was called)."""
    return bool(_launched)


def process_age() -> float | None:
    """Seconds since the kernel started this process (Linux; None where it cannot be read)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            text = stat.read()
        ticks = int(text[text.rindex(")") + 2:].split()[19])  # field 22, starttime, in clock ticks since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0 <= age < PARENT_LIMIT_S else None


def command_start() -> tuple[float, str]:
    """``(start on the time.monotonic clock, source)``: where this process's command started
    (module docstring); source is a key of ``SINCE``."""
    now_mono, now_wall = time.monotonic(), time.time()
    try:
        parent = float(os.environ.get(ENV, ""))
    except ValueError:
        parent = None
    if parent is not None and 0 <= now_wall - parent < PARENT_LIMIT_S:
        return now_mono - (now_wall - parent), "parent"
    age = process_age()
    if age is not None:
        return now_mono - age, "process"
    if _launched:
        return _launched[0], "launcher"
    return _IMPORTED, "import"


def child_environment() -> dict[str, str]:
    """``ENV`` for a child process that finishes this command: the command's start, wall clock."""
    return {ENV: repr(time.time() - (time.monotonic() - current().start))}


class Wall:
    """A command's wall time cut into named parts: each ``mark(part)`` ends ``part`` at the given
    time (default now), where the part before it ended (or the command started)."""

    def __init__(self, start: float, source: str) -> None:
        self.start, self.source = start, source
        self.parts: list[tuple[str, float]] = []  # (part, seconds), in order
        self._last = start

    def mark(self, part: str, at: float | None = None) -> None:
        """End ``part`` at ``at`` (time.monotonic; default now; never before the last mark, nor
        after now); a part marked twice in a row grows."""
        now = time.monotonic()
        at = min(max(self._last, now if at is None else at), now)
        if self.parts and self.parts[-1][0] == part:
            self.parts[-1] = (part, self.parts[-1][1] + at - self._last)
        else:
            self.parts.append((part, at - self._last))
        self._last = at

    def elapsed(self) -> float:
        """Seconds from the command's start to the last mark."""
        return self._last - self.start

    def seconds(self, part: str) -> float:
        """The seconds of ``part`` (0 when it was never marked)."""
        return sum(s for name, s in self.parts if name == part)


_current: list[Wall] = []


def begin(from_process_start: bool | None = None) -> Wall:
    """Start timing a command in this process and make it ``current()``: from the process's (or
    its parent command's) start when the process was launched as ``ep-testbed``
    (``from_process_start`` None: ``launched()``) or a parent handed its start on, else from now."""
    if from_process_start is None:
        from_process_start = launched() or ENV in os.environ
    start, source = command_start() if from_process_start else (time.monotonic(), "call")
    _current[:] = [Wall(start, source)]
    return _current[0]


def current() -> Wall:
    """The command being timed in this process (one timed from the process's start when none
    began: code that marks parts outside a command, e.g. a benchmark, never fails)."""
    if not _current:
        _current.append(Wall(*command_start()))
    return _current[0]


def mark(part: str, at: float | None = None) -> None:
    """``current().mark(part, at)``."""
    current().mark(part, at)


#: Decimals of the seconds a closing line prints (its parts add up to its wall time within rounding).
DECIMALS = 2


def _seconds(value: float) -> str:
    return f"{value:.{DECIMALS}f} s"


def closing_line(count: int | None, noun: str, wall: Wall | None = None, rates: dict[str, int] | None = None,
                 last: str = "reports") -> str:
    """The command's last line, its last part ``last`` ending now: ``count`` ``noun`` over the
    wall time from the command's start, the rate of that, and every part with its seconds; a
    part named in ``rates`` also gets its own rate (``{"cases": 259}``: ``noun`` per second of
    that part alone, said to be so). With ``count`` None, ``noun`` names the command and no rate
    is given (``model run in 70.3 s of wall time ...: ...``)."""
    wall = wall or current()
    wall.mark(last)
    total = wall.elapsed()
    parts = []
    for name, seconds in wall.parts:
        text = f"{name} {_seconds(seconds)}"
        if rates and name in rates and seconds > 0:
            text += f" ({rates[name] / seconds:.1f} {noun}/s in it alone)"
        parts.append(text)
    head = f"{noun} in {_seconds(total)} of wall time {SINCE[wall.source]}" if count is None else \
        f"{count} {noun} in {_seconds(total)} of wall time {SINCE[wall.source]}, " \
        f"{count / total if total > 0 else 0.0:.1f} {noun}/s"
    return f"{head}: " + ", ".join(parts)


class Closing(NamedTuple):
    """A closing line read back (``parse_closing_line``): the count (``counted``; None without one), what was
    counted (or the command), the wall seconds, the rate (None without a count), and each
    part's seconds in order."""

    counted: int | None
    noun: str
    wall_s: float
    rate: float | None
    parts: list[tuple[str, float]]


_LINE = re.compile(r"^(?:(?P<count>\d+) )?(?P<noun>.+?) in (?P<wall>[\d.]+) s of wall time (?:from|since) [^:]*?"
                   r"(?:, (?P<rate>[\d.]+) (?P=noun)/s)?: (?P<parts>.*)$")
_PART = re.compile(r"(?P<name>[a-zA-Z][a-zA-Z -]*?) (?P<seconds>[\d.]+) s(?: \([^)]*\))?(?:, |$)")


def parse_closing_line(text: str) -> Closing | None:
    """The last closing line in ``text`` (what a command printed), or None."""
    for line in reversed(text.splitlines()):
        found = _LINE.match(line.strip())
        if found:
            parts = [(p["name"], float(p["seconds"])) for p in _PART.finditer(found["parts"])]
            return Closing(None if found["count"] is None else int(found["count"]), found["noun"],
                           float(found["wall"]), None if found["rate"] is None else float(found["rate"]), parts)
    return None


__all__ = ["DECIMALS", "ENV", "SINCE", "Closing", "Wall", "begin", "child_environment", "closing_line", "command_start",
           "current", "launched", "mark", "mark_launch", "parse_closing_line", "process_age"]
