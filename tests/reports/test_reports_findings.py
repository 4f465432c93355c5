"""``ep-testbed findings RUN_DIR``: a run's failures grouped into distinct findings, each with its
smallest case, a text to file and a repro bundle that reproduces it with numpy and onnxruntime
alone (an interpreter with nothing else: ``bare_python``), on real CPU runs with planted failures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import bare_python
import pytest
import synthetic_run
from test_reports_html import visible_text

from ep_testbed.harness.cli import main, parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.results import WRONG, read_run
from ep_testbed.reports import render_run
from ep_testbed.reports.findings import FINDING_MD, INDEX_JSON, INDEX_MD

pytestmark = pytest.mark.slow  # the fixtures run the CPU EP in worker processes

HARNESS_TESTS = Path(__file__).resolve().parents[1] / "harness"
sys.path.insert(0, str(HARNESS_TESTS))  # planted_mappers: the mapper seam's planted failures
#: What the default CPU fuzz found (seed 0), with expectations off: an infinite input where the
#: reference (DirectML's interpolation, a + t*(b - a): inf - inf is NaN) gives NaN and ONNX
#: Runtime's CPU RoiAlign (a weighted sum of the corners) gives +inf.
INF_INPUT = "roi_align/fuzz-s0-b3-026"


def _failing(run_dir) -> list[dict]:
    return [line for line in read_run(str(run_dir))[1] if line.get("type") == "case" and line["outcome"] in WRONG]


def _findings(run_dir, capsys, *extra) -> tuple[dict, str]:
    code = main(["findings", str(run_dir), *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads((run_dir / "findings" / INDEX_JSON).read_text(encoding="utf-8")), out


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """ROI_ALIGN1's grid cases with every float32 output rounded to float16 (a planted helper pair):
    the same failure in every float32 case; the mapper flags some descs' sample counts as diverging."""
    out = tmp_path_factory.mktemp("planted") / "run"
    code = run_command(parse_args(["run", "--ep", "cpu", "--ops", "roi_align1", "-k", "grid-avg-linear",
                                   "--no-expectations", "--out", str(out), "--no-progress"]),
                       mapper="planted_mappers:half_output_float32", worker_paths=(str(HARNESS_TESTS),))
    assert code == 1
    return out


@pytest.fixture(scope="module")
def causes(tmp_path_factory):
    """Two known CPU divergences with their expectations off: MaxRoiPool's NaN handling and its
    float32 bin ends (the latter only under --strict-tolerance): two causes, two findings."""
    out = tmp_path_factory.mktemp("causes") / "run"
    assert main(["run", "--ep", "cpu", "--ops", "roi_pooling", "-k", "edge-nan-inf", "-k", "edge-float32-bins",
                 "--no-expectations", "--strict-tolerance", "--out", str(out), "--no-progress"]) == 1
    return out


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    return bare_python.make(tmp_path_factory.mktemp("bare") / "venv")


def _reproduces(python: str, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([python, "repro.py"], cwd=folder / "repro", capture_output=True, text=True, timeout=300,
                          env=bare_python.clean_env())


def test_planted_failures_group_by_signature_and_keep_the_smallest_case(planted, capsys):
    lines = _failing(planted)
    # one planted rounding of OutputTensor in float32: one finding per set of fields the mapper flags
    flag_sets = {tuple(sorted(f["field"] for f in line["flags"] if f["kind"] == "diverges")) for line in lines}
    index, out = _findings(planted, capsys)
    assert len(index["findings"]) == len(flag_sets) == 2 and index["failing"] == len(lines) > 2
    assert sum(f["cases"] for f in index["findings"]) == len(lines)
    assert f"{len(lines)} failing case(s)" in out and "2 distinct finding(s)" in out
    by_id = {line["id"]: line for line in lines}
    for finding in index["findings"]:
        assert finding["signature"]["values"] == "number -> number" and finding["dtype"] == "float32"
        members = [by_id[i] for i in finding["ids"]]
        size = lambda line: sum(s["elements"] for s in line["error_stats"].values())  # noqa: E731
        assert finding["elements"] == min(size(m) for m in members) == size(by_id[finding["smallest"]])


def test_each_findings_bundle_reproduces_it_with_numpy_and_onnxruntime_alone(planted, causes, bare, capsys):
    for run in (planted, causes):
        index, _ = _findings(run, capsys, "--overwrite")
        for finding in index["findings"]:
            folder = run / "findings" / finding["folder"]
            assert finding["bundle"] and (folder / "repro.zip").is_file()
            done = _reproduces(bare, folder)
            assert done.returncode == 1, (finding["title"], done.stdout[-800:], done.stderr[-800:])


def test_two_causes_are_two_findings_and_each_text_says_what_to_file(causes, capsys):
    index, _ = _findings(causes, capsys, "--overwrite")
    assert sorted(f["smallest"] for f in index["findings"]) == ["roi_pooling/edge-float32-bins",
                                                                "roi_pooling/edge-nan-inf"]
    header = read_run(str(causes))[0]
    for finding in index["findings"]:
        text = (causes / "findings" / finding["folder"] / FINDING_MD).read_text(encoding="utf-8")
        for section in ("## Versions and device", "## What fails", "## Expected vs got (worst elements)",
                        "## What the reference expects, and why", "## The minimal case", "## Reproduce it"):
            assert section in text
        assert f"onnxruntime {header['ort_version']}" in text and header["gpu"]["summary"].split(" ")[0] in text
        assert "| OutputTensor |" in text and "python repro.py" in text
        assert f"--no-expectations -k {finding['smallest']}" in text and "--strict-tolerance" in text
    readme = (causes / "findings" / INDEX_MD).read_text(encoding="utf-8")
    assert "2 failing case(s) in 2 distinct finding(s)" in readme


def test_a_fuzz_finding_is_represented_by_its_shrunk_case_which_reproduces(tmp_path, bare, capsys):
    out = tmp_path / "fuzz"
    assert main(["fuzz", "--ep", "cpu", "--ops", "roi_align", "--replay", INF_INPUT, "--no-expectations",
                 "--out", str(out), "--no-progress"]) == 1
    index, _ = _findings(out, capsys)
    (finding,) = index["findings"]
    assert finding["smallest"] == INF_INPUT + "-min" and finding["shrunk_from"] == INF_INPUT
    assert finding["ids"] == [INF_INPUT] and finding["signature"]["values"] == "nan -> inf"
    text = (out / "findings" / finding["folder"] / FINDING_MD).read_text(encoding="utf-8")
    assert f"--replay {INF_INPUT}" in text and "minimal case a shrink made of" in text
    assert _reproduces(bare, out / "findings" / finding["folder"]).returncode == 1


def test_a_run_without_failures_has_no_finding_and_says_so(tmp_path, capsys):
    run = synthetic_run.write_run(tmp_path / "ok", 6, pattern=["pass", "known", "inexpressible"])
    index, out = _findings(run, capsys)
    assert index["findings"] == [] and index["known"] == 2 and "no finding" in out
    assert "No finding" in (run / "findings" / INDEX_MD).read_text(encoding="utf-8")
    assert "Distinct findings" not in visible_text(render_run(run).read_text(encoding="utf-8"))


def test_the_report_lists_the_findings(causes):
    text = visible_text(render_run(causes).read_text(encoding="utf-8"))
    assert "Distinct findings (2)" in text and "roi_pooling/edge-nan-inf" in text


def test_bad_input_is_exit_2_with_one_message(tmp_path, capsys):
    assert main(["findings", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "results.jsonl").write_text("not json\n")
    assert main(["findings", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert "run header" in err and "Traceback" not in err
    run = synthetic_run.write_run(tmp_path / "run", 4, pattern=["pass", "fail"])
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("a user's file")
    assert main(["findings", str(run), "--out", str(busy)]) == 2
    assert "--overwrite" in capsys.readouterr().err and (busy / "mine.txt").read_text() == "a user's file"


def test_a_hostile_run_folder_is_data(tmp_path, capsys):
    """A case folder path that climbs out of the run folder gets no bundle (nothing is read
    there); an id and a message holding Markdown and control characters stay inert text."""
    run = synthetic_run.write_run(tmp_path / "run", 2, pattern=["fail", "pass"])
    path = run / "results.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    failing = next(line for line in lines if line.get("outcome") == "fail")
    failing.update(artifacts="../../outside", id="roi_align/[click](http://x)`\x1b[2J|", message="a\x1b[31m|b")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["findings", str(run)]) == 0
    captured = capsys.readouterr()
    assert "no repro bundle" in captured.err and "\x1b" not in captured.out + captured.err
    (folder,) = [p for p in (run / "findings").iterdir() if p.is_dir()]
    text = (folder / FINDING_MD).read_text(encoding="utf-8")
    assert "\x1b" not in text and not (folder / "repro").exists()
    # outside code fences, the id (which holds a backtick) only ever in a code span of two backticks
    prose, fenced = [], False
    for line in text.splitlines():
        fenced = fenced != line.startswith("```")
        if not fenced and not line.startswith("```"):
            prose.append(line)
    prose_text = "\n".join(prose)
    assert prose_text.count("](http") == prose_text.count("`` roi_align/[click](http://x)`\\x1b[2J| ``") == 2
