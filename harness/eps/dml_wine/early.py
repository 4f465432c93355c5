"""Starting a DirectML host's processes, with the standard library alone: the set-up home
(``host.json``), an X server (Xvfb), ``wine64 host.exe``, and what it prints on stderr.

``host.DmlWineHost`` talks to a started host (``launch``). Starting one costs a second or more
(Xvfb, Wine, Direct3D 12 on the emulated device, ONNX Runtime's DLLs loading), and a command
that will need one in its own process (``run``, ``fuzz``, ``doctor``, ``model run`` in process,
each with ``--ep dml-wine``: ``wants_host``) can start it before the project's imports
(numpy, onnx, onnxruntime, the catalog): ``harness.launch`` and ``python -m
ep_testbed.harness.cli`` call ``start_early(argv)`` first thing, and the process's first
``DmlWineHost`` with the default settings takes it over (``take_early``) instead of starting
its own. An early host nobody takes ends with the process (``atexit``, and ``PR_SET_PDEATHSIG``
when the process dies without running it); a set-up that is not complete starts nothing early
(the command then names what is missing, as it always did).

``host.json`` is read as the untrusted file it is (a FIFO, a huge or a deeply nested document is
refused at once, never waited on or recursed into), the ``wine64`` it names must be the one the
set-up recorded before anything is executed (``check_wine64``), and the caller's Wine variables
never reach the host (``WINE_ENV_OVERRIDDEN``), early or not. Besides the standard library this
module imports only ``core.terminal`` (which needs nothing else either) to print paths safely.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import json
import os
import select
import shutil
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ...core.terminal import safe

SETUP_COMMAND = "bash tools/dml-wine.sh"
HOME_ENV = "EP_TESTBED_DML_WINE_HOME"
#: DLLs host.exe loads from its folder (Wine looks beside the .exe first).
HOST_DLLS = ("DirectML.dll", "onnxruntime.dll", "onnxruntime_providers_shared.dll",
             "wined3d.dll", "dxgi.dll", "d3d12.dll")
#: The D3D DLLs beside host.exe load as native (vkd3d 1.14, not Wine 8's own 1.6); winedbg off,
#: so a crash ends the process instead of starting a debugger that waits.
DLL_OVERRIDES = "wined3d,dxgi,d3d12=n;winedbg.exe=d"
#: What host.exe writes to stderr just before each response (host.c, END_MARKER).
END_MARKER = b"[ep-testbed-host] end of request"
#: Default WINEDEBUG: Wine's own channels quiet but its errors, and vkd3d's warnings, which say
#: when vkd3d refused one of DirectML's shaders (``EMULATION_SIGNATURES``).
WINE_DEBUG = "-all,err+all,warn+vkd3d"

# ----------------------------------------------------------------------------------------------
# Errors

class HostError(RuntimeError):
    """The DirectML host failed (not a session: those come back in ``HostRun``)."""


class HostSetupError(HostError):
    """The home folder lacks a piece; the message names it and the set-up command."""



# ----------------------------------------------------------------------------------------------
# The home folder

def home_dir() -> Path:
    """``$EP_TESTBED_DML_WINE_HOME``, else ``${XDG_CACHE_HOME:-~/.cache}/ep-testbed/dml-wine``
    (what ``tools/dml-wine.sh`` uses)."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "ep-testbed" / "dml-wine"


def host_source() -> Path:
    """``host.c`` beside this module (what host.exe must have been built from)."""
    return Path(__file__).with_name("host.c")


def _setup_error(piece: str) -> HostSetupError:
    return HostSetupError(f"DirectML under Wine is not set up: {piece}. Run `{SETUP_COMMAND}` "
                          f"(from the repository root; home folder {safe(home_dir())}).")


#: The most of ``host.json`` read (the set-up writes a few KiB): a larger file is refused unread.
HOST_JSON_MAX_BYTES = 1 << 20
#: Keys of ``host.json`` that must be text where present (paths, the loader, the DLL overrides).
HOST_JSON_TEXT_KEYS = ("host_exe", "bin_dir", "prefix", "wine64", "wineserver", "dll_overrides")


def _read_untrusted_json(path: Path) -> Any:
    """The JSON document in ``path``, read as an untrusted file with the standard library alone
    (this module runs before the project's readers are imported): opened without waiting (a FIFO
    or a device is refused, not read), at most ``HOST_JSON_MAX_BYTES``, UTF-8, nesting only as
    deep as the parser's recursion allows. ``HostSetupError`` naming what is wrong otherwise."""
    if not os.path.lexists(path):
        raise _setup_error(f"no {safe(path)}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _setup_error(f"{safe(path)} is unreadable ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _setup_error(f"{safe(path)} is unreadable (not a regular file)")
        data = f.read(HOST_JSON_MAX_BYTES + 1)
    if len(data) > HOST_JSON_MAX_BYTES:
        raise _setup_error(f"{safe(path)} is unreadable (larger than {HOST_JSON_MAX_BYTES} bytes)")
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise _setup_error(f"{safe(path)} is unreadable (nested deeper than a JSON document can be read)") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both
        raise _setup_error(f"{safe(path)} is unreadable ({safe(exc, 200)})") from None


def read_host_json(home: str | os.PathLike | None = None, *, check_source: bool = True) -> dict[str, Any]:
    """``host.json`` of the home folder, after checking that every piece a host needs is there:
    host.exe and its DLLs, the Wine prefix, wine64 (the one the set-up recorded: ``check_wine64``),
    Xvfb, and (``check_source``) that host.exe was built from this checkout's ``host.c``. The
    file itself is read as an untrusted file (``_read_untrusted_json``). Raises
    ``HostSetupError`` naming the first piece missing."""
    folder = Path(home) if home is not None else home_dir()
    path = folder / "host.json"
    info = _read_untrusted_json(path)
    if not isinstance(info, dict) or info.get("schema") != 1:
        raise _setup_error(f"{safe(path)} is not a schema-1 host.json")
    for key in HOST_JSON_TEXT_KEYS:
        if info.get(key) is not None and not isinstance(info[key], str):
            raise _setup_error(f"{safe(path)}: {key} is not text")
    bin_dir = Path(info.get("bin_dir") or folder / "bin")
    for name in ("host.exe",) + HOST_DLLS:
        if not (bin_dir / name).is_file():
            raise _setup_error(f"{safe(bin_dir / name)} is missing")
    if not (Path(info.get("prefix") or folder / "prefix") / "user.reg").is_file():
        raise _setup_error(f"the Wine prefix {safe(info.get('prefix'))} is missing")
    if not os.access(str(info.get("wine64") or ""), os.X_OK):
        raise _setup_error(f"{safe(info.get('wine64') or 'wine64')} is not installed (Debian package wine64)")
    check_wine64(info, path)
    if shutil.which("Xvfb") is None:
        raise _setup_error("Xvfb is not installed (Debian package xvfb)")
    source = host_source()
    if check_source and source.is_file():
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        if digest != info.get("host_source_sha256"):
            raise _setup_error(f"host.exe was built from another {source.name} than {source}")
    return info


#: The Wine loader the set-up installs (Debian's package wine64) and names in host.json.
SETUP_WINE64 = "/usr/lib/wine/wine64"


def check_wine64(info: dict[str, Any], path: Path) -> None:
    """``HostSetupError`` unless host.json's ``wine64`` is the loader the set-up recorded: a
    regular file whose sha256 is the recorded ``wine64_sha256`` (set-ups since it was recorded),
    else (an older set-up, which recorded only the path) the set-up's own ``SETUP_WINE64``. A
    host.json edited to run another program is refused before anything is executed."""
    wine64 = str(info.get("wine64") or "")
    where = f"{safe(path)} names {safe(wine64)} as wine64"
    if not os.path.isabs(wine64) or not os.path.isfile(wine64):
        raise _setup_error(f"{where}, which is not a file")
    recorded = info.get("wine64_sha256")
    if recorded is not None:
        digest = hashlib.sha256()
        with open(wine64, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != recorded:
            raise _setup_error(f"{where}, whose sha256 is not the one the set-up recorded (wine64_sha256): another "
                               "program, or Wine was updated since")
    elif os.path.realpath(wine64) != os.path.realpath(SETUP_WINE64):
        raise _setup_error(f"{where}; the set-up installs and records {SETUP_WINE64}")


#: Variables of the caller's environment that would make Wine run another way than the set-up
#: prepared (``WINEARCH=win32`` makes it refuse the set-up's 64-bit prefix and the host die): the
#: host runs without them, with the set-up's prefix, loader and overrides.
WINE_ENV_OVERRIDDEN = ("WINEARCH", "WINELOADER", "WINESERVER", "WINEDLLPATH", "WINELOADERNOEXEC")



# ----------------------------------------------------------------------------------------------
# The processes

class _StderrTail:
    """The last ``limit`` bytes a process wrote to stderr, read by a daemon thread (a pipe
    nobody drains would block Wine once it fills). The host ends each request's share with
    ``END_MARKER``; the pump numbers the markers as they pass, so request ``k``'s text is what lies
    between marker ``k - 1`` and marker ``k``, however late the pipe delivers it (a request whose
    stderr nobody read, such as a hello, cannot spill into the next one's)."""

    #: Marker positions kept: a request's text is asked for right after its answer, so only the
    #: last few matter.
    KEEP_MARKS = 256

    def __init__(self, stream: Any, limit: int) -> None:
        self.limit, self.size, self.total = limit, 0, 0
        self.chunks: collections.deque[bytes] = collections.deque()
        self.marks: dict[int, int] = {}  # marker number -> absolute offset where its text starts
        self.marks_seen = 0
        self.ended = False  # the pipe reached its end (set under ``changed``, then notified)
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: Any) -> None:
        carry = b""  # the stream's last bytes, where a marker split across two reads starts
        try:
            for chunk in iter(lambda: stream.read1(65536), b""):
                with self.changed:
                    carry = self._note_marks(carry, chunk)
                    self.chunks.append(chunk)
                    self.size += len(chunk)
                    self.total += len(chunk)
                    while self.size - len(self.chunks[0]) >= self.limit:
                        self.size -= len(self.chunks.popleft())
                    self.changed.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()
            stream.close()

    def _note_marks(self, carry: bytes, chunk: bytes) -> bytes:
        """Record the markers that end in ``chunk``; the bytes to carry into the next search."""
        base, window, start = self.total - len(carry), carry + chunk, 0
        while (at := window.find(END_MARKER, start)) >= 0:
            self.marks[self.marks_seen] = base + at
            self.marks.pop(self.marks_seen - self.KEEP_MARKS, None)
            self.marks_seen += 1
            start = at + len(END_MARKER)
        return window[max(start, len(window) - len(END_MARKER) + 1):]

    def _between(self, start: int, end: int | None) -> bytes:
        """Absolute stream offsets ``start:end`` (what is still kept of them)."""
        first = self.total - self.size
        data = b"".join(self.chunks)
        return data[max(0, start - first):None if end is None else max(0, end - first)]

    def request_text(self, number: int, timeout: float = 2.0) -> str:
        """Request ``number``'s share (0 for the host's first request), waiting up to ``timeout``
        for its marker (stderr is a separate pipe from the response, so it may come later)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.marks_seen <= number and not self.ended:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.changed.wait(remaining)
            if number > self.marks_seen:  # the request before never ended: nothing is this one's
                return ""
            if number == 0:
                start = 0
            else:  # past the marker line of the request before (its text, then a newline)
                start = self.marks.get(number - 1, self.total - self.size) + len(END_MARKER) + 1
            data = self._between(start, self.marks.get(number))
        return data.removesuffix(b"\n").decode("utf-8", errors="replace")

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the pipe to close (a killed process's last lines)."""
        self.thread.join(timeout)

    def text(self, max_chars: int | None = None) -> str:
        with self.changed:
            data = b"".join(self.chunks)[-self.limit:]
        text = data.decode("utf-8", errors="replace")
        return text[-max_chars:] if max_chars else text


def _kill(proc: subprocess.Popen | None) -> None:
    """SIGKILL one process we started and reap it; only its own pid (Wine's shared wineserver
    and other hosts' processes are left alone)."""
    if proc is not None and proc.poll() is None:
        try:
            proc.kill()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def stop(started: "Started") -> None:
    """End a host: SIGKILL ``wine64 host.exe`` and release its X server (``XServer.release``),
    which outlives it while the Wine session it may have started still uses the display."""
    _kill(started.proc)
    if started.xvfb is not None:
        started.xvfb.release()


def _close_quietly(stream: Any) -> None:
    """Close a pipe we hold, ignoring one already closed or broken."""
    if stream is not None:
        try:
            stream.close()
        except (OSError, ValueError):
            pass


def _resolve_prctl() -> Any:
    """libc's ``prctl``, looked up once in the parent: nothing may load a library between fork
    and exec (another thread could hold the loader's lock). None off Linux."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _resolve_prctl()


def die_with_parent() -> None:
    """In a child between fork and exec: ask Linux to SIGKILL it when the thread that started it
    dies. Hosts run in their own session (so a Ctrl-C meant for the run does not reach Wine
    first), which also keeps them out of the process group a killed worker takes down; this
    keeps them from outliving it. Where ``prctl`` is missing nothing is asked."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


#: The watcher that keeps an Xvfb while anything uses it (``XServer``); it imports nothing of ours.
XWATCH = Path(__file__).with_name("xwatch.py")


class XServer:
    """An X server (Xvfb) for Wine, kept by a watcher process (``xwatch.py``): it lives while its
    starter holds it and, once released (``release``, or the starter's death), while any process
    of the Wine prefix still has its display in its environment; then the watcher ends it.

    Why not simply kill it with its host: the first Wine process of a prefix's session starts
    Wine's desktop process and services with its own display. A server gone before the desktop
    has loaded its graphics driver (a host killed while starting) leaves the whole session
    without a Vulkan device (DXGI 0x887a0004 for every host that joins it) until all of the
    prefix's processes have ended. ``display`` is ``":N"``, ``pid`` Xvfb's process id."""

    def __init__(self, watcher: subprocess.Popen, display: str, pid: int) -> None:
        self.watcher, self.display, self.pid = watcher, display, pid

    def release(self) -> None:
        """The starter is done with it (idempotent); it ends once the prefix no longer uses it."""
        _close_quietly(self.watcher.stdin)
        if self.watcher.poll() is None:
            threading.Thread(target=self.watcher.wait, name="xwatch reaper", daemon=True).start()

    def end_now(self) -> None:
        """End it at once (the watcher is killed and Xvfb dies with it): only for a display no
        Wine session can have used."""
        _close_quietly(self.watcher.stdin)
        _kill(self.watcher)


def start_xvfb(timeout: float, prefix: str | os.PathLike = "", screen: str = "1024x768x24") -> XServer:
    """An X server (Xvfb) on a display number it picks itself (``-displayfd``: no race with
    other servers), kept by its watcher (``XServer``) for the Wine prefix ``prefix``. One per
    host by default; several hosts can share one (``DmlWineHost(display=...)``), and whoever
    started it releases it. Raises ``HostError`` when no display is reported within ``timeout``."""
    watcher = subprocess.Popen([sys.executable, "-S", str(XWATCH), os.fspath(prefix), screen],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    line = b""
    deadline = time.monotonic() + timeout
    out = watcher.stdout.fileno() if watcher.stdout is not None else -1
    try:
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([out], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(out, 64) if ready else b""
            if not chunk:
                break
            line += chunk
    finally:
        _close_quietly(watcher.stdout)
    words = line.split()
    if len(words) != 2 or not all(w.isdigit() for w in words):
        _close_quietly(watcher.stdin)
        _kill(watcher)
        raise HostError(f"Xvfb did not report a display within {timeout:.0f} s (watcher exit code {watcher.poll()})")
    return XServer(watcher, ":" + words[0].decode(), int(words[1]))


@dataclass
class Started:
    """A host's processes, started (``launch``): ``wine64 host.exe`` (``proc``), its Xvfb
    (``xvfb``, None on a display it was given), the ``display``, the pump of its stderr, the
    settings it was started with, and when (``time.monotonic``)."""

    proc: subprocess.Popen
    xvfb: XServer | None
    display: str
    stderr: _StderrTail
    setup: dict[str, Any]
    home: Path
    wine_debug: str
    dll_overrides: str
    started_at: float


def launch(setup: dict[str, Any], home: Path, *, start_timeout: float = 120.0, wine_debug: str = WINE_DEBUG,
           stderr_limit: int = 64 * 1024, display: str | None = None, dll_overrides: str | None = None) -> Started:
    """Start ``wine64 host.exe`` of the set-up ``setup`` (``read_host_json``) under its own Xvfb
    (or on ``display``), its stderr pumped; nothing is asked of it yet (``host.DmlWineHost``
    says hello). The host dies with the thread that started it (``die_with_parent``); its Xvfb
    is kept by a watcher (``XServer``, released by ``stop`` or when this process ends). Raises
    ``HostError`` when Xvfb gives no display, ``HostSetupError`` when wine64 cannot start."""
    t0 = time.monotonic()
    xvfb = None
    if display is None:
        xvfb = start_xvfb(start_timeout, setup["prefix"])
        display = xvfb.display
    overrides = dll_overrides or setup.get("dll_overrides") or DLL_OVERRIDES
    env = dict(os.environ, WINEPREFIX=setup["prefix"], DISPLAY=display, WINEDLLOVERRIDES=overrides,
               WINEDEBUG=wine_debug)
    env.pop("WAYLAND_DISPLAY", None)
    for key in WINE_ENV_OVERRIDDEN:  # the set-up's Wine, never the caller's variant of it
        env.pop(key, None)
    try:
        proc = subprocess.Popen([setup["wine64"], setup["host_exe"]], cwd=setup["bin_dir"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
                                preexec_fn=die_with_parent)
    except OSError as exc:
        if xvfb is not None:
            xvfb.release()
        raise HostSetupError(f"cannot start {setup['wine64']}: {exc}. Run `{SETUP_COMMAND}`.") from None
    return Started(proc, xvfb, display, _StderrTail(proc.stderr, stderr_limit), setup, home, wine_debug, overrides, t0)


#: ``--ep`` values whose EP is held in a DirectML host.
EP_NAMES = ("dml-wine",)
#: Commands (the words before the options) that build sessions in their own process.
HOST_COMMANDS = (("run",), ("fuzz",), ("doctor",))
#: Options after which no session is built (the command prints and ends).
NO_SESSION = ("-h", "--help", "--list")


def wants_host(argv: Sequence[str]) -> bool:
    """Whether the ``ep-testbed`` command line ``argv`` (without the program) builds a session on
    ``--ep dml-wine`` in this very process: ``run``, ``fuzz``, ``doctor``, and ``model run``
    ``--in-process`` (the child a ``model run`` starts), never with ``--help`` or ``--list``."""
    args = list(argv)
    words = args[:2]
    command: tuple[str, ...] | None = (words[0],) if words and words[0] in {c[0] for c in HOST_COMMANDS} else None
    if command is None and words == ["model", "run"] and "--in-process" in args:
        command = ("model", "run")
    if command is None or any(a in NO_SESSION for a in args):
        return False
    for i, arg in enumerate(args):
        value = arg.partition("=")[2] if arg.startswith("--ep=") else (args[i + 1] if arg == "--ep" and i + 1 < len(args)
                                                                         else None)
        if value is not None and value.strip().lower() in EP_NAMES:
            return True
    return False


class _Early:
    """The host ``start_early`` started, in a thread that stays alive as the host's parent (the
    host dies with the thread that started it): ``ready`` is set once it is started or failed."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.ready = threading.Event()
        self.started: Started | None = None
        self.taken = False
        self.thread = threading.Thread(target=self._start, name="dml-wine early host", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        try:
            self.started = launch(read_host_json(self.home), self.home)
        except Exception:  # a set-up not complete or not as recorded: the command's own start says what is wrong
            self.started = None
        finally:
            self.ready.set()
        threading.Event().wait()  # stay alive: the host dies with this thread


_early: list[_Early] = []


def start_early(argv: Sequence[str]) -> bool:
    """Start a host now, in the background, when ``argv`` will build sessions on ``--ep
    dml-wine`` in this process (``wants_host``); whether one is starting. Only the first call
    of a process counts."""
    if _early or not wants_host(argv):
        return False
    try:
        _early.append(_Early(home_dir()))
    except RuntimeError:  # "can't start new thread" (a limit on threads): the command starts its host itself
        return False
    atexit.register(_end_untaken)
    return True


def take_early(home: Path, wine_debug: str, dll_overrides: str | None, display: str | None,
               timeout: float) -> Started | None:
    """The host ``start_early`` started, once, when it was started with these settings and is
    still running (waiting up to ``timeout`` for it to be started); None otherwise (and for
    every later call)."""
    if not _early or _early[0].taken:
        return None
    early = _early[0]
    if display is not None or Path(home) != early.home or wine_debug != WINE_DEBUG:
        return None
    early.ready.wait(timeout)
    started = early.started
    if started is None or started.proc.poll() is not None or \
            (dll_overrides or started.setup.get("dll_overrides") or DLL_OVERRIDES) != started.dll_overrides:
        return None
    early.taken = True
    return started


def _end_untaken() -> None:
    """At exit: the early host, if nobody took it."""
    if _early and not _early[0].taken and _early[0].started is not None:
        stop(_early[0].started)


__all__ = ["DLL_OVERRIDES", "END_MARKER", "HOME_ENV", "HOST_DLLS", "HOST_JSON_MAX_BYTES", "SETUP_COMMAND",
           "SETUP_WINE64", "WINE_DEBUG", "WINE_ENV_OVERRIDDEN", "HostError", "HostSetupError", "Started", "XServer",
           "check_wine64", "die_with_parent", "home_dir", "host_source", "launch", "read_host_json", "start_early",
           "start_xvfb", "stop", "take_early", "wants_host"]
