"""Files that appear whole or not at all: the one way a command writes a file it does not stream.

Every artifact (report.html, junit.xml, summary.json, diff.html/diff.txt, a case folder's files,
a corpus folder's, a baseline's, ``gen``'s, ``reference --out``) is written to a temporary name
in the same folder and renamed over its final name only once every byte was written and the file
closed (``os.replace``: atomic within one file system, on POSIX and Windows alike). So a full
disk, a kill or an exception mid-write leaves the previous file (or none), never a truncated one,
and the temporary file is removed on any failure this process sees. Streams (``results.jsonl``,
``shrinks.jsonl``) are appended line by line instead: a killed run keeps every finished line.

The rename replaces a symbolic link planted at the final name rather than writing through it,
and the temporary file is created exclusively (``O_EXCL``, ``O_NOFOLLOW``), so nothing is written
outside the folder. Text is UTF-8, a lone surrogate written as its escape (``encode_text``).
``untrusted_files.open_output`` opens through here.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Any

#: What a temporary name starts with (a dot: hidden beside the file it becomes).
TEMP_PREFIX = ".ep-testbed-tmp-"


def temp_name(path: str | os.PathLike) -> str:
    """A fresh temporary name beside ``path``: same folder, so the rename stays on one file system."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f"{TEMP_PREFIX}{secrets.token_hex(4)}-{name}"[:240])


class AtomicFile:
    """A file object writing to a temporary name; ``close`` renames it to the final path,
    ``discard`` (or leaving a ``with`` block by an exception) removes it. Everything else is the
    underlying file's (``write``, ``flush``, ``seek``, ``tell``, ``fileno``...), so ``json.dump``,
    ``numpy.savez`` and ``zipfile`` write to it as to any file."""

    def __init__(self, path: str | os.PathLike, mode: str = "wb"):
        if mode not in ("w", "wb"):
            raise ValueError(f"AtomicFile writes whole files (mode 'w' or 'wb'), not {mode!r}")
        # set before anything can fail: ``__del__`` and ``__getattr__`` of an object whose open
        # failed (a read-only or full file system) must find them, never look them up again
        self._done = True
        self._file: Any = None
        self.path = os.fspath(path)
        self.temp = temp_name(self.path)
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        fd = os.open(self.temp, flags, 0o644)
        try:
            self._file = os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8",
                                                                           errors="backslashreplace")
        except BaseException:
            os.close(fd)
            os.unlink(self.temp)
            raise
        self._done = False

    def __getattr__(self, name: str) -> Any:
        """The underlying file's attribute; an ``AttributeError`` for this object's own
        (underscore) names, which are looked up here only when ``__init__`` did not get to set
        them: delegating those would look ``_file`` up here again, without end."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._file, name)

    def __enter__(self) -> "AtomicFile":
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()

    def write(self, data: Any) -> int:
        """Write ``data`` to the temporary file (an ``OSError`` such as ENOSPC propagates)."""
        return self._file.write(data)

    def close(self) -> None:
        """Flush, close and rename onto the final path; on any failure remove the temporary file
        and re-raise (the final path keeps what it held before)."""
        if self._done:
            return
        try:
            self._file.close()  # flushes: a full disk shows here at the latest
            os.replace(self.temp, self.path)
        except BaseException:
            self.discard()
            raise
        self._done = True

    def discard(self) -> None:
        """Drop what was written: close and remove the temporary file; the final path is untouched."""
        if self._done:
            return
        self._done = True
        try:
            self._file.close()
        except OSError:
            pass  # the flush of a full disk: the bytes are being dropped anyway
        try:
            os.unlink(self.temp)
        except OSError:
            pass

    def __del__(self) -> None:
        # a file nobody closed never becomes the artifact: only an explicit close renames it
        if not getattr(self, "_done", True):
            self.discard()


def check_target(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be replaced by a file (a folder, a device, a FIFO, a socket), or None
    when it is absent, a regular file or a link (a link is replaced, never followed)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode) or stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder where this command writes a file"
    return "is not a regular file (a device, FIFO or socket); nothing is written there"


#: What to do about a write that failed, by its errno (``write_remedy``).
_REMEDIES = {errno.EROFS: "make the folder writable (its file system is mounted read-only) or choose another one",
             errno.EACCES: "give this user write access to the folder or choose another one",
             errno.EPERM: "give this user write access to the folder or choose another one"}


def write_remedy(exc: BaseException) -> str:
    """What to do, in a few words starting with a verb, about an ``OSError`` that stopped a
    write: ``make room`` for a full disk (no space or no inodes left, a quota, a file size
    limit), the read-only or permission fix for those, else ``fix the cause``."""
    code = getattr(exc, "errno", None)
    if code in _REMEDIES:
        return _REMEDIES[code]
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, None):
        return "make room"
    return "fix the cause"


def encode_text(text: str) -> bytes:
    """``text`` as UTF-8, a lone surrogate (which valid JSON such as ``"\\ud800"`` can put in an
    id or a message, and which UTF-8 cannot hold) written as its escape ``\\ud800``, as the
    console shows it, rather than failing the whole file."""
    return text.encode("utf-8", "backslashreplace")


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, ``encode_text``) to ``path`` whole or not at all; returns the path."""
    with AtomicFile(path, "wb") as f:
        f.write(encode_text(data) if isinstance(data, str) else data)
    return Path(path)


__all__ = ["AtomicFile", "TEMP_PREFIX", "check_target", "encode_text", "temp_name", "write_atomic", "write_remedy"]
