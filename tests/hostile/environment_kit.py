"""What the attack suite's environment tests share: the command in a real subprocess, the
contract every hostile call must keep, and the hostile environments themselves (tmpfs folders
full or read-only, cgroups, broken copies of onnxruntime, fake plugin libraries built with gcc).

These tests change what the sandbox cannot: the file system under a command, the process's
memory and pids limits, its streams, the onnxruntime it imports, the native libraries it
loads. So each call is a fresh ``python -m ep_testbed.harness.cli`` process, judged by
``check`` with the sandbox's own rules (``sandbox.one_message``; no traceback, no control
character printed, an exit code among those allowed).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Iterator

import pytest
from sandbox import ROOT, one_message

from ep_testbed.harness.run.worker import FAULT_ENV

#: Seconds one command may take before it counts as a hang (a run of a few cases takes seconds).
LIMIT_S = float(os.environ.get("EP_TESTBED_HOSTILE_LIMIT_S", "120"))
#: The line ``run`` and ``fuzz`` print before any case (what runs where, an emulated device said so in
#: parentheses after the provider), not a message.
ANNOUNCE = re.compile(r"^ep-testbed: .+ on \S+(?: \([^)]*\))? \(\d+ workers.*\) -> ")
CLI = [sys.executable, "-m", "ep_testbed.harness.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without fault injection, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env.update(extra)
    return env


def cli(*argv, env: dict[str, str] | None = None, timeout: float = LIMIT_S, **kwargs) -> subprocess.CompletedProcess:
    """``ep-testbed ARGV`` in a subprocess (text output captured unless ``kwargs`` redirect it);
    a call that outlives ``timeout`` fails the test as a hang."""
    kwargs.setdefault("capture_output", True)
    try:
        return subprocess.run([*CLI, *map(str, argv)], cwd=ROOT, env=env or clean_env(), text=True,
                              timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"hang: {argv!r} ran past {timeout:g} s") from exc


def check(done: subprocess.CompletedProcess, codes=(0, 1, 2)) -> subprocess.CompletedProcess:
    """The hostile contract: an exit code in ``codes``, never a traceback, 70 or a signal; exit 2
    is one message; nothing a terminal would interpret printed."""
    where = f"argv={done.args!r} code={done.returncode}\n--- stdout\n{(done.stdout or '')[-3000:]}\n" \
            f"--- stderr\n{(done.stderr or '')[-3000:]}"
    for text in (done.stdout or "", done.stderr or ""):
        assert "Traceback (most recent call last)" not in text, "traceback: " + where
        assert "RecursionError" not in text, "recursion: " + where
        bad = [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")]
        assert not bad, f"control characters printed {bad[:5]!r}: " + where
    assert done.returncode in codes, "exit code: " + where
    if done.returncode == 2 and done.stderr is not None:
        said = "\n".join(line for line in done.stderr.splitlines() if not ANNOUNCE.match(line))
        assert one_message(said), "not one message: " + where
    return done


# --- file systems ------------------------------------------------------------------------------

@contextlib.contextmanager
def tmpfs(where: Path, *, size: str = "16m", nr_inodes: int | None = None) -> Iterator[Path]:
    """A tmpfs mounted at ``where`` for the block (unmounted after); the test is skipped, with the
    kernel's reason, where mounting is refused (not root, no CAP_SYS_ADMIN)."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (f",nr_inodes={nr_inodes}" if nr_inodes else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def read_only(where: Path) -> None:
    """Remount the tmpfs at ``where`` read-only (root cannot be kept out of a folder otherwise)."""
    done = subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot remount a tmpfs read-only here: {done.stderr.strip()}")


def fill_inodes(where: Path) -> int:
    """Create empty files in ``where`` until the file system has no inode left; how many."""
    n = 0
    while True:
        try:
            (where / f"filler-{n}").touch()
        except OSError:
            return n
        n += 1


def copy_run(run: Path, to: Path) -> Path:
    """A copy of run folder ``run`` at ``to`` (a lock file left out)."""
    shutil.copytree(run, to, ignore=shutil.ignore_patterns("ep-testbed.lock"))
    return to


# --- native libraries and packages -------------------------------------------------------------

#: A plugin EP library in C: ``CreateEpFactories`` with ONNX Runtime's signature (plugin EP ABI,
#: onnxruntime_ep_c_api.h) that, as the macros say, faults when loaded (a constructor) or when
#: ONNX Runtime calls it (1 segfault, 2 abort, 3 hang), prints JSON-like noise on stdout when
#: loaded (and then ends the process with status 0: ``EXIT_AT_LOAD``), or returns one factory
#: whose every function is NULL; with none of them set it offers no factory (a library that loads
#: and lists no device).
FAKE_PLUGIN_C = r"""
#include <stdlib.h>
#include <signal.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>
static void fault(int how) {
  if (how == 1) { volatile int *p = (int *)16; *p = 1; }
  if (how == 2) abort();
  if (how == 3) for (;;) pause();
}
#if FAULT_AT_LOAD
__attribute__((constructor)) static void at_load(void) { fault(FAULT_AT_LOAD); }
#endif
#if EXIT_AT_LOAD || NOISE_AT_LOAD
#include <stdio.h>
__attribute__((constructor)) static void at_load(void) {
  printf("{\"noise\": \"on stdout\"}\n");
  fflush(stdout);
  if (EXIT_AT_LOAD) exit(0);
}
#endif
void *CreateEpFactories(const char *name, const void *api_base, const void *logger, void **factories,
                        size_t max_factories, size_t *num_factories) {
  (void)name; (void)api_base; (void)logger; (void)max_factories;
#if FAULT_IN_CREATE
  fault(FAULT_IN_CREATE);
#endif
#if NULL_FACTORY
  uint32_t *factory = calloc(1, 4096);
  factory[0] = 23;  /* ort_version_supported; every function pointer after it is NULL */
  factories[0] = factory;
  *num_factories = 1;
#else
  *num_factories = 0;
#endif
  return NULL;
}
void *ReleaseEpFactory(void *factory) { (void)factory; return NULL; }
"""
#: Fake plugin libraries by name: the macros each is built with.
FAKE_PLUGINS = {"segfault-at-load": "-DFAULT_AT_LOAD=1", "abort-at-load": "-DFAULT_AT_LOAD=2",
                "hang-at-load": "-DFAULT_AT_LOAD=3", "segfault-in-create": "-DFAULT_IN_CREATE=1",
                "abort-in-create": "-DFAULT_IN_CREATE=2", "hang-in-create": "-DFAULT_IN_CREATE=3",
                "null-factory": "-DNULL_FACTORY=1", "exit-at-load": "-DEXIT_AT_LOAD=1 -DNOISE_AT_LOAD=1",
                "noise-at-load": "-DNOISE_AT_LOAD=1 -DEXIT_AT_LOAD=0", "no-factory": ""}


def fake_plugin(folder: Path, name: str) -> Path:
    """Build the fake plugin library ``name`` (``FAKE_PLUGINS``) in ``folder`` with gcc; the
    test is skipped where no gcc is installed."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (gcc) to build the fake plugin libraries")
    source = folder / "fake_plugin.c"
    source.write_text(FAKE_PLUGIN_C)
    library = folder / f"lib{name}.so"
    done = subprocess.run([compiler, "-shared", "-fPIC", "-O0", *FAKE_PLUGINS[name].split(), "-o", str(library),
                           str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return library


def truncated_copy(library: Path, to: Path, size: int = 64 * 1024) -> Path:
    """The first ``size`` bytes of ``library`` as a new file ``to`` (a download cut short)."""
    with open(library, "rb") as f:
        to.write_bytes(f.read(size))
    to.chmod(0o755)
    return to


def onnxruntime_folder() -> Path:
    """The installed ``onnxruntime`` package's folder (found, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


#: Ways to break a copy of the onnxruntime package (``broken_onnxruntime``).
BROKEN_ORT = ("no-core-library", "no-pybind-state", "truncated-core-library", "truncated-pybind-state", "no-version",
              "escape-in-version", "device-list-raises", "raises-at-import", "pybind-state-exits")


def broken_onnxruntime(root: Path, how: str) -> Path:
    """A copy of the installed onnxruntime package under ``root`` (put ``root`` first on
    PYTHONPATH), broken as ``how`` says (``BROKEN_ORT``). Files are hard links where the file
    system allows (each changed file is a new one, never written through the link)."""
    source, target = onnxruntime_folder(), root / "onnxruntime"

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, ignore=shutil.ignore_patterns("__pycache__"))
    capi, init = target / "capi", target / "__init__.py"

    def rewrite(path: Path, text: str) -> None:
        path.unlink()
        path.write_text(text)

    core, pybind = sorted(capi.glob("libonnxruntime.so*")), sorted(capi.glob("onnxruntime_pybind11_state*"))
    if how == "no-core-library":
        for path in core:
            path.unlink()
    elif how == "no-pybind-state":
        for path in pybind:
            path.unlink()
    elif how in ("truncated-core-library", "truncated-pybind-state"):
        for path in core if how == "truncated-core-library" else pybind:
            data = path.read_bytes()[:64 * 1024]
            path.unlink()
            path.write_bytes(data)
    elif how == "no-version":
        rewrite(init, init.read_text() + "\ndel __version__\n")
    elif how == "escape-in-version":
        rewrite(init, init.read_text() + "\n__version__ = '1.2.3\\x1b[2J\\nverdict: pass'\n")
    elif how == "device-list-raises":
        rewrite(init, init.read_text() + "\ndef get_ep_devices():\n    raise RuntimeError('device list broken')\n")
    elif how == "raises-at-import":
        rewrite(init, "raise RuntimeError('broken at import')\n" + init.read_text())
    elif how == "pybind-state-exits":  # a native module whose loading ends the process quietly
        built = fake_plugin(root, "exit-at-load")
        for path in pybind:
            path.unlink()
            shutil.copy2(built, path)
    else:
        raise ValueError(how)
    return root


# --- cgroups -----------------------------------------------------------------------------------

@contextlib.contextmanager
def memory_cgroup(limit: int) -> Iterator[Path]:
    """A memory cgroup of ``limit`` bytes (swap included where the kernel accounts it), made as a
    child of this process's own (v2 where its memory controller is enabled, else v1's memory
    hierarchy), removed after the block; run a command in it with ``preexec_fn=join(folder)``.
    The test is skipped, saying why, where no cgroup can be made here."""
    made = None
    for root, path, version in _own_cgroups("memory"):
        parent = Path(root) / path.lstrip("/")
        if version == 2 and "memory" not in (parent / "cgroup.controllers").read_text(errors="replace").split():
            continue
        folder = parent / f"ep-testbed-test-{os.getpid()}-{limit}"
        try:
            folder.mkdir()
        except OSError:
            continue
        files = ["memory.max", "memory.swap.max"] if version == 2 else ["memory.limit_in_bytes",
                                                                        "memory.memsw.limit_in_bytes"]
        try:
            (folder / files[0]).write_text(str(limit))
            if (folder / files[1]).exists():
                (folder / files[1]).write_text(str(limit) if version == 1 else "0")
        except OSError:
            folder.rmdir()
            continue
        made = folder
        break
    if made is None:
        pytest.skip("no memory cgroup can be made here (neither v2 with the memory controller nor v1's memory "
                    "hierarchy is writable)")
    try:
        yield made
    finally:
        _remove_cgroup(made)


def join(cgroup: Path):
    """A ``preexec_fn`` moving the child into ``cgroup`` before it runs."""
    def move() -> None:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    return move


@contextlib.contextmanager
def pids_cgroup(limit: int) -> Iterator[Path]:
    """A pids cgroup allowing ``limit`` tasks (processes and threads), a child of this process's
    own (v2 with the pids controller, else v1's pids hierarchy), removed once every process in it
    has ended; skipped, saying why, where none can be made."""
    made = None
    for root, path, version in _own_cgroups("pids"):
        parent = Path(root) / path.lstrip("/")
        if version == 2 and "pids" not in (parent / "cgroup.controllers").read_text(errors="replace").split():
            continue
        folder = parent / f"ep-testbed-test-{os.getpid()}-pids-{limit}"
        try:
            folder.mkdir()
            (folder / "pids.max").write_text(str(limit))
        except OSError:
            if folder.is_dir():
                folder.rmdir()
            continue
        made = folder
        break
    if made is None:
        pytest.skip("no pids cgroup can be made here (neither v2 with the pids controller nor v1's pids hierarchy)")
    try:
        yield made
    finally:
        _remove_cgroup(made)


def _remove_cgroup(folder: Path) -> None:
    """Remove a cgroup this kit made, once every process in it has ended (a run's worker forker
    leaves just after the run); a hang past ``LIMIT_S`` fails the test."""
    deadline = time.monotonic() + LIMIT_S
    while (folder / "cgroup.procs").read_text().strip():
        assert time.monotonic() < deadline, f"processes still in {folder}: {(folder / 'cgroup.procs').read_text()}"
        time.sleep(0.05)
    folder.rmdir()


def _own_cgroups(controller: str) -> list[tuple[str, str, int]]:
    """``(mount point, this process's cgroup under it, version)`` for ``controller``: v2 first."""
    try:
        memberships = [line.rstrip("\n").split(":", 2) for line in open("/proc/self/cgroup", encoding="utf-8")]
        mounts = [line.split() for line in open("/proc/self/mountinfo", encoding="utf-8")]
    except OSError:
        return []
    found = []
    for fields in mounts:
        dash = fields.index("-") if "-" in fields else -1
        if dash < 0:
            continue
        fstype, options, point = fields[dash + 1], fields[-1], fields[4]
        for number, controllers, path in memberships:
            if fstype == "cgroup2" and number == "0":
                found.append((point, path, 2))
            elif fstype == "cgroup" and controller in options.split(",") and controller in controllers.split(","):
                found.append((point, path, 1))
    return sorted(found, key=lambda f: -f[2])
