"""Kill -9 and what it leaves as the attack: a temporary file of a half-written artifact in a case
folder, a merge killed before or after it wrote its results.

Whoever next claims the folder sweeps the temporary files (no process writes there while it
holds the claim); a merge's output folder is resumable as its message says (``--overwrite``
redoes the merge from its runs), and the result equals a clean merge's.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from environment_kit import check, cli

from ep_testbed.harness.core.atomic_files import TEMP_PREFIX
from ep_testbed.harness.run.run_folder import LOCK_FILE

pytestmark = pytest.mark.slow  # runs the test catalog in workers, and commands

VOLATILE = {"duration_s", "timings", "placement_source"}


def _local_run(out, *argv):
    import local_cases

    from ep_testbed.harness.cli import parse_args
    from ep_testbed.harness.cli.run import run_command

    return run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "--no-progress", *argv]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx_wrong_indices",
                       worker_paths=(local_cases.HERE,))


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two shards of the failing test catalog (so every case has a case folder)."""
    top = tmp_path_factory.mktemp("shards")
    for k in (1, 2):
        assert _local_run(top / f"s{k}", "--shard", f"{k}/2") == 1
    return top / "s1", top / "s2"


@pytest.fixture(scope="module")
def clean_merge(shards, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "m"
    check(cli("merge", *shards, "--out", out), (1,))
    return _cases(out)


def _cases(out):
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    cases = [line for line in lines if line["type"] == "case"]
    assert len(cases) == len({c["id"] for c in cases})
    return {c["id"]: {k: v for k, v in c.items() if k not in VOLATILE} for c in cases}


def _stale_lock(folder):
    """The lock a merge killed outright leaves (its pid no longer runs)."""
    (folder / LOCK_FILE).write_text(json.dumps({"pid": 2**22 + 7, "host": os.uname().nodename, "token": "x",
                                                "command": "ep-testbed merge"}) + "\n")


def _temporaries(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob(f"{TEMP_PREFIX}*"))


def test_a_temporary_file_left_in_a_case_folder_is_swept_by_the_resume(tmp_path):
    """What kill -9 leaves mid-write: an empty ``.ep-testbed-tmp-*-actual.npz`` beside a case's
    files. ``--resume`` (which claims the folder) removes it and says so."""
    out = tmp_path / "r"
    assert _local_run(out, "-k", "0") == 1
    case = next((out / "cases").iterdir())
    (case / f"{TEMP_PREFIX}0badc0de-actual.npz").write_bytes(b"")
    (out / f"{TEMP_PREFIX}0badc0de-report.html").write_bytes(b"<html")
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # no end line: a killed run
    assert _local_run(out, "-k", "0", "--resume") == 1
    assert _temporaries(out) == []


@pytest.mark.parametrize("killed", ["before-results", "after-results"])
def test_a_merge_killed_outright_is_finished_as_its_message_says(shards, clean_merge, tmp_path, killed):
    """Killed while copying case folders (no results.jsonl yet), or after writing results.jsonl
    and before its report: the rerun either finishes, or refuses naming ``--overwrite``, with
    which it finishes; either way the result equals a clean merge and no temporary file is left."""
    out = tmp_path / "m"
    check(cli("merge", *shards, "--out", out), (1,))
    for name in ("report.html", "junit.xml", "summary.json"):
        (out / name).unlink()
    if killed == "before-results":
        (out / "results.jsonl").unlink()
        shutil.rmtree(next((out / "cases").iterdir()))
    case = next((out / "cases").iterdir())
    (case / f"{TEMP_PREFIX}0badc0de-expected.npz").write_bytes(b"PK")
    _stale_lock(out)
    again = check(cli("merge", *shards, "--out", out), (1, 2))
    if again.returncode == 2:
        assert "--overwrite" in again.stderr
        again = check(cli("merge", *shards, "--out", out, "--overwrite"), (1,))
    assert _cases(out) == clean_merge
    assert (out / "report.html").is_file() and _temporaries(out) == []
    assert not (out / LOCK_FILE).exists()


def test_merge_overwrite_replaces_a_run_folder_with_the_merge(shards, clean_merge, tmp_path):
    """``--overwrite`` replaces what a merge writes (a run that was there, with case folders the
    merge does not have), nothing else."""
    out = tmp_path / "m"
    assert _local_run(out, "-k", "0") == 1
    (out / "notes.txt").write_text("mine")
    check(cli("merge", *shards, "--out", out), (2,))
    check(cli("merge", *shards, "--out", out, "--overwrite"), (1,))
    assert _cases(out) == clean_merge and (out / "notes.txt").read_text() == "mine"
    merged_folders = {c["artifacts"] for c in clean_merge.values() if c.get("artifacts")}
    assert {f"cases/{p.name}" for p in (out / "cases").iterdir()} == merged_folders
