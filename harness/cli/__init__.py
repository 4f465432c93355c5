"""The ``ep-testbed`` command line: one module per subcommand, listed once, in ``SUBCOMMANDS``.

Each subcommand module exposes ``add(subparsers)``, which registers its parser with ``func=``
set to its handler (``handler(args) -> exit code``); ``SUBCOMMANDS`` below is the only list of
them, in the order ``ep-testbed --help`` shows. Options several front ends share (the EP, the
tolerances, the expectations) are defined once in ``harness.cli.options``, which the pytest plugin
and the model CLI use too. Every subcommand module is imported with this package (no lazy
loading: the whole import costs a few tenths of a second, and one explicit list beats a second
mechanism to keep in step).

``main(argv)`` parses with ``parse_args`` (which also stores the shell-quoted command line on the
namespace as ``args.command_line``: the rerun command recorded in results headers) and runs the
handler under the ``--limit`` caps every command takes (``harness.core.untrusted_files``: every file
a command reads goes through that module); a ``DescError`` (a desc the DML page refuses), a
``FileRefused`` (a file the module will not read as asked), another unreadable file or a
``MemoryError`` (an input that outgrew the machine: ``harness.core.memory``) becomes exit code 2
with one message. Bad usage that argparse catches exits 2 with argparse's message. ``main`` is
also the one top-level guard of ``core.exit_codes``: Ctrl-C or SIGTERM that reaches it is one line
and exit 130 / 143, and any other exception is an internal error, one line naming it and where to
report it, exit 70 (the traceback too with ``EP_TESTBED_DEBUG=1``). ``main`` also starts the
command's clock (``core.walltime``: from the process's start when the process is the command,
else from the call), whose parts each command's closing line names. Python-API seams that are not
flags (another case catalog or mapper for ``run``) are keyword arguments of the handler itself:
see ``cli.run.run_command``.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
from typing import Sequence

from ..core import exit_codes, walltime

# `python -m ep_testbed.harness.cli`: an interrupt while the imports below load (a second or
# more) is one line and 130/143, as the console script's launcher makes it.
exit_codes.guard_module_start(__name__, "ep-testbed")

from ...reference import DescError
from ..core.installed import OrtBroken, guard_onnxruntime
from ..core.memory import shortage_message
from ..core.terminal import guard_streams, safe
from ..core.untrusted_files import FileRefused, using_limits
from . import ci_summary, devices, diff, doctor, findings, fuzz, gen, merge, model, reference, report, run
from . import map as map_
from .common import PROG, command_line, internal_error, usage_error
from .options import OptionError, add_limit_options, parse_limits

#: Every subcommand module, in help order.
SUBCOMMANDS = (doctor, devices, run, fuzz, merge, report, ci_summary, findings, diff, map_, gen, reference, model)


def build_parser() -> argparse.ArgumentParser:
    """The ``ep-testbed`` parser with every module of ``SUBCOMMANDS`` registered, in order."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Tells whether an ONNX Runtime execution provider computes DirectML's ROI pooling, "
                               "ROI align and max pooling as DirectML specifies them.",
        epilog=f"`{PROG} COMMAND --help` describes a command, its options and (where they matter) its exit codes. "
               "Every command: " + ", ".join(f"{code} {text}" for code, text in exit_codes.MEANINGS.items()))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add(sub)
    for leaf in _leaf_parsers(sub):
        add_limit_options(leaf.add_argument_group("limits (caps on what is read or allocated)").add_argument)
    return parser


def _leaf_parsers(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """The parsers that run a handler: those of ``sub`` and, for a command with subcommands of
    its own (``model run``), theirs, so every one of them takes ``--limit``."""
    leaves = []
    for parser in dict.fromkeys(sub.choices.values()):  # an alias maps to the same parser
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        leaves += [leaf for action in nested for leaf in _leaf_parsers(action)] if nested else [parser]
    return leaves


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and store the rerun command in ``args.command_line``.

    Exits 2 with argparse's message on bad usage, like ``main``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.command_line = command_line(argv)
    return args


def _tolerant_console() -> None:
    """A console that cannot encode a character (Windows' code page when output is redirected)
    shows it escaped instead of failing the command: paths and ONNX Runtime's messages hold any text."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):  # not a text stream that can be reconfigured
            pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ep-testbed <argv>``; return its exit code (``core.exit_codes``; each subcommand's help
    lists its codes). The one top-level guard: an interrupt is 130 (SIGINT) or 143 (SIGTERM), an
    exception nothing below expected is an internal error (70), each one line on stderr. The
    streams are guarded meanwhile (``terminal.guard_streams``): a closed or full stdout or stderr
    never changes the code, except that a command whose output is its result (``PRINTS_ITS_RESULT``)
    and could not deliver it ends with 2."""
    walltime.begin()  # from the process's start when launched as ep-testbed, else from this call
    restore_streams = guard_streams()
    previous_hook = exit_codes.quiet_unraisable(PROG)
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not str(w).startswith("-")]
    # a broken install is one message (OrtBroken), never a crash; the commands that will import
    # onnxruntime have its native modules tried in a child beside their own start
    command = str(words[0]) if words else ""
    unguard = guard_onnxruntime(early=command in IMPORTS_ONNXRUNTIME)
    try:
        code = _guarded_main(argv)
    finally:
        unguard()
        lost, _ = restore_streams()
        sys.unraisablehook = previous_hook  # the console script's process-wide one, where it runs
    if lost is not None and code in (exit_codes.OK, exit_codes.FAILED) and command in PRINTS_ITS_RESULT:
        return usage_error(f"{command}: its output could not be written to stdout ({lost.strerror or lost}).\n"
                           "Note: send stdout somewhere with room (a file, a pipe) and run it again")
    return code


#: The commands that import onnxruntime (their sessions, the EP checks, the opset probe of ``graphs``).
IMPORTS_ONNXRUNTIME = ("devices", "doctor", "fuzz", "gen", "map", "model", "run")
#: The commands whose result is what they print (a listing, a summary): output that could not be
#: written is a result not delivered (exit 2). Every other command's printing is a log of a
#: result kept in files and its exit code.
PRINTS_ITS_RESULT = ("ci-summary", "devices", "map", "reference")


def _guarded_main(argv: Sequence[str] | None) -> int:
    """``main`` inside the stream guard: the interrupt and internal-error guard."""
    _tolerant_console()
    previous = exit_codes.install_sigterm()
    try:
        return _main(argv)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except MemoryError:  # past the handler's own guard (parsing the command line): still exit 2
        return usage_error(shortage_message("this command", None))
    except Exception as exc:  # the guard: anything unexpected is ep-testbed's own bug, never exit 0 or 1
        interrupt = exit_codes.interrupt_behind(exc)
        if interrupt is not None:  # an error an interrupt caused (a native import cut short): the interrupt
            return _interrupted(interrupt)
        return internal_error(exc)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Print the one line of an interrupt; its exit code (130, or 143 for SIGTERM)."""
    code = exit_codes.interrupted_code(exc)
    print(f"{PROG}: interrupted by {'SIGTERM' if code == exit_codes.TERMINATED else 'Ctrl-C (SIGINT)'}"
          "; what had finished is kept", file=sys.stderr)
    return code


def _main(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run its handler under the ``--limit`` caps; refused input is exit 2."""
    args = parse_args(argv)
    walltime.mark("start-up")  # the interpreter, the imports, the command line
    try:
        caps = parse_limits(args.limit)
    except OptionError as exc:
        return usage_error(str(exc))
    try:
        with using_limits(caps):
            return args.func(args)
    except DescError as exc:  # named with the files it came from (a desc file, and the inputs it was given)
        files = ", ".join(safe(value) for key in ("desc", "inputs")
                          if isinstance(value := getattr(args, key, None), (str, os.PathLike)))
        return usage_error(f"invalid desc ({files}): {exc}" if files else f"invalid desc: {exc}")
    except FileRefused as exc:
        return usage_error(str(exc))
    except OrtBroken as exc:
        return usage_error(str(exc))
    except ModuleNotFoundError as exc:
        if exc.name != "onnxruntime":
            raise
        return usage_error("no onnxruntime is installed in this environment. Fix: install one flavour, e.g. "
                           "pip install \"ep-testbed[cpu]\" (or [directml], [cuda], [openvino], [webgpu]), or install "
                           "ep-testbed into the environment that holds your onnxruntime wheel")
    except (OSError, json.JSONDecodeError) as exc:
        if getattr(exc, "errno", None) in (errno.EMFILE, errno.ENFILE):  # a limit, not the file named
            return usage_error(f"{exc}.\nNote: this process's limit on open files was reached: raise it "
                               "(ulimit -n) and run the command again")
        return usage_error(str(exc))
    except MemoryError:  # an input that outgrew the machine where no estimate caught it first: never 0 or 1
        return usage_error(shortage_message(f"`{args.command_line}`", None))
