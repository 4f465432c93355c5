"""The DirectML host's start, end to end: started before the project's imports when the command
will hold ``--ep dml-wine`` in its own process (``eps.dml_wine.early``), taken over by the
process's first host, ended at exit when nobody took it; and a run header that reads the device
from the preflight's host instead of starting one of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from dml_wine_kit import display_users, needs_host, running

from ep_testbed.harness.eps.adapters import resolve
from ep_testbed.harness.eps.dml_wine import adapter as adapter_mod
from ep_testbed.harness.eps.dml_wine import early
from ep_testbed.harness.eps.dml_wine.host import WINE_DEBUG, DmlWineHost


@pytest.mark.parametrize("argv, wanted", [
    (["run", "--ep", "dml-wine"], True),
    (["run", "--ep=dml-wine", "--out", "x"], True),
    (["fuzz", "--budget", "5", "--ep", "DML-Wine"], True),
    (["doctor", "--ep", "dml-wine"], True),
    (["model", "run", "m.onnx", "--in-process", "--ep", "dml-wine"], True),
    (["model", "run", "m.onnx", "--ep", "dml-wine"], False),  # the parent: its child holds the EP
    (["run", "--ep", "dml-wine", "--list"], False),
    (["run", "--ep", "dml-wine", "--help"], False),
    (["run", "--ep", "cpu", "--out", "dml-wine"], False),
    (["report", "runs/dml-wine"], False),
    (["run", "--ep"], False),
    ([], False),
])
def test_only_a_command_that_holds_the_ep_in_its_own_process_starts_a_host_early(argv, wanted):
    assert early.wants_host(argv) is wanted


def _host_processes(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux: /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                    text = stat.read()
            except OSError:
                continue
            if int(text[text.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry))
    return found


@pytest.mark.slow
def test_the_first_host_of_the_process_takes_the_early_one_and_an_untaken_one_ends_with_the_process():
    needs_host()
    code = ("import sys, time\n"
            "from ep_testbed.harness.eps.dml_wine import early\n"
            "from ep_testbed.harness.eps.dml_wine.host import DmlWineHost\n"
            "assert early.start_early(['run', '--ep', 'dml-wine'])\n"
            "assert not early.start_early(['run', '--ep', 'dml-wine'])  # once a process\n"
            "first = DmlWineHost()\n"
            "second = DmlWineHost()\n"
            "print(first.early, second.early, first.info['host_protocol'], second.info['host_protocol'], flush=True)\n"
            "first.close(); second.close()\n"
            "early._early.clear()\n"
            "assert early.start_early(['fuzz', '--ep', 'dml-wine'])\n"
            "early._early[0].ready.wait(120)\n"
            "s = early._early[0].started\n"
            "print(s.proc.pid, s.xvfb.pid, s.display, flush=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    taken, left = done.stdout.splitlines()
    assert taken.split() == ["True", "False", "1", "1"]
    # a host nobody took ends with the process that started it; its X server once nothing of the
    # prefix uses the display (``early.XServer``)
    host, xvfb, display = left.split()
    prefix = early.read_host_json()["prefix"]

    def ended() -> bool:
        return not running(int(host)) and (not running(int(xvfb)) or bool(display_users(display, prefix)))

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not ended():
        time.sleep(0.2)
    assert ended()


def test_a_host_with_other_settings_never_takes_the_early_one(monkeypatch, tmp_path):
    monkeypatch.setattr(early, "_early", [])
    assert early.take_early(early.home_dir(), WINE_DEBUG, None, None, 0.1) is None  # none started
    fake = early._Early.__new__(early._Early)
    fake.home, fake.taken, fake.started = early.home_dir(), False, None
    fake.ready = __import__("threading").Event()
    fake.ready.set()
    monkeypatch.setattr(early, "_early", [fake])
    for home, debug, display in ((tmp_path, WINE_DEBUG, None), (early.home_dir(), "-all", None),
                                 (early.home_dir(), WINE_DEBUG, ":7")):
        assert early.take_early(home, debug, None, display, 0.1) is None
    assert not fake.taken


@pytest.mark.slow
def test_the_run_header_reads_the_device_from_the_preflights_host_without_starting_another(monkeypatch):
    needs_host()
    started = []

    class Counted(DmlWineHost):
        def __init__(self, *args, **kwargs):
            started.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(adapter_mod, "DmlWineHost", Counted)
    adapter = adapter_mod.WineDmlAdapter(resolve("dml-wine"))
    first = adapter.identity_record()  # the preflight's: a host starts
    adapter.close()  # the preflight closes it; the workers start their own
    again = adapter.identity_record()  # the run header's
    assert started == [1] and again == first and again["emulated"] is True
    assert again["directml"]["version"] and again["adapter"]["description"]
