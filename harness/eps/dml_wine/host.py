"""Client of the DirectML host: real DirectML sessions from Linux, through Wine.

``bash tools/dml-wine.sh`` sets up a home folder (``home_dir()``) with Microsoft's DirectML.dll,
the Windows onnxruntime.dll, vkd3d's Direct3D 12 DLLs, a Wine prefix and ``host.exe`` (built from
``host.c`` beside this file, which documents the wire protocol). ``DmlWineHost`` starts one
private X server (Xvfb: Wine's Vulkan driver needs a display) and one ``wine64 host.exe``, and
sends it one request per session::

    with DmlWineHost() as host:
        print(host.hello()["directml_dll"]["file_version"])
        run = host.run(model.SerializeToString(), {"X": x})   # DML, conformance settings
        run.raise_for_error()
        y = run.named()["Y"]; placement = run.placement(["node0"])

``run`` builds a session on ``provider`` ("DML" or "CPU": ORT's CPU EP under Wine, the second
route that separates DirectML facts from emulation artefacts), runs it once and returns a
``HostRun``: the outputs bit for bit, the profiling trace's events, the graph assignment info,
or the stage that failed with ONNX Runtime's message verbatim. Failures of the host itself are
exceptions: ``HostCrashed`` (the process died mid-request; the stderr tail is in the message),
``HostTimeout`` (a request ran past its limit; the process is killed), ``HostSetupError`` (the
home folder lacks a piece; the message names it and the set-up command), ``HostNoDevice`` (the
host started, but its DXGI lists no adapter; the message says why when Wine said so). After either of the
first two the host is closed; start a new ``DmlWineHost``.

Needs only numpy and the standard library (Linux: ``select`` on pipes), so it also runs as a
script: ``python harness/eps/dml_wine/host.py --hello``.
"""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ...core.terminal import safe

# What starts a host's processes needs the standard library alone (the launcher starts one before
# the project's imports): it lives in ``early``, and its names stay importable from here.
from .early import (  # noqa: F401  (re-exported)
    DLL_OVERRIDES,
    END_MARKER,
    HOME_ENV,
    HOST_DLLS,
    SETUP_COMMAND,
    SETUP_WINE64,
    WINE_DEBUG,
    WINE_ENV_OVERRIDDEN,
    HostError,
    HostSetupError,
    Started,
    _kill,
    _setup_error,
    _StderrTail,
    check_wine64,
    die_with_parent,
    home_dir,
    host_source,
    launch,
    read_host_json,
    start_xvfb,
    stop,
    take_early,
)

HOST_PROTOCOL = 1
#: stderr lines that mark a failure of the emulation (vkd3d on lavapipe), not of DirectML: seen
#: when DirectML's vectorised element-wise kernels (e.g. Add or Mul of a multiple of 4 float32
#: elements, Cast uint32 -> int64) fail to compile with 0x80004005 at session creation, and when
#: a buffer of 4 GiB or more is asked for (lavapipe's maxBufferSize is 2**32 - 1; the DirectML EP
#: rounds its allocations up to a power of two, so a tensor just over 2 GiB asks for 4 GiB) and
#: the run fails with 8007000E.
EMULATION_SIGNATURES = ("Failed to scan shader bytecode", "Invalid shader", "Invalid heap for base descriptor",
                        "Failed to create Vulkan buffer")

#: Session config entries of a conformance session (``harness/providers.py`` sets the same
#: ones in-process): no silent CPU fallback, DirectML graph fusion off (each node its own
#: kernel and its own profiling event), the node -> EP assignment recorded.
CONFORMANCE_CONFIG = {
    "DML": {"session.disable_cpu_ep_fallback": "1", "ep.dml.disable_graph_fusion": "1",
            "session.record_ep_graph_assignment_info": "1"},
    "CPU": {"session.record_ep_graph_assignment_info": "1"},
}
PROVIDER_NAMES = {"DML": "DmlExecutionProvider", "CPU": "CPUExecutionProvider"}

_REQ_HELLO, _REQ_RUN, _REQ_QUIT, _REQ_TEST_ABORT, _REQ_TEST_STALL = 1, 2, 3, 0xF0, 0xF1
_STATUS = {0: None, 1: "build", 2: "run", 3: "request"}

#: ONNX TensorProto element type <-> numpy dtype (the types the protocol carries).
ONNX_TYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"), 2: np.dtype("u1"), 3: np.dtype("i1"), 4: np.dtype("<u2"), 5: np.dtype("<i2"),
    6: np.dtype("<i4"), 7: np.dtype("<i8"), 9: np.dtype("bool"), 10: np.dtype("<f2"), 11: np.dtype("<f8"),
    12: np.dtype("<u4"), 13: np.dtype("<u8"),
}
_CODE_OF = {(dt.kind, dt.itemsize): code for code, dt in ONNX_TYPES.items()}


def onnx_type_of(dtype: Any) -> int:
    """The ONNX element type code of a numpy dtype (``np.float32`` -> 1); ValueError if the
    protocol does not carry it."""
    dt = np.dtype(dtype)
    code = _CODE_OF.get((dt.kind, dt.itemsize))
    if code is None:
        raise ValueError(f"dtype {dt} has no ONNX element type the DirectML host carries "
                         f"(carried: {', '.join(str(d) for d in ONNX_TYPES.values())})")
    return code


def dtype_of(code: int) -> np.dtype:
    """The numpy dtype of an ONNX element type code (1 -> float32); ValueError if unknown."""
    try:
        return ONNX_TYPES[code]
    except KeyError:
        raise ValueError(f"ONNX element type {code} is not carried by the DirectML host") from None


# ----------------------------------------------------------------------------------------------
# Errors

class HostCrashed(HostError):
    """The host process died mid-request. ``returncode`` and ``stderr_tail`` say how."""

    def __init__(self, message: str, returncode: int | None = None, stderr_tail: str = ""):
        super().__init__(message)
        self.returncode, self.stderr_tail = returncode, stderr_tail


class HostNoDevice(HostError):
    """The host started, but its DXGI lists no adapter: no DirectML session can be built on it.
    The message says why when Wine said so (``no_device_message``)."""


#: What Wine writes when a process of a session whose desktop has no graphics driver asks for Vulkan.
NO_DRIVER_MARK = "Failed to load Wine graphics driver supporting Vulkan"


def no_device_message(prefix: str, wineserver: str, stderr_tail: str) -> str:
    """Why a host's DXGI lists no adapter, and what to do, from what Wine wrote."""
    if NO_DRIVER_MARK in stderr_tail:
        return ("the DirectML host's DXGI lists no adapter: Wine's graphics driver is not loaded in the Wine "
                f"session of the prefix {safe(prefix)} (Wine said \"{NO_DRIVER_MARK}\"). That session's desktop "
                "was started without a working X display, and every process that joins it inherits that until all "
                "of them have ended. Note: wait for other commands using the prefix to end, or end its processes "
                f"now with `WINEPREFIX={safe(prefix)} {safe(wineserver)} -k` (that stops those commands' hosts too), "
                "then run again.")
    return ("the DirectML host's DXGI lists no adapter, so no DirectML session can be built. Note: "
            "`vulkaninfo --summary` should list Mesa's llvmpipe; `bash tools/dml-wine.sh` repairs the set-up; "
            f"Wine's last words:\n{stderr_tail[-1500:]}")


class HostTimeout(HostError):
    """A request ran past its time limit; the host process was killed."""

    def __init__(self, message: str, stderr_tail: str = ""):
        super().__init__(message)
        self.stderr_tail = stderr_tail


# ----------------------------------------------------------------------------------------------
# One session's result

@dataclass
class HostRun:
    """One session on the host: outputs in the session's order, or the stage that failed.

    ``error_stage``: None (ran), "build" (ONNX Runtime refused or failed to build the session),
    "run" (it raised while running), "request" (the host could not read the request);
    ``error_message`` is ONNX Runtime's text verbatim. ``profile_events``: the profiling
    trace's events (empty when profiling was off; ``profile_note`` says when the trace was
    unreadable). ``assignment``: node -> EP from the graph assignment info, or None when the
    host's ONNX Runtime has none or it was not recorded (``subgraphs`` keeps each subgraph's
    EP and (node, op type) pairs). ``*_seconds``: as timed in the host: session options (for DML
    this creates the EP's Direct3D 12 and DirectML devices), session build, the run, and
    read-back (assignment, profiling trace) with the session's release. ``stderr``: what Wine,
    vkd3d, DirectML and ONNX Runtime wrote while serving this request (bounded; needs the
    host's stderr channels on, see ``WINE_DEBUG``)."""

    outputs: list[np.ndarray]
    output_names: list[str]
    profile_events: list[dict[str, Any]]
    assignment: dict[str, str] | None
    error_stage: str | None
    error_message: str | None
    options_seconds: float = 0.0
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    finish_seconds: float = 0.0
    subgraphs: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    profile_note: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.error_stage is None

    def named(self) -> dict[str, np.ndarray]:
        """The outputs keyed by graph output name."""
        return dict(zip(self.output_names, self.outputs))

    @property
    def emulation_notes(self) -> list[str]:
        """This request's stderr lines that mark an emulation failure (``EMULATION_SIGNATURES``):
        non-empty means the failure says nothing about DirectML itself."""
        return [line.strip() for line in self.stderr.splitlines()
                if any(sig in line for sig in EMULATION_SIGNATURES)]

    def raise_for_error(self) -> "HostRun":
        """``self`` if the session ran; else RuntimeError with the stage and ONNX Runtime's text."""
        if self.error_stage is not None:
            raise RuntimeError(f"DirectML host: {self.error_stage} failed: {self.error_message}")
        return self

    def placement(self, node_names: Iterable[str]) -> dict[str, str]:
        """node -> provider for ``node_names``: each node's own profiling event
        (``<node>_kernel_time``, ``args.provider``) first, else the assignment info; a node
        neither names is absent (never counts as placed)."""
        names = set(node_names)
        found: dict[str, str] = {}
        for event in self.profile_events:
            if not isinstance(event, dict) or event.get("cat") != "Node":
                continue
            name = str(event.get("name", ""))
            given = event.get("args")
            args: dict[str, Any] = given if isinstance(given, dict) else {}
            node = name[: -len("_kernel_time")] if name.endswith("_kernel_time") else None
            if node in names and args.get("provider"):
                found[node] = str(args["provider"])
        for node in names - found.keys():
            if self.assignment and node in self.assignment:
                found[node] = self.assignment[node]
        return found


# ----------------------------------------------------------------------------------------------
# Wire format (host.c's header documents it)

class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> None: self.parts.append(struct.pack("<B", v))
    def u32(self, v: int) -> None: self.parts.append(struct.pack("<I", v))
    def i32(self, v: int) -> None: self.parts.append(struct.pack("<i", v))

    def text(self, s: str) -> None:
        data = s.encode("utf-8")
        self.u32(len(data))
        self.parts.append(data)

    def blob(self, data: bytes | memoryview) -> None:
        self.parts.append(struct.pack("<Q", len(data)))
        self.parts.append(bytes(data) if isinstance(data, memoryview) else data)

    def tensor(self, name: str, array: np.ndarray) -> None:
        code = onnx_type_of(array.dtype)
        array = np.ascontiguousarray(array, dtype=ONNX_TYPES[code])  # little-endian, row-major
        self.text(name)
        self.i32(code)
        self.u32(array.ndim)
        self.parts.append(struct.pack(f"<{array.ndim}q", *array.shape))
        self.blob(array.tobytes())

    def frame(self) -> bytes:
        body = b"".join(self.parts)
        return struct.pack("<Q", len(body)) + body


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.view, self.pos = memoryview(data), 0

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.view):
            raise HostError("the host's response is shorter than its fields (protocol mismatch: "
                            f"rebuild host.exe with `{SETUP_COMMAND}`)")
        out = self.view[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def text(self) -> str:
        return bytes(self.take(self.unpack("<I"))).decode("utf-8", errors="replace")

    def tensor(self) -> tuple[str, np.ndarray]:
        name, code, rank = self.text(), self.unpack("<i"), self.unpack("<I")
        shape = struct.unpack(f"<{rank}q", self.take(8 * rank))
        data = self.take(self.unpack("<Q"))
        return name, np.frombuffer(data, dtype=dtype_of(code)).reshape(shape).copy()


# ----------------------------------------------------------------------------------------------
# The host process

class DmlWineHost:
    """One ``wine64 host.exe`` under its own Xvfb, serving sessions until ``close()``.

    ``home``: the set-up home folder (default ``home_dir()``); ``request_timeout``: seconds a
    request may take (``run(..., timeout=)`` overrides it per request); ``start_timeout``: for
    Xvfb, Wine and the host's first answer; ``wine_debug``: WINEDEBUG (default ``WINE_DEBUG``:
    Wine's errors and vkd3d's warnings, captured, never printed; ``"-all"``: nothing);
    ``stderr_limit``: bytes of stderr kept; ``display``: an X display to use (e.g. ``":5"``, one
    Xvfb shared by several hosts) instead of starting a private Xvfb; ``dll_overrides``:
    WINEDLLOVERRIDES instead of the set-up's (e.g. ``"winedbg.exe=d"`` alone runs Wine's own
    stock Direct3D 12, which the canary must refuse); ``launched``: processes ``early.launch``
    already started, to talk to (the other settings of the start are then theirs). Starting is about 1-2 s
    (``start_seconds``, from the processes' start); with the default settings the process's
    first host is the one ``early.start_early`` started before the imports, when there is one
    (``early`` True); ``info`` is the host's hello. The host dies with the thread that
    started it (``PR_SET_PDEATHSIG`` on Linux), so a worker killed for a hang leaves no Windows
    process behind; its Xvfb ends once nothing of the prefix uses its display (``early.XServer``)."""

    def __init__(self, home: str | os.PathLike | None = None, *, request_timeout: float = 300.0,
                 start_timeout: float = 120.0, wine_debug: str = WINE_DEBUG, stderr_limit: int = 64 * 1024,
                 check_source: bool = True, display: str | None = None, dll_overrides: str | None = None,
                 launched: Started | None = None) -> None:
        self.setup = read_host_json(home, check_source=check_source)
        self.request_timeout = request_timeout
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        # Requests sent so far, and (per thread) the number of the calling thread's last one,
        # which names its share of stderr.
        self._sent, self._numbers = 0, threading.local()
        folder = Path(home) if home is not None else home_dir()
        # the host ``early.start_early`` started before the imports, when it fits these settings
        started = launched or take_early(folder, wine_debug, dll_overrides, display, start_timeout)
        self.early = started is not None and launched is None
        if started is None:
            started = launch(self.setup, folder, start_timeout=start_timeout, wine_debug=wine_debug,
                             stderr_limit=stderr_limit, display=display, dll_overrides=dll_overrides)
        t0, self.display = started.started_at, started.display
        proc: subprocess.Popen = started.proc
        self._started, self._proc, self._stderr = started, proc, started.stderr
        self._finalizer = weakref.finalize(self, stop, started)
        self._in_fd, self._out_fd = _fd(proc.stdin), _fd(proc.stdout)
        os.set_blocking(self._in_fd, False)  # writes wait in select, under the request's deadline
        self.info = self.hello(timeout=start_timeout)
        if self.info.get("host_protocol") != HOST_PROTOCOL:
            self.close()
            raise _setup_error(f"host.exe speaks protocol {self.info.get('host_protocol')}, this client {HOST_PROTOCOL}")
        if not self.info.get("adapters"):
            self._stderr.settle(timeout=0.3)
            tail = self._stderr.text(8000)
            self.close()
            raise HostNoDevice(no_device_message(self.setup["prefix"], self.setup.get("wineserver") or "wineserver", tail))
        self.start_seconds = time.monotonic() - t0

    # -- life cycle ----------------------------------------------------------------------------
    def __enter__(self) -> "DmlWineHost":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def xvfb_pid(self) -> int | None:
        """The process id of the host's own Xvfb (None on a display it was given)."""
        return self._started.xvfb.pid if self._started.xvfb is not None else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def close(self, timeout: float = 10.0) -> None:
        """Ask the host to quit, make sure it is gone, and release its Xvfb (``early.stop``)."""
        if self.alive:
            try:
                self._request(_frame(_REQ_QUIT), timeout)
            except HostError:
                pass
        proc, self._proc = self._proc, None
        if proc is not None:
            _close(proc.stdin)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
            # stderr stays with its pump thread, which closes it at EOF (when Wine's service
            # processes, which inherit it, end): closing it here would wait for the pump's read.
            try:
                _close(proc.stdout)
            except OSError:
                pass
        stop(self._started)
        self._finalizer.detach()

    def stderr_tail(self, max_chars: int = 4000) -> str:
        """The end of what Wine, vkd3d, DirectML and ONNX Runtime wrote to stderr."""
        return self._stderr.text(max_chars)

    # -- requests ------------------------------------------------------------------------------
    def hello(self, timeout: float | None = None) -> dict[str, Any]:
        """The host's versions and device: ONNX Runtime's version string, DirectML.dll's file
        version, the DXGI adapters, the D3D12 feature level and shader model, the vkd3d
        workaround's state."""
        reader, _, _ = self._call(_frame(_REQ_HELLO), timeout)
        return json.loads(reader.text())

    def run(self, model_bytes: bytes, feeds: Mapping[str, np.ndarray], *, provider: str = "DML",
            device_id: int = 0, shared_device: bool = False, graph_opt: bool | int = False, config_entries: Mapping[str, str] | None = None,
            profile: bool = True, log_severity: int = 3, timeout: float | None = None) -> HostRun:
        """Build a session of ``model_bytes`` on ``provider`` ("DML" or "CPU"), run it once on
        ``feeds`` and read it back (``HostRun``).

        ``shared_device``: hand the session the host's DirectML device for ``device_id``
        (made once; saves the 0.1-0.25 s ORT spends making one per session) instead of
        letting the EP make its own (ORT's ``device_id`` path, the default).
        ``graph_opt``: False (ORT_DISABLE_ALL), True (ORT_ENABLE_ALL) or a level (0, 1, 2, 99);
        ``config_entries``: session config entries sent as given; None sends
        ``CONFORMANCE_CONFIG[provider]``. DML sessions also get memory pattern off and
        sequential execution (host.c). ``log_severity`` 0 prints ORT's verbose log to the
        stderr tail."""
        key = _provider_key(provider)
        level = {False: 0, True: 99}.get(graph_opt, graph_opt) if isinstance(graph_opt, bool) else int(graph_opt)
        entries = CONFORMANCE_CONFIG[key] if config_entries is None else dict(config_entries)
        w = _Writer()
        w.u8(_REQ_RUN)
        w.u8(1 if key == "DML" else 0)
        w.i32(device_id)
        w.u8(1 if shared_device else 0)
        w.i32(level)
        w.i32(log_severity)
        w.u8(1 if profile else 0)
        w.u32(len(entries))
        for k, v in entries.items():
            w.text(str(k))
            w.text(str(v))
        w.blob(model_bytes)
        w.u32(len(feeds))
        for name, array in feeds.items():
            w.tensor(name, np.asarray(array))
        reader, stage, message = self._call(w.frame(), timeout)
        run = _read_run(reader, stage, message)
        run.stderr = self._stderr.request_text(self._numbers.last)
        return run

    def _test_abort(self, timeout: float | None = None) -> None:
        """Test only: the host calls abort() (its crash handling is exercised with this)."""
        self._call(_frame(_REQ_TEST_ABORT), timeout)

    def _test_stall(self, milliseconds: int, timeout: float | None = None) -> None:
        """Test only: the host sleeps, then answers (its timeouts are exercised with this)."""
        self._call(_frame(_REQ_TEST_STALL, struct.pack("<I", milliseconds)), timeout)

    def _call(self, frame: bytes, timeout: float | None) -> tuple[_Reader, str | None, str]:
        reader = _Reader(self._request(frame, self.request_timeout if timeout is None else timeout))
        stage = _STATUS.get(reader.unpack("<B"), "request")
        return reader, stage, reader.text()

    def _request(self, frame: bytes, timeout: float) -> bytes:
        with self._lock:  # one request at a time: frames of two threads must not interleave
            self._numbers.last, self._sent = self._sent, self._sent + 1
            return self._request_locked(frame, timeout)

    def _request_locked(self, frame: bytes, timeout: float) -> bytes:
        if not self.alive:
            raise HostCrashed("the DirectML host is not running (closed, crashed or timed out before): "
                              "start a new DmlWineHost", self._proc.poll() if self._proc else None,
                              self._stderr.text(4000))
        deadline = time.monotonic() + timeout
        try:
            self._write(frame, deadline)
            size = struct.unpack("<Q", self._read(8, deadline))[0]
            return self._read(size, deadline)
        except _Deadline:
            tail = self._die()
            raise HostTimeout(f"the DirectML host took more than {timeout:g} s; it was killed. "
                              f"stderr tail:\n{tail}", tail) from None
        except (_Gone, BrokenPipeError):
            try:
                code = self._proc.wait(timeout=5) if self._proc is not None else None
            except subprocess.TimeoutExpired:  # stdout closed, process still there: kill it
                code = None
            tail = self._die()
            raise HostCrashed(f"the DirectML host died mid-request (exit code {code}{_exit_meaning(code)}). "
                              f"stderr tail:\n{tail}", code, tail) from None

    def _die(self) -> str:
        """Kill the host (and release its Xvfb) after a timeout or crash; the stderr tail. The dead
        process stays in ``_proc``: ``alive`` is False and later requests say so."""
        stop(self._started)
        self._stderr.settle(timeout=0.3)  # let the last lines arrive
        self._finalizer.detach()
        return self._stderr.text(4000)

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline()
            _, ready, _ = select.select([], [self._in_fd], [], remaining)
            if ready:
                try:
                    view = view[os.write(self._in_fd, view[:1 << 20]):]
                except BlockingIOError:
                    continue
                except OSError as exc:  # EPIPE: the host is gone
                    raise _Gone() from exc

    def _read(self, n: int, deadline: float) -> bytes:
        # EOF alone does not tell a crash in time: Wine's service processes (services.exe,
        # explorer.exe, ...), started by the first process of a prefix, inherit its pipes and
        # hold them open until the wineserver ends (seconds later, or never while another host
        # uses the prefix). So the process itself is polled too.
        parts, got = [], 0
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline()
            ready, _, _ = select.select([self._out_fd], [], [], min(remaining, 0.1))
            if not ready:
                if (self._proc is None or self._proc.poll() is not None) \
                        and not select.select([self._out_fd], [], [], 0)[0]:
                    raise _Gone()
                continue
            chunk = os.read(self._out_fd, min(n - got, 1 << 22))
            if not chunk:
                raise _Gone()
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)


class _Deadline(Exception):
    pass


class _Gone(Exception):
    pass


def _frame(request_type: int, body: bytes = b"") -> bytes:
    return struct.pack("<QB", 1 + len(body), request_type) + body


def _provider_key(provider: str) -> str:
    for key, name in PROVIDER_NAMES.items():
        if provider.strip().lower() in (key.lower(), name.lower()):
            return key
    raise ValueError(f"provider {provider!r}: the DirectML host runs 'DML' or 'CPU'")


def _exit_meaning(code: int | None) -> str:
    """A hint for a Windows exit status seen through Wine (abort() exits 3, faults 0xC...)."""
    if code is None:
        return ""
    if code == 3:
        return ": abort()"
    if code < 0:
        return f": killed by signal {-code}"
    if code >= 0xC0000000:
        return f": Windows exception 0x{code:08x}"
    return ""


def _read_run(reader: _Reader, stage: str | None, message: str) -> HostRun:
    options_s, build_s, run_s, finish_s = (reader.unpack("<d") for _ in range(4))
    outputs = [reader.tensor() for _ in range(reader.unpack("<I"))]
    trace = reader.text()
    has_assignment = reader.unpack("<B")
    subgraphs = []
    for _ in range(reader.unpack("<I")):
        ep = reader.text()
        subgraphs.append((ep, [(reader.text(), reader.text()) for _ in range(reader.unpack("<I"))]))
    events, note = [], ""
    if trace:
        try:
            parsed = json.loads(trace)
            events = parsed if isinstance(parsed, list) else []
        except ValueError:
            note = "profiling trace unreadable"
    assignment = {node: ep for ep, nodes in subgraphs for node, _ in nodes} if has_assignment else None
    return HostRun(outputs=[a for _, a in outputs], output_names=[n for n, _ in outputs], profile_events=events,
                   assignment=assignment, error_stage=stage, error_message=message if stage else None,
                   options_seconds=options_s, build_seconds=build_s, run_seconds=run_s,
                   finish_seconds=finish_s, subgraphs=subgraphs, profile_note=note)


def _main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="The DirectML host under Wine: print its hello.")
    parser.add_argument("--hello", action="store_true", help="start a host and print its versions as JSON")
    args = parser.parse_args(argv)
    if not args.hello:
        parser.print_help()
        return 2
    try:
        with DmlWineHost() as host:
            print(json.dumps(dict(host.info, start_seconds=round(host.start_seconds, 3)), indent=2))
    except HostError as exc:
        print(f"error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())


def _fd(stream: Any) -> int:
    """The file descriptor of a pipe the host was started with (``subprocess.PIPE``: never None)."""
    if stream is None:
        raise HostError("the DirectML host was started without its pipes")
    return stream.fileno()


def _close(stream: Any) -> None:
    """Close a pipe of the host, if it has one; OSError as ``close`` raises it."""
    if stream is not None:
        stream.close()
