"""Summary table, exit codes, progress line, selection and shard arithmetic."""

import io
from dataclasses import dataclass

import pytest

from ep_testbed.harness.core.exit_codes import FAILED as EXIT_FAILED
from ep_testbed.harness.core.exit_codes import INTERRUPTED as EXIT_INTERRUPTED
from ep_testbed.harness.core.exit_codes import NO_CASES as EXIT_NO_CASES
from ep_testbed.harness.core.exit_codes import OK as EXIT_OK
from ep_testbed.harness.run.progress import Progress
from ep_testbed.harness.run.selection import parse_shard, select, shard
from ep_testbed.harness.run.summary import exit_code, failing_outcomes, table, timings_table


@dataclass(frozen=True)
class C:
    id: str


def test_exit_code_counts_not_on_ep_and_inexpressible_apart():
    ok = {"pass": 3, "known": 1, "not-on-ep": 2, "inexpressible": 1}
    assert exit_code(ok, failing_outcomes()) == EXIT_OK
    assert exit_code(ok, failing_outcomes(fail_on_not_on_ep=True)) == EXIT_FAILED
    assert exit_code(ok, failing_outcomes(fail_on_inexpressible=True)) == EXIT_FAILED
    for bad in ("fail", "crash", "timeout", "error", "fixed"):
        assert exit_code({"pass": 1, bad: 1}, failing_outcomes()) == EXIT_FAILED, bad
    assert exit_code({}, failing_outcomes()) == EXIT_NO_CASES
    assert exit_code({"fail": 1}, failing_outcomes(), interrupted=True) == EXIT_INTERRUPTED


def test_table_has_a_row_per_operator_and_a_total():
    lines = [{"op": "DML_OPERATOR_ROI_ALIGN1", "outcome": "pass"}, {"op": "DML_OPERATOR_ROI_ALIGN1", "outcome": "crash"},
             {"op": "DML_OPERATOR_MAX_POOLING2", "outcome": "pass"}]
    text = table(lines).splitlines()
    assert text[0].split() == ["operator", "pass", "fail", "crash", "total"]
    assert text[2].split() == ["MAX_POOLING2", "1", "0", "0", "1"]
    assert text[3].split() == ["ROI_ALIGN1", "1", "0", "1", "2"]
    assert text[-1].split() == ["TOTAL", "2", "0", "1", "3"]


def test_timings_table_says_where_each_case_time_went_beside_its_stated_cost():
    lines = [{"id": "roi_align1/stress-a", "outcome": "pass", "tags": {"seconds": "11.8", "memory_mb": "1477"},
              "duration_s": 3.5, "timings": {"prepare_s": 1.5, "reference_s": 1.25, "build_s": 0.01, "run_s": 0.5,
                                             "judge_s": 1.49, "shared_by": 1}},
             {"id": "max_pooling2/old-line\x1b[31m", "outcome": "known", "tags": None, "duration_s": None}]
    text = timings_table(lines).splitlines()
    assert "reference is part of prepare" in text[0]
    assert text[1].split() == ["case", "outcome", "stated", "s", "stated", "MiB", "total", "s", "prepare", "reference",
                               "EP", "build", "EP", "run", "judge"]
    assert text[3].split() == ["roi_align1/stress-a", "pass", "11.8", "1477", "3.50", "1.50", "1.25", "0.01", "0.50",
                               "1.49"]
    assert text[4].split()[1:] == ["known"] + ["-"] * 8  # a line without timings (an older writer) says so
    assert "\x1b" not in text[4]


def test_progress_line_shows_done_failures_rate_and_eta():
    stream = io.StringIO()
    progress = Progress(4, enabled=True, stream=stream)
    progress.update({"outcome": "pass"})
    progress.update({"outcome": "crash"})
    line = progress.render()
    assert "2/4" in line and "failed 1" in line and "cases/s" in line and "ETA" in line
    quiet = io.StringIO()
    Progress(4, enabled=False, stream=quiet).update({"outcome": "pass"})
    assert quiet.getvalue() == ""


def test_select_by_substring_glob_and_exclusion():
    cases = [C("roi_align1/avg-fp16-a"), C("roi_align1/max-fp32-b"), C("max_pooling2/x-fp16")]
    assert [c.id for c in select(cases, ["fp16"])] == ["roi_align1/avg-fp16-a", "max_pooling2/x-fp16"]
    assert [c.id for c in select(cases, ["roi_align1/*"], ["max"])] == ["roi_align1/avg-fp16-a"]
    assert len(select(cases, ["avg,max_pooling2"])) == 2
    assert select(cases) == cases


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_partition_the_cases_evenly_whatever_the_input_order(n):
    cases = [C(f"op{i % 3}/case-{i:03d}") for i in range(50)]
    parts = [shard(cases, k, n) for k in range(1, n + 1)]
    assert sorted(c.id for p in parts for c in p) == sorted(c.id for c in cases)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert [c.id for c in shard(list(reversed(cases)), 1, n)] == [c.id for c in parts[0]]


def test_shard_spec_is_validated():
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "a/b", "3"):
        with pytest.raises(ValueError, match="K/N"):
            parse_shard(bad)


def test_an_exact_id_selects_that_case_alone():
    """The report's rerun line is `-k <id>`: it must not also pick up ids that merely contain it."""
    cases = [C(i) for i in ("roi_align/random-s0-001", "roi_align/random-s0-0011", "x/random-s0-001b")]
    assert [c.id for c in select(cases, ["roi_align/random-s0-001"])] == ["roi_align/random-s0-001"]
    assert [c.id for c in select(cases, ["random-s0-001"])] == [c.id for c in cases]  # not an id: a substring
    assert [c.id for c in select(cases, [], ["roi_align/random-s0-001"])] == ["roi_align/random-s0-0011",
                                                                             "x/random-s0-001b"]
