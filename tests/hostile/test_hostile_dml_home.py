"""The DirectML host's home folder (``EP_TESTBED_DML_WINE_HOME``) and environment as the attack:
a ``host.json`` nested 100000 deep, a FIFO in its place, one naming another program as wine64, a
wine64 that differs from the one the set-up recorded; ``WINEARCH=win32`` in the environment.

Each refused home is exit 2 with one message naming the set-up command, at once (never a
recursion, never a wait on the FIFO, never the other program run); the caller's Wine variables
never reach the host, which runs with the set-up's prefix and loader.
"""

from __future__ import annotations

import json
import os

import pytest
from environment_kit import check, clean_env, cli

from ep_testbed.harness.eps.dml_wine import host as dml_host

pytestmark = pytest.mark.slow  # runs ep-testbed commands

COMMANDS = {"doctor": ["doctor", "--ep", "dml-wine"], "run": ["run", "--ep", "dml-wine", "--tier", "smoke"]}


def _real_setup():
    try:
        return dml_host.read_host_json()
    except dml_host.HostError as exc:
        pytest.skip(f"the DirectML host is not set up here (bash tools/dml-wine.sh): {exc}")


def _home(tmp_path, info=None, raw=None):
    home = tmp_path / "home"
    home.mkdir()
    if raw is not None:
        (home / "host.json").write_bytes(raw)
    elif info is not None:
        (home / "host.json").write_text(json.dumps(info))
    return home


def _refused(tmp_path, home, command, words):
    out = ["--out", tmp_path / "r"] if command == "run" else []
    done = check(cli(*COMMANDS[command], *out, env=clean_env(EP_TESTBED_DML_WINE_HOME=str(home)), timeout=120),
                 (2,))
    assert all(word in done.stderr for word in words), done.stderr
    assert not (tmp_path / "r").exists()
    return done


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_deeply_nested_host_json_is_refused(tmp_path, command):
    home = _home(tmp_path, raw=b"[" * 100000 + b"]" * 100000)
    _refused(tmp_path, home, command, ["host.json is unreadable", "nested", "bash tools/dml-wine.sh"])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_fifo_in_place_of_host_json_is_refused_without_waiting(tmp_path, command):
    home = _home(tmp_path)
    os.mkfifo(home / "host.json")
    _refused(tmp_path, home, command, ["host.json is unreadable", "bash tools/dml-wine.sh"])


def _marker_program(tmp_path):
    """A program that leaves a file behind if it is ever run."""
    marker = tmp_path / "ran"
    program = tmp_path / "not-wine64"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    return program, marker


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_host_json_naming_another_program_as_wine64_never_runs_it(tmp_path, command):
    program, marker = _marker_program(tmp_path)
    info = dict(_real_setup(), wine64=str(program))
    info.pop("wine64_sha256", None)
    _refused(tmp_path, _home(tmp_path, info), command, [str(program), "as wine64", dml_host.SETUP_WINE64])
    assert not marker.exists()


def test_a_wine64_whose_digest_differs_from_the_recorded_one_is_refused(tmp_path):
    program, marker = _marker_program(tmp_path)
    info = dict(_real_setup(), wine64=str(program), wine64_sha256="0" * 64)
    _refused(tmp_path, _home(tmp_path, info), "doctor", ["not the one the set-up recorded"])
    assert not marker.exists()


def test_the_recorded_wine64_is_accepted(tmp_path):
    import hashlib

    info = _real_setup()
    recorded = dict(info, wine64_sha256=hashlib.sha256(open(info["wine64"], "rb").read()).hexdigest())
    home = _home(tmp_path, recorded)
    assert dml_host.read_host_json(home, check_source=False)["wine64"] == info["wine64"]


@pytest.mark.parametrize("variable", ["WINEARCH=win32", "WINELOADER=/bin/false", "WINESERVER=/bin/false"])
def test_the_callers_wine_variables_never_reach_the_host(tmp_path, variable):
    """``WINEARCH=win32`` made the host die (exit 1, unexplained): Wine refused the set-up's
    64-bit prefix. The host runs without the caller's Wine variables."""
    _real_setup()
    key, _, value = variable.partition("=")
    done = check(cli(*COMMANDS["doctor"], env=clean_env(**{key: value}), timeout=300), (0,))
    assert "ready" in done.stdout
