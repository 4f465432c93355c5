"""A worker process: runs cases one after another for ``harness.pool``, until its stdin closes.

Started as ``python -m harness.worker RESULT_FD``. It reads length-prefixed pickled frames on
stdin -- first a ``CaseConfig``, then ``(case, ArtifactPolicy)`` per case -- and writes
``("ready", pid)``, then one ``("result", line)`` per case, on the file descriptor ``RESULT_FD``.
Its stdout and stderr go to a log file the parent reads back when the worker dies, so whatever
ONNX Runtime or the EP printed becomes part of the ``crash``/``timeout`` message. Before each
case it prints ``--- case <id>`` to stderr.

Test hook (fault injection), read only here and only from the environment::

    EP_TESTBED_FAULT="abort=<glob>;hang=<glob>;segfault=<glob>;exit=<glob>;raise=<glob>"

makes the worker, right before running a case whose id matches ``<glob>`` (fnmatch), call
``os.abort()`` (SIGABRT), sleep forever, dereference NULL (SIGSEGV), ``os._exit(3)``, or
raise inside ``run_case``'s caller. It exists so the tests can show that a crashing or hanging
EP costs one case and nothing else; nothing sets it unless you do.
"""

from __future__ import annotations

import fnmatch
import os
import pickle
import signal
import struct
import sys
import time
from typing import Any, BinaryIO

FAULT_ENV = "EP_TESTBED_FAULT"
FAULT_ACTIONS = ("abort", "hang", "segfault", "exit", "raise")

_HEADER = struct.Struct(">I")


def write_frame(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: BinaryIO) -> Any:
    """The next object, or None at end of stream (also for a frame cut short by a dying peer)."""
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    data = _read_exact(stream, size)
    return None if data is None else pickle.loads(data)


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def parse_faults(text: str) -> list[tuple[str, str]]:
    """``"abort=a/*;hang=b"`` -> ``[("abort", "a/*"), ("hang", "b")]``; unknown actions refused."""
    faults = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        action, sep, pattern = item.partition("=")
        if not sep or action not in FAULT_ACTIONS:
            raise ValueError(f"{FAULT_ENV}: {item!r} must be ACTION=GLOB with ACTION one of {', '.join(FAULT_ACTIONS)}")
        faults.append((action, pattern))
    return faults


def inject(faults: list[tuple[str, str]], case_id: str) -> None:
    for action, pattern in faults:
        if not fnmatch.fnmatchcase(case_id, pattern):
            continue
        print(f"{FAULT_ENV}: injecting {action} for {case_id}", file=sys.stderr, flush=True)
        if action == "abort":
            os.abort()
        if action == "hang":
            while True:
                time.sleep(3600)
        if action == "segfault":
            import ctypes

            ctypes.string_at(0)
        if action == "exit":
            os._exit(3)
        if action == "raise":
            raise RuntimeError(f"{FAULT_ENV} raise for {case_id}")


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so a hung worker never outlives its run."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    results = os.fdopen(int(argv[0]), "wb", buffering=0)
    requests = sys.stdin.buffer
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle

    from .case_run import load_mapper, run_case

    config = read_frame(requests)
    if config is None:
        return 0
    faults = parse_faults(os.environ.get(FAULT_ENV, ""))
    mapper = load_mapper(config.mapper)
    import onnxruntime  # noqa: F401  (load it before the first case's clock starts)

    write_frame(results, ("ready", os.getpid()))
    while True:
        try:
            request = read_frame(requests)
        except Exception as exc:  # a case object this process cannot unpickle
            write_frame(results, ("broken", f"{type(exc).__name__}: {exc}"))
            continue
        if request is None:
            return 0
        case, policy = request
        print(f"--- case {case.id}", file=sys.stderr, flush=True)
        try:
            inject(faults, case.id)
            line = run_case(case, config, policy, mapper)
        except Exception as exc:
            line = {"outcome": "error", "message": f"worker raised {type(exc).__name__}: {exc}"}
        sys.stdout.flush()
        write_frame(results, ("result", line))


if __name__ == "__main__":
    sys.exit(main())
