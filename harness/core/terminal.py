"""Text from models and result files, made safe to print on a terminal.

Node names, output names, case ids, messages and header values come from files anyone can
write. Printed raw, an ANSI escape sequence in a node name can clear the screen or recolour a
log, a carriage return can overwrite what a line said, and a newline can forge a whole line of
output (``verdict: pass``). ``safe`` shows every such character as a visible escape instead;
every printer of the command line passes data through it (``safe_message`` for the messages
this tool composes, whose own line breaks are kept).
"""

from __future__ import annotations

import unicodedata
from typing import Any

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


__all__ = ["safe", "safe_message"]
