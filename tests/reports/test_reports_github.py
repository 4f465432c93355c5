"""The job summary and check annotations of reports/github.py (what ``ep-testbed ci-summary`` prints
for the DML workflow), on real ``ep-testbed run --ep cpu`` runs of a slice of the catalog: once with
the CPU expectations (their divergences are ``known``) and once without (the same cases ``fail``).

Expected figures come from the run's own files read independently: counts from results.jsonl's
lines grouped by harness/core/results.py's outcome groups, the order of failures from summary.json.
"""

import json
import re
import shutil

import pytest

from ep_testbed.harness.cli import build_parser, main
from ep_testbed.harness.core.results import EXPECTED_FAILURE, FAILING, NOT_TESTED, PASSING
from ep_testbed.reports import render_summary_json
from ep_testbed.reports.github import annotations, job_summary

#: Catalog cases whose CPU outcomes cover pass, known/fail and inexpressible on four operators.
SLICE = "-k=edge-nan-inf,edge-pads,edge-uint64,opset10"
COLUMNS = {"pass": PASSING, "fail": FAILING, "known": EXPECTED_FAILURE, **{o: (o,) for o in NOT_TESTED}}


def _cpu_run(folder, *extra):
    code = main(["run", "--ep", "cpu", SLICE, "--out", str(folder), "--jobs", "0", "--no-progress", *extra])
    assert code in (0, 1)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{"expected": the slice with the CPU expectations, "unexpected": with none}."""
    base = tmp_path_factory.mktemp("github")
    return {"expected": _cpu_run(base / "expected"), "unexpected": _cpu_run(base / "unexpected", "--no-expectations")}


def _lines(run):
    return [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def _cases(run):
    return [r for r in _lines(run) if r["type"] == "case"]


def _unescape(cell):
    return re.sub(r"\\(.)", r"\1", cell.strip()).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _table(markdown, header):
    """The rows (lists of unescaped cells) of the table whose header row starts with ``header``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        rows.append([_unescape(c) for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


@pytest.mark.parametrize("which", ["expected", "unexpected"])
def test_the_table_counts_each_operator_as_results_jsonl_has_it(runs, which):
    cases = _cases(runs[which])
    rows = _table(job_summary(runs[which]), "operator")
    want = {}
    for case in cases:
        name = case["op"].removeprefix("DML_OPERATOR_")
        row = want.setdefault(name, dict.fromkeys(COLUMNS, 0))
        row[next(c for c, outcomes in COLUMNS.items() if case["outcome"] in outcomes)] += 1
    assert [r[0] for r in rows[:-1]] == sorted(want) and len(want) == 4
    for name, *cells in rows[:-1]:
        assert [int(c) for c in cells] == [*want[name].values(), sum(want[name].values())], name
    assert rows[-1] == ["**all**", *(f"**{sum(r[c] for r in want.values())}**" for c in COLUMNS), f"**{len(cases)}**"]
    totals = {c: sum(r[c] for r in want.values()) for c in COLUMNS}
    assert totals["pass"] > 0 and totals["inexpressible"] > 0
    if which == "unexpected":  # the CPU EP's known divergences, now failures
        assert totals["known"] == 0 and totals["fail"] > 0
    else:
        assert totals["known"] > 0 and totals["fail"] == 0


def test_top_failures_follow_summary_json_with_a_rerun_line_each(runs, tmp_path):
    run = runs["unexpected"]
    failing = json.loads(render_summary_json(run, out=tmp_path / "summary.json").read_text())["failing"]
    assert len(failing) >= 3
    markdown = job_summary(run, top=2)
    assert f"**{len(failing)} case(s) fail the run** (fail {len(failing)})" in _unescape(markdown)
    assert f"#### Top failures (2 of {len(failing)})" in markdown
    rows = _table(markdown, "case")
    assert [(r[0], r[1]) for r in rows] == [(f["id"], f["outcome"]) for f in failing[:2]]
    assert [r[2] for r in rows] == [f["outside"] for f in failing[:2]]
    fence = markdown.split("```sh\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert len(fence) == 2
    for line, case in zip(fence, failing):
        words = line.split()
        assert words[:2] == ["ep-testbed", "run"] and words[words.index("-k") + 1] == case["id"]
        build_parser().parse_args(words[1:])  # a line the command takes as it is
    passing = job_summary(runs["expected"])
    assert "**no case fails the run**." in passing and "Top failures" not in passing


def test_annotations_are_one_error_per_failing_case_then_the_rest_counted(runs, tmp_path):
    run = runs["unexpected"]
    failing = json.loads(render_summary_json(run, out=tmp_path / "summary.json").read_text())["failing"]
    lines = annotations(run, limit=2)
    errors = [line for line in lines if line.startswith("::error ")]
    assert [e.split("::")[1] for e in errors] == [f"error title=fail%3A {f['id']}" for f in failing[:2]]
    assert all(f" float32: fail, {f['outside']} outside tolerance, max abs " in e or
               f" float16: fail, {f['outside']} outside tolerance, max abs " in e for e, f in zip(errors, failing))
    assert lines[2] == f"::warning title={len(failing) - 2} more failing case(s)::not annotated (GitHub shows 10 " \
                       "error annotations per step): the job summary lists the top ones, report.html and junit.xml " \
                       "every one"
    counts = {c: sum(k["outcome"] in o for k in _cases(run)) for c, o in COLUMNS.items()}
    assert lines[3] == "::notice title=ep-testbed on CPUExecutionProvider::" + f"{sum(counts.values())} cases: " + \
        ", ".join(f"{n} {c}" for c, n in counts.items())
    assert len(lines) == 4
    assert [line for line in annotations(runs["expected"]) if not line.startswith("::notice")] == []


def _doctored(run, folder, edit):
    """A copy of ``run`` whose case lines went through ``edit(record) -> record``."""
    copy = folder / "run"
    shutil.copytree(run, copy)
    lines = [json.dumps(edit(r) if r["type"] == "case" else r) for r in _lines(run)]
    (copy / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return copy


def test_case_text_cannot_forge_a_command_a_cell_a_link_or_a_fence(runs, tmp_path):
    hostile_id = "x\n::error::forged,%0A:title=a | b <script>`` ```[link](http://evil)\r\x1b[2J"

    def edit(record):
        if record["outcome"] == "fail":
            record["id"] = hostile_id + record["id"]
            record["message"] = "line one\n::warning::forged too\n| cell |"
        return record

    run = _doctored(runs["unexpected"], tmp_path, edit)
    lines = annotations(run)
    assert all(line.startswith(("::error title=", "::warning title=", "::notice title=")) for line in lines)
    assert all("\n" not in line and "\r" not in line and "\x1b" not in line for line in lines)
    first = lines[0]
    assert first.startswith("::error title=fail%3A x\\n%3A%3Aerror%3A%3Aforged%2C%250A%3Atitle=a | b")
    assert first.endswith("; line one")  # the message's first line only: nothing after a break
    markdown = job_summary(run)
    prose = markdown.split("<details>", 1)[0]  # the rerun lines are fenced code, shown as text
    assert "<script>" not in prose and "](http" not in prose.replace("\\](http", "")
    rows = _table(markdown, "case")
    assert len(rows) == min(10, sum(r["outcome"] == "fail" for r in _cases(run)))
    assert all(len(r) == 5 and r[0].startswith("x\\n::error::forged,%0A:title=a | b <script>") for r in rows)
    titled = job_summary(run, title="t\n# forged\x1b[2J")
    assert titled.splitlines()[0] == r"### t\\n# forged\\x1b\[2J" and "\x1b" not in titled  # renders t\n# forged...
    fenced = markdown.split("<details>", 1)[1]
    opening = re.search(r"^(`{3,})sh$", fenced, re.M).group(1)
    assert len(opening) > 3 and fenced.count("\n" + opening + "\n") == 1  # only the closing line ends it


def test_an_unfinished_run_says_so_in_both(runs, tmp_path):
    run = _doctored(runs["expected"], tmp_path, lambda r: r)
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
    (run / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:10], encoding="utf-8")
    assert "**the run did not finish**" in job_summary(run)
    notes = annotations(run)
    assert any(n.startswith("::warning title=run did not finish::") for n in notes)
    assert any(n == "::warning title=unreadable results lines::1 line(s) of " + str(run / "results.jsonl") +
               " could not be read" for n in notes)


def test_the_command_prints_what_the_functions_return(runs, capsys, tmp_path):
    run = runs["unexpected"]
    assert main(["ci-summary", str(run), "--top", "3"]) == 0
    assert capsys.readouterr().out == job_summary(run, top=3)
    assert main(["ci-summary", str(run), "--format", "annotations", "--max-annotations", "1"]) == 0
    assert capsys.readouterr().out == "".join(line + "\n" for line in annotations(run, limit=1))
    assert main(["ci-summary", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ep-testbed: ci-summary: ") and "does not exist" in err[0]
