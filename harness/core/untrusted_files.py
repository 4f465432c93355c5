"""Reading files nobody vouched for: the one place every command opens an input file.

Every file ``ep-testbed`` reads is data someone else may have written: desc JSON, ``.npz`` /
``.npy`` arrays, ``results.jsonl`` lines, baselines, expectations and tolerance tables, ONNX
models and their external data, the files of a case folder. This module reads them so that a
bad file costs one clear ``FileRefused`` (the CLI prints it and exits 2), never a traceback, a
hang, an allocation nobody asked for, or a read outside the folder the file belongs to:

- **regular files only**: ``stat`` before ``open`` (a FIFO would block the open, ``/dev/zero``
  never ends), opened non-blocking, and checked again on the open descriptor;
- **sizes capped before reading or allocating** (``Limits``, defaults below, overridable with
  ``--limit NAME=VALUE`` on every command, never past what Python itself reads: 500 levels of
  nesting, its integer-conversion digits): a file's bytes, a JSON document's nesting and the
  digits of its integers, an array's elements, the *declared* uncompressed size of every
  ``.npz`` member before it is decompressed (so a zip bomb is refused unopened), a model and its
  external data; an array file's decompressed bytes are also checked against the memory this
  process may still allocate (``memory.headroom``) before any is decompressed;
- **parsed strictly**: UTF-8 (a BOM allowed), JSON without ``NaN``/``Infinity`` literals and
  without numbers that overflow a float; ``.npy`` headers are parsed here (``numpy.lib.format``
  readers), pickled object arrays and structured dtypes are refused, and the data must be
  exactly as long as the header says before anything is allocated;
- **contained**: a path found *inside* data (a result line's ``artifacts``, a tensor's external
  data location, the files of a case folder) is resolved under its folder and refused when it
  is absolute, climbs out with ``..``, or leaves it through a symbolic link (``inside``);
  ``plan_copy`` / ``copy_planned`` copy regular files only, never through a link;
- **written without following links**: what a command writes into a folder (a run folder, a
  case folder, ``--out``) goes through ``output_folder`` / ``open_output``, which replace a
  planted symbolic link instead of writing through it; a whole file is written under a
  temporary name and renamed (``atomic_files``), so it is never left truncated.

Paths a user typed on the command line are theirs to choose (a link they name is followed);
paths read out of files are not. Nothing here imports onnx or onnxruntime: the reports use it.

The caps (``Limits``):

=================  ==============  ==============================================================
name               default         what it bounds
=================  ==============  ==============================================================
``json-bytes``     64 MiB          a JSON file (desc, expectations, tolerances, manifest)
``results-bytes``  1 GiB           a ``results.jsonl`` (each line at most 16 MiB)
``elements``       2**28           elements of one array read, and of any tensor the reference
                                   or an input generator would allocate
``npz-bytes``      2 GiB           uncompressed bytes of an ``.npz`` (declared sizes, summed)
``model-bytes``    2 GiB - 1       an ONNX model file (protobuf's own limit)
``external-bytes`` 16 GiB          a model's external data, all tensors together
=================  ==============  ==============================================================
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import ntpath
import os
import posixpath
import re
import stat
import sys
import zipfile
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any, BinaryIO, Iterable, Iterator, Mapping

import numpy as np

from ...reference.checks import element_cap
from . import memory
from .atomic_files import AtomicFile, check_target, encode_text

KiB, MiB, GiB = 2**10, 2**20, 2**30


class FileRefused(ValueError):
    """A file the tool will not read as asked. The message names the file, the field (when one
    is at fault), what is allowed, and (after ``Note:``) what to do next."""

    def __init__(self, path: Any, problem: str, *, field: str | None = None, allowed: str | None = None,
                 hint: str | None = None):
        """``path``: the file; ``problem``: what is wrong; ``field``: where in the file;
        ``allowed``: what would be accepted; ``hint``: what to do next."""
        self.path, self.problem, self.field, self.allowed, self.hint = str(path), problem, field, allowed, hint
        where = f"{self.path}: " + (f"{field}: " if field else "")
        text = where + problem + (f" (allowed: {allowed})" if allowed else "")
        super().__init__(text + (f"\nNote: {hint}" if hint else ""))


class FileChanged(FileRefused):
    """A file that changed between two reads of it (``LinesRead``): what was read first no longer
    holds, so a reader redoes its read or refuses it, never mixes the two."""


class OutOfMemory(FileRefused):
    """A file this process has too little memory left to read as asked: the message says what it
    needs, what there was and what to do (``memory.shortage_message``). Its own type, so that a
    command that could still finish (a run whose report cannot be drawn) tells it from damage."""


@dataclass(frozen=True)
class Limits:
    """The caps of the module docstring's table; ``LIMIT_NAMES`` spells them on the command line."""

    json_bytes: int = 64 * MiB
    results_bytes: int = 1 * GiB
    line_bytes: int = 16 * MiB
    elements: int = 2**28
    npz_bytes: int = 2 * GiB
    model_bytes: int = 2**31 - 1
    external_bytes: int = 16 * GiB
    json_depth: int = 64
    int_digits: int = 40
    npz_members: int = 4096

    def with_items(self, items: list[str]) -> "Limits":
        """These limits with ``NAME=VALUE`` items applied (``--limit elements=2**30``,
        ``--limit npz-bytes=8GiB``); ValueError naming the item and the names allowed."""
        changes: dict[str, int] = {}
        for item in items:
            name, sep, text = item.partition("=")
            key = name.strip().replace("-", "_")
            if not sep or key not in {f.name for f in fields(self)}:
                raise ValueError(f"--limit {item!r}: expected NAME=VALUE with NAME one of {', '.join(LIMIT_NAMES)}")
            value = parse_size(text)
            if value is None or value < 1:
                raise ValueError(f"--limit {item!r}: {text!r} is not a positive whole number (e.g. 1000, 2**30, "
                                 "512MiB, 8GiB)")
            most, why = _LIMIT_MAXIMA.get(key, (None, ""))
            if most is not None and value > most:
                raise ValueError(f"--limit {item!r}: at most {most} ({why})")
            changes[key] = value
        return replace(self, **changes)


#: The caps Python itself puts on what a raised limit could reach: its JSON parser recurses once
#: per nesting level (within the interpreter's recursion limit, with room for the caller's own
#: frames), and it converts no integer literal longer than ``sys.get_int_max_str_digits()``.
_LIMIT_MAXIMA: dict[str, tuple[int | None, str]] = {
    "json_depth": (max(64, sys.getrecursionlimit() // 2), "Python's JSON parser recurses once per level"),
    "int_digits": (getattr(sys, "get_int_max_str_digits", lambda: 0)() or None,
                   "Python converts no longer integer literal"),
}

#: The ``--limit`` names, in the table's order.
LIMIT_NAMES = tuple(f.name.replace("_", "-") for f in fields(Limits))
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "kb": 10**3, "mb": 10**6, "gb": 10**9,
          "tb": 10**12, "kib": KiB, "mib": MiB, "gib": GiB, "tib": 2**40}


def parse_size(text: str) -> int | None:
    """``"1000"``, ``"2**30"``, ``"512MiB"``, ``"8GB"`` -> int; None for anything else (at most 2**64)."""
    text = text.strip().lower().replace("_", "")
    power = re.fullmatch(r"(\d{1,3})\*\*(\d{1,3})", text)
    if power:
        value = int(power.group(1)) ** int(power.group(2)) if int(power.group(2)) <= 64 else None
    else:
        match = re.fullmatch(r"(\d{1,20})\s*([a-z]*)", text)
        value = int(match.group(1)) * _UNITS[match.group(2)] if match and match.group(2) in _UNITS else None
    return value if value is not None and value <= 2**64 else None


_LIMITS: contextvars.ContextVar[Limits] = contextvars.ContextVar("ep_testbed_limits", default=Limits())


def limits() -> Limits:
    """The limits in force (``using_limits`` sets them for a command)."""
    return _LIMITS.get()


@contextlib.contextmanager
def using_limits(value: Limits) -> Iterator[Limits]:
    """Make ``value`` the limits in force inside the block (also the reference's element cap)."""
    token = _LIMITS.set(value)
    try:
        with element_cap(value.elements):
            yield value
    finally:
        _LIMITS.reset(token)


def _limit_hint(name: str, needed: int | None = None) -> str:
    """The ``Note:`` for a refusal that a larger cap would lift (none can past ``_LIMIT_MAXIMA``)."""
    most, why = _LIMIT_MAXIMA.get(name, (None, ""))
    if needed and most is not None and needed > most:
        return f"no --limit lifts this: {name.replace('_', '-')} is at most {most} ({why})"
    size = f"={needed}" if needed else "=N"
    return f"if you mean it, raise the cap with --limit {name.replace('_', '-')}{size}"


# --- opening -------------------------------------------------------------------------------

def open_regular(path: str | os.PathLike, what: str = "file") -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file; ``FileRefused`` otherwise.

    Checked with ``stat`` first (opening a FIFO would block), opened non-blocking, and checked
    again on the descriptor (the file cannot be swapped for a device in between)."""
    try:
        before = os.stat(path)
    except FileNotFoundError:
        raise FileRefused(path, f"cannot read it (no such {what})", hint="check the path") from None
    except OSError as exc:
        raise FileRefused(path, f"cannot read the {what} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(before.st_mode):
        kind = "a folder" if stat.S_ISDIR(before.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise FileRefused(path, f"the {what} is {kind}", hint="pass a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileRefused(path, f"cannot read the {what} ({exc.strerror or exc})") from None
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise FileRefused(path, f"the {what} changed while it was being opened")
    return os.fdopen(fd, "rb")


def read_bytes(path: str | os.PathLike, what: str = "file", limit: int | None = None,
               limit_name: str = "json_bytes") -> bytes:
    """The whole of a regular file, refused unread when it holds more than ``limit`` bytes
    (default: the ``limit_name`` cap in force)."""
    cap = getattr(limits(), limit_name) if limit is None else limit
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        if size > cap:
            raise FileRefused(path, f"the {what} holds {size} bytes, more than the {cap} this command reads",
                              hint=_limit_hint(limit_name, size))
        data = f.read(size + 1)  # read(n) allocates n bytes up front: never ask for the cap itself
        if len(data) > size:  # it grew while being read, or its size is not stated (a /proc file)
            data += _read_capped(f, cap + 1 - len(data))
    if len(data) > cap:
        raise FileRefused(path, f"the {what} holds more than {cap} bytes", hint=_limit_hint(limit_name))
    return data


def _read_capped(f: BinaryIO, most: int) -> bytes:
    """The rest of ``f``, at most ``most`` bytes, read a MiB at a time (never ``most`` allocated
    up front: a file that states no size may still be small)."""
    parts, left = [], most
    while left > 0:
        part = f.read(min(left, MiB))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def decode_text(data: bytes, path: Any, what: str = "file") -> str:
    """UTF-8 (with or without a byte-order mark) -> str; ``FileRefused`` naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileRefused(path, f"the {what} is not UTF-8 text: byte {exc.start} is 0x{data[exc.start]:02x}",
                          hint="save it as UTF-8") from None


# --- JSON ----------------------------------------------------------------------------------

def read_json(path: str | os.PathLike, what: str = "JSON file", *, limit_name: str = "json_bytes",
              nonfinite: bool = False) -> Any:
    """The decoded JSON document in ``path`` (see ``parse_json``), its size capped first."""
    return parse_json(decode_text(read_bytes(path, what, limit_name=limit_name), path, what), path, what,
                      nonfinite=nonfinite)


def parse_json(text: str, path: Any = "<json>", what: str = "JSON file", *, nonfinite: bool = False) -> Any:
    """Strict JSON: no ``NaN``/``Infinity`` literals (unless ``nonfinite``: for files this tool
    writes with them, e.g. ``model_result.json``), no number that overflows a float, no integer
    longer than the ``int_digits`` cap, nesting at most ``json_depth`` levels."""
    caps = limits()

    def bounded_int(digits: str) -> int:
        """An integer literal, refused past the digit cap (int() of a huge one is slow, then useless)."""
        if len(digits.lstrip("-")) > caps.int_digits:
            raise _JsonRefusal(f"an integer of {len(digits.lstrip('-'))} digits (at most {caps.int_digits})")
        return int(digits)

    def finite_float(text: str) -> float:
        """A float literal, refused if it overflows to infinity (1e400)."""
        value = float(text)
        if not math.isfinite(value):
            raise _JsonRefusal(f"the number {text[:40]} overflows a float")
        return value

    def no_constant(name: str) -> Any:
        """``NaN``/``Infinity`` literals: floats where the caller allows them, else refused."""
        if nonfinite:
            return float(name.replace("Infinity", "inf"))
        raise _JsonRefusal(f"{name} is not JSON (write a number, or the string \"nan\"/\"inf\" where allowed)")

    try:
        if _numbers_need_checks(text, caps.int_digits):
            value = json.loads(text, parse_int=bounded_int, parse_float=finite_float, parse_constant=no_constant)
        else:  # no literal the checks could refuse: the C parser's own number conversion, the same values
            value = json.loads(text, parse_constant=no_constant)
    except _JsonRefusal as exc:
        raise FileRefused(path, f"not {_a(what)}: {exc}") from None
    except RecursionError:  # Python's parser gave up first: the cap, or its own recursion limit
        depth = _text_depth(text, caps.json_depth)
        if depth <= caps.json_depth:
            raise FileRefused(path, f"not {_a(what)}: nested deeper than Python's JSON parser reads") from None
    except json.JSONDecodeError as exc:
        raise FileRefused(path, f"not {_a(what)}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") \
            from None
    else:
        depth = _text_depth(text, caps.json_depth)
    if depth > caps.json_depth:
        raise FileRefused(path, f"not {_a(what)}: nested {depth} levels deep, more than {caps.json_depth}",
                          hint=_limit_hint("json_depth", depth))
    return value


def _a(what: str) -> str:
    """``what`` with its indefinite article ("an expectations file", "a desc")."""
    return ("an " if what[:1].lower() in "aeiou" else "a ") + what


class _JsonRefusal(ValueError):
    """Raised from inside ``json.loads``'s hooks; ``parse_json`` turns it into ``FileRefused``."""


#: A float whose runs of digits are at most this long and whose exponent has at most two digits
#: is below 10**299 (a float overflows from about 1.8e308); past it the checked parse decides.
_FLOAT_SAFE_DIGITS = 200


#: Every digit to 0 and E to e: a long literal or a long exponent is then a plain substring.
_NUMBER_SHAPES = str.maketrans("123456789E", "000000000e")


def _numbers_need_checks(text: str, int_digits: int) -> bool:
    """Whether ``text`` holds a literal the integer-digit or float-overflow check of ``parse_json``
    might refuse: a run of digits past the integer cap (or past ``_FLOAT_SAFE_DIGITS``, where a float
    may overflow), or a positive exponent of three digits or more (digits inside strings
    count too: they only send a text the checked way). Where it holds none, both checks pass every
    literal, and the parser's own conversion (``int``, ``float``) gives the values they would.
    Substring searches, since a regular expression's counted repetition is ten times slower on the
    long messages of a results line."""
    shapes = text.translate(_NUMBER_SHAPES)
    return ("0" * (min(int_digits, _FLOAT_SAFE_DIGITS) + 1) in shapes
            or "e000" in shapes or "e+000" in shapes)  # a negative exponent never overflows


def _outside_strings(text: str) -> str:
    """The JSON ``text`` (already parsed, so well formed) without its string literals: every
    backslash escape that could hide a quote taken out first (each pair of backslashes, then each
    escaped quote: outside strings JSON has no backslash), so that every quote left opens or closes
    a string, and the text outside them is every other piece between quotes."""
    plain = text.replace("\\\\", "").replace('\\"', "")
    return "".join(plain.split('"')[0::2])


def _text_depth(text: str, cap: int) -> int:
    """How deeply the JSON ``text`` (already parsed) nests, counted on its brackets outside string
    literals; exact past ``cap``, and at most ``cap`` otherwise: a document with no more than
    ``cap`` opening brackets cannot nest deeper (most lines this tool writes), so the exact count
    runs only past it, in NumPy rather than a walk over every value."""
    if text.count("[") + text.count("{") <= cap:  # brackets in strings included: still within the cap
        return 0
    bare = _outside_strings(text)
    if bare.count("[") + bare.count("{") <= cap:
        return 0 if not ("[" in bare or "{" in bare) else 1
    codes = np.frombuffer(bare.encode("ascii", "replace"), dtype=np.uint8)
    return int(np.cumsum(_BRACKET_STEPS[codes], dtype=np.int64).max(initial=0))


#: Per byte: +1 for an opening bracket, -1 for a closing one, 0 otherwise.
_BRACKET_STEPS = np.zeros(256, dtype=np.int8)
_BRACKET_STEPS[[ord("["), ord("{")]] = 1
_BRACKET_STEPS[[ord("]"), ord("}")]] = -1


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (a scalar is 0, ``[1]`` is 1), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


@dataclass(frozen=True)
class BadLine:
    """A line of a JSON-lines file that is not one JSON object: its number (from 1), why, and
    whether it is the file's last line without a newline (what a killed writer leaves)."""

    number: int
    reason: str
    torn: bool


@dataclass
class LinesRead:
    """What a first pass over a lines file saw, for a second pass to hold the file to: the file's
    identity, size and modification time when the pass began and when it ended (``file_stamp``),
    and a digest of every line it read (by line number). ``read_json_lines_at`` refuses
    (``FileChanged``) a file whose stamp differs, or a line whose bytes do, so two passes never
    describe two different files."""

    start: tuple[int, ...] = ()
    end: tuple[int, ...] = ()
    digests: dict[int, bytes] = field(default_factory=dict)

    def check(self, f: BinaryIO, path: Any, what: str) -> None:
        """``FileChanged`` unless the open file ``f`` is the one the first pass read, unchanged."""
        now = file_stamp(f)
        if self.start != self.end:
            raise FileChanged(path, f"the {what} changed while it was being read (it is still being written)",
                              hint=_CHANGED_HINT)
        if now != self.end:
            raise FileChanged(path, f"the {what} changed between two reads of it ({_stamp_change(self.end, now)})",
                              hint=_CHANGED_HINT)

    def check_line(self, number: int, raw: bytes, path: Any, what: str) -> None:
        """``FileChanged`` when line ``number`` no longer holds the bytes the first pass read."""
        if number in self.digests and self.digests[number] != line_digest(raw):
            raise FileChanged(path, f"line {number} of the {what} changed between two reads of it",
                              hint=_CHANGED_HINT)


_CHANGED_HINT = "read the folder again once nothing writes into it (a run, a --resume or a merge still going)"


def file_stamp(f: BinaryIO) -> tuple[int, ...]:
    """``(device, inode, size, modification time in ns)`` of an open file."""
    st = os.fstat(f.fileno())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _stamp_change(before: tuple[int, ...], after: tuple[int, ...]) -> str:
    """What differs between two ``file_stamp``s, in words."""
    if before[:2] != after[:2]:
        return "another file took its name"
    if before[2] != after[2]:
        return f"{before[2]} bytes then, {after[2]} now"
    return "modified since, same size"


def line_digest(raw: bytes) -> bytes:
    """A short digest of one line's bytes (8 bytes of BLAKE2b: a changed line is told from an
    unchanged one without keeping it)."""
    return hashlib.blake2b(raw, digest_size=8).digest()


def read_json_lines(path: str | os.PathLike, what: str = "results file") -> Iterator[tuple[int, Any]]:
    """``(line number, object)`` per non-blank line; a line that is not a JSON object yields
    ``(number, BadLine)`` instead, so the caller decides what an unreadable line means. The file
    is capped at ``results_bytes``, each line at ``line_bytes`` (read no further than that)."""
    for number, _offset, item in read_json_lines_placed(path, what):
        yield number, item


def read_json_lines_placed(path: str | os.PathLike, what: str = "results file", seen: LinesRead | None = None
                           ) -> Iterator[tuple[int, int, Any]]:
    """``read_json_lines`` with each line's byte offset: ``(line number, offset, object or
    BadLine)``, so a reader that keeps little of a line can read it whole again later
    (``read_json_lines_at``) instead of holding it; ``seen`` (if given) collects what the second
    pass holds the file to (``LinesRead``)."""
    caps = limits()
    with open_regular(path, what) as f:
        _check_lines_size(f, path, what, caps)
        if seen is not None:
            seen.start = file_stamp(f)
        offset = 0
        for number, raw in enumerate(iter(lambda: f.readline(caps.line_bytes + 1), b""), 1):
            start, offset = offset, offset + len(raw)
            torn = not raw.endswith(b"\n")
            if len(raw) > caps.line_bytes:
                yield number, start, BadLine(number, f"longer than {caps.line_bytes} bytes", torn=False)
                while (rest := f.readline(MiB)) and not rest.endswith(b"\n"):
                    offset += len(rest)  # the rest of that line, skipped a piece at a time
                offset += len(rest)
                continue
            if not raw.strip():
                continue
            if seen is not None:
                seen.digests[number] = line_digest(raw)
            yield number, start, _json_line(raw, number, torn, path)
        if seen is not None:
            seen.end = file_stamp(f)


def read_json_lines_at(path: str | os.PathLike, places: Iterable[tuple[int, int]], what: str = "results file",
                       seen: LinesRead | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, object or BadLine)`` for each ``(line number, byte offset)`` of ``places``
    (as ``read_json_lines_placed`` gave them), in the order given, through one open handle and
    the same caps: a second pass over a file that reads only the lines it needs whole. With
    ``seen`` (the first pass's ``LinesRead``), ``FileChanged`` when the file or a line read is
    not what the first pass read."""
    caps = limits()
    with open_regular(path, what) as f:
        _check_lines_size(f, path, what, caps)
        if seen is not None:
            seen.check(f, path, what)
        for number, offset in places:
            f.seek(offset)
            raw = f.readline(caps.line_bytes + 1)
            if seen is not None:
                seen.check_line(number, raw, path, what)
            if len(raw) > caps.line_bytes:
                yield number, BadLine(number, f"longer than {caps.line_bytes} bytes", torn=False)
            else:
                yield number, _json_line(raw, number, not raw.endswith(b"\n"), path)


def _check_lines_size(f: BinaryIO, path: str | os.PathLike, what: str, caps: "Limits") -> None:
    """``FileRefused`` when the open lines file ``f`` holds more than ``results_bytes``."""
    size = os.fstat(f.fileno()).st_size
    if size > caps.results_bytes:
        raise FileRefused(path, f"the {what} holds {size} bytes, more than the {caps.results_bytes} read",
                          hint=_limit_hint("results_bytes", size))


def _json_line(raw: bytes, number: int, torn: bool, path: Any) -> Any:
    """One line as a JSON object, or a ``BadLine`` saying why it is not one."""
    try:
        value = parse_json(decode_text(raw, path), path, "JSON line")
    except FileRefused as exc:
        return BadLine(number, exc.problem.removeprefix(f"not {_a('JSON line')}: "), torn)
    if not isinstance(value, dict):
        return BadLine(number, f"a JSON {type(value).__name__}, not an object", torn)
    return value


# --- arrays --------------------------------------------------------------------------------

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
#: Array element kinds read: booleans, integers, floats, complex numbers (never objects or records).
ARRAY_KINDS = "biufc"
NPZ_HINT = "write one with numpy.savez(path, NAME=array, ...) (plain numeric arrays, no pickles)"


def read_arrays(path: str | os.PathLike, what: str = "arrays file", kinds: str = ARRAY_KINDS
                ) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` by name (``numpy.savez``'s layout), each checked as the module
    docstring says before it is decompressed or allocated; ``kinds``: the dtype kinds allowed
    (``ARRAY_KINDS``, plus ``"U"`` for a file that also holds fixed-width text). A bare ``.npy``
    (one unnamed array) is refused with a hint; ``read_array`` reads those."""
    with open_regular(path, what) as f:
        archive = _open_npz(f, path)
        with archive:
            members = _npz_members(archive, path)
            check_memory(path, sum(info.file_size for _, info in members), "decompressing its arrays")
            return {name[:-4]: _member_array(archive, info, path, kinds) for name, info in members}


def array_headers(path: str | os.PathLike, what: str = "arrays file", kinds: str = ARRAY_KINDS
                  ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{name: (shape, dtype)}`` of an ``.npz``, every member checked as ``read_arrays`` checks
    it (members, caps, dtype, the header's byte count against the member's) without reading or
    decompressing any array's data: what a folder of inputs is validated with before its arrays
    are needed (``read_arrays`` reads them, and checks the data, then)."""
    with open_regular(path, what) as f:
        archive = _open_npz(f, path)
        with archive:
            return {name[:-4]: _member_header(archive, info, path, kinds) for name, info in _npz_members(archive, path)}


def _open_npz(f: BinaryIO, path: Any) -> zipfile.ZipFile:
    """The zip archive of an opened ``.npz``; ``FileRefused`` for a ``.npy`` or anything else."""
    magic = f.read(6)
    f.seek(0)
    if magic.startswith(_NPY_MAGIC):
        raise FileRefused(path, "one unnamed array (a .npy file), not an NPZ of named arrays", hint=NPZ_HINT)
    if not magic.startswith(_ZIP_MAGICS):
        raise FileRefused(path, "not an NPZ of named arrays (it does not start like a zip file)", hint=NPZ_HINT)
    try:
        return zipfile.ZipFile(f)
    except MemoryError:
        raise
    except Exception as exc:  # zipfile raises several types for damaged archives
        raise FileRefused(path, f"not a readable NPZ ({type(exc).__name__}: {exc})", hint=NPZ_HINT) from None


def _member_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Any, kinds: str
                   ) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one ``.npz`` member, from its header alone (``_npy_header``)."""
    where = f"array {info.filename[:-4]!r}"
    try:
        with archive.open(info) as member:
            shape, _fortran, dtype = _npy_header(member, info.file_size, path, where, kinds)
            return shape, dtype
    except (FileRefused, MemoryError):
        raise
    except Exception as exc:  # truncated, corrupt or lying archives raise many types
        raise FileRefused(path, f"{where} is unreadable ({type(exc).__name__}: {exc})", hint=NPZ_HINT) from None


def _npz_members(archive: zipfile.ZipFile, path: Any) -> list[tuple[str, zipfile.ZipInfo]]:
    """The members of an ``.npz``, refused before any is decompressed when they are not all
    ``NAME.npy``, are encrypted, repeat a name, or declare more bytes than the ``npz_bytes`` cap."""
    caps = limits()
    infos = archive.infolist()
    if len(infos) > caps.npz_members:
        raise FileRefused(path, f"{len(infos)} members, more than {caps.npz_members}",
                          hint=_limit_hint("npz_members", len(infos)))
    seen: set[str] = set()
    total = 0
    for info in infos:
        if not info.filename.endswith(".npy") or info.is_dir():
            raise FileRefused(path, f"member {info.filename!r} is not an array", allowed="NAME.npy members only",
                              hint=NPZ_HINT)
        if info.flag_bits & 0x1:
            raise FileRefused(path, f"member {info.filename!r} is encrypted", hint=NPZ_HINT)
        if info.filename in seen:
            raise FileRefused(path, f"member {info.filename!r} appears twice", hint=NPZ_HINT)
        seen.add(info.filename)
        total += info.file_size
    if total > caps.npz_bytes:
        raise FileRefused(path, f"its arrays declare {total} bytes uncompressed, more than the {caps.npz_bytes} read",
                          hint=_limit_hint("npz_bytes", total))
    return [(info.filename, info) for info in infos]


def _member_array(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Any, kinds: str = ARRAY_KINDS
                  ) -> np.ndarray:
    """One ``.npz`` member as an array: header checked, exactly the declared bytes read (the
    zip's CRC then checked), nothing allocated beyond what the header and the zip agree on."""
    where = f"array {info.filename[:-4]!r}"
    try:
        with archive.open(info) as member:
            return _npy_body(member, info.file_size, path, where, kinds)
    except (FileRefused, MemoryError):
        raise
    except Exception as exc:  # truncated, corrupt or lying archives raise many types
        raise FileRefused(path, f"{where} is unreadable ({type(exc).__name__}: {exc})", hint=NPZ_HINT) from None


def read_array(path: str | os.PathLike, what: str = "array file") -> np.ndarray:
    """The one array of a ``.npy`` file, checked like an ``.npz`` member."""
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        check_memory(path, size, "reading its array")
        try:
            return _npy_body(f, size, path, "the array")
        except (FileRefused, MemoryError):
            raise
        except Exception as exc:
            raise FileRefused(path, f"not a readable .npy ({type(exc).__name__}: {exc})") from None


def _npy_body(stream: IO[bytes], size: int, path: Any, where: str, kinds: str = ARRAY_KINDS) -> np.ndarray:
    """Parse an ``.npy`` of ``size`` bytes from ``stream``: the header's dtype and element count
    checked against the caps and against ``size`` before the data is read into a fresh buffer."""
    shape, fortran, dtype = _npy_header(stream, size, path, where, kinds)
    nbytes = math.prod(shape) * dtype.itemsize
    buffer = bytearray(nbytes)
    # files and zip members have readinto (typing.IO does not say so); read(1) also makes zip check the CRC
    if stream.readinto(memoryview(buffer)) != nbytes or stream.read(1):  # type: ignore[attr-defined]
        raise FileRefused(path, f"{where} is shorter or longer than its header says")
    array = np.frombuffer(buffer, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


def _npy_header(stream: IO[bytes], size: int, path: Any, where: str, kinds: str = ARRAY_KINDS
                ) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran order, dtype)`` of an ``.npy`` of ``size`` bytes, the stream left at its
    data: plain numeric dtypes of ``kinds`` only, at most the ``elements`` cap, and exactly as
    many data bytes as the header declares."""
    fmt = np.lib.format
    major, _minor = fmt.read_magic(stream)
    reader = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
    shape, fortran, dtype = reader(stream, max_header_size=10000)
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in kinds:
        raise FileRefused(path, f"{where} has dtype {dtype}", allowed="plain bool, integer, float or complex arrays; "
                          "pickled objects are never loaded", hint=NPZ_HINT)
    count = math.prod(shape)
    cap = limits().elements
    if count > cap:
        raise FileRefused(path, f"{where} declares shape {list(shape)} ({count} elements), more than the {cap} read",
                          hint=_limit_hint("elements", count))
    header_end = stream.tell()
    nbytes = count * dtype.itemsize
    if size - header_end != nbytes:
        raise FileRefused(path, f"{where}: its header declares {nbytes} bytes of data, the file holds "
                          f"{size - header_end}", hint="the file is truncated or its header is wrong; write it again")
    return tuple(shape), bool(fortran), dtype


def check_memory(path: Any, nbytes: int, what: str) -> None:
    """``FileRefused`` (the ``memory.shortage_message``) when ``nbytes`` will not fit in what this
    process may still allocate: checked before anything is decompressed or read, with an eighth
    and 64 MiB more for what decompressing and the caller's first copy allocate beside it."""
    if memory.check_fits(what, nbytes + nbytes // 8 + 64 * MiB) is not None:
        raise memory_refused(path, what, nbytes + nbytes // 8 + 64 * MiB)


def memory_refused(path: Any, what: str, need: int | None = None, have: int | None = None) -> OutOfMemory:
    """The ``OutOfMemory`` refusal of ``path`` when ``what`` (reading it, decompressing it) needs ``need``
    bytes (None: more than there is, a ``MemoryError`` was caught) and ``have`` were available."""
    problem, _, hint = memory.shortage_message(what, need, have).partition("\nNote: ")
    return OutOfMemory(path, problem.rstrip("."), hint=hint or None)


# --- paths inside folders ------------------------------------------------------------------

def inside(root: str | os.PathLike, relative: str, what: str = "path") -> Path:
    """``root/relative`` if it stays inside ``root`` both lexically (no absolute path, drive or
    ``..`` that climbs out) and after resolving symbolic links; ``FileRefused`` otherwise.
    Nothing is opened: ``realpath`` only reads links."""
    root_real = Path(os.path.realpath(root))
    if (not isinstance(relative, str) or not relative or "\x00" in relative or posixpath.isabs(relative)
            or ntpath.isabs(relative) or ntpath.splitdrive(relative)[0] or relative.startswith(("\\", "/"))):
        raise FileRefused(root, f"{what} {relative!r} is not a relative path inside this folder")
    parts = [p for p in re.split(r"[\\/]+", relative) if p not in ("", ".")]
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            raise FileRefused(root, f"{what} {relative!r} climbs out of the folder with '..'")
    candidate = Path(os.path.realpath(root_real.joinpath(*parts)))
    if candidate != root_real and root_real not in candidate.parents:
        raise FileRefused(root, f"{what} {relative!r} leads outside the folder (through a symbolic link)")
    return candidate


def plan_copy(source_root: str | os.PathLike, relative: str, target_root: str | os.PathLike,
              what: str = "folder", max_depth: int = 8) -> list[tuple[Path, Path]]:
    """``(source file, target file)`` pairs that copy ``source_root/relative`` to
    ``target_root/relative``: both must stay inside their roots (``inside``), and every entry
    under it must be a regular file or a folder: a symbolic link (or a device, FIFO...)
    anywhere is refused before anything is copied or followed. ``copy_planned`` copies them."""
    source = inside(source_root, relative, what)
    target = inside(target_root, relative, what)
    if os.path.islink(os.path.join(source_root, relative)) or not source.is_dir():
        raise FileRefused(source_root, f"{what} {relative!r} is not a folder")
    pairs: list[tuple[Path, Path]] = []
    stack = [(source, target, 0)]
    while stack:
        folder, into, depth = stack.pop()
        if depth > max_depth:
            raise FileRefused(folder, f"folders nest more than {max_depth} levels deep")
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_symlink():
                    raise link_refused(entry.path, "only regular files are copied")
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), into / entry.name, depth + 1))
                elif entry.is_file(follow_symlinks=False):
                    pairs.append((Path(entry.path), into / entry.name))
                else:
                    raise FileRefused(entry.path, "is not a regular file (a device, FIFO or socket)")
    return pairs


def link_refused(path: str | os.PathLike, allowed: str) -> FileRefused:
    """The one refusal of a symbolic link found where data was expected (a link in a data folder
    is never followed: it could lead anywhere); ``allowed`` says what is read there instead."""
    return FileRefused(path, f"is a symbolic link; {allowed}",
                       hint="replace the link by the file or folder it points at, or delete it")


def copy_planned(pairs: list[tuple[Path, Path]]) -> int:
    """Copy what ``plan_copy`` listed (each source opened with ``open_regular``, so a file swapped
    for something else since is refused); returns the files copied."""
    for source, target in pairs:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open_regular(source) as src, open_output(target, "wb") as dst:
            while chunk := src.read(MiB):
                dst.write(chunk)
    return len(pairs)


# --- writing into folders that may hold planted links -------------------------------------

def output_folder(root: str | os.PathLike, relative: str = "") -> Path:
    """``root/relative`` as a real folder made inside ``root``: a component that is a symbolic
    link is removed and made a folder (never followed), one that is a file is ``FileRefused``.
    A run folder is data too: a link planted in it must not turn a write into one elsewhere."""
    folder = Path(root)
    folder.mkdir(parents=True, exist_ok=True)
    for part in [p for p in re.split(r"[\\/]+", relative) if p not in ("", ".")]:
        if part == "..":
            raise FileRefused(root, f"{relative!r} climbs out of the folder")
        folder = folder / part
        if folder.is_symlink():
            folder.unlink()
        try:
            folder.mkdir()
        except FileExistsError:  # made before, or just now by another worker process of the run
            if folder.is_symlink() or not folder.is_dir():
                raise FileRefused(folder, "is in the way of a folder this command writes", hint="move it away") from None
    return folder


def open_output(path: str | os.PathLike, mode: str = "wb", *, atomic: bool = True) -> Any:
    """``path`` opened for writing (``"wb"``, ``"w"``, ``"ab"``, ``"a"``) without following a
    link. ``"w"``/``"wb"`` write whole files (``atomic_files.AtomicFile``: a temporary name renamed
    on close, so the file appears whole or not at all, and a link planted there is replaced);
    appending, or ``atomic=False`` for a stream a killed run must keep, opens ``path`` itself: a
    symbolic link there is removed first and the open refuses links (``O_NOFOLLOW``), so nothing
    outside the folder is written."""
    why = check_target(path)
    if why is not None:
        raise FileRefused(path, why, hint="move it away" if "folder" in why else None)
    if atomic and not mode.startswith("a"):
        return AtomicFile(path, mode)
    append = mode.startswith("a")
    if os.path.islink(path):
        os.unlink(path)
    flags = (os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))
    fd = os.open(path, flags, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileRefused(path, "is not a regular file (a device, FIFO or socket); nothing is written there")
    return os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8", errors="backslashreplace")


def write_output(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all, through ``open_output``;
    returns the path."""
    with open_output(path, "wb") as f:
        f.write(encode_text(data) if isinstance(data, str) else data)
    return Path(path)


def write_arrays(target: Any, arrays: Mapping[str, Any]) -> None:
    """Write ``arrays`` (name -> array-like) as an uncompressed ``.npz``: to ``target`` when it is
    an open binary file, else to the path ``target`` through ``open_output`` (whole or not at
    all, never through a link)."""
    named: dict[str, Any] = {name: np.asarray(value) for name, value in arrays.items()}
    if hasattr(target, "write"):
        np.savez(target, **named)  # numpy types **arrays like its allow_pickle flag: hence dict[str, Any]
        return
    with open_output(target) as f:
        np.savez(f, **named)


__all__ = ["ARRAY_KINDS", "BadLine", "FileRefused", "LIMIT_NAMES", "Limits", "copy_planned", "decode_text", "inside",
           "json_depth", "limits", "open_output", "open_regular", "output_folder", "parse_json", "parse_size", "read_array", "read_arrays",
           "plan_copy", "read_bytes", "read_json", "FileChanged", "LinesRead", "file_stamp", "line_digest", "read_json_lines", "read_json_lines_at",
           "read_json_lines_placed", "using_limits", "write_arrays", "write_output"]
