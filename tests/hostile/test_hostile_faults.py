"""Faults injected into real runs: the main process killed outright at several points, the disk
filling up at several points, then ``--resume``. Every time the resumed run must equal a clean
run of the same cases: no case lost, none repeated, one header, the same outcomes. (Worker
kills and hangs are in tests/harness/test_harness_faults.py and test_harness_scratch.py,
Ctrl-C and concurrent runs in test_hostile_regressions.py and tests/harness/test_harness_cli.py.)
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import pytest
import run_watch
from sandbox import ROOT

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.run.worker import FAULT_ENV

pytestmark = pytest.mark.slow  # every test here runs ep-testbed commands: -m "not slow" skips them

IDS = [c.id for c in build_catalog(["max_pooling2"]) if "/grid-" in c.id][:6]
VOLATILE = {"duration_s", "timings", "placement_source", "message"}


def _argv(out):
    return [sys.executable, "-m", "ep_testbed.harness.cli", "run", "--ops", "max_pooling2", "-k", ",".join(IDS),
            "--jobs", "1", "--out", str(out), "--no-progress"]


def _env(**extra):
    return {**{k: v for k, v in os.environ.items() if k != FAULT_ENV}, **extra}


def _cases(out):
    """The case lines of a run folder, volatile keys dropped, by id; asserts one header and no
    repeated id."""
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records].count("run") == 1
    cases = [r for r in records if r["type"] == "case"]
    assert len(cases) == len({c["id"] for c in cases}), "an id was written twice"
    return {c["id"]: {k: v for k, v in c.items() if k not in VOLATILE} for c in cases}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The same cases, run without a fault: (case lines by id, size of its results.jsonl)."""
    out = tmp_path_factory.mktemp("clean") / "r"
    done = subprocess.run(_argv(out), env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return _cases(out), (out / "results.jsonl").stat().st_size


@pytest.mark.parametrize("after", [0, 2, 5])
def test_a_run_killed_outright_resumes_to_the_clean_result(tmp_path, clean, after):
    out = tmp_path / "r"
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = subprocess.Popen(_argv(out), env=_env(**{FAULT_ENV: f"hang={IDS[after]}", "TMPDIR": str(temp)}), cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    # killed while case `after` runs (it hangs), its predecessors on disk: the worker gets case
    # `after` before the parent writes the line of the case before it, so that line may follow
    run_watch.wait_until(run_watch.fault_injected(temp, "hang", IDS[after]), f"case {after} hanging", run)
    run_watch.wait_until(run_watch.has_lines(out / "results.jsonl", "case", after), f"the {after} lines before", run)
    assert len(run_watch.lines_of(out / "results.jsonl", "case")) == after
    os.kill(run.pid, signal.SIGKILL)  # no handler runs: no end line, the lock stays
    run.wait()
    resumed = subprocess.run([*_argv(out), "--resume"], env=_env(), cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "removed the stale lock" in resumed.stderr
    assert _cases(out) == clean[0]


def _limited(limit):
    """A ``preexec_fn``: files written by the child may not grow past ``limit`` bytes, and a
    write past it fails (EFBIG) instead of killing the process: a disk that fills up."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("share", [0.1, 0.5, 0.9])
def test_a_disk_that_fills_up_costs_no_case_and_resume_completes(tmp_path, clean, share):
    out = tmp_path / "r"
    expected, size = clean
    room = int(share * size)  # the clean run's results.jsonl would not fit
    full = subprocess.run(_argv(out), env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=300,
                          preexec_fn=_limited(room))
    assert full.returncode == 2, full.stderr
    assert "failed" in full.stderr and "--resume" in full.stderr and "Traceback" not in full.stderr
    assert (out / "results.jsonl").stat().st_size <= room
    resumed = subprocess.run([*_argv(out), "--resume"], env=_env(), cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert _cases(out) == expected


def test_a_disk_that_fills_up_while_the_report_is_written_exits_2_and_leaves_no_torn_file(tmp_path, clean):
    """Every result fits, the report does not: exit 2 (never 0) naming what is kept and the
    command that finishes; no truncated report.html and no temporary file left; that command works."""
    out = tmp_path / "r"
    expected, size = clean
    room = size + 4096  # results.jsonl fits; report.html (hundreds of KiB) does not
    full = subprocess.run([*_argv(out), "--keep-worst", "0"], env=_env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=300, preexec_fn=_limited(room))
    assert full.returncode == 2, full.stdout + full.stderr
    assert "results.jsonl is kept" in full.stderr and f"ep-testbed report {out}" in full.stderr
    assert "Traceback" not in full.stderr
    assert _cases(out) == expected
    assert not (out / "report.html").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temporary file left behind
    finished = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "report", str(out)], env=_env(),
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert (out / "report.html").stat().st_size > room and (out / "summary.json").exists()
