"""What the DirectML host's tests share: they need `bash tools/dml-wine.sh` (Linux). Without it they
are skipped naming that command, except under CI (``CI`` set, as for the OpenVINO and older-ORT
venvs), where `.ci/run` sets the host up and its absence fails them; EP_TESTBED_NO_DML_WINE=1 says
a machine runs without the DirectML host on purpose (skipped, under CI too)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ep_testbed.harness.eps.dml_wine import host as dml_host
from ep_testbed.harness.eps.dml_wine.host import HostSetupError

OPT_OUT = "EP_TESTBED_NO_DML_WINE"


def needs_host() -> None:
    """Return when the host is set up; else skip naming the set-up command, or fail under CI."""
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: DirectML under Wine not used on this machine")
    try:
        dml_host.read_host_json()
        return
    except HostSetupError as exc:
        problem = str(exc)
    if os.environ.get("CI"):
        pytest.fail(f"{problem}\n(CI sets the host up with `{dml_host.SETUP_COMMAND}` before the tests)", pytrace=False)
    pytest.skip(f"DirectML under Wine is not set up on this machine: {problem}")


def run_windows_program(source: Path, folder: Path, timeout: float = 180.0) -> str:
    """Build ``source`` (C) with the set-up's mingw-w64 into ``folder``, with the set-up's
    DirectML and Direct3D 12 DLLs beside it, run it under the set-up's Wine prefix on a private
    X display and return its stdout. Fails naming the set-up command when a piece is missing."""
    needs_host()
    setup = dml_host.read_host_json()
    compiler = shutil.which("x86_64-w64-mingw32-gcc")
    if compiler is None:
        pytest.fail(f"x86_64-w64-mingw32-gcc is missing: run `{dml_host.SETUP_COMMAND}`", pytrace=False)
    exe = folder / (source.stem + ".exe")
    # the flags the set-up builds host.exe with, so a warning here is as fatal as there
    built = subprocess.run([compiler, "-O1", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(source)],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, f"{compiler} failed on {source}:\n{built.stderr[-2000:]}"
    for name in ("DirectML.dll", "wined3d.dll", "dxgi.dll", "d3d12.dll"):
        (folder / name).symlink_to(Path(setup["bin_dir"]) / name)
    xvfb = dml_host.start_xvfb(60, setup["prefix"])
    try:
        env = dict(os.environ, WINEPREFIX=setup["prefix"], DISPLAY=xvfb.display, WINEDEBUG="-all",
                   WINEDLLOVERRIDES=setup.get("dll_overrides") or dml_host.DLL_OVERRIDES)
        done = subprocess.run([setup["wine64"], str(exe)], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        xvfb.release()
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    return done.stdout


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return text[text.rindex(")") + 2:].split()[0] != "Z"


def display_users(display: str, prefix: str) -> list[int]:
    """The live processes of the Wine prefix ``prefix`` whose environment names ``display``:
    the ones an X server is kept for (``early.XServer``)."""
    want = {f"WINEPREFIX={prefix}".encode(), f"DISPLAY={display}".encode()}
    users = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except (OSError, ValueError):
            continue
        if name.isdigit() and want <= env:
            users.append(int(name))
    return users


def private_home(folder: Path) -> Path:
    """A set-up home in ``folder`` whose Wine prefix is this test's own (its files hard-linked
    to the set-up's, the registry copied, since Wine rewrites it): a Wine session no other test
    shares, so a test may start and end it. End it with ``end_session``."""
    needs_host()
    setup = json.loads((dml_host.home_dir() / "host.json").read_text(encoding="utf-8"))
    prefix = folder / "prefix"
    subprocess.run(["cp", "-al", setup["prefix"], str(prefix)], check=True)
    for registry in prefix.glob("*.reg"):
        data = registry.read_bytes()
        registry.unlink()
        registry.write_bytes(data)
    setup["prefix"] = str(prefix)
    (folder / "host.json").write_text(json.dumps(setup), encoding="utf-8")
    return folder


def end_session(home: Path) -> None:
    """End every Wine process of ``private_home``'s prefix and wait for its wineserver."""
    setup = json.loads((home / "host.json").read_text(encoding="utf-8"))
    env = dict(os.environ, WINEPREFIX=setup["prefix"])
    for flag in ("-k", "-w"):
        subprocess.run([setup["wineserver"], flag], env=env, capture_output=True, timeout=60)
