"""The exit codes of every ``ep-testbed`` command, one meaning each: the one list.

A CI gate reads only the code, so no two situations share one:

=====  ==================  =================================================================
code   name                meaning
=====  ==================  =================================================================
0      ``OK``              nothing wrong: every judged case passed (or is ``known``), no regression
1      ``FAILED``          a judged failure (a case failed, crashed, timed out, errored or is
                           ``fixed``; a model's operator diverges) or a ``diff`` regression; never
                           anything else
2      ``USAGE``           bad input or usage (a flag, a file the tool refuses), or a run that
                           cannot start or cannot finish its artifacts (another run owns the
                           folder, a full disk: what is kept and how to finish is printed)
4      ``NO_CASES``        nothing selected (no case matches the selection)
70     ``INTERNAL``        an internal error: something unexpected inside ep-testbed itself (a bug
                           to report); one line, the traceback with ``EP_TESTBED_DEBUG=1``
130    ``INTERRUPTED``     interrupted by SIGINT (Ctrl-C); finished cases are kept
143    ``TERMINATED``      interrupted by SIGTERM (a CI time limit, ``kill``); finished cases kept
=====  ==================  =================================================================

Why 70 for an internal error: it is ``EX_SOFTWARE`` of BSD's ``sysexits.h`` ("an internal
software error has been detected", https://man.freebsd.org/cgi/man.cgi?query=sysexits), the
conventional code for a program's own bug; it is neither 1 (a CPython interpreter dying of an
uncaught exception exits 1, which a gate would read as a judged failure) nor 2 (argparse's usage
code), nor 3 (the worker's injected ``exit`` fault), and stays clear of 126-128+N, which shells
use for "not executable" and "killed by signal N". 130 and 143 are 128 + SIGINT (2) and 128 +
SIGTERM (15): what a shell reports for a process those signals killed, so a CI log reads the same
whether the tool or the shell reports it.

SIGTERM becomes ``Terminated``, a ``KeyboardInterrupt``, so every path that keeps finished work on
Ctrl-C keeps it on SIGTERM too; ``interrupted_code`` tells the two apart afterwards.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

OK = 0
FAILED = 1
USAGE = 2
NO_CASES = 4
INTERNAL = 70
INTERRUPTED = 130
TERMINATED = 143

#: Every code with its one-line meaning, in the order the README's table lists them.
MEANINGS: dict[int, str] = {
    OK: "nothing wrong",
    FAILED: "a judged failure or regression",
    USAGE: "bad input or usage, or a run that cannot start or finish its artifacts",
    NO_CASES: "nothing selected",
    INTERNAL: "internal error (a bug in ep-testbed: report it)",
    INTERRUPTED: "interrupted (SIGINT, Ctrl-C)",
    TERMINATED: "interrupted (SIGTERM)",
}

#: The environment variable that makes an internal error print its traceback too.
DEBUG_ENV = "EP_TESTBED_DEBUG"

_last_signal: list[int] = []  # the signal behind the most recent interrupt in this process


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's ``KeyboardInterrupt`` would be: the same clean-up runs."""


def on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM handler: remember the signal and raise ``Terminated``."""
    _last_signal[:] = [signum]
    raise Terminated


def install_sigterm() -> Any:
    """Make SIGTERM raise ``Terminated`` in this (main) thread; returns the previous handler,
    or None where signals cannot be set (another thread, no SIGTERM)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return None
    _last_signal.clear()
    return signal.signal(signal.SIGTERM, on_sigterm)


def interrupted_code(exc: BaseException | None = None) -> int:
    """143 when the interrupt was SIGTERM (``exc`` a ``Terminated``, or the last signal this
    process turned into one), else 130."""
    if isinstance(exc, Terminated) or (exc is None and _last_signal == [getattr(signal, "SIGTERM", 15)]):
        return TERMINATED
    return INTERRUPTED


def with_artifacts(run_code: int, artifacts_code: int) -> int:
    """The exit code of a command that judged (``run_code``) and then wrote its artifacts
    (``artifacts_code``): an interrupt stays an interrupt; otherwise artifacts that could not be
    finished (2, or 70 for a bug) win, since the run's verdict was not delivered; else ``run_code``."""
    if run_code in (INTERRUPTED, TERMINATED) or artifacts_code == OK:
        return run_code
    return artifacts_code


def debug_enabled() -> bool:
    """Whether ``EP_TESTBED_DEBUG`` asks for tracebacks (set, and not ``0``/empty)."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


__all__ = ["DEBUG_ENV", "FAILED", "INTERNAL", "INTERRUPTED", "MEANINGS", "NO_CASES", "OK", "TERMINATED",
           "Terminated", "USAGE", "debug_enabled", "install_sigterm", "interrupted_code", "on_sigterm", "with_artifacts"]
