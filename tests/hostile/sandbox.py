"""The attack suite's client side: run an ``ep-testbed`` command fenced in (``sandbox_server``)
and judge what it did.

``Sandbox.call(argv, reads=..., writes=...)`` runs one command in a forked child with a time
limit and an address-space limit, and returns an ``Outcome``: exit code, stdout, stderr, the
traceback if one escaped, whether it hung or ran out of memory, and every file it read or
changed. ``Outcome.check(...)`` asserts what every hostile input must get:

- an exit code among those allowed (0/1 with a correct result, or 2 with one message);
- never a traceback, a hang, a ``MemoryError`` or a death by signal;
- nothing printed that a terminal would interpret: no control character but the newline;
- no file written outside ``writes`` (and the sandbox's own temp folder), no file read
  outside ``reads`` (plus the Python installation, the repository, /proc, /sys and the like),
  and none of ``secrets`` opened at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
#: Seconds of CPU one hostile call may use before it counts as a hang (or ten times that on the
#: clock, when it uses none: ``sandbox_server.serve_one``).
LIMIT_S = float(os.environ.get("EP_TESTBED_HOSTILE_LIMIT_S", "60"))
#: Address space one call may add to the server's (every cap the suite sets is far below it).
MEMORY = 1536 * 2**20
#: Folders every command may read: the interpreter, its packages, this repository, the OS.
SYSTEM_READS = sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["purelib"],
                       sysconfig.get_paths()["stdlib"], str(ROOT), "/proc", "/sys", "/dev/null", "/dev/urandom",
                       "/etc", "/usr/share", "/usr/lib", "/lib"})


@dataclass
class Outcome:
    """What one command did (see the module docstring)."""

    argv: list[str]
    code: int | None
    stdout: str
    stderr: str
    traceback: str | None = None
    hang: bool = False
    died: bool = False
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cwd_roots: list[str] = field(default_factory=list)  # the call's (empty) working folder

    @property
    def memory_blowup(self) -> bool:
        """An allocation the limits did not stop (``MemoryError``, or ONNX Runtime's bad_alloc)."""
        text = (self.traceback or "") + self.stderr
        return "MemoryError" in text or "bad_alloc" in text or "Failed to allocate memory" in text

    def describe(self) -> str:
        """Everything about the call, for an assertion message."""
        return (f"argv={self.argv!r} code={self.code} hang={self.hang} died={self.died} s={self.seconds:.2f}\n"
                f"--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}\n--- traceback\n{self.traceback}")

    def check(self, codes=(0, 1, 2), *, reads=(), writes=(), secrets=(), temp: str | None = None) -> "Outcome":
        """Assert the contract of the module docstring; returns self for chaining."""
        where = self.describe()
        assert not self.hang, "hang: " + where
        assert not self.died, "died: " + where
        assert self.traceback is None, "traceback: " + where
        assert "Traceback (most recent call last)" not in self.stderr, "traceback printed: " + where
        assert not self.memory_blowup, "memory: " + where
        assert self.code in codes, "exit code: " + where
        if self.code == 2:
            assert one_message(self.stderr), "not one message: " + where
        for text in (self.stdout, self.stderr):
            bad = [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")]
            assert not bad, f"control characters printed {bad[:5]!r}: " + where
        self.check_files(reads=reads, writes=writes, secrets=secrets, temp=temp)
        return self

    def check_files(self, *, reads=(), writes=(), secrets=(), temp: str | None = None) -> None:
        """Writes inside ``writes`` (or ``temp``), reads inside ``reads``/``writes``/the system
        folders, ``secrets`` never opened."""
        secret = {os.path.realpath(s) for s in secrets}
        touched = {os.path.realpath(p) for p in self.reads + self.writes}
        assert not secret & touched, f"secret opened {sorted(secret & touched)}: " + self.describe()
        write_roots = [*writes, *([temp] if temp else []), "/dev/null"]  # a sink some libraries open
        for path in self.writes:
            assert under(path, write_roots), f"wrote outside --out: {path}: " + self.describe()
        for path in self.reads:
            assert under(path, [*reads, *write_roots, *SYSTEM_READS, *self.cwd_roots]), \
                f"read outside inputs: {path}: " + self.describe()


def under(path: str, roots) -> bool:
    """Whether ``path`` (links resolved) is one of ``roots`` or inside one."""
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def one_message(stderr: str) -> bool:
    """Exit 2's contract: one message (``ep-testbed...: text``, optionally followed by ``Note:``
    lines), or argparse's usage block with one ``error:`` line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return False
    if any(line.startswith("usage:") for line in lines):
        return sum(": error: " in line for line in lines) == 1
    messages = [line for line in lines if line.startswith("ep-testbed") and ": note:" not in line]
    return len(messages) == 1


class Sandbox:
    """One ``sandbox_server`` process (per test process), and a counter of the calls made."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.temp = scratch / "tmp"
        self.temp.mkdir(exist_ok=True)
        #: The working folder of every call: empty (the import system probes it, as '' is on sys.path).
        self.cwd = scratch / "cwd"
        self.cwd.mkdir(exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "harness"), env.get("PYTHONPATH", "")])
        env.pop("EP_TESTBED_FAULT", None)
        # One malloc arena: glibc's malloc with several arenas (threads made them: OpenBLAS's,
        # ONNX Runtime's) can spin at 100% CPU, deaf to SIGTERM, retrying arena after arena once
        # RLIMIT_AS refuses memory, where with one arena it fails and Python raises MemoryError.
        # The children fork from this server and inherit its arenas.
        env["MALLOC_ARENA_MAX"] = "1"
        self.proc = subprocess.Popen([sys.executable, str(HERE / "sandbox_server.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
        ready = json.loads(self.proc.stdout.readline())
        assert "ready" in ready
        self.calls: dict[str, int] = {}
        self._n = 0

    def call(self, argv: list[str], *, kind: str, api: str = "main", cwd: Path | None = None,
             limit_s: float = LIMIT_S, mem: int = MEMORY, env: dict[str, str] | None = None,
             mapper: str | None = None) -> Outcome:
        """Run ``ep-testbed <argv>`` (``api="run-local"``: ``run <argv>`` on the test catalog,
        through ``mapper`` if given) and count it under ``kind`` (the figure the suite reports)."""
        self._n += 1
        base = self.scratch / f"call{self._n}"
        request = {"argv": [str(a) for a in argv], "api": api, "cwd": str(cwd or self.cwd), "limit_s": limit_s,
                   "mem": mem, "stdout": f"{base}.out", "stderr": f"{base}.err",
                   "env": {"TMPDIR": str(self.temp), **(env or {})},
                   "worker_paths": [str(ROOT / "tests" / "harness")],
                   "seams": {"mapper": mapper} if mapper else {}}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        if os.environ.get("EP_TESTBED_HOSTILE_TIMES"):
            with open(os.environ["EP_TESTBED_HOSTILE_TIMES"], "a") as f:
                f.write(f"{kind} {answer.get('seconds', 0):.3f}\n")
        self.calls[kind] = self.calls.get(kind, 0) + 1
        text = {}
        for stream in ("stdout", "stderr"):
            path = Path(request[stream])
            text[stream] = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
            path.unlink(missing_ok=True)
        Path(f"{base}.out.result.json").unlink(missing_ok=True)
        events = answer.get("events", [])
        return Outcome(argv=request["argv"], code=answer.get("code"), stdout=text["stdout"], stderr=text["stderr"],
                       traceback=answer.get("traceback"), hang=answer.get("hang", False),
                       died=answer.get("died", False), seconds=answer.get("seconds", 0.0),
                       cwd_roots=[request["cwd"]], reads=[p for kind_, p in events if kind_ == "read"],
                       writes=[p for kind_, p in events if kind_ == "write"])

    def close(self) -> None:
        """Stop the server."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
