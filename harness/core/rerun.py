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

Which command reruns a case depends on where the case came from (``rerun_words``, the one place
every rerun line is formed: report.html, ci-summary, junit.xml, the terminal): a catalog or
corpus case is ``ep-testbed run ... -k ID``; a case a fuzz run drew exists in no catalog, so its
line is ``ep-testbed fuzz ... --replay ID``, which redraws it from its id (and a shrink's minimal
case, ``<id>-min``, is the replay of the case it was shrunk from, which shrinks it again).
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
from typing import Any, Iterable, Mapping

from .results import CaseLine, safe_id
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


#: The ``family`` tags a fuzz run gives its cases (``harness/fuzz``): a drawn case, and a shrink's
#: minimal case (whose ``shrunk_from`` tag names the drawn case).
FUZZ_FAMILY, FUZZ_MINIMAL_FAMILY = "fuzz", "fuzz-minimal"


def replay_origin(header: Mapping[str, Any], line: CaseLine) -> str | None:
    """The fuzzed case id whose ``fuzz --replay`` reruns ``line`` (a case of the run ``header``
    opens), or None when ``line`` is not a case a fuzz run drew or shrank: a catalog or corpus
    case, or any case of a ``run`` (a corpus case keeps the tags of the fuzz run that found it,
    but ``run --corpus`` is what reruns it)."""
    if not isinstance(header.get("fuzz"), Mapping):
        return None
    tags = line.get("tags")
    tags = tags if isinstance(tags, Mapping) else {}
    if tags.get("family") == FUZZ_FAMILY and isinstance(line.get("id"), str):
        return str(line["id"])
    if tags.get("family") == FUZZ_MINIMAL_FAMILY and isinstance(tags.get("shrunk_from"), str):
        return str(tags["shrunk_from"])
    return None


def rerun_words(header: Mapping[str, Any], line: CaseLine) -> list[str]:
    """The command that reruns the case ``line`` of the run ``header`` opens, as words: its
    origin's command (module docstring) with ``rerun_args`` and a fresh ``--out`` per paste."""
    origin = replay_origin(header, line)
    if origin is not None:
        return replay_words(header, origin)
    case_id = str(line.get("id", ""))
    return ["ep-testbed", "run", *rerun_args(header), "-k", case_id, "--out", f"runs/rerun-{safe_id(case_id)}-{TIME_FIELD}"]


def replay_words(header: Mapping[str, Any], fuzz_id: str) -> list[str]:
    """``ep-testbed fuzz ... --replay FUZZ_ID`` with the run's ``rerun_args`` (what ``fuzz``
    records; the id itself carries operator, size, seed and batch) and a fresh ``--out``."""
    return ["ep-testbed", "fuzz", *rerun_args(header), "--replay", fuzz_id,
            "--out", f"runs/replay-{safe_id(fuzz_id)}-{TIME_FIELD}"]


def rerun_line(header: Mapping[str, Any], line: CaseLine) -> str:
    """``rerun_words`` as one shell line (each word quoted where the shell needs it)."""
    return shell_line(rerun_words(header, line))


def shell_line(words: Iterable[str]) -> str:
    """``words`` as one shell line, each quoted where the shell needs it."""
    return " ".join(shlex.quote(word) for word in words)


__all__ = ["ALWAYS", "FUZZ_FAMILY", "FUZZ_MINIMAL_FAMILY", "TIME_FIELD", "TOLERANCE_DESTS", "action_argv",
           "file_identity", "legacy_rerun_args", "outcome_argv", "replay_origin", "replay_words", "rerun_args", "rerun_line",
           "rerun_words", "shell_line", "tolerance_specs"]
