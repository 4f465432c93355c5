"""Results files whose fields hold the wrong kind, repeat a case, or name an outcome this version
does not know: every reader answers with exit 0, 1 or 2 and says what it skipped, never an
internal error (70) and never a verdict over a result it silently chose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import synthetic_run

from ep_testbed.harness.cli import main

#: A value of each JSON kind but text (and a text where an integer belongs).
WRONG_KINDS = [None, 7, 1.5, True, ["OutputTensor"], {"name": "OutputTensor"}]


def _edit(run_dir: Path, change) -> None:
    """Rewrite ``run_dir``'s results.jsonl with ``change(record)`` applied to every record."""
    path = run_dir / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(change(r)) + "\n" for r in records))


def _failing_run(tmp_path: Path, name: str = "run") -> Path:
    return synthetic_run.write_run(tmp_path / name, 12, pattern=["pass", "fail", "known"],
                                   artifacts_every_failure=False)


@pytest.mark.parametrize("value", WRONG_KINDS, ids=lambda v: type(v).__name__)
def test_a_worst_element_of_any_kind_is_shown_as_text_by_report_and_grouped_by_findings(tmp_path, capsys, value):
    """A line is data: an output named by a number, a list or nothing is shown as text (it exited
    70 in findings' grouping and the report's, comparing or hashing it)."""
    run = _failing_run(tmp_path)
    _edit(run, lambda r: {**r, "worst": [{**r["worst"][0], "output": value, "failed": True}]} if r.get("worst") else r)
    assert main(["report", str(run)]) == 0
    assert "skipped" not in capsys.readouterr().err
    assert main(["findings", str(run), "--out", str(tmp_path / "found")]) == 0
    out = capsys.readouterr().out
    assert "failing case(s)" in out and "distinct finding(s)" in out, out


def test_a_worst_index_of_text_is_shown_empty(tmp_path, capsys):
    run = _failing_run(tmp_path)
    _edit(run, lambda r: {**r, "worst": [{**r["worst"][0], "index": ["1", 0], "failed": True}]} if r.get("worst")
          else r)
    assert main(["report", str(run)]) == 0 and main(["findings", str(run), "--out", str(tmp_path / "f")]) == 0
    assert "skipped" not in capsys.readouterr().err


@pytest.mark.parametrize("value", [1, True, "CPUExecutionProvider", [1, 2]], ids=repr)
def test_a_header_whose_provider_list_is_no_list_of_text_is_refused_naming_it(tmp_path, capsys, value):
    run = _failing_run(tmp_path)
    _edit(run, lambda r: {**r, "available_providers": value} if r["type"] == "run" else r)
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert "has no run header line" in err and "its first damaged line, 1, may have been it" in err, err
    assert "available_providers" in err and "Note: repair that line" in err, err


def _with_a_second_line_for_each_failure(run: Path) -> None:
    """Append a ``pass`` line for every failing case id, before the end line."""
    path = run / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    extra = [{**r, "outcome": "pass", "worst": [], "mismatches": 0} for r in records if r.get("outcome") == "fail"]
    assert extra
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:-1] + extra + records[-1:]))


def test_two_results_for_one_case_are_named_by_every_reader_and_refused_by_diff(tmp_path, capsys):
    base = _failing_run(tmp_path, "base")
    twice = _failing_run(tmp_path, "twice")
    _with_a_second_line_for_each_failure(twice)
    assert main(["report", str(twice)]) == 0
    assert "have more than one result" in capsys.readouterr().err
    assert main(["findings", str(twice), "--out", str(tmp_path / "found")]) == 0
    assert "have more than one result" in capsys.readouterr().err
    assert main(["ci-summary", str(twice), "--format", "annotations"]) == 0
    assert "::warning title=case ids with more than one result::" in capsys.readouterr().out
    # Without the refusal the gate judged the appended passes: "4 fixed", exit 0.
    assert main(["diff", str(base), str(twice), "--out", str(tmp_path / "diff")]) == 2
    err = capsys.readouterr().err
    assert "the diff is refused, as it could judge the wrong result" in err and "on lines " in err, err


def test_an_outcome_this_version_does_not_know_fails_the_diff_gate(tmp_path, capsys):
    base = _failing_run(tmp_path, "base")
    newer = _failing_run(tmp_path, "newer")
    _edit(newer, lambda r: {**r, "outcome": "banana"} if r.get("outcome") == "pass" else r)
    assert main(["diff", str(base), str(newer), "--out", str(tmp_path / "diff")]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED" in out and "newly failing" in out and "banana" in out, out


def test_a_diff_over_damaged_lines_says_how_it_counted_their_cases(tmp_path, capsys):
    base = _failing_run(tmp_path, "base")
    damaged = _failing_run(tmp_path, "damaged")
    _edit(damaged, lambda r: {**r, "worst": [3]} if r.get("worst") else r)
    assert main(["diff", str(base), str(damaged), "--out", str(tmp_path / "diff")]) == 1
    out = capsys.readouterr().out
    assert "line(s) of run B's results.jsonl could not be read" in out and "count as gone from B" in out, out
    assert "worst holds an integer; its entries are objects" in out, out
