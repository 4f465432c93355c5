"""The machine's limits as the attack: a memory cgroup far below the machine's memory (a container's
limit), a pids limit, warnings made errors.

Every case states its memory need; a run checks it against what the cgroup leaves, never the
machine's RAM alone, so the kernel's OOM killer never ends the run (or a worker, which would read
as the EP's crash). The cgroup tests make a real cgroup, a child of this process's own: v2 where
its memory controller is enabled, else v1's memory hierarchy (these machines have v1). The v2
layout is also read from planted files (``test_a_v2_limit_is_read_from_its_files``), since these
machines cannot make a v2 memory cgroup.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from environment_kit import CLI, check, clean_env, join, memory_cgroup, pids_cgroup
from sandbox import ROOT

from ep_testbed.harness.core import memory

pytestmark = pytest.mark.slow  # runs ep-testbed commands

MiB = 2**20
FITS = "max_pooling2/stress-classifier-1x64x112x112-3x3-s2-p1-fp32"  # states about 175 MiB
TOO_BIG = ["max_pooling2/stress-out-64x65534-groups-of-64", "max_pooling2/stress-out-4096x4095-around-2^24-idxuint32"]


def _run_in(cgroup, out, ids, jobs=1):
    done = subprocess.run([*CLI, "run", "--ep", "cpu", "--tier", "stress", "-k", ",".join(ids), "--jobs", str(jobs),
                           "--out", str(out), "--no-progress"], cwd=ROOT, env=clean_env(), capture_output=True,
                          text=True, timeout=600, preexec_fn=join(cgroup))
    return done


def test_cases_that_outgrow_the_cgroup_are_skipped_with_the_reason_and_the_rest_run(tmp_path):
    """Under 600 MiB the 598 MiB and 1814 MiB cases cannot fit beside the run's own processes: the
    old check (the machine's MemAvailable, tens of GiB) let them run, and the OOM killer ended the
    run with no case written."""
    with memory_cgroup(600 * MiB) as cgroup:
        done = check(_run_in(cgroup, tmp_path / "r", [FITS, *TOO_BIG]), (0,))
    lines = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines if line["type"] == "case"] == [FITS]
    skipped = lines[0]["skipped"]
    assert sorted(s["id"] for s in skipped) == sorted(TOO_BIG)
    assert all("memory cgroup's limit of 600 MiB" in s["reason"] for s in skipped), skipped
    assert all(f"skipped {case}" in done.stderr for case in TOO_BIG)


def test_a_cgroup_too_small_for_any_selected_case_is_said_before_anything_runs(tmp_path):
    with memory_cgroup(300 * MiB) as cgroup:
        done = check(_run_in(cgroup, tmp_path / "r", [FITS, *TOO_BIG], jobs=2), (4,))
    assert "no selected case fits this machine's memory" in done.stderr
    assert "memory cgroup's limit of 300 MiB" in done.stderr


def test_headroom_and_available_memory_stay_within_the_cgroup(tmp_path):
    """In a child process inside a 500 MiB cgroup both ceilings are below 500 MiB: no more than
    the cgroup left at the least-used of two readings taken around them (the process's own use
    moves between the readings, so neither alone bounds the figures read in between)."""
    script = ("from ep_testbed.harness.core import memory as m; import json; "
              "print(json.dumps([m.cgroup_memory(), m.available_memory(), m.headroom(), m.cgroup_memory()]))")
    with memory_cgroup(500 * MiB) as cgroup:
        done = subprocess.run([CLI[0], "-c", script], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                              timeout=120, preexec_fn=join(cgroup))
    (limit, used_before), available, headroom, (limit_after, used_after) = json.loads(done.stdout)
    assert limit == limit_after == 500 * MiB and 0 < min(used_before, used_after) < limit
    left = limit - min(used_before, used_after)
    assert available <= left and headroom <= left


def _plant_v2(tmp_path, limit="524288000", current="104857600", stat="inactive_file 52428800\n", parent="max"):
    """A v2 hierarchy in files: this process in /app/job, the job's limit ``limit``, its parent's ``parent``."""
    root = tmp_path / "cgroup"
    (root / "app" / "job").mkdir(parents=True)
    (root / "app" / "job" / "memory.max").write_text(limit + "\n")
    (root / "app" / "job" / "memory.current").write_text(current + "\n")
    (root / "app" / "job" / "memory.stat").write_text("anon 1\n" + stat)
    (root / "app" / "memory.max").write_text(parent + "\n")
    (root / "app" / "memory.current").write_text(current + "\n")
    proc = tmp_path / "cgroup.txt"
    proc.write_text("0::/app/job\n")
    mountinfo = tmp_path / "mountinfo.txt"
    mountinfo.write_text(f"30 24 0:26 / {root} rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n")
    return str(proc), str(mountinfo)


def test_a_v2_limit_is_read_from_its_files(tmp_path):
    """Planted files: this machine's kernel offers no v2 memory controller to make a cgroup with."""
    proc, mountinfo = _plant_v2(tmp_path)
    assert memory.cgroup_memory(proc, mountinfo) == (500 * MiB, 50 * MiB)  # reclaimable cache not counted


def test_the_tightest_level_of_the_hierarchy_wins(tmp_path):
    proc, mountinfo = _plant_v2(tmp_path, limit="max", parent=str(300 * MiB))
    assert memory.cgroup_memory(proc, mountinfo) == (300 * MiB, 100 * MiB)


def test_no_limit_anywhere_is_no_cgroup_ceiling(tmp_path):
    proc, mountinfo = _plant_v2(tmp_path, limit="max")
    assert memory.cgroup_memory(proc, mountinfo) is None
    assert memory.cgroup_memory(str(tmp_path / "absent"), mountinfo) is None


# --- processes and threads ---------------------------------------------------------------------

SMOKE = ["run", "--ep", "cpu", "--tier", "smoke", "--no-progress"]


def _ids(out):
    path = out / "results.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    ids = [line["id"] for line in lines if line["type"] == "case"]
    assert len(ids) == len(set(ids)), "a case written twice"
    return ids


def _outcomes(out):
    path = out / "results.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return {line["id"]: line["outcome"] for line in lines if line["type"] == "case"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke tier's outcomes by id, from a run under no limit."""
    out = tmp_path_factory.mktemp("smoke") / "r"
    assert subprocess.run([*CLI, *SMOKE, "--out", str(out)], cwd=ROOT, env=clean_env(), capture_output=True,
                          timeout=600).returncode in (0, 1)
    return _outcomes(out)


@pytest.fixture(scope="module")
def smoke_ids(smoke):
    return sorted(smoke)


@pytest.mark.parametrize("limit", [4, 6, 8, 12])
def test_a_run_under_a_pids_limit_ends_with_2_or_finishes_and_resume_completes_it(tmp_path, smoke, smoke_ids, limit):
    """Under a pids limit (the old run: exit 70 "can't start new thread", 26 ids never written)
    a run either finishes (0) or stops with one message naming the limit (2); no case is written
    twice or judged wrong for want of a thread, and ``--resume`` without the limit completes it."""
    out = tmp_path / "r"
    with pids_cgroup(limit) as cgroup:
        done = subprocess.run([*CLI, *SMOKE, "--out", str(out)], cwd=ROOT, env=clean_env(), capture_output=True,
                              text=True, timeout=600, preexec_fn=join(cgroup))
    check(done, (0, 1, 2))
    if done.returncode == 2:
        assert "limit on processes or threads" in done.stderr and "--resume" in done.stderr
    written = _outcomes(out)
    assert written == {case: smoke[case] for case in written}, done.stderr  # what ran, judged as without a limit
    resumed = check(subprocess.run([*CLI, *SMOKE, "--out", str(out), "--resume"], cwd=ROOT, env=clean_env(),
                                   capture_output=True, text=True, timeout=600), (0, 1))
    assert sorted(_ids(out)) == smoke_ids, resumed.stderr


def test_warnings_made_errors_do_not_turn_the_clean_up_into_a_traceback(tmp_path):
    """``PYTHONWARNINGS=error``: the pool's temp folder, left to the exit, warned (ResourceWarning)
    and the warning became a traceback."""
    done = check(subprocess.run([*CLI, *SMOKE, "--out", str(tmp_path / "r")], cwd=ROOT,
                                env=clean_env(PYTHONWARNINGS="error"), capture_output=True, text=True, timeout=600),
                 (0,))
    assert "Warning" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize("limit", [10, 16])
def test_a_run_under_a_limit_on_open_files_ends_with_2_naming_it_or_finishes(tmp_path, smoke, smoke_ids, limit):
    """``ulimit -n``: a worker that cannot get its pipes is the limit named (not processes),
    and the run resumes to the whole set of ids without it."""
    import resource

    out = tmp_path / "r"
    done = check(subprocess.run([*CLI, *SMOKE, "--out", str(out)], cwd=ROOT, env=clean_env(), capture_output=True,
                                text=True, timeout=600,
                                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))),
                 (0, 1, 2))
    if done.returncode == 2:
        assert "open files" in done.stderr and "ulimit -n" in done.stderr, done.stderr
    check(subprocess.run([*CLI, *SMOKE, "--out", str(out), "--resume"], cwd=ROOT, env=clean_env(),
                         capture_output=True, text=True, timeout=600), (0, 1))
    assert sorted(_ids(out)) == smoke_ids
