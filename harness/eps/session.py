"""One ONNX Runtime session on an execution provider: built with the conformance settings, run
once, and where each node ran read back. Case runs (``harness.run.case_run``) and model runs
(``harness.models.run``) both go through ``run_on_ep``; nothing else in the harness builds a
session to judge outputs.

- ``run_on_ep(model, feeds, ep, settings)`` builds the session with
  ``harness.eps.providers.session_options`` (graph optimizations off unless asked, CPU fallback
  disabled unless ``allow_fallback``, DirectML's settings: graph fusion off), the EP put on it by
  its adapter (``harness.eps.adapters``: by name for a built-in EP, through its ORT device for a
  plugin EP or with ``--ep-device``), with Python's
  whole-session fallback to the CPU EP off (``enable_fallback=0``; a session built without the
  EP under test is a build failure), runs it, and returns an ``EpRun``:
  the outputs, and the node -> provider placement with its source
  (``harness.eps.placement.read_placement``) when profiled. ONNX Runtime's errors come back as one
  ``SessionError`` that says whether building or running failed, and whether the failure is
  ONNX Runtime refusing a CPU fallback (``refused_fallback``).
- ``diagnose_refusal(model, feeds, ep, settings)``: after such a refusal, builds and runs a
  session *with* fallback allowed only to read where every node went (``Diagnosis``); the
  caller decides what the refusal means for its verdict.

Profiling traces go to one scratch folder per process, ``ep-testbed-prof-<pid>`` (made on first
use, removed at exit); each trace is removed as soon as it is read. A worker process makes it
inside its pool's folder (``SCRATCH_ENV``), which the pool removes when the worker dies; a
process killed outright leaves its folder behind, and the next one to make a scratch folder
removes those of processes that are gone (``sweep_stale``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Iterator, Mapping

import numpy as np
import onnx

from ..core.processes import process_alive
from . import placement as placement_mod
from .adapters import adapter_for
from .ep_run import Diagnosis, EpRun, SessionError, first_line
from .providers import EpNotAvailable, EpSpec, SessionSettings, session_options

#: Where a worker makes its scratch folder (set by ``harness.run.pool``); unset: the system temp folder.
SCRATCH_ENV = "EP_TESTBED_SCRATCH"
SCRATCH_PREFIX = "ep-testbed-prof-"

#: ONNX Runtime's quietest log level: failures reach the caller as exceptions, and a session
#: that is refused would otherwise also print profiling noise.
QUIET = 4


def run_on_ep(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec, settings: SessionSettings, *,
              allow_fallback: bool = False, profile: bool = True, quiet: bool = False,
              initializers: Mapping[str, np.ndarray] | None = None) -> EpRun:
    """Build a session for ``model`` on ``ep`` with the conformance settings, run it once on
    ``feeds`` and, when ``profile``, read back where each node ran.

    ``allow_fallback`` lets nodes the EP declines run on the CPU EP (the CPU EP itself never
    has fallback disabled); ``quiet`` turns ONNX Runtime's own logging off; ``initializers``
    are handed to the session apart from the model (``add_external_initializers``: the
    external initializers of a model too large for one protobuf message). Raises
    ``SessionError`` when ONNX Runtime raises while building or running the session."""
    adapter = adapter_for(ep)
    if getattr(adapter, "holds_sessions", False):  # the EP's sessions live in another process
        try:
            adapter.prepare()
        except EpNotAvailable as exc:
            raise SessionError("build", ep.provider, exc) from None
        return adapter.run_session(model, feeds, settings, allow_fallback=allow_fallback, profile=profile,
                                   quiet=quiet, initializers=initializers)
    import onnxruntime as ort  # loaded on first use: the CLI and the reports start without it

    prefix = _profile_prefix() if profile else None
    so = session_options(ep, settings, allow_fallback=allow_fallback, profile_prefix=prefix)
    if quiet:
        so.log_severity_level = QUIET
    # The OrtValues borrow the arrays' memory: they stay referenced until the session is gone.
    injected = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in (initializers or {}).values()]
    if injected:
        so.add_external_initializers(list(initializers or {}), injected)
    try:  # the EP's adapter puts it on the options: by name, or through its device (plugin EPs)
        adapter.prepare()
        providers = adapter.attach(so)
    except EpNotAvailable as exc:
        raise SessionError("build", ep.provider, exc) from None
    started = time.perf_counter()
    try:
        # enable_fallback=0: Python's InferenceSession would otherwise rebuild the session on the
        # CPU EP alone when the EP fails to start (onnxruntime_inference_collection.py)
        session = ort.InferenceSession(model.SerializeToString(), so, providers=providers, enable_fallback=0)
    except Exception as exc:
        raise SessionError("build", ep.provider, exc) from None
    if session.get_providers()[:1] != [ep.provider]:
        raise SessionError("build", ep.provider, RuntimeError(
            f"ONNX Runtime built the session without {ep.provider} (providers: {session.get_providers()})"))
    built = time.perf_counter()
    try:
        values = session.run(None, dict(feeds))
    except Exception as exc:
        raise SessionError("run", ep.provider, exc) from None
    run = EpRun([np.asarray(v) for v in values], [o.name for o in session.get_outputs()])
    if profile:
        node_names = [n.name for n in model.graph.node]
        run.placement, run.evidence, run.placement_note = placement_mod.read_evidence(
            session, node_names, session.end_profiling())
        run.placement_source = placement_mod.describe_evidence(run.evidence, run.placement_note)
    run.build_s, run.run_s = built - started, time.perf_counter() - built
    return run


#: One line of ONNX Runtime's default logger, as it prints it to a terminal: a colour escape,
#: ``2026-11-25 18:54:20.489586190 [W:onnxruntime:Default, file.cc:247 Function] message``, a reset.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ORT_LOG = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \[([VIWEF]):onnxruntime:[^,\]]*, ([^\] ]+)[^\]]*\] ?(.*)$")
_THROWN = re.compile(r"^(?:\S*/)?([\w.]+\.(?:cc|cpp|h):\d+) [^\[]*(\[.*)$")
_LEVELS = {"V": "verbose", "I": "info", "W": "warning", "E": "error", "F": "fatal"}


def native_log_lines(text: str) -> list[str]:
    """What ONNX Runtime printed, one clean line per log record: colour escapes dropped, the
    timestamp and logger id folded into ``warning (file.cc:247): message``; other lines as they
    are, with no control character left (``terminal.safe_message``'s rule)."""
    lines = []
    for raw in _ANSI.sub("", text).splitlines():
        raw = "".join(ch if ch.isprintable() else " " for ch in raw).strip()
        if not raw:
            continue
        match = _ORT_LOG.match(raw)
        if not match:
            lines.append(raw)
            continue
        where, message = match.group(2), match.group(3).strip()
        thrown = _THROWN.match(message)  # an exception's own "path/file.cc:252 signature [ERROR] text"
        if thrown:
            where, message = thrown.group(1), thrown.group(2)
        lines.append(f"{_LEVELS[match.group(1)]} ({where}): {message}")
    return lines


@contextlib.contextmanager
def native_stderr() -> Iterator[list[str]]:
    """Catch what native code (ONNX Runtime's default logger, an EP's factory) writes to file
    descriptor 2 inside the block, where Python's ``sys.stderr`` never sees it, and yield a list
    that holds it afterwards as ``native_log_lines``: the caller prints it as one clean line each
    instead of raw, coloured log records."""
    said: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield said
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            said += native_log_lines(sink.read(1 << 20).decode("utf-8", "replace"))


def diagnose_refusal(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], ep: EpSpec,
                     settings: SessionSettings, *, quiet: bool = False,
                     initializers: Mapping[str, np.ndarray] | None = None) -> Diagnosis:
    """After ``run_on_ep`` was refused a CPU fallback: run ``model`` with fallback allowed, only to
    read where each node went. Never raises for what ONNX Runtime does: a failing diagnostic
    session is a ``Diagnosis`` with ``error`` set."""
    try:
        run = run_on_ep(model, feeds, ep, settings, allow_fallback=True, profile=True, quiet=quiet,
                        initializers=initializers)
    except SessionError as exc:
        return Diagnosis(error=first_line(exc.cause))
    return Diagnosis(run.placement, run.placement_source)


_PROFILE_NUMBERS = itertools.count()


def _profile_prefix() -> str:
    """A fresh profiling file prefix in this process's scratch folder."""
    return os.path.join(_scratch_dir(), f"session{next(_PROFILE_NUMBERS)}")


@functools.lru_cache(maxsize=1)
def _scratch_dir() -> str:
    """This process's folder for profiling traces (a TemporaryDirectory per case cost ~1 ms):
    ``ep-testbed-prof-<pid>`` in ``SCRATCH_ENV``'s folder or the temp folder. Traces are
    removed as they are read; what a failing session leaves goes at process exit."""
    parent = os.environ.get(SCRATCH_ENV) or tempfile.gettempdir()
    sweep_stale(parent)
    path = os.path.join(parent, f"{SCRATCH_PREFIX}{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def sweep_stale(parent: str, prefix: str = SCRATCH_PREFIX) -> None:
    """Remove ``<prefix><pid>`` folders in ``parent`` whose process is gone (killed before its
    exit handler ran); folders of live processes, and anything else, are left alone."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name[len(prefix):].split("-", 1)[0]
        if (entry.name.startswith(prefix) and pid_text.isdigit() and entry.is_dir(follow_symlinks=False)
                and int(pid_text) != os.getpid() and not process_alive(int(pid_text))):
            shutil.rmtree(entry.path, ignore_errors=True)


__all__ = ["Diagnosis", "EpRun", "SCRATCH_ENV", "SessionError", "diagnose_refusal", "first_line", "native_log_lines", "native_stderr", "run_on_ep",
           "sweep_stale"]
