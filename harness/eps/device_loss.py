"""Errors that say the GPU device itself was removed or lost: one list, of every EP's record.

After a GPU timeout (TDR), a driver reset or a hot unplug, every later call on the device fails
the same way, so such an error belongs to no case. ``device_lost(text)`` says whether an EP's
error text (ONNX Runtime's exception message, or what the EP's own process left) is one of them;
the run machinery (``harness.run``) then ends that case as ``crash`` with ``reason``
``device-lost``, restarts the worker with a fresh device, and stops the run after a few losses in
a row instead of failing every case that is left.

Each pattern is matched case-insensitively against the whole text; where the EP spells an
HRESULT as bare hex (ONNX Runtime's DirectML EP prints WIL's ``Exception(3) tid(5a68) 887A0005
The GPU device instance has been suspended...``), the hex alone is a pattern.
"""

from __future__ import annotations

import functools
import re

from . import registry
from .registry import LossPattern

#: The ``reason`` a case line carries when the device was lost while it ran.
REASON = "device-lost"
#: Every device-loss string the harness knows, in the order they are tried: the testbed's own EPs'
#: (each EP's record names its own, ``registry.EpRecord.device_loss``; ``device_lost`` also tries
#: those of an EP registered since).
PATTERNS: tuple[LossPattern, ...] = registry.loss_patterns()


def device_lost(text: str) -> LossPattern | None:
    """The first pattern of every EP record's (``PATTERNS``, and an EP's registered since) that
    ``text`` matches, or None when it says nothing of a lost device."""
    for pattern in registry.loss_patterns():
        if _compiled(pattern.regex).search(text):
            return pattern
    return None


@functools.lru_cache(maxsize=None)
def _compiled(regex: str) -> re.Pattern[str]:
    """``regex`` compiled to match in any case (once per pattern)."""
    return re.compile(regex, re.IGNORECASE)


class DeviceLost(Exception):
    """The device was lost while ``case_ids`` (the cases of one session) ran; ``pattern`` says
    how the EP said so and ``detail`` is the EP's own text (its first line, shortened)."""

    def __init__(self, case_ids: list[str], pattern: LossPattern, detail: str):
        """``case_ids``: the session's cases (one, or a pack's); ``pattern``/``detail`` as above."""
        self.case_ids, self.pattern, self.detail = list(case_ids), pattern, detail
        super().__init__(f"{pattern.means}: {detail}")


def loss_of(exc: BaseException, case_ids: list[str]) -> DeviceLost | None:
    """``exc`` as a ``DeviceLost`` of ``case_ids`` when its text (or its cause's) says the device
    is lost; ``exc`` itself when it already is one; None otherwise."""
    if isinstance(exc, DeviceLost):
        return exc
    texts = [str(exc), str(getattr(exc, "cause", "") or "")]
    for text in texts:
        pattern = device_lost(text)
        if pattern is not None:
            return DeviceLost(case_ids, pattern, first_line(text))
    return None


def first_line(text: str, limit: int = 400) -> str:
    """The first non-empty line of ``text``, at most ``limit`` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[:limit] + "..."


__all__ = ["PATTERNS", "REASON", "DeviceLost", "LossPattern", "device_lost", "first_line", "loss_of"]
