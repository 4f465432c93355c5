"""``merge`` reads each shard in two passes (``harness.run.merge``: a small view of every case line
and where it lies, then the lines copied one at a time): its results.jsonl must hold exactly what
a merge that parses every shard whole writes (every case line once, sorted by id, as the shard
has it, and the end line's counts), on real CPU shards; and a shard rewritten between the passes
is refused. Memory under an address-space limit: ``tests/hostile/test_hostile_memory.py``."""

from __future__ import annotations

import json
import shutil

import pytest

from ep_testbed.harness.cli import main
from ep_testbed.harness.core.results import count_outcomes, dumps, load_records, results_path
from ep_testbed.harness.run import merge

pytestmark = pytest.mark.slow  # real runs on the CPU EP


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three shards of a catalog slice run on the CPU EP without expectations (failing cases with
    case folders); the third lost its end line, as a killed shard does."""
    root = tmp_path_factory.mktemp("shards")
    folders = []
    for k in (1, 2, 3):
        folder = root / f"s{k}"
        code = main(["run", "--ep", "cpu", "--no-expectations", "--ops", "max_pooling2,roi_align1", "--shard",
                     f"{k}/3", "--jobs", "0", "--no-progress", "--out", str(folder)])
        assert code in (0, 1)
        folders.append(folder)
    path = folders[2] / "results.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    return folders


def _whole_merge(folders) -> tuple[list[str], dict[str, int]]:
    """The case lines and counts a merge that holds every shard's lines parsed whole writes."""
    lines = [line for folder in folders for line in load_records(results_path(folder)).cases.values()]
    lines.sort(key=lambda line: line["id"])
    return [dumps(line) for line in lines], count_outcomes(lines)


def test_the_merged_file_is_what_a_whole_file_merge_writes(shards, tmp_path, capsys):
    out = tmp_path / "merged"
    assert main(["merge", *map(str, shards), "--out", str(out)]) in (0, 1)
    written = (out / "results.jsonl").read_text().splitlines()
    cases, counts = _whole_merge(shards)
    assert len(cases) > 30 and written[1:-1] == cases
    end = json.loads(written[-1])
    assert end["type"] == "end" and end["counts"] == counts and end["interrupted"] is True
    printed = capsys.readouterr().out
    assert f"merged 3 runs, {len(cases)} cases" in printed
    failing = [json.loads(line) for line in cases if json.loads(line)["outcome"] == "fail"]
    assert failing and all(line["id"] in printed for line in failing[:20])  # the failures listing
    for line in map(json.loads, cases):  # each case folder copied with its line
        assert not line["artifacts"] or (out / line["artifacts"]).is_dir()


def test_a_case_in_two_shards_is_still_refused(shards, tmp_path, capsys):
    twin = tmp_path / "twin"
    shutil.copytree(shards[0], twin)
    lines = (twin / "results.jsonl").read_text().splitlines(keepends=True)
    header = {**json.loads(lines[0]), "shard": "2/3"}  # another shard's header over shard 1's cases
    (twin / "results.jsonl").write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    assert main(["merge", str(shards[0]), str(twin), "--out", str(tmp_path / "m"), "--allow-partial"]) == 2
    assert "is in both" in capsys.readouterr().err and not (tmp_path / "m" / "results.jsonl").exists()


def test_a_shard_rewritten_between_the_passes_refuses_the_merge(shards, tmp_path, monkeypatch, capsys):
    copies = []
    for folder in shards:
        copies.append(tmp_path / folder.name)
        shutil.copytree(folder, copies[-1])
    path = copies[1] / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    changed = json.loads(lines[1])
    changed["outcome"] = "crash" if changed["outcome"] != "crash" else "pass"
    joined = merge._join_cases

    def then_rewritten(runs):  # the first pass is over; a --resume of that shard rewrites it
        result = joined(runs)
        path.write_text(lines[0] + json.dumps(changed) + "\n" + "".join(lines[2:]))
        return result

    monkeypatch.setattr(merge, "_join_cases", then_rewritten)
    assert main(["merge", *map(str, copies), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"case {changed['id']!r} changed while it was being merged" in err and "Traceback" not in err
    assert not (tmp_path / "m" / "results.jsonl").exists()
