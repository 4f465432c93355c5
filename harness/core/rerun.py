"""The options a report's rerun line repeats: every ``ep-testbed run`` flag that changes a case's outcome.

``ep-testbed run`` records them in its run header as ``rerun_args`` (a list of command-line
words); the report builds ``ep-testbed run <rerun_args> -k <case id> --out runs/rerun-...-{time}``
from them, so a pasted line runs the case as CI ran it:

- the flags of the shared EP, tolerance and expectations groups (``harness.cli.options``: ``--ep``,
  ``--ep-option``, ``--graph-opt``, ``--expectations``/``--no-expectations`` and whatever those
  groups gain later), plus ``--seed`` and ``--timeout``, each only where it differs from its
  default (``--ep`` and ``--seed`` always);
- the tolerances as their *content*: ``--tolerances FILE`` and ``--tol`` are replaced by one
  ``--tol DTYPE:atol=..,rtol=..,ulp=..`` per data type whose effective tolerance differs from
  the defaults, so the line needs no file and reproduces on another machine (the header keeps
  the file's path and sha256 in ``tolerances_file`` as provenance);
- ``--expectations FILE`` stays a path (the case line's ``expected_outcome`` shows the entry
  that matched).

A header written before ``rerun_args`` existed gets the same line from its other fields
(``legacy_rerun_args``): EP alias and options, graph optimization level, tolerances, seed.
"""

from __future__ import annotations

import argparse
import hashlib
from typing import Any, Iterable, Mapping

from .tolerances import DEFAULT_TOLERANCES, Tolerances
from .untrusted_files import FileRefused, read_bytes

#: The part of ``ep-testbed run --out`` that becomes the UTC time (with ``-2``, ``-3``... when that
#: folder exists): a rerun line pasted twice writes two folders.
TIME_FIELD = "{time}"
#: The ``dest`` of the tolerance flags whose effect the line carries as ``--tol`` items instead.
TOLERANCE_DESTS = ("tol", "tolerances")
#: Flags the line always carries, default or not (the EP and the catalog seed are what a reader
#: looks for first).
ALWAYS = ("ep", "seed")


def _flag(action: argparse.Action) -> str:
    """The long spelling of an option (``--seed`` rather than ``-s``)."""
    return max(action.option_strings, key=len)


def action_argv(action: argparse.Action, value: Any) -> list[str]:
    """The command-line words that give ``action`` the parsed ``value`` (empty for its default)."""
    flag = _flag(action)
    if action.nargs == 0:  # store_true / store_false / store_const
        return [flag] if value == action.const and value != action.default else []
    if isinstance(action, argparse._AppendAction):
        return [w for item in value or [] for w in (flag, str(item))]
    if value is None or (value == action.default and action.dest not in ALWAYS):
        return []
    return [flag, str(value)]


def tolerance_specs(tolerances: Tolerances) -> list[str]:
    """``--tol`` values that turn the defaults into ``tolerances`` (one per differing data type)."""
    specs = []
    for dtype, tol in sorted(tolerances.by_dtype.items()):
        if DEFAULT_TOLERANCES.get(dtype) == tol:
            continue
        ulp = "none" if tol.ulp is None else str(int(tol.ulp))
        specs.append(f"{dtype}:atol={float(tol.atol)!r},rtol={float(tol.rtol)!r},ulp={ulp}")
    return specs


def outcome_argv(actions: Iterable[argparse.Action], args: argparse.Namespace, tolerances: Tolerances) -> list[str]:
    """``rerun_args`` of a run: the words of ``actions`` (the outcome-changing options) as
    ``args`` holds them, with the tolerance flags replaced by ``tolerance_specs``."""
    words: list[str] = []
    for action in actions:
        if action.dest in TOLERANCE_DESTS:
            continue
        words += action_argv(action, getattr(args, action.dest, action.default))
    for spec in tolerance_specs(tolerances):
        words += ["--tol", spec]
    return words


def file_identity(path: str | None) -> dict[str, Any] | None:
    """``{"path", "sha256"}`` of a file the run read (None without one, or when unreadable)."""
    if not path:
        return None
    try:  # read through the same caps as the run's own reading of it
        digest = hashlib.sha256(read_bytes(path, "tolerances file")).hexdigest()
    except (OSError, FileRefused):
        return None
    return {"path": str(path), "sha256": digest}


def legacy_rerun_args(header: Mapping[str, Any]) -> list[str]:
    """``rerun_args`` rebuilt from the other fields of a header that lacks it."""
    words = ["--ep", str(header.get("ep_alias") or header.get("ep") or "cpu")]
    options = header.get("ep_options")
    if isinstance(options, Mapping):
        for key, value in options.items():
            words += ["--ep-option", f"{key}={value}"]
    session = header.get("session_options")
    if isinstance(session, Mapping) and session.get("graph_optimization_level") == "ORT_ENABLE_ALL":
        words.append("--graph-opt")
    seed = header.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        words += ["--seed", str(seed)]
    table = header.get("tolerances")
    if isinstance(table, Mapping):
        try:
            tolerances = Tolerances.from_json(table)
        except (TypeError, ValueError, AttributeError):
            tolerances = Tolerances.defaults()
        for spec in tolerance_specs(tolerances):
            words += ["--tol", spec]
    return words


def rerun_args(header: Mapping[str, Any]) -> list[str]:
    """The header's ``rerun_args`` when it is a list of strings, else ``legacy_rerun_args``."""
    recorded = header.get("rerun_args")
    if isinstance(recorded, list) and recorded and all(isinstance(w, str) for w in recorded):
        return list(recorded)
    return legacy_rerun_args(header)


__all__ = ["ALWAYS", "TIME_FIELD", "TOLERANCE_DESTS", "action_argv", "file_identity", "legacy_rerun_args",
           "outcome_argv", "rerun_args", "tolerance_specs"]
