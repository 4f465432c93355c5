"""The reports read results.jsonl in two passes (``reports.results.SummaryView``, ``Run.whole``),
or, for a small file, in one that keeps the whole lines beside the views (``Run.kept``):
report.html, junit.xml and summary.json must be exactly what the same renderers write from the
run read whole (every line parsed and held, as they read it before), either way, on real CPU runs,
a fuzz run with shrinks and the synthetic runs; and a results file that changes between the
passes (or after the one) is refused, not mixed. Memory under an address-space limit: ``tests/hostile/test_hostile_memory.py``."""

from __future__ import annotations

import base64
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
import synthetic_run
from hypothesis import example, given
from hypothesis import strategies as st

from ep_testbed.harness.cli import main
from ep_testbed.reports import render_junit, render_run, render_summary_json, results
from ep_testbed.reports.html_report import wants_detail
from ep_testbed.reports.results import ResultsError, SummaryView, load_run, load_run_summary


def _comparable(html: str) -> str:
    """``html`` without what differs between two renderings of one run: the minute it was
    generated and the time stamps inside each inline repro bundle (a zip): each bundle becomes
    the list of its members' names, CRCs and sizes."""
    html = re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated", html)

    def members(match: re.Match) -> str:
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(match.group(1)))) as bundle:
            return "zip:" + repr([(i.filename, i.CRC, i.file_size) for i in bundle.infolist()])
    return re.sub(r"data:application/zip;base64,([A-Za-z0-9+/=]*)", members, html)


def _render_each_way(run_dir: Path, tmp_path: Path, **options) -> dict[str, dict[str, bytes]]:
    """The three files rendered from the run read whole, from its summary views with the whole
    lines the first pass kept (the default for a small file), and from its views with every whole
    line read again (a file past ``KEEP_WHOLE_BYTES``), by way."""
    outputs = {}
    for way, keep in (("whole", None), ("views", results.KEEP_WHOLE_BYTES), ("views read again", -1)):
        folder = tmp_path / way
        folder.mkdir()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(results, "KEEP_WHOLE_BYTES", keep if keep is not None else results.KEEP_WHOLE_BYTES)
            run = load_run(run_dir) if keep is None else None
            outputs[way] = {
                "report.html": _comparable(render_run(run_dir, out=folder / "report.html", run=run,
                                                      **options).read_text(encoding="utf-8")).encode(),
                "junit.xml": render_junit(run_dir, out=folder / "junit.xml", run=run).read_bytes(),
                "summary.json": render_summary_json(run_dir, out=folder / "summary.json", run=run).read_bytes()}
    return outputs


def _assert_same(run_dir: Path, tmp_path: Path, **options) -> None:
    outputs = _render_each_way(run_dir, tmp_path, **options)
    whole = outputs.pop("whole")
    for way, files in outputs.items():
        for name in whole:
            assert files[name] == whole[name], f"{name} differs between the whole run and its {way}"


@pytest.fixture(params=["kept", "read again"])
def keep(request, monkeypatch):
    """Either way ``load_run_summary`` gives whole lines back: kept by its first pass, or read again."""
    if request.param == "read again":
        monkeypatch.setattr(results, "KEEP_WHOLE_BYTES", -1)
    return request.param


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    """Real runs on the CPU EP: a catalog slice judged without expectations (failures with case
    folders), the smoke tier with them (known cases), and a short fuzz run that shrank a failure."""
    root = tmp_path_factory.mktemp("cpu")
    commands = {
        "failing": ["run", "--ep", "cpu", "--no-expectations", "--ops", "max_pooling2,roi_pooling", "--jobs", "0"],
        "smoke": ["run", "--ep", "cpu", "--tier", "smoke", "--jobs", "0"],
        "fuzz": ["fuzz", "--ep", "cpu", "--no-expectations", "--ops", "max_pooling2", "--max-cases", "60", "--budget", "120",
                 "--max-shrinks", "1", "--shrink-time", "4", "--seed", "3", "--jobs", "1"],
    }
    runs = {}
    for name, argv in commands.items():
        runs[name] = root / name
        assert main([*argv, "--out", str(runs[name]), "--no-progress"]) in (0, 1)
    assert (runs["fuzz"] / "shrinks.jsonl").is_file()  # the fuzz section is part of what is compared
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("name", ["failing", "smoke", "fuzz"])
def test_a_real_cpu_run_renders_the_same_from_its_summary_views(cpu_runs, tmp_path, name):
    _assert_same(cpu_runs[name], tmp_path)


def _fewer_sections(run_dir: Path, tmp_path: Path) -> None:
    """--max-details below the cases that want a section: the bounded heap picks what sorting
    them all picked."""
    candidates = sum(map(wants_detail, load_run_summary(run_dir).cases))
    assert candidates >= 4
    _assert_same(run_dir, tmp_path, max_details=candidates // 2, max_pictures=1)


@pytest.mark.slow
def test_fewer_sections_than_candidates_pick_the_same_most_severe_cases(cpu_runs, tmp_path):
    _fewer_sections(cpu_runs["fuzz"], tmp_path)


def test_fewer_sections_of_a_synthetic_run_pick_the_same_cases(tmp_path):
    run_dir = _rechecked_run(synthetic_run.write_run(tmp_path / "run", 120))
    (tmp_path / "out").mkdir()
    _fewer_sections(run_dir, tmp_path / "out")


def _rechecked_run(run_dir: Path) -> Path:
    """A synthetic run whose failures were re-checked on a second EP and attributed, and whose
    lines flag a DML field with a few values (what the views keep of scope, attribution, flags)."""
    path = run_dir / "results.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for n, line in enumerate(lines):
        if line["type"] != "case":
            continue
        line["flags"] = [*(line.get("flags") or []), {"field": "Strides", "value": [1 + n % 3, 1], "kind": "exact",
                                                      "reason": "x"}]
        if line["outcome"] in ("fail", "crash", "known"):
            line["scope"] = ("only on CPUExecutionProvider", "shared with CUDAExecutionProvider")[n % 2]
            line["attribution"] = {"cause": ("operator", "helper", None)[n % 3], "reason": "why", "nodes": []}
            line["also_on"] = {"ep": "CUDAExecutionProvider", "reported": "fail", "same_failure": bool(n % 2)}
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


def test_synthetic_runs_render_the_same_from_their_summary_views(tmp_path):
    """Every outcome, re-check scopes, attributions, expectations, and hostile text."""
    for name, run_dir in (("ordinary", synthetic_run.write_run(tmp_path / "run", 120)),
                          ("rechecked", _rechecked_run(synthetic_run.write_run(tmp_path / "rechecked", 120))),
                          ("evil", synthetic_run.write_evil_run(tmp_path / "evil"))):
        (tmp_path / f"{name}-out").mkdir()
        _assert_same(run_dir, tmp_path / f"{name}-out")


def test_a_repeated_id_and_a_torn_line_render_as_when_read_whole(tmp_path):
    """The last line of an id wins at the place of its first (``RunRecords.cases``), a torn last
    line is skipped: the second pass reads each case's own line, in that order."""
    run_dir = synthetic_run.write_run(tmp_path / "run", 24)
    path = run_dir / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    first_case = json.loads(lines[1])
    again = {**first_case, "outcome": "crash", "message": "the same id, written again"}
    path.write_text("".join(lines[:-1]) + json.dumps(again) + "\n" + lines[-1] + '{"type": "case", "id": "torn')
    run = load_run_summary(run_dir)
    assert run.cases[0].id == first_case["id"] and run.cases[0].outcome == "crash" and run.unreadable_lines
    (tmp_path / "out").mkdir()
    _assert_same(run_dir, tmp_path / "out")


def test_a_view_holds_a_few_keys_and_shares_what_lines_repeat(tmp_path, keep):
    run_dir = synthetic_run.write_run(tmp_path / "run", 120)
    views = load_run_summary(run_dir)
    whole = load_run(run_dir)
    assert views.projected and not whole.projected and (views.kept is not None) == (keep == "kept")
    assert all("message" not in c.raw and "worst" not in c.raw for c in views.cases)
    same_op = [c.raw["op"] for c in views.cases if c.op == views.cases[0].op]
    assert len(same_op) > 1 and all(op is same_op[0] for op in same_op)  # one string held for all
    for view, line in zip(views.cases, whole.cases):
        assert (view.outcome, view.errors, view.scope, view.attribution and view.attribution["cause"]) == \
            (line.outcome, line.errors, line.scope, line.attribution and line.attribution["cause"])
        assert next(views.whole([view])).raw == line.raw


def test_a_results_file_changed_between_the_passes_is_refused(tmp_path, monkeypatch, capsys, keep):
    run_dir = synthetic_run.write_run(tmp_path / "run", 24)
    run = load_run_summary(run_dir)
    path = run_dir / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[2] + lines[1] + "".join(lines[3:]))  # two case lines swapped
    # the file's stamp (or line 2's digest) tells before the line is read as another case's
    with pytest.raises(ResultsError, match=r"changed between two reads|line 2 changed while it was being read"):
        list(run.whole(run.cases))
    original = SummaryView.__call__

    def then_rewritten(self, line):  # the report's first pass ends, then a --resume rewrites the file
        view = original(self, line)
        if line["id"] == json.loads(lines[-2])["id"]:
            path.write_text(lines[0] + "".join(lines[3:]))
        return view

    path.write_text("".join(lines))
    monkeypatch.setattr(SummaryView, "__call__", then_rewritten)
    assert main(["report", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "changed while it was being read" in err and "Traceback" not in err
    assert "Note: read the folder again once nothing writes into it" in err


def test_a_small_run_is_rendered_from_one_read_of_its_lines(tmp_path, monkeypatch):
    """The first pass keeps a small file's whole lines beside their views, so report.html,
    junit.xml and summary.json are rendered without reading a line again; a file that outgrows
    ``KEEP_WHOLE_BYTES``, or memory, is read again line by line as before."""
    from ep_testbed.harness.core import memory
    from ep_testbed.reports import render_all

    run_dir = synthetic_run.write_run(tmp_path / "run", 120)
    reads = []
    read_again = results.read_cases_at
    monkeypatch.setattr(results, "read_cases_at", lambda *a, **k: reads.append(1) or read_again(*a, **k))
    render_all(run_dir)
    assert reads == []
    monkeypatch.setattr(memory, "headroom", lambda: 1000)  # bytes: too little to keep the lines whole
    render_all(run_dir)
    assert len(reads) >= 3  # the sections, the case table and the JUnit cases each read theirs again


_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, width=16)
                            | st.sampled_from(["1", "1.0", "true", "[1]", "null", ""]),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab1"), inner,
                                                                                        max_size=3),
                            max_leaves=8)


@example([[1], "[1]", [1.0], [True], ["1"], {"a": None}, "{'a': None}", [[1]], "[[1]]"])
@given(st.lists(_JSON_VALUES, min_size=2, max_size=12))
def test_a_shared_value_is_always_the_same_json_as_the_one_given(values):
    """``SummaryView.share`` hands back a value seen before only where it is the same JSON (so
    1, 1.0, true, "1" and [1] each stay themselves, whatever order they come in)."""
    view = SummaryView()
    for value in values:
        assert json.dumps(view.share(value)) == json.dumps(value)
