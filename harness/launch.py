"""The ``ep-testbed`` console script: Ctrl-C or SIGTERM while the tool is still starting is one line.

``ep_testbed.harness.cli`` imports every subcommand, and with them numpy, onnx and onnxruntime: a
second or more before ``cli.main`` exists to catch an interrupt, and Python's default would print
a ``KeyboardInterrupt`` traceback there (and SIGTERM would kill the process without a word). This
module imports only the standard library (and ``core.walltime``, which does too: the command's
clock, stamped first; ``eps.early_start``, which for ``--ep dml-wine`` starts the DirectML
host while the rest imports; and for ``fuzz``, ``run.forker``, which starts the process that forks
the workers), makes SIGINT and SIGTERM raise, then imports the
command line and runs ``cli.main``, which takes over with its own guard
(``core.exit_codes``). An interrupt before that is exit 130 (SIGINT) or 143 (SIGTERM) with one line
on stderr, as ``core.exit_codes`` documents for every command.

``ep_testbed.harness.cli:main`` and ``python -m ep_testbed.harness.cli`` stay what they were; this
is ``python -m ep_testbed.harness.launch`` too.

``EP_TESTBED_LAUNCH_WAIT=PATH`` (a test seam, never needed to run the tool): after the handlers
are installed and before the command line is imported, read one byte from ``PATH`` (a named
pipe the test opens for writing), so a test can interrupt the start at a known point.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

PROG = "ep-testbed"
INTERRUPTED, TERMINATED = 130, 143  # core.exit_codes' values; that module is not imported this early
WAIT_ENV = "EP_TESTBED_LAUNCH_WAIT"


class _Terminated(KeyboardInterrupt):
    """SIGTERM while starting, raised where Ctrl-C's ``KeyboardInterrupt`` would be."""


_SIGNALS: list[int] = []  # the interrupts this process got while starting


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM handler until ``cli.main`` installs its own."""
    _SIGNALS.append(signum)
    raise _Terminated


def _on_sigint(signum: int, frame: Any) -> None:
    """SIGINT handler: Python's own (``KeyboardInterrupt``), remembering the signal, since an import
    it cuts short may raise an error of its own without it (numpy's ``PyCapsule_Import could not
    import module``)."""
    _SIGNALS.append(signum)
    raise KeyboardInterrupt


def _wait_for_test() -> None:
    """The ``WAIT_ENV`` seam of the module docstring (nothing when the variable is unset). It
    waits in short turns rather than in one blocking read: a signal that lands after Python last
    looked for one but before a read began would wait for that read to end, which is never."""
    import select

    path = os.environ.get(WAIT_ENV)
    if path:
        fd = os.open(path, os.O_RDONLY)
        try:
            while not select.select([fd], [], [], 0.05)[0]:
                pass
            os.read(fd, 1)
        finally:
            os.close(fd)


def start_host_early(argv: list[str]) -> None:
    """A command that will hold an EP whose holder starts a process of its own (``--ep dml-wine``:
    the DirectML host) starts it now, in the background, so that it starts while the project
    imports (``eps.early_start``: the standard library only; any other command imports nothing
    more for it)."""
    from .eps import early_start

    early_start.start(argv)


def start_workers_early(argv: list[str]) -> None:
    """``fuzz``, which always runs its cases in worker processes, starts the process that forks
    them now (``run.forker.start_early``: the standard library only), so that its imports run
    beside the command line's; any other command starts nothing here."""
    if argv[:1] == ["fuzz"] and not {"-h", "--help"} & set(argv):
        from .run import forker

        forker.start_early(dict(os.environ))  # the environment a pool's workers get (PYTHONPATH: the same forker)


def _interrupt_behind(exc: BaseException | None) -> BaseException | None:
    """``exc`` or the ``KeyboardInterrupt`` in its chain of causes (``exit_codes.interrupt_behind``,
    which this module cannot import yet)."""
    for _ in range(64):
        if exc is None or isinstance(exc, KeyboardInterrupt):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _reopen_closed_std_fds() -> None:
    """Open the null device on each of fds 0-2 the caller closed (``terminal.reopen_closed_std_fds``,
    which ``cli.main`` runs too), before any import can open a file that takes such a number."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main() -> int:
    """Install the interrupt handling, import the command line, run it; its exit code, or 130 /
    143 with one line on stderr when interrupted before the command line took over."""
    from .core import walltime  # the standard library only: the command's clock

    walltime.mark_launch()
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _on_sigterm)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where the caller ignores it
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        _reopen_closed_std_fds()  # first: the early host's pipes must not take a closed fd's number
        start_host_early(sys.argv[1:])
        start_workers_early(sys.argv[1:])
        _wait_for_test()
        from .cli import main as cli_main
        from .core.exit_codes import quiet_unraisable

        quiet_unraisable(PROG)  # also what is collected after main returns, as the process exits
        return cli_main()
    except (KeyboardInterrupt, ImportError) as exc:
        # only an interrupt that reached here before cli.main's own guard (which returns a code); a
        # native module interrupted while it loads raises ImportError, from the KeyboardInterrupt or not
        if _interrupt_behind(exc) is None and not _SIGNALS:
            raise
        terminated = isinstance(_interrupt_behind(exc), _Terminated) or _SIGNALS[-1:] == [getattr(signal, "SIGTERM", 15)]
        print(f"{PROG}: interrupted by {'SIGTERM' if terminated else 'Ctrl-C (SIGINT)'} while starting; "
              "nothing was run", file=sys.stderr)
        return TERMINATED if terminated else INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
