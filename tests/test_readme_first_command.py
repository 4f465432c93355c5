"""The README's first command works every time it is run as written: each run writes a fresh
folder (``runs/<ep>-<UTC time>``, ``-2``, ``-3``... within one second), so a second run neither
refuses the folder the first one filled nor overwrites it."""

import os
import shlex
from pathlib import Path

import pytest

from ep_testbed.harness.cli import main
from ep_testbed.harness.core.results import read_run

ROOT = Path(__file__).resolve().parents[1]
#: One catalog case: the command as written runs the whole catalog; this test only needs two runs.
ONE_CASE = "roi_align1/edge-whole-image"


def readme_run_command() -> list[str]:
    """The ``ep-testbed run`` words of the README's first command block (after ``pip install ... &&``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```sh", 1)[1].split("```", 1)[0]
    command = next(line for line in block.splitlines() if "ep-testbed run" in line)
    words = shlex.split(command.split("&&")[-1])
    assert words[:2] == ["ep-testbed", "run"], command
    return words


@pytest.mark.slow
def test_the_readme_first_command_runs_twice_into_two_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    words = readme_run_command()
    extra = ["-k", ONE_CASE, "--jobs", "0", "--no-progress"]
    assert main(words[1:] + extra) == 0
    assert main(words[1:] + extra) == 0
    folders = sorted(p for p in Path("runs").iterdir() if p.is_dir())
    assert len(folders) == 2, folders
    for folder in folders:
        _, lines, end = read_run(str(folder))
        assert [line["id"] for line in lines] == [ONE_CASE] and end is not None and not end.get("interrupted")
    assert all(os.path.basename(f).startswith("cpu-") for f in map(str, folders))
