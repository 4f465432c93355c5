"""A worker process: runs batches of cases one after another for ``harness.run.pool``, until its stdin closes.

Started as ``python -m ep_testbed.harness.run.worker`` with stdin and stdout as pipes and stderr as a log
file. It reads length-prefixed pickled frames on stdin -- first ``("early-start", providers, model
bytes)`` (plain data), then a ``CaseConfig``, then ``("warm-up", model bytes, feeds)``, then one
list of ``(case, ArtifactPolicy)`` pairs per batch -- and writes ``("ready", pid)``, then one
``("result", line)`` per case, as soon as that case is decided (``case_run.run_batch``: the
cases of a batch that can share a session run in one). Before saying ready it starts the EP with
an untimed session of the warm-up model (``case_run.warm_up``), so no case pays for the EP's
start. A built-in GPU EP (``providers`` not None: ``adapters.early_providers``) begins that
start at once, in a thread, while the worker imports the rest (ONNX Runtime releases the GIL
while it builds a session: a CUDA context or a Dawn device comes up beside the imports). The
frames go to a private duplicate of the original stdout;
file descriptor 1 itself is pointed at the log, so nothing ONNX Runtime or an EP prints
(from Python or native code) can corrupt a frame. The parent reads the log back when the
worker dies, so whatever was printed becomes part of the ``crash``/``timeout`` message.
Before each case the worker prints ``--- case <id>`` to stderr, and before each session of
several cases ``--- session of N cases``. (No ``pass_fds`` or process groups are needed, so
this works on Windows too.)

Test hook (fault injection), read only here and only from the environment::

    EP_TESTBED_FAULT="abort=<glob>;hang=<glob>;segfault=<glob>;exit=<glob>;device-lost=<glob>;raise=<glob>;noise=<glob>;perturb[:N]=<glob>"

makes the worker misbehave for a case whose id matches ``<glob>`` (fnmatch): right before the
session that runs it (with whatever cases share that session: a fault planted inside a batch),
call ``os.abort()`` (SIGABRT; on Windows exit status 3), sleep forever, read an address in the
never-mapped first page (SIGSEGV; on Windows STATUS_ACCESS_VIOLATION), ``os._exit(3)``, or raise
what ONNX Runtime's DirectML EP raises once the device is removed (``device-lost``:
``DEVICE_LOST_TEXT``, which the worker then handles as any real device loss: ``serve``); a
case that runs no session (inexpressible, an error before its session) never gets there. Right
before the case itself: raise inside ``run_batch``' caller (the case alone is an ``error``), or
write junk to file descriptors 1 and 2 and go on (``noise``: what a chatty native library does).
``perturb`` runs the case normally but changes element
``N`` (default 0, flat) of the first output the EP hands back, when that output has so many
elements: a wrong answer that only outputs of more than ``N`` elements show, like a kernel bug
past a tiling boundary. It exists so the tests can show that a crashing or hanging EP costs one
case and nothing else, and that fuzzing finds and shrinks a wrong output; nothing sets it
unless you do.

On Windows the worker first turns off the crash dialogs (SetErrorMode, and the C runtime's abort
message and report), so a crashing EP ends the process at once instead of waiting on a dialog
until the case times out.
"""

from __future__ import annotations

import ctypes
import fnmatch
import functools
import os
import pickle
import signal
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

if TYPE_CHECKING:  # the worker imports numpy and the harness only after its EP's early start has begun
    from ..core.results import CaseLine

FAULT_ENV = "EP_TESTBED_FAULT"
FAULT_ACTIONS = ("abort", "hang", "segfault", "exit", "raise", "noise", "perturb", "device-lost")
#: The faults acted out right before the session that runs the case (the others: before the case).
SESSION_FAULTS = ("abort", "hang", "segfault", "exit", "device-lost")
#: What the ``device-lost`` fault raises: ONNX Runtime's DirectML EP's error after a device removal,
#: worded as reported in https://github.com/microsoft/onnxruntime/issues/22700
DEVICE_LOST_TEXT = ("[ONNXRuntimeError] : 1 : FAIL : onnxruntime\\core\\providers\\dml\\DmlExecutionProvider\\src\\"
                    "ExecutionProvider.cpp(962)\\onnxruntime_pybind11_state.pyd!00007FFABA30B0B1: Exception(3) tid(5a68) "
                    "887A0005 The GPU device instance has been suspended. Use GetDeviceRemovedReason to determine the "
                    "appropriate action.")
#: How a worker that lost its device ends (after its ``device-lost`` message): the pool starts a
#: fresh one, with a fresh device.
DEVICE_LOST_EXIT = 0

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
    """``"abort=a/*;hang=b"`` -> ``[("abort", "a/*"), ("hang", "b")]``; unknown actions refused
    (``perturb`` may carry an element number: ``perturb:1000=*``)."""
    faults = []
    for item in filter(None, (part.strip() for part in text.split(";"))):
        action, sep, pattern = item.partition("=")
        name, colon, element = action.partition(":")
        if not sep or name not in FAULT_ACTIONS or (colon and (name != "perturb" or not element.isdigit())):
            raise ValueError(f"{FAULT_ENV}: {item!r} must be ACTION=GLOB with ACTION one of {', '.join(FAULT_ACTIONS)} "
                             "(perturb may name an element: perturb:N=GLOB)")
        faults.append((action, pattern))
    return faults


def inject(faults: list[tuple[str, str]], case_id: str, actions: tuple[str, ...] = FAULT_ACTIONS) -> None:
    """Act out every fault among ``actions`` whose glob matches ``case_id`` (module docstring);
    the crashing ones end the process."""
    for action, pattern in faults:
        if action not in actions or not fnmatch.fnmatchcase(case_id, pattern):
            continue
        print(f"{FAULT_ENV}: injecting {action} for {case_id}", file=sys.stderr, flush=True)
        if action == "abort":
            os.abort()
        if action == "hang":
            while True:
                time.sleep(3600)
        if action == "segfault":
            segfault()
        if action == "exit":
            os._exit(3)
        if action == "raise":
            raise RuntimeError(f"{FAULT_ENV} raise for {case_id}")
        if action == "device-lost":
            raise RuntimeError(DEVICE_LOST_TEXT)
        if action == "noise":
            os.write(1, b"\x00\x00\x00\x05junk on fd 1\n")
            os.write(2, b"junk on fd 2\n")


def segfault() -> None:
    """Crash with an access violation. The read happens in ctypes' own field access, not in a
    foreign call: on Windows ctypes wraps foreign calls in structured exception handling, so
    ``ctypes.string_at(0)`` raises OSError there instead of crashing. Address 16 lies in the first
    page, which no process maps (0 itself would make ctypes allocate a buffer)."""
    ctypes.c_int64.from_address(16).value  # noqa: B018 - the read is the point


#: SetErrorMode flags: no critical-error, general-protection-fault or open-file dialogs.
SEM_FAILCRITICALERRORS, SEM_NOGPFAULTERRORBOX, SEM_NOOPENFILEERRORBOX = 0x0001, 0x0002, 0x8000


def quiet_crash_reports(api: Any = None, crt: Any = None) -> None:
    """Windows: a crash ends the worker at once, with no Windows Error Reporting dialog
    (SetErrorMode) and no abort() message box or report (the C runtime's _set_abort_behavior).
    ``api``/``crt`` replace kernel32 and ucrtbase (tests); elsewhere nothing is done."""
    if api is None and os.name != "nt":
        return
    try:
        api = api or ctypes.WinDLL("kernel32")  # type: ignore[attr-defined]
        api.SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX)
        crt = crt or ctypes.CDLL("ucrtbase")
        crt._set_abort_behavior(0, 0x1 | 0x2)  # clear _WRITE_ABORT_MSG and _CALL_REPORTFAULT
    except (OSError, AttributeError):
        pass


def perturbing(faults: list[tuple[str, str]], case_id: str, mapper: Callable[..., Any]) -> Callable[..., Any]:
    """``mapper`` itself, or, when a ``perturb[:N]`` fault matches ``case_id``, a mapper whose
    mappings read the EP's first output back with element ``N`` changed (``_perturb``)."""
    for action, pattern in faults:
        name, _, element = action.partition(":")
        if name == "perturb" and fnmatch.fnmatchcase(case_id, pattern):
            return functools.partial(_perturbed_mapping, mapper, int(element or 0))
    return mapper


def _perturbed_mapping(mapper: Callable[..., Any], element: int, desc: Any, **kwargs: Any) -> Any:
    """``mapper(desc, **kwargs)`` with its ``outputs`` read-back wrapped to perturb ``element``."""
    mapping = mapper(desc, **kwargs)
    read_back = mapping.outputs

    def outputs(onnx_outputs: Any) -> dict[str, Any]:
        arrays = read_back(onnx_outputs)
        first = next(iter(arrays))
        arrays[first] = _perturb(arrays[first], element)
        return arrays

    mapping.outputs = outputs
    return mapping


def _perturb(array: Any, element: int) -> Any:
    """A copy of ``array`` whose flat element ``element`` is surely different and finite (a NaN
    or an infinity becomes 0, a number ``v`` becomes ``v + 1`` below 1024 in magnitude and
    ``v / 2`` above, where float16 would round ``v + 1`` back to ``v``; an integer ``v + 1``,
    wrapping); ``array`` itself when it has no such element."""
    import numpy as np

    if array.size <= element:
        return array
    changed = np.array(array, copy=True)
    flat = changed.reshape(-1)
    value = flat[element]
    if changed.dtype.kind == "f":
        flat[element] = (value + 1 if abs(value) < 1024 else value / 2) if np.isfinite(value) else 0
    else:
        flat[element] = np.array(int(value) + 1).astype(changed.dtype)
    return changed


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so a hung worker never outlives its run (on Windows
    the parent's Job object does this, harness.run.winjob)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass


#: The early-start session, kept until the warm-up has run (its EP stays up meanwhile).
_EARLY: list[Any] = []


def _early_start(request: Any) -> threading.Thread | None:
    """Start a thread building a session of the pool's ``("early-start", providers, model)``
    request, when it names providers; its failure is the warm-up's to meet and report."""
    if not (isinstance(request, tuple) and len(request) == 3 and request[0] == "early-start" and request[1]):
        return None

    def build() -> None:
        try:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.log_severity_level = 3  # errors only: the warm-up reports what goes wrong
            # enable_fallback=0: an EP that fails to start is not replaced by the CPU EP here either
            _EARLY.append(ort.InferenceSession(request[2], options, providers=request[1], enable_fallback=0))
        except BaseException:
            pass

    thread = threading.Thread(target=build, name="early-start", daemon=True)
    thread.start()
    return thread


def main() -> int:
    """The worker loop (module docstring); 0 when stdin closes."""
    results = os.fdopen(os.dup(1), "wb", buffering=0)  # the protocol channel: the original stdout pipe
    sys.stdout.flush()
    os.dup2(2, 1)  # from now on fd 1 (Python's and native code's stdout) writes to the log
    requests = sys.stdin.buffer
    _die_with_parent()
    quiet_crash_reports()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle

    early = _early_start(read_frame(requests))  # plain data: nothing of the project imported yet

    from .case_run import (  # after the fd juggling: its imports may print
        Memory,
        load_mapper,
        run_batch,
        warm_up,
    )

    config = read_frame(requests)
    if config is None:
        return 0
    faults = parse_faults(os.environ.get(FAULT_ENV, ""))
    mapper = load_mapper(config.mapper)
    warm = read_frame(requests)
    if not (isinstance(warm, tuple) and len(warm) == 3 and warm[0] == "warm-up"):
        return 0  # the pool always sends one; anything else is not a pool to serve
    if early is not None:
        early.join()  # the EP's start ends before the warm-up that proves it
    print(warm_up(config, warm[1], warm[2]), file=sys.stderr, flush=True)  # before "ready": no case's clock yet
    _EARLY.clear()
    memory = Memory()  # what packing learns on this EP, kept from one batch to the next
    write_frame(results, ("ready", os.getpid()))
    while True:
        try:
            request = read_frame(requests)
        except Exception as exc:  # a case object this process cannot unpickle
            write_frame(results, ("broken", f"{type(exc).__name__}: {exc}"))
            continue
        if request is None:
            return 0
        if not serve(request, config, faults, mapper, results, functools.partial(run_batch, memory=memory)):
            return DEVICE_LOST_EXIT  # this process's device is gone: the pool starts a fresh worker


def serve(batch: list[tuple[Any, Any]], config: Any, faults: list[tuple[str, str]], mapper: Callable[..., Any],
          results: BinaryIO, run_batch: Callable[..., Any]) -> bool:
    """Run one batch of ``(case, policy)`` pairs with ``run_batch`` (``case_run.run_batch``) and
    write each case's ``("result", line)`` as it is decided; a case the harness could not finish
    still gets a line (``error``). When the device is lost (``harness.eps.device_loss``), write
    ``("device-lost", {"cases", "means", "source", "detail"})`` naming the session's cases
    instead, answer nothing more and return False: the worker must end."""
    from ..eps import device_loss

    answered: set[str] = set()
    session: list[str] = []  # the cases of the session about to run (a planted loss hits them all)

    def emit(line: CaseLine) -> None:
        """Send one case's line to the pool."""
        sys.stdout.flush()
        answered.add(line["id"])
        write_frame(results, ("result", line))

    def before_session(cases: list[Any]) -> None:
        """Say which cases share the next session, then act out their session faults."""
        session[:] = [case.id for case in cases]
        if len(cases) > 1:
            print(f"--- session of {len(cases)} cases", file=sys.stderr, flush=True)
        for case in cases:
            inject(faults, case.id, SESSION_FAULTS)

    chosen = []
    for case, policy in batch:
        print(f"--- case {case.id}", file=sys.stderr, flush=True)
        try:
            inject(faults, case.id, ("raise", "noise"))
        except Exception as exc:
            emit({"id": case.id, "outcome": "error", "message": f"worker raised {type(exc).__name__}: {exc}"})
            continue
        chosen.append((case, policy, perturbing(faults, case.id, mapper)))
    try:
        run_batch(chosen, config, emit=emit, before_session=before_session)
    except Exception as exc:  # run_batch guards every case; this is a last resort, never a lost case
        lost = device_loss.loss_of(exc, [i for i in session if i not in answered])
        if lost is not None:
            print(f"--- device lost: {lost}", file=sys.stderr, flush=True)
            write_frame(results, ("device-lost", {"cases": lost.case_ids, "means": lost.pattern.means,
                                                  "source": lost.pattern.source, "detail": lost.detail}))
            return False
        for case, _, _ in chosen:
            if case.id not in answered:
                emit({"id": case.id, "outcome": "error", "message": f"worker raised {type(exc).__name__}: {exc}"})
    return True


if __name__ == "__main__":
    sys.exit(main())
