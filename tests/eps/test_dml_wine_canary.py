"""The canary that stands between a broken Direct3D 12 emulation and a run full of false DirectML
failures, and the host's life tied to the process that started it."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
from dml_wine_kit import display_users, needs_host, running

from ep_testbed.harness.eps.dml_wine import canary
from ep_testbed.harness.eps.dml_wine.host import SETUP_COMMAND, DmlWineHost, read_host_json

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the DirectML host runs under Wine on Linux")


def test_the_canary_is_exact_on_the_set_up_host(host):
    result = canary.check(host, "1.14")
    assert result.ok, result.message
    assert np.array_equal(result.outputs["Y"], canary.CANARY_OUTPUT)


def test_the_canary_refuses_wine_s_stock_vkd3d_naming_it_and_the_fix():
    """Wine 8's own Direct3D 12 (vkd3d 1.6 inside wined3d.dll): DirectML runs, ONNX Runtime says
    OK, and the outputs are wrong: zeros as a rule, non-zero once in a loaded suite run. The
    canary must call either a broken host, not a DirectML result, and say which it saw."""
    needs_host()
    with DmlWineHost(dll_overrides="winedbg.exe=d") as stock:
        result = canary.check(stock, "1.6 (Wine's built-in)")
    assert not result.ok
    y = result.outputs["Y"]
    assert not np.array_equal(y, canary.CANARY_OUTPUT)
    said = "all zeros" if not np.any(y) else "wrong values"
    assert said in result.message and "vkd3d 1.6" in result.message and SETUP_COMMAND in result.message


def test_the_host_and_its_x_server_die_with_the_process_that_started_them():
    """A worker killed for a hang must not leave Wine and Xvfb behind (they run in their own
    session, out of the worker's process group): the host dies with it, and its X server as soon
    as no process of the prefix uses its display (``early.XServer``; when this host started the
    prefix's Wine session, its desktop keeps the display until the session ends)."""
    needs_host()
    code = ("import time\nfrom ep_testbed.harness.eps.dml_wine.host import DmlWineHost\n"
            "h = DmlWineHost()\nprint(h.pid, h.xvfb_pid, h.display, flush=True)\ntime.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    host, xvfb, display = parent.stdout.readline().split()
    parent.kill()
    parent.wait()
    prefix = read_host_json()["prefix"]
    deadline = time.monotonic() + 10
    while (running(int(host)) or (running(int(xvfb)) and not display_users(display, prefix))) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(int(host))
    assert not running(int(xvfb)) or display_users(display, prefix), "an X server nobody uses outlived its host"
