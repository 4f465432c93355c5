"""What several subcommands share: the usage error, the printed outcome table, the report step."""

from __future__ import annotations

import shlex
import sys
from typing import Any, Sequence

from ep_testbed.harness.core.memory import shortage_message
from ep_testbed.harness.core.terminal import safe_message
from ep_testbed.harness.core.untrusted_files import OutOfMemory
from ep_testbed.harness.run.summary import EXIT_USAGE, problems, table
from ep_testbed.reports import render_all

PROG = "ep-testbed"


class UsageError(Exception):
    """Bad usage or a run that cannot start: the handler prints the message and exits 2."""


def usage_error(message: str, prog: str = PROG) -> int:
    """Print ``<prog>: <message>`` to stderr and return the usage exit code (2). The message's
    own line breaks (a ``Note:`` line) are kept; any other control character in it, which can
    only have come from data, is shown escaped (``terminal.safe_message``)."""
    print(f"{prog}: {safe_message(message)}", file=sys.stderr)
    return EXIT_USAGE


def command_line(argv: Sequence[str]) -> str:
    """The shell-quoted command a user would type to repeat ``argv`` (recorded in run headers)."""
    return " ".join([PROG, *(shlex.quote(a) for a in argv)])


def print_outcomes(lines: list[dict[str, Any]], failing: Sequence[str]) -> None:
    """The outcome table per operator and dtype, then the failing cases (what CI logs show)."""
    print(table(lines))
    listing = problems(lines, failing)
    if listing:
        print("\nfailures:\n" + listing)


def render_report(run_dir: str) -> bool:
    """Write report.html, junit.xml and summary.json into the run folder and print their paths;
    False when that ran out of memory (the message says what is kept and how to finish: the
    command then exits 2, an out-of-memory never reads as a judged result), True otherwise."""
    refused = None
    try:
        for kind, path in render_all(run_dir).items():
            print(f"{kind}: {path}")
    except OutOfMemory as exc:  # the results file alone would not fit
        refused = str(exc)
    except MemoryError:
        pass  # out of the handler first, so what rendering held is freed before the message
    except Exception as exc:  # a report bug must not turn a finished run into a failure
        print(f"{PROG}: rendering the report failed: {type(exc).__name__}: {safe_message(exc)}", file=sys.stderr)
        return True
    else:
        return True
    message = refused or shortage_message(f"rendering the report of {run_dir}", None)
    problem, _, note = message.partition("\nNote: ")
    print(f"{PROG}: the report of {run_dir} was not rendered (its results.jsonl is complete and kept): "
          f"{safe_message(problem)}\nNote: finish it with `{PROG} report {shlex.quote(run_dir)}` where there is more "
          f"memory; or {safe_message(note.removeprefix('try '))}", file=sys.stderr)
    return False
