"""What several subcommands share: the usage error, the printed outcome table, the report step."""

from __future__ import annotations

import os
import shlex
import sys
import threading
import traceback
from typing import Any, Mapping, Sequence

from ...reports import render_all
from ...reports.rendering import warm_up
from ..core import emulation, exit_codes
from ..core.atomic_files import write_remedy
from ..core.memory import shortage_message
from ..core.rerun import rerun_line
from ..core.results import CaseLine
from ..core.terminal import safe, safe_message
from ..core.untrusted_files import FileRefused, OutOfMemory
from ..run.summary import first_problem, problems, table

PROG = "ep-testbed"
#: The templates report.html is drawn from (compiled ahead by ``prepare_reports``).
REPORT_TEMPLATES = ("report.html.j2", "_macros.j2", "_shrinks.html.j2")
_preparing: list[threading.Thread] = []


class UsageError(Exception):
    """Bad usage or a run that cannot start: the handler prints the message and exits 2."""


def usage_error(message: str, prog: str = PROG) -> int:
    """Print ``<prog>: <message>`` to stderr and return the usage exit code (2). The message's
    own line breaks (a ``Note:`` line) are kept; any other control character in it, which can
    only have come from data, is shown escaped (``terminal.safe_message``)."""
    print(f"{prog}: {safe_message(message)}", file=sys.stderr)
    return exit_codes.USAGE


def command_line(argv: Sequence[str]) -> str:
    """The shell-quoted command a user would type to repeat ``argv`` (recorded in run headers)."""
    return " ".join([PROG, *(shlex.quote(a) for a in argv)])


def print_outcomes(lines: list[CaseLine], failing: Sequence[str],
                   header: Mapping[str, Any] | None = None) -> None:
    """The outcome table per operator and dtype, then the failing cases (what CI logs show) and,
    given the run ``header``, the line that reruns the first of them (``rerun.rerun_line``: a
    fuzzed case's is its ``fuzz --replay``). A run on an emulated device says so first, with its
    label (``core.emulation``)."""
    label = emulation.label(header)
    if label:
        print(f"device: {safe(label)} (emulated: not a hardware result)")
    print(table(lines))
    listing = problems(lines, failing)
    if listing:
        print("\nfailures:\n" + listing)
        first = first_problem(lines, failing)
        if header is not None and first is not None:
            print(f"rerun the first: {safe(rerun_line(header, first))}")


def prepare_reports() -> None:
    """Compile the report's templates in the background now (``reports.rendering.warm_up``), so
    that a run's report, rendered once its last case is in, does not wait for them: a command
    calls this as its cases start, and ``render_report`` waits for it. Where no thread can be
    started (a limit on processes or threads: a cgroup's ``pids.max``) nothing is prepared: the
    templates compile as the report renders, and the run goes on."""
    if not _preparing:
        try:
            _preparing.append(warm_up(*REPORT_TEMPLATES))
        except RuntimeError:  # "can't start new thread"
            pass


def render_report(run_dir: str) -> int:
    """Write report.html, junit.xml and summary.json into the run folder and print their paths;
    return ``exit_codes.OK``, else ``USAGE`` when a file cannot be written (a full disk: each file
    is whole or absent, ``core.atomic_files``) or rendering ran out of memory, or ``INTERNAL`` for
    a bug in the reports, each with one message saying that results.jsonl is kept and how to
    finish (``ep-testbed report RUN_DIR``): a run whose report is missing never exits 0 or 1."""
    finish = f"\nNote: results.jsonl is kept whole; finish with: {PROG} report {shlex.quote(str(run_dir))}"
    for thread in _preparing:  # the templates compiled while the cases ran
        thread.join()
    refused = None
    try:
        for kind, path in render_all(run_dir).items():
            print(f"{kind}: {safe(path)}")
    except OutOfMemory as exc:  # the results file alone would not fit
        refused = str(exc)
    except MemoryError:
        pass  # out of the handler first, so what rendering held is freed before the message
    except (OSError, FileRefused) as exc:
        problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        remedy = write_remedy(exc) if isinstance(exc, OSError) else "fix the cause"
        print(f"{PROG}: writing the report into {safe(run_dir)} failed ({safe_message(problem)}); "
              f"no report file is left half-written{finish} (after you {remedy})", file=sys.stderr)
        return exit_codes.USAGE
    except Exception as exc:  # a bug in the reports: its own code, never the run's 0 or 1
        code = internal_error(exc, "rendering the report")
        print(finish.strip(), file=sys.stderr)
        return code
    else:
        return exit_codes.OK
    message = refused or shortage_message(f"rendering the report of {safe(run_dir)}", None)
    problem, _, note = message.partition("\nNote: ")
    print(f"{PROG}: the report of {safe(run_dir)} was not rendered (its results.jsonl is complete and kept): "
          f"{safe_message(problem)}\nNote: finish it with `{PROG} report {shlex.quote(run_dir)}` where there is more "
          f"memory; or {safe_message(note.removeprefix('try '))}", file=sys.stderr)
    return exit_codes.USAGE


def internal_error(exc: BaseException, doing: str = "") -> int:
    """Print one line naming ``exc``, where it was raised and where to report it (the traceback
    too when ``EP_TESTBED_DEBUG`` is set); return ``exit_codes.INTERNAL``."""
    if exit_codes.debug_enabled():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    frames = traceback.extract_tb(exc.__traceback__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the package's root
    ours = [f for f in frames if os.path.abspath(f.filename).startswith(root)] or frames
    where = f" at {os.path.basename(ours[-1].filename)}:{ours[-1].lineno} ({ours[-1].name})" if ours else ""
    hint = "" if exit_codes.debug_enabled() else f"; rerun with {exit_codes.DEBUG_ENV}=1 for the traceback"
    print(f"{PROG}: internal error{' ' + doing if doing else ''}: {type(exc).__name__}: "
          f"{safe_message(' '.join(str(exc).split()))[:500]}{where}. This is a bug in ep-testbed, not in your input: please report it "
          f"to the ep-testbed maintainers (your project's issue tracker) with the command line{hint}", file=sys.stderr)
    return exit_codes.INTERNAL
