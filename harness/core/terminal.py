"""Text from models and result files, made safe to print on a terminal.

Node names, output names, case ids, messages and header values come from files anyone can
write. Printed raw, an ANSI escape sequence in a node name can clear the screen or recolour a
log, a carriage return can overwrite what a line said, and a newline can forge a whole line of
output (``verdict: pass``). ``safe`` shows every such character as a visible escape instead;
every printer of the command line passes data through it (``safe_message`` for the messages
this tool composes, whose own line breaks are kept).

``guard_streams()`` is the last line of that defence and keeps the exit code's meaning when the
streams themselves fail: a standard stream the caller closed (``>&-``) is reopened on the null
device before anything can open a file in its place; every character a terminal would
interpret that reaches stdout or stderr is shown escaped (whatever printed it; the newline is
kept, and the live progress line writes its own controls through ``write_control``); and a
stream that cannot be written (``/dev/full``, a closed pipe, an I/O error) never turns a
command's result into an exception: the failure is recorded (``GuardedStream.failure``), what is
left to write goes to the null device, and the command ends with the code it would have had.
"""

from __future__ import annotations

import errno
import os
import sys
import unicodedata
from typing import Any, Callable

#: Unicode categories shown escaped: controls (C0, DEL, C1), format characters (bidirectional
#: overrides, zero-width characters), surrogates, private use, unassigned, line/paragraph separators.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def safe(value: Any, limit: int | None = None) -> str:
    """``str(value)`` with every control, format or separator character written as an escape
    (``\\x1b``, ``\\n``, ``\\u202e``), so the printed text is exactly one line of visible
    characters; cut to ``limit`` characters (then ending in ``...``) if given. Backslashes stay
    as they are (Windows paths stay readable)."""
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 3)] + "..."
    if text.isprintable():
        return text
    return "".join(_escape(ch) for ch in text)


def _escape(ch: str) -> str:
    """One character as printed by ``safe``."""
    if ch in _SHORT:
        return _SHORT[ch]
    if unicodedata.category(ch) not in _ESCAPED_CATEGORIES:
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def safe_message(text: object) -> str:
    """A message of several lines made safe line by line: its own line breaks are kept, every
    other control character is escaped as ``safe`` does (for text composed from data whose
    values were not each escaped, e.g. an exception's message)."""
    return "\n".join(safe(line) for line in str(text).split("\n"))


def visible(text: str) -> str:
    """``text`` with every character ``safe`` escapes shown escaped, except the newline: what a
    guarded stream writes."""
    if text.isprintable():
        return text
    return "\n".join(safe(line) for line in text.split("\n"))


class GuardedStream:
    """A text stream that escapes what a terminal would interpret and never raises ``OSError``
    on a write or flush (module docstring); every other attribute is the wrapped stream's."""

    def __init__(self, stream: Any):
        """``stream``: the text stream wrapped (``sys.stdout`` or ``sys.stderr``)."""
        self._stream = stream
        #: The first ``OSError`` a write or flush met, None while none has.
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        """Write ``text`` with controls escaped (``visible``); its length, whatever happened."""
        return self.write_control(visible(text))

    def write_control(self, text: str) -> int:
        """Write ``text`` as it is (the live progress line's carriage return and erase); its length."""
        try:
            self._stream.write(text)
        except OSError as exc:
            self._failed(exc)
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream; a failure is recorded, never raised."""
        try:
            self._stream.flush()
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        """Record ``exc`` and send the rest of the stream to the null device, so that no later
        flush (the interpreter's, at exit) fails on the same bytes again."""
        if self.failure is None:
            self.failure = exc
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):  # a stream without a file (a test's StringIO)
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
        try:
            self._stream.flush()
        except OSError:
            pass

    @property
    def lost(self) -> bool:
        """Whether output was lost for a reason other than its reader leaving (a closed pipe,
        ``| head``, is the reader's choice, as SIGPIPE is for other tools)."""
        return self.failure is not None and self.failure.errno not in (errno.EPIPE, errno.ECONNRESET)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._stream, name)


def reopen_closed_std_fds() -> None:
    """Open the null device on each of fds 0, 1 and 2 that is closed, and give ``sys`` a stream
    for it: a later ``open`` or pipe would otherwise get that number, and whatever writes to
    stdout or stderr (this process, a library, a child) would write into that file."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace",
                                closefd=False))


def guard_streams() -> Callable[[], tuple[OSError | None, OSError | None]]:
    """Reopen closed standard fds, wrap ``sys.stdout`` and ``sys.stderr`` in ``GuardedStream``s
    (module docstring); returns the function that puts the previous streams back and gives the
    output failures ``(stdout's, stderr's)`` (``GuardedStream.lost``: None where none or a closed pipe)."""
    reopen_closed_std_fds()
    previous = sys.stdout, sys.stderr
    guarded = [None if isinstance(s, GuardedStream) or s is None else GuardedStream(s) for s in previous]
    if guarded[0] is not None:
        sys.stdout = guarded[0]
    if guarded[1] is not None:
        sys.stderr = guarded[1]

    def restore() -> tuple[OSError | None, OSError | None]:
        for stream in guarded:
            if stream is not None:
                stream.flush()
        sys.stdout, sys.stderr = previous
        return tuple(g.failure if g is not None and g.lost else None for g in guarded)  # type: ignore[return-value]

    return restore


__all__ = ["GuardedStream", "guard_streams", "reopen_closed_std_fds", "safe", "safe_message", "visible"]
