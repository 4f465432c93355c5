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


def on_sigint(signum: int, frame: Any) -> None:
    """SIGINT handler of a module still loading (``guard_module_start``): remember the signal and
    raise ``KeyboardInterrupt``, as Python's own handler does."""
    _last_signal[:] = [signum]
    raise KeyboardInterrupt


def quiet_unraisable(prog: str) -> Any:
    """Make an exception Python cannot raise (one in a ``__del__`` or a finalizer: a zip file
    abandoned by an interrupt, a ``ResourceWarning`` that ``-W error`` turned into an error while a
    temporary file was cleaned up) one note line on stderr instead of a traceback (the traceback
    with ``EP_TESTBED_DEBUG=1``): it cannot change what the command did. Returns the previous hook."""
    import sys

    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if debug_enabled():
            previous(unraisable)
            return
        kind = getattr(unraisable.exc_type, "__name__", "error")
        text = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}"
                       for ch in " ".join(str(unraisable.exc_value).split())[:200])
        try:
            print(f"{prog}: note: ignored an error while cleaning up ({kind}: {text})", file=sys.stderr)
        except Exception:  # nothing left to say it on
            pass

    sys.unraisablehook = hook
    return previous


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


def interrupt_behind(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The interrupt that ``exc`` stands for, if any: ``exc`` itself, or one in its chain of
    causes (a native module interrupted while it loads, ``import onnxruntime``, raises
    ``ImportError: initialization failed`` from the ``KeyboardInterrupt``). Such an error is the
    interrupt's consequence, never a bug."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def guard_module_start(module: str, prog: str) -> None:
    """When this process is ``python -m <module>`` and the module is still being loaded (Python
    sets ``sys.argv[0]`` to ``"-m"`` until then; its ``-m`` documentation), make an interrupt
    before its own guard runs one line and exit 130 (or 143: SIGTERM raises ``Terminated`` from
    here on), never a traceback; anywhere else nothing changes."""
    import sys

    orig = list(getattr(sys, "orig_argv", []))
    if sys.argv[:1] != ["-m"] or module not in orig or orig[orig.index(module) - 1] != "-m":
        return
    if threading.current_thread() is threading.main_thread():
        if hasattr(signal, "SIGTERM"):
            signal.signal(signal.SIGTERM, on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where the caller ignores it
            signal.signal(signal.SIGINT, on_sigint)
    previous = sys.excepthook

    def hook(kind: type, value: BaseException, tb: Any) -> None:
        # an import cut short by the interrupt may raise its own error without it (numpy's
        # "PyCapsule_Import could not import module"): the signal this process saw decides
        interrupt = interrupt_behind(value)
        if interrupt is None and not _last_signal:
            previous(kind, value, tb)
            return
        code = interrupted_code(interrupt)  # None: the signal this process saw
        try:
            print(f"{prog}: interrupted by {'SIGTERM' if code == TERMINATED else 'Ctrl-C (SIGINT)'} while starting; "
                  "nothing was run", file=sys.stderr, flush=True)
        finally:
            os._exit(code)

    sys.excepthook = hook


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
           "Terminated", "USAGE", "debug_enabled", "guard_module_start", "install_sigterm",
           "interrupt_behind", "interrupted_code", "on_sigint", "on_sigterm", "quiet_unraisable", "with_artifacts"]
