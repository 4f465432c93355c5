import json
import re
from pathlib import Path

import pytest
import synthetic_run

from ep_testbed.harness.cli import main as cli_main
from ep_testbed.reports import diff_runs


def _edit(run_dir: Path, edits: dict[int, dict], drop: set[int] = frozenset(), add: list[dict] = ()) -> None:
    """Change case lines by position (1 = first case), drop some, append others."""
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    out = [lines[0]]
    for i, line in enumerate(lines[1:], 1):
        obj = json.loads(line)
        if obj.get("type") != "case":
            out.append(line)
            continue
        if i in drop:
            continue
        obj.update(edits.get(i, {}))
        out.append(json.dumps(obj))
    out += [json.dumps(a) for a in add]
    (run_dir / "results.jsonl").write_text("\n".join(out) + "\n")


@pytest.fixture
def two_runs(tmp_path):
    pattern = ["pass"] * 6
    a = synthetic_run.write_run(tmp_path / "a", 6, pattern=pattern)
    b = synthetic_run.write_run(tmp_path / "b", 6, pattern=pattern)
    _edit(a, {2: {"outcome": "fail"}, 3: {"errors": {"max_abs": 1e-3, "max_rel": 1e-3, "max_ulp": 10}},
              4: {"errors": {"max_abs": 1e-3, "max_rel": 1e-3, "max_ulp": 10}}, 5: {"outcome": "fail"}})
    _edit(b, {1: {"outcome": "crash"},                                                   # newly failing
              3: {"errors": {"max_abs": 5e-3, "max_rel": 5e-3, "max_ulp": 50}},          # grew x5
              4: {"errors": {"max_abs": 1.5e-3, "max_rel": 1.5e-3, "max_ulp": 15}},      # grew x1.5 only
              5: {"outcome": "timeout"}},                                                # still failing
          drop={6},
          add=[synthetic_run.case_line(100, "DML_OPERATOR_ROI_ALIGN1", "FLOAT32", "pass", None),
               synthetic_run.case_line(101, "DML_OPERATOR_ROI_ALIGN1", "FLOAT32", "fail", None)])
    return a, b


def test_diff_categories(two_runs, tmp_path):
    a, b = two_runs
    res = diff_runs(a, b, tmp_path / "out", growth_factor=2.0)
    ids = lambda changes: [c.id.split("-")[-1] for c in changes]  # noqa: E731
    assert ids(res.newly_failing) == ["0", "101"]       # case 1 crashed; a new case that fails counts too
    assert ids(res.fixed) == ["1"]
    assert ids(res.grown) == ["2"] and res.grown[0].metric == "max_ulp" and res.grown[0].factor == 5.0
    assert ids(res.still_failing_changed) == ["4"]
    assert ids(res.added) == ["100"] and ids(res.gone) == ["5"]
    assert res.regressed and res.reasons == ["2 case(s) newly failing",
                                             "1 case(s) of A missing from B (--allow-missing to accept)"]
    text = (tmp_path / "out" / "diff.txt").read_text()
    assert text.splitlines()[1].startswith("verdict: REGRESSED: 2 case(s) newly failing; 1 case(s) of A missing")
    assert "1 error grown > 2x, 1 fixed" in text.splitlines()[1]
    html = (tmp_path / "out" / "diff.html").read_text()
    assert "Newly failing" in html and "×5" in html


def test_identical_runs_do_not_regress_and_zero_to_tiny_error_is_not_growth(tmp_path):
    a = synthetic_run.write_run(tmp_path / "a", 20)
    b = synthetic_run.write_run(tmp_path / "b", 20)
    _edit(a, {1: {"errors": {"max_abs": 0.0, "max_rel": 0.0, "max_ulp": 0}}})
    _edit(b, {1: {"errors": {"max_abs": 1e-8, "max_rel": 1e-8, "max_ulp": 1}}})
    res = diff_runs(a, b, tmp_path / "out")
    assert not res.regressed and res.unchanged == 20


def test_growth_factor_below_one_is_refused(two_runs, tmp_path):
    with pytest.raises(ValueError, match="growth_factor"):
        diff_runs(*two_runs, tmp_path / "out", growth_factor=0.5)


def test_cli_diff_exit_codes_and_report(two_runs, tmp_path, capsys):
    a, b = two_runs
    assert cli_main(["diff", str(a), str(b), "--out", str(tmp_path / "d")]) == 1
    assert "REGRESSED" in capsys.readouterr().out
    assert cli_main(["diff", str(a), str(a), "--out", str(tmp_path / "d2")]) == 0
    assert cli_main(["diff", str(a), str(tmp_path / "missing")]) == 2
    assert cli_main(["report", str(b)]) == 0
    assert {"report.html", "junit.xml", "summary.json", "diff.html"} - {p.name for p in b.iterdir()} == {"diff.html"}
    assert cli_main(["report", str(tmp_path / "missing")]) == 2


def test_failure_that_stops_reaching_the_ep_is_not_fixed_but_lost_coverage(tmp_path):
    a = synthetic_run.write_run(tmp_path / "a", 2, pattern=["fail"])
    b = synthetic_run.write_run(tmp_path / "b", 2, pattern=["fail"])
    _edit(b, {1: {"outcome": "not-on-ep"}, 2: {"outcome": "pass"}})
    res = diff_runs(a, b, tmp_path / "out")
    assert [c.after for c in res.coverage_lost] == ["not-on-ep"]
    assert [c.after for c in res.fixed] == ["pass"]
    assert res.regressed


def test_a_stale_expectation_is_an_outcome_change_not_a_regression(tmp_path):
    """``fixed`` fails a run (the expectations file is out of date) but says the EP got better:
    known -> fixed is listed as a change, and is no regression."""
    a = synthetic_run.write_run(tmp_path / "a", 2, pattern=["known", "pass"])
    b = synthetic_run.write_run(tmp_path / "b", 2, pattern=["fixed", "pass"])
    res = diff_runs(a, b, tmp_path / "out")
    assert [(c.before, c.after) for c in res.other_changes] == [("known", "fixed")]
    assert not res.newly_failing and not res.regressed


# The gate: each way a run can lose what it tested fails it, and a flag accepts each.

def _passing(tmp_path, name: str, n: int = 8) -> Path:
    return synthetic_run.write_run(tmp_path / name, n, pattern=["pass"])


def _gate(capsys, a: Path, b: Path, out: Path, *flags: str) -> tuple[int, str]:
    code = cli_main(["diff", str(a), str(b), "--out", str(out), *flags])
    return code, capsys.readouterr().out


def test_gate_fails_when_every_pass_becomes_not_on_ep(tmp_path, capsys):
    a, b = _passing(tmp_path, "a", 56), _passing(tmp_path, "b", 56)
    _edit(b, {i: {"outcome": "not-on-ep", "errors": {}} for i in range(1, 57)})
    code, out = _gate(capsys, a, b, tmp_path / "d")
    assert code == 1 and "56 tested case(s) no longer reach the EP" in out and "REGRESSED" in out
    assert _gate(capsys, a, b, tmp_path / "d2", "--allow-not-tested")[0] == 0


def test_gate_fails_on_pass_to_inexpressible_and_pass_to_error(tmp_path, capsys):
    a, b = _passing(tmp_path, "a"), _passing(tmp_path, "b")
    _edit(b, {1: {"outcome": "inexpressible"}, 2: {"outcome": "error"}})
    res = diff_runs(a, b, tmp_path / "d")
    assert [c.after for c in res.coverage_lost] == ["inexpressible"]
    assert [c.after for c in res.newly_failing] == ["error"]
    assert _gate(capsys, a, b, tmp_path / "d2", "--allow-not-tested")[0] == 1  # the error still fails it


def test_gate_fails_when_a_case_goes_missing(tmp_path, capsys):
    a, b = _passing(tmp_path, "a"), _passing(tmp_path, "b")
    _edit(b, {}, drop={3})
    code, out = _gate(capsys, a, b, tmp_path / "d")
    assert code == 1 and "1 case(s) of A missing from B" in out
    code, out = _gate(capsys, a, b, tmp_path / "d2", "--allow-missing")
    assert code == 0 and "warning: 1 case(s) of A missing from B (accepted" in out


def test_gate_fails_on_an_interrupted_second_run(tmp_path, capsys):
    a = _passing(tmp_path, "a")
    b = synthetic_run.write_run(tmp_path / "b", 8, pattern=["pass"], end=False)
    code, out = _gate(capsys, a, b, tmp_path / "d")
    assert code == 1 and "run B did not finish" in out
    assert _gate(capsys, a, b, tmp_path / "d2", "--allow-interrupted")[0] == 0


def test_gate_fails_on_a_second_run_with_no_case(tmp_path, capsys):
    a = _passing(tmp_path, "a")
    b = synthetic_run.write_run(tmp_path / "b", 0, pattern=["pass"])
    code, out = _gate(capsys, a, b, tmp_path / "d")
    assert code == 1 and "run B has no case" in out
    assert _gate(capsys, a, b, tmp_path / "d2", "--allow-empty")[0] == 1  # the 8 cases of A are still missing
    assert _gate(capsys, a, b, tmp_path / "d3", "--allow-empty", "--allow-missing")[0] == 0


def test_growth_within_tolerance_only_warns(tmp_path, capsys):
    """max ULP 60 -> 658 with no element outside tolerance: a warning, exit 0;
    --fail-on-growth makes it fail."""
    a, b = _passing(tmp_path, "a"), _passing(tmp_path, "b")
    _edit(a, {1: {"errors": {"max_abs": 1e-6, "max_rel": 1e-6, "max_ulp": 60}, "tolerance_used": 0.05}})
    _edit(b, {1: {"errors": {"max_abs": 1e-5, "max_rel": 1e-5, "max_ulp": 658}, "tolerance_used": 0.6}})
    code, out = _gate(capsys, a, b, tmp_path / "d")
    assert code == 0 and "no regression" in out and "warning: 1 case(s) with error grown" in out
    assert "max_ulp 60 -> 658 (x10.9667), 0.6 of its tolerance in B" in out
    assert _gate(capsys, a, b, tmp_path / "d2", "--fail-on-growth")[0] == 1


def test_diff_html_links_both_reports_groups_rows_and_has_a_filter(tmp_path):
    from ep_testbed.reports import render_run

    a, b = _passing(tmp_path, "a", 40), _passing(tmp_path, "b", 40)
    _edit(b, {i: {"outcome": "not-on-ep"} for i in range(1, 31)})
    render_run(a)
    render_run(b)
    diff_runs(a, b, tmp_path / "d")
    html = (tmp_path / "d" / "diff.html").read_text()
    assert 'href="../a/report.html"' in html and 'href="../b/report.html"' in html
    assert html.count('href="../a/report.html#cases?id=') == 30  # every changed row links into A and B
    groups = re.findall(r'<summary><b>([^<]+)</b> <span class="muted">\((\d+)\)</span>', html)
    assert sum(int(n) for _, n in groups) == 30 and 1 < len(groups) < 30
    assert all("pass → not-on-ep" in g for g, _ in groups)
    assert 'id="d-q"' in html and 'id="d-s"' in html
