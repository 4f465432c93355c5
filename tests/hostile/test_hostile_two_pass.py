"""A results.jsonl that changes between a reader's two passes as the attack: ``report`` (and every
reader of a run folder that keeps a small view of each line, then reads lines whole again) must
never describe two files at once (report.html's table from one, summary.json's counts from the
other). The file's identity, size, modification time and a digest of every line the first pass
read are held against the second pass: a change is read again from the start, or refused once it
keeps changing (exit 2).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from ep_testbed.harness.cli import main
from ep_testbed.reports import results as report_results

pytestmark = pytest.mark.slow  # runs a test catalog in workers


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    """A run of the test catalog whose cases fail (a mapper with wrong indices)."""
    import local_cases

    from ep_testbed.harness.cli import parse_args
    from ep_testbed.harness.cli.run import run_command

    out = tmp_path_factory.mktemp("two-pass") / "run"
    code = run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "--no-progress", "--keep-worst", "0"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx_wrong_indices",
                       worker_paths=(local_cases.HERE,))
    assert code == 1
    return out


def _flip(path, n):
    """Turn the first ``n`` failing case lines into passing ones in place, each line keeping its
    length (``fail`` and ``pass`` are as long): size and offsets stay, the outcomes change."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    flipped = 0
    for i, line in enumerate(lines):
        if flipped < n and '"outcome": "fail"' in line:
            lines[i] = line.replace('"outcome": "fail"', '"outcome": "pass"')
            flipped += 1
    path.write_text("".join(lines))
    return flipped


def _changing_between_passes(monkeypatch, path, times):
    """Make the file change right after each of the first ``times`` first passes (``load_records``)."""
    real = report_results.load_records
    calls = []

    def first_pass_then_change(*args, **kwargs):
        records = real(*args, **kwargs)
        calls.append(1)
        if len(calls) <= times:
            _flip(path, 1 + len(calls))
        return records

    monkeypatch.setattr(report_results, "load_records", first_pass_then_change)
    return calls


def _line_outcomes(folder):
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {line["id"]: line["outcome"] for line in lines if line["type"] == "case"}


def _table_outcomes(folder):
    """Case id -> outcome as report.html's case table rows say (``[id, op, dtype, outcome, ...]``)."""
    html = (folder / "report.html").read_text()
    found = {}
    for case_id in _line_outcomes(folder):
        match = re.search(re.escape(json.dumps(case_id)) + r',\s*"[^"]*",\s*"[^"]*",\s*"([a-z-]+)"', html)
        found[case_id] = match.group(1) if match else None
    return found


def _counts(folder):
    summary = json.loads((folder / "summary.json").read_text())
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    outcomes = [line["outcome"] for line in lines if line["type"] == "case"]
    return summary, outcomes


def test_a_file_changed_between_the_passes_is_read_again_and_the_report_agrees_with_it(failing_run, tmp_path,
                                                                                       monkeypatch, capsys):
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(failing_run, folder)
    calls = _changing_between_passes(monkeypatch, folder / "results.jsonl", times=1)
    assert main(["report", str(folder)]) == 0
    assert len(calls) == 2  # the first read found the file changed, the second read it whole
    summary, outcomes = _counts(folder)
    assert summary["counts"]["pass"] == outcomes.count("pass") >= 2
    assert _table_outcomes(folder) == _line_outcomes(folder)  # report.html's table: the same read
    junit = (folder / "junit.xml").read_text()
    assert junit.count("<failure") + junit.count("<error") == len(outcomes) - outcomes.count("pass") \
        - outcomes.count("known") - outcomes.count("not-on-ep") - outcomes.count("inexpressible")


def test_a_file_that_keeps_changing_is_refused_with_exit_2(failing_run, tmp_path, monkeypatch, capsys):
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(failing_run, folder)
    _changing_between_passes(monkeypatch, folder / "results.jsonl", times=report_results.READS)
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "changed between two reads" in err and "changed each time" in err and "Traceback" not in err


def test_a_line_edited_in_place_is_told_from_an_unchanged_one(failing_run, tmp_path):
    """Same size, same offsets, same ids: only the line's digest tells (and the stamp's mtime)."""
    import shutil

    from ep_testbed.harness.core import results as core_results
    from ep_testbed.harness.core.untrusted_files import FileChanged

    folder = tmp_path / "run"
    shutil.copytree(failing_run, folder)
    path = folder / "results.jsonl"
    records = core_results.load_records(str(path))
    _flip(path, 1)
    stat = os.stat(path)  # the stamp made to agree: only the line's digest can tell
    records.seen.end = records.seen.start = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    places = [(case_id, *records.where[case_id]) for case_id in records.cases]
    with pytest.raises(FileChanged, match="changed between two reads"):
        list(core_results.read_cases_at(str(path), places, records.seen))
