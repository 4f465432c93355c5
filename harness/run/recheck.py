"""A run's failures re-checked on a second EP: is a failure this EP's own, or one it shares?

``run --also-on cpu`` (the default whenever the CPU EP is available and the EP under test is
another; ``--also-on none`` turns it off) runs each case that failed on the EP under test (raw
outcome ``fail``, ``crash`` or ``timeout``) again on the second EP, in a worker of its own (a
crash there costs nothing), and labels it in the case line's ``scope``:

- ``shared with <second EP>``: the second EP fails it the same way: the same failure signature
  (``harness.core.signature``: outcome, kind, failing outputs, value classes of the worst
  element, diverging fields) and, where both runs attributed the failure
  (``harness.run.attribution``), the same cause;
- ``only on <EP under test>``: the second EP passes it, or fails it another way (the line's
  ``also_on`` says how).

``also_on`` records what the second EP did: its provider, raw outcome and message, failure
signature, attributed cause, and the expectation of its own that names the cause (its bundled
file and the shared causes that apply to it). The label never changes an outcome.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from ep_testbed.harness.core.expectations import Expectations
from ep_testbed.harness.core.signature import signature
from ep_testbed.harness.eps.providers import EpSpec

from .case_run import CaseConfig
from .pool import WorkerPool

#: Raw outcomes a run re-checks on the second EP.
RECHECKED = ("fail", "crash", "timeout")
#: Characters of the second EP's message kept in ``also_on``.
MESSAGE_CHARS = 300


def shared_label(provider: str) -> str:
    """``"shared with CPUExecutionProvider"``."""
    return f"shared with {provider}"


def only_label(provider: str) -> str:
    """``"only on CUDAExecutionProvider"``."""
    return f"only on {provider}"


class Recheck:
    """Re-checks failing cases on ``other`` with the run's settings (no case folders, the
    expectations of ``other``); one worker, started at the first failure, kept to the end."""

    def __init__(self, config: CaseConfig, other: EpSpec, timeout: float, expectations: Expectations,
                 env: dict[str, str] | None = None, extra_paths: Iterable[str] = ()):
        """``config``: the run's case settings (its EP is replaced by ``other``); ``timeout``:
        seconds per case; ``expectations``: ``other``'s (they name the cause there)."""
        self.config = replace(config, ep=other, run_dir=None)
        self.timeout, self.expectations = timeout, expectations
        self.env, self.extra_paths = env, tuple(extra_paths)
        self._pool: WorkerPool | None = None

    def label(self, case: Any, line: dict[str, Any]) -> None:
        """Set ``line``'s ``scope`` and ``also_on`` (module docstring) when its raw outcome is
        one re-checked; leave them None otherwise."""
        if line.get("outcome") not in RECHECKED:
            return
        if self._pool is None:
            self._pool = WorkerPool(self.config, 1, self.timeout, env=self.env, extra_paths=self.extra_paths)
        other = self._pool.run_one(case)
        raw = dict(other)
        self.expectations.settle(case, other)
        mine, theirs = signature(line), signature(raw)
        same = mine is not None and theirs is not None and mine == theirs and _same_cause(line, raw)
        line["scope"] = shared_label(self.config.ep.provider) if same else only_label(line.get("ep") or "?")
        line["also_on"] = {
            "ep": self.config.ep.provider, "outcome": raw.get("outcome"), "reported": other.get("outcome"),
            "same_failure": same, "signature": theirs.to_json() if theirs else None,
            "cause": (raw.get("attribution") or {}).get("cause"),
            "expected_outcome": other.get("expected_outcome"),
            "message": str(raw.get("message") or "")[:MESSAGE_CHARS]}

    def close(self) -> None:
        """Stop the worker (idempotent)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _same_cause(mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """The attributed causes agree, or one side has none to compare (a crash, a refusal)."""
    a, b = (mine.get("attribution") or {}).get("cause"), (theirs.get("attribution") or {}).get("cause")
    return a is None or b is None or a == b
