"""What one session on an EP gives back: its outputs and placement (``EpRun``), or why there are none
(``SessionError``), and where a refused model's nodes went (``Diagnosis``). Shared by the session
layer and the EP adapters (an adapter that holds its sessions in another process builds these
itself), so neither imports the other for them.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from . import placement as placement_mod

#: What went wrong, by stage: ONNX Runtime raised while building or running the session, or (for
#: an EP whose sessions live in another process, such as DirectML under Wine) that process died
#: or hung while serving it: the case's ``crash`` and ``timeout``, with the worker unharmed.
STAGES = {"build": "could not build the session", "run": "raised while running",
          "crash": "crashed while serving the session", "timeout": "ran past its time limit"}


class SessionError(RuntimeError):
    """ONNX Runtime raised while building (``stage == "build"``) or running (``"run"``) a session,
    or the process that held it died (``"crash"``) or hung (``"timeout"``).

    ``cause`` is ONNX Runtime's exception; ``str()`` names the provider, the stage and the first
    line of the cause."""

    #: Lines of an emulated device's own log saying that it, not the EP, failed (the DirectML host:
    #: vkd3d refusing one of DirectML's shaders); empty for every other EP.
    emulation: list[str] = []

    def __init__(self, stage: str, provider: str, cause: BaseException):
        """``stage``: one of ``STAGES``; ``provider``: the EP's name; ``cause``: ONNX Runtime's
        exception (or, for ``crash``/``timeout``, what the EP's process left)."""
        self.stage, self.provider, self.cause = stage, provider, cause
        super().__init__(f"{provider} {STAGES[stage]}: {first_line(cause)}")

    @property
    def refused_fallback(self) -> bool:
        """True when ONNX Runtime refused the session because a node would fall back to the CPU EP."""
        return self.stage == "build" and placement_mod.is_fallback_refusal(self.cause)


@dataclass
class EpRun:
    """One session's run: outputs in the session's order, and (when profiled) node -> provider,
    with what proved each node (``evidence``: node -> one of ``placement.EVIDENCE``) and what kept
    a source from being read (``placement_note``, e.g. an unreadable trace); ``placement_source``
    is ``placement.describe_evidence(evidence, placement_note)``. ``build_s`` / ``run_s``: seconds
    spent building the session (for an EP that starts a device per session, that too) and running
    it with its placement read back (``harness.eps.packing`` shares them out between the cases
    of a packed session)."""

    outputs: list[np.ndarray]
    output_names: list[str]
    placement: dict[str, str] = field(default_factory=dict)
    placement_source: str | None = None
    evidence: dict[str, str] = field(default_factory=dict)
    placement_note: str = ""
    build_s: float = 0.0
    run_s: float = 0.0

    def named(self) -> dict[str, np.ndarray]:
        """The outputs keyed by graph output name."""
        return dict(zip(self.output_names, self.outputs))


@dataclass
class Diagnosis:
    """Where the nodes of a refused model run once CPU fallback is allowed; ``error`` (with an
    empty placement) when that session failed too."""

    placement: dict[str, str] = field(default_factory=dict)
    placement_source: str | None = None
    error: str | None = None


#: The ids of the cases whose session this process (or thread) is running (one, or the cases packed
#: into it), set by the case runner around each session; empty outside one (model runs, doctor).
#: Read by per-case test hooks of an adapter that holds its sessions elsewhere (the DirectML
#: host's planted faults).
_CURRENT_CASES: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("ep_testbed_current_cases",
                                                                                  default=())


@contextlib.contextmanager
def case_scope(*case_ids: str) -> Iterator[None]:
    """Within the block, ``current_cases()`` is ``case_ids`` (and ``current_case()`` the first)."""
    token = _CURRENT_CASES.set(tuple(case_ids))
    try:
        yield
    finally:
        _CURRENT_CASES.reset(token)


def current_cases() -> tuple[str, ...]:
    """The ids of the cases whose session is being run here (``case_scope``); empty outside one."""
    return _CURRENT_CASES.get()


def current_case() -> str | None:
    """The id of the (first) case being run here (``case_scope``), or None."""
    cases = _CURRENT_CASES.get()
    return cases[0] if cases else None


def first_line(exc: BaseException) -> str:
    """``"TypeName: first line of the message"``: ONNX Runtime's errors can run to pages."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


__all__ = ["Diagnosis", "EpRun", "STAGES", "SessionError", "case_scope", "current_case", "current_cases", "first_line"]
