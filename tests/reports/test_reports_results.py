import json
import math

import pytest
import synthetic_run

from ep_testbed.harness.core.results import OUTCOMES
from ep_testbed.reports.rendering import OUTCOME_COLOURS, OUTCOME_HELP
from ep_testbed.reports.results import ResultsError, load_run


def test_reads_header_cases_and_end(small_run):
    run = load_run(small_run)
    assert run.header["ep"] == "CPUExecutionProvider"
    assert len(run.cases) == 120
    assert not run.interrupted
    assert sum(run.counts.values()) == 120
    assert run.counts["fail"] == 3


def test_torn_last_line_is_skipped_and_counted(tmp_path):
    run_dir = synthetic_run.write_run(tmp_path / "r", 10, end=False)
    with (run_dir / "results.jsonl").open("a") as f:
        f.write('{"type": "case", "id": "half-writ')
    run = load_run(run_dir)
    assert len(run.cases) == 10
    assert run.interrupted
    assert run.unreadable_lines == [12]


def test_resumed_duplicate_id_keeps_last_result(tmp_path):
    run_dir = synthetic_run.write_run(tmp_path / "r", 3)
    first = json.loads((run_dir / "results.jsonl").read_text().splitlines()[1])
    first["outcome"] = "crash"
    with (run_dir / "results.jsonl").open("a") as f:
        f.write(json.dumps(first) + "\n")
    run = load_run(run_dir)
    assert [c.id for c in run.cases][0] == first["id"]
    assert run.by_id()[first["id"]].outcome == "crash"
    assert len(run.cases) == 3


def test_harness_spelling_of_non_finite_numbers_is_decoded(tmp_path):
    run_dir = synthetic_run.write_run(tmp_path / "r", 1, pattern=["fail"])
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    case = json.loads(lines[1])
    case["errors"] = {"max_abs": "inf", "max_rel": "nan", "max_ulp": None}
    case["worst"] = [{"output": "OutputTensor", "index": [0], "expected": 1.0, "actual": "nan", "abs": "inf"}]
    lines[1] = json.dumps(case)
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    c = load_run(run_dir).cases[0]
    assert c.max_abs == math.inf and math.isnan(c.errors["max_rel"]) and c.errors["max_ulp"] is None
    assert math.isnan(c.worst[0]["actual"])


def test_missing_file_and_missing_header_say_what_to_do(tmp_path):
    with pytest.raises(ResultsError, match="ep-testbed run --out"):
        load_run(tmp_path)
    (tmp_path / "results.jsonl").write_text('{"type": "case", "id": "x"}\n')
    with pytest.raises(ResultsError, match="no run header"):
        load_run(tmp_path)


def test_every_outcome_of_the_schema_has_a_colour_and_a_help_text():
    assert set(OUTCOME_COLOURS) == set(OUTCOMES) == set(OUTCOME_HELP)
