"""A run folder is owned by one run, and ``--resume`` only continues the same run.

The lock (``harness.run.run_folder``) is tested with real processes where liveness matters; the
resume checks run the handler in this process on tests/harness/local_cases.py, like
test_harness_cli.py.
"""

import json
import os
import socket
import subprocess
import sys

import pytest
from test_harness_cli import case_lines, run_local

from ep_testbed.harness.run.run_folder import LOCK_FILE, FolderBusy, claim, refuse_overwrite


def _lock(folder, **fields):
    folder.mkdir(parents=True, exist_ok=True)
    record = {"pid": os.getpid(), "host": socket.gethostname(), "pid_started": None, "token": "t",
              "command": "ep-testbed run --out x", "started": "2026-01-01T00:00:00+00:00", **fields}
    (folder / LOCK_FILE).write_text(json.dumps(record))


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_folder_held_by_a_live_run_is_refused_naming_that_run(tmp_path, capsys):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _lock(tmp_path / "r", pid=sleeper.pid)
        code, _, err = run_local(capsys, "-k", "00", "--out", str(tmp_path / "r"))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert code == 2 and f"in use by another ep-testbed run: pid {sleeper.pid}" in err and "Traceback" not in err
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_a_stale_lock_of_a_dead_run_is_removed_with_a_note(tmp_path, capsys):
    _lock(tmp_path / "r", pid=_dead_pid())
    code, _, err = run_local(capsys, "-k", "00", "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert "removed the stale lock" in err
    assert not (tmp_path / "r" / LOCK_FILE).exists()  # released at the end


def test_a_reused_pid_does_not_keep_a_lock_alive(tmp_path, capsys):
    _lock(tmp_path / "r", pid=os.getpid(), pid_started=1)  # this pid, but a process started at another time
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("process start times are read from /proc (Linux)")
    code, _, err = run_local(capsys, "-k", "00", "--out", str(tmp_path / "r"))
    assert code == 0 and "removed the stale lock" in err


def test_a_lock_from_another_host_is_refused_with_the_file_to_delete(tmp_path, capsys):
    _lock(tmp_path / "r", host="build-agent-7", pid=4242)
    code, _, err = run_local(capsys, "-k", "00", "--out", str(tmp_path / "r"))
    assert code == 2 and "pid 4242 on build-agent-7" in err and f"delete {tmp_path / 'r' / LOCK_FILE}" in err


def test_an_unreadable_lock_is_refused_not_guessed(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / LOCK_FILE).write_bytes(b"\xff\xfe garbage")
    code, _, err = run_local(capsys, "-k", "00", "--out", str(tmp_path / "r"))
    assert code == 2 and "lock file that cannot be read" in err


def test_claims_exclude_each_other_and_release_only_their_own(tmp_path):
    with claim(tmp_path / "f", "first") as held:
        with pytest.raises(FolderBusy, match=f"pid {os.getpid()}"):
            claim(tmp_path / "f", "second")
        (tmp_path / "f" / LOCK_FILE).write_text(json.dumps({"token": "someone else"}))
        held.release()
        assert (tmp_path / "f" / LOCK_FILE).exists()  # not ours any more: left alone


def test_refuse_overwrite_names_what_the_folder_holds(tmp_path):
    refuse_overwrite(tmp_path / "none", False)
    (tmp_path / "full").mkdir()
    refuse_overwrite(tmp_path / "full", False)
    (tmp_path / "full" / "model_result.json").write_text("{}")
    with pytest.raises(FolderBusy, match=r"(?s)--out .*full already holds files \(model_result.json\).*--overwrite"):
        refuse_overwrite(tmp_path / "full", False)
    refuse_overwrite(tmp_path / "full", True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(FolderBusy, match="exists and is not a folder"):
        refuse_overwrite(tmp_path / "file", False)


# --- --resume: the same run or nothing ------------------------------------------------------

@pytest.mark.parametrize("argv, difference", [
    (["--seed", "1"], "seed: 0 -> 1"),
    (["--tol", "fp32:atol=0.5"], "tolerances: "),
    (["-k", "01"], "selection: "),
    (["--ep-option", "intra=1"], "ep_options: {} -> {'intra': '1'}"),
    (["--graph-opt"], "session_options: "),
])
@pytest.mark.slow
def test_resume_refuses_every_option_that_changes_outcomes(tmp_path, capsys, argv, difference):
    out = str(tmp_path / "r")
    assert run_local(capsys, "-k", "00", "--out", out)[0] == 0
    before = (tmp_path / "r" / "results.jsonl").read_bytes()
    selection = [] if argv[0] == "-k" else ["-k", "00"]
    code, _, err = run_local(capsys, *selection, *argv, "--out", out, "--resume")
    assert code == 2 and "was run with other options" in err and difference in err, err
    assert (tmp_path / "r" / "results.jsonl").read_bytes() == before  # untouched


@pytest.mark.slow
def test_resume_notices_an_edited_expectations_file(tmp_path, capsys):
    path = tmp_path / "e.json"
    entry = {"id": "max_pooling2/none-*", "outcome": "fail", "readings": ["lowest-start"], "reason": "test",
             "link": "https://example.org/1"}
    path.write_text(json.dumps({"expectations": [entry]}))
    out = str(tmp_path / "r")
    assert run_local(capsys, "-k", "00", "--expectations", str(path), "--out", out)[0] == 0
    path.write_text(json.dumps({"expectations": [{**entry, "id": "max_pooling2/*"}]}))
    code, _, err = run_local(capsys, "-k", "00", "--expectations", str(path), "--out", out, "--resume")
    assert code == 2 and "expectations_sha256: " in err


@pytest.mark.slow
def test_resume_with_the_same_options_adds_nothing_twice(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert run_local(capsys, "-k", "0", "--out", out)[0] == 0
    code, stdout, err = run_local(capsys, "-k", "0", "--out", out, "--resume")
    assert code == 0, err
    assert "\n0 cases in " in stdout  # the closing line counts the cases run now
    text = (tmp_path / "r" / "results.jsonl").read_text()
    assert text.count('"type": "run"') == 1 and text.count('"type": "end"') == 1
    ids = [line["id"] for line in case_lines(tmp_path / "r")]
    assert len(ids) == len(set(ids)) > 0


@pytest.mark.slow
def test_a_damaged_header_is_refused_deterministically_and_overwrite_starts_again(tmp_path, capsys):
    out = tmp_path / "r"
    assert run_local(capsys, "-k", "0", "--out", str(out))[0] == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(['{"type": "run", "ep": ', *lines[1:]]) + "\n")
    for _ in range(2):  # the same answer every time, and the file untouched
        code, _, err = run_local(capsys, "-k", "0", "--out", str(out), "--resume")
        assert code == 2 and "has no readable run header (line 1" in err and "--overwrite" in err
    code, _, err = run_local(capsys, "-k", "0", "--out", str(out), "--overwrite")
    assert code == 0, err
    assert (out / "results.jsonl").read_text().count('"type": "run"') == 1


def test_a_file_with_only_a_damaged_header_starts_afresh(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.jsonl").write_text('{"type": "ru')
    code, _, err = run_local(capsys, "-k", "00", "--out", str(tmp_path / "r"), "--resume")
    assert code == 0 and "started afresh" in err
    assert (tmp_path / "r" / "results.jsonl").read_text().count('"type": "run"') == 1


def test_two_different_headers_are_refused(tmp_path, capsys):
    out = tmp_path / "r"
    assert run_local(capsys, "-k", "00", "--out", str(out))[0] == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    other = json.loads(lines[0])
    other["started"] = "2000-01-01T00:00:00+00:00"
    (out / "results.jsonl").write_text("\n".join([lines[0], json.dumps(other), *lines[1:]]) + "\n")
    code, _, err = run_local(capsys, "-k", "00", "--out", str(out), "--resume")
    assert code == 2 and "2 different run headers" in err


def test_a_damaged_case_line_is_named_and_its_case_runs_again(tmp_path, capsys):
    out = tmp_path / "r"
    assert run_local(capsys, "-k", "0", "--out", str(out))[0] == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    damaged_id = json.loads(lines[2])["id"]
    lines[2] = lines[2][: len(lines[2]) // 2]  # damage in the middle of the file
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    code, stdout, err = run_local(capsys, "-k", "0", "--out", str(out), "--resume")
    assert code == 0, err
    assert "line 3 was damaged" in err and "\n1 cases in " in stdout
    ids = [line["id"] for line in case_lines(out)]
    assert damaged_id in ids and len(ids) == len(set(ids))


def test_a_run_its_folder_refuses_starts_no_worker(tmp_path):
    """Workers start before the run opens its folder (their EP's start overlaps the preflight), but
    not for a run the folder refuses at once: results there and neither --resume nor --overwrite."""
    from ep_testbed.harness.eps.providers import resolve_ep
    from ep_testbed.harness.run.case_run import CaseConfig
    from ep_testbed.harness.run.runner import RunOptions, start_workers

    config = CaseConfig(ep=resolve_ep("cpu"))
    (tmp_path / "results.jsonl").write_text("")
    assert start_workers(config, RunOptions(out_dir=str(tmp_path), jobs=2), 5) is None
    for resumed in (RunOptions(out_dir=str(tmp_path), jobs=2, resume=True),
                    RunOptions(out_dir=str(tmp_path), jobs=2, overwrite=True),
                    RunOptions(out_dir=str(tmp_path / "new"), jobs=2)):
        pool = start_workers(config, resumed, 5)
        try:
            assert pool is not None and len(pool._workers) == 2
        finally:
            if pool is not None:
                pool.close()


def test_an_out_that_is_a_file_is_refused_before_any_case_runs(tmp_path, capsys):
    """It was refused only as the folder was made, with a message that claimed finished cases."""
    taken = tmp_path / "taken"
    taken.write_text("someone's file")
    with pytest.raises(FolderBusy, match="exists and is not a folder"):
        claim(taken)
    assert taken.read_text() == "someone's file"
