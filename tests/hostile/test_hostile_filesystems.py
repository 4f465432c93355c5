"""File systems that refuse writes: a tmpfs with no inode left, one mounted read-only.

Every command that writes into such a folder ends with exit 2 and one message saying what
failed and what to do; its error handling never fails in turn (a file object whose open failed
must not recurse when it is collected).
"""

from __future__ import annotations

import gc
import sys

import pytest
from environment_kit import check, cli, copy_run, fill_inodes, read_only, tmpfs

from ep_testbed.harness.core import atomic_files
from ep_testbed.harness.core.atomic_files import AtomicFile

pytestmark = pytest.mark.slow  # runs ep-testbed commands


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A finished smoke run of a few cases on the CPU EP."""
    out = tmp_path_factory.mktemp("fs") / "run"
    done = cli("run", "--ep", "cpu", "--tier", "smoke", "--ops", "max_pooling2", "--jobs", "1", "--out", out,
               "--no-progress")
    assert done.returncode == 0, done.stderr
    return out


def test_an_atomic_file_whose_open_failed_is_collected_quietly(tmp_path):
    """The old object looked its own attributes up through ``__getattr__`` when its open had
    failed, and ``__del__`` recursed until RecursionError."""
    unraisable = []
    previous, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with pytest.raises(FileNotFoundError):
            AtomicFile(tmp_path / "no-such-folder" / "file.json")
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert not unraisable, [u.exc_value for u in unraisable]


def test_report_into_a_read_only_folder_is_one_message(tmp_path, run_folder):
    with tmpfs(tmp_path / "mnt") as mnt:
        run = copy_run(run_folder, mnt / "run")
        for name in ("report.html", "junit.xml", "summary.json"):
            (run / name).unlink()
        read_only(mnt)
        done = check(cli("report", run), (2,))
        assert "Read-only file system" in done.stderr and "read-only" in done.stderr.split("Note:")[1]


def test_diff_of_read_only_runs_is_one_message(tmp_path, run_folder):
    with tmpfs(tmp_path / "mnt") as mnt:
        a, b = copy_run(run_folder, mnt / "a"), copy_run(run_folder, mnt / "b")
        read_only(mnt)
        done = check(cli("diff", a, b), (2,))
        assert "Read-only file system" in done.stderr


@pytest.mark.parametrize("left", [0, 2])
def test_a_run_on_a_file_system_with_no_inode_left_is_one_message(tmp_path, left):
    """``left`` inodes free: none (the lock cannot be made), or the lock's and results.jsonl's
    (every case is recorded, then the report's files cannot be created)."""
    with tmpfs(tmp_path / "mnt", size="64m", nr_inodes=64) as mnt:
        out = mnt / "run"
        out.mkdir()
        filled = fill_inodes(mnt)
        for n in range(left):
            (mnt / f"filler-{filled - 1 - n}").unlink()
        done = check(cli("run", "--ep", "cpu", "--tier", "smoke", "--ops", "max_pooling2", "--jobs", "1",
                         "--out", out, "--no-progress"), (2,))
        assert "No space left on device" in done.stderr
        assert "Exception ignored" not in done.stderr


@pytest.mark.parametrize("errno_name, words", [("EROFS", "read-only"), ("ENOSPC", "make room"),
                                               ("EACCES", "write access")])
def test_the_remedy_fits_the_error(errno_name, words):
    import errno

    assert words in atomic_files.write_remedy(OSError(getattr(errno, errno_name), "x"))
