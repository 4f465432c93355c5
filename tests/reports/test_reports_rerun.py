"""A report's rerun line reproduces the case's outcome: it carries every option that changed it.

Each test makes a run with one outcome-changing option (``--tol``, ``--tolerances``,
``--graph-opt``, ``--ep-option``), takes the case's rerun line as the report shows it, pastes it
(shell-split, run through the ``ep-testbed`` entry point) and compares outcomes; where the CPU EP
lets an option change the outcome, the same line without the option gives another outcome, so
the test fails if the line drops it. Pasting twice writes two folders.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from pathlib import Path

from ep_testbed.harness.cli import main, parse_args
from ep_testbed.harness.cli.options import parse_tolerances
from ep_testbed.harness.cli.run import fresh_out, run_command
from ep_testbed.harness.core import rerun
from ep_testbed.reports.html_report import rerun_command
from ep_testbed.reports.results import load_run

HARNESS_TESTS = str(Path(__file__).parents[1] / "harness")
#: A RoiAlign case the CPU EP computes a few ULP off the reference: a pass under the default
#: tolerances, a fail under zero tolerance with the plain rule (``--strict-tolerance``: the fp32
#: rounding bound would accept those ULP).
CLOSE_CASE = "roi_align1/edge-whole-image"
STRICT_FP32 = "fp32:atol=0,rtol=0,ulp=0"


def outcome(run_dir: Path, case_id: str) -> str:
    """The outcome ``run_dir/results.jsonl`` gives ``case_id``."""
    return load_run(run_dir).by_id()[case_id].outcome


def line_of(run_dir: Path, case_id: str) -> str:
    """The rerun line the report of ``run_dir`` shows for ``case_id``."""
    run = load_run(run_dir)
    return rerun_command(run, run.by_id()[case_id])


def paste(line: str, **seams) -> tuple[int, Path]:
    """Run a pasted rerun line in the current folder; (exit code, the run folder it wrote)."""
    words = shlex.split(line)
    assert words[:2] == ["ep-testbed", "run"], line
    args = parse_args(words[1:] + ["--no-progress"])
    code = run_command(args, **seams) if seams else main(words[1:] + ["--no-progress"])
    written = sorted(Path("runs").glob("rerun-*"), key=lambda p: p.stat().st_mtime)
    return code, written[-1]


def without(line: str, *flags: str) -> str:
    """``line`` with every ``flag VALUE`` (or bare ``flag``) of ``flags`` removed."""
    words, out, skip = shlex.split(line), [], False
    for w in words:
        if skip:
            skip = False
        elif w in flags:
            skip = w not in ("--graph-opt",)
        else:
            out.append(w)
    return " ".join(shlex.quote(w) for w in out)


def test_rerun_line_carries_tol(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--ep", "cpu", "-k", CLOSE_CASE, "--tol", STRICT_FP32, "--strict-tolerance", "--out", "first", "--jobs", "0",
                 "--no-progress"]) == 1
    assert outcome(Path("first"), CLOSE_CASE) == "fail"
    line = line_of(Path("first"), CLOSE_CASE)
    assert "--tol FLOAT32:atol=0.0,rtol=0.0,ulp=0" in line
    code, again = paste(line)
    assert code == 1 and outcome(again, CLOSE_CASE) == "fail"
    code, lax = paste(without(line, "--tol"))
    assert code == 0 and outcome(lax, CLOSE_CASE) == "pass"  # the option is what made it fail


def test_rerun_line_carries_a_tolerances_file_by_content(tmp_path, monkeypatch):
    """The line holds the file's table as --tol items, so it reproduces where the file is not."""
    monkeypatch.chdir(tmp_path)
    Path("tol.json").write_text(json.dumps({"FLOAT32": {"atol": 0.0, "rtol": 0.0, "ulp": 0}}))
    assert main(["run", "--ep", "cpu", "-k", CLOSE_CASE, "--tolerances", "tol.json", "--strict-tolerance", "--out", "first", "--jobs", "0",
                 "--no-progress"]) == 1
    header = load_run(Path("first")).header
    assert header["tolerances_file"]["path"] == "tol.json" and len(header["tolerances_file"]["sha256"]) == 64
    Path("tol.json").unlink()
    line = line_of(Path("first"), CLOSE_CASE)
    assert "--tolerances" not in line
    code, again = paste(line)
    assert code == 1 and outcome(again, CLOSE_CASE) == "fail"
    assert load_run(again).header["tolerances"] == header["tolerances"]
    assert outcome(paste(without(line, "--tol"))[1], CLOSE_CASE) == "pass"


def test_rerun_line_carries_graph_opt(tmp_path, monkeypatch):
    """With --graph-opt ONNX Runtime removes an op node (an Identity) of this test mapper, so the
    case is not-on-ep; without it the case passes. The rerun line must say --graph-opt."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(HARNESS_TESTS)
    seams = {"catalog": "local_cases:build_catalog", "mapper": "local_cases:to_onnx_identity_op",
             "worker_paths": (HARNESS_TESTS,)}
    case = "max_pooling2/local-w2-00"
    assert run_command(parse_args(["run", "--graph-opt", "-k", case, "--out", "first", "--no-progress"]),
                       **seams) == 0
    assert outcome(Path("first"), case) == "not-on-ep"
    line = line_of(Path("first"), case)
    assert "--graph-opt" in shlex.split(line)
    code, again = paste(line, **seams)
    assert outcome(again, case) == "not-on-ep"
    assert load_run(again).header["session_options"] == load_run(Path("first")).header["session_options"]
    assert outcome(paste(without(line, "--graph-opt"), **seams)[1], case) == "pass"


def test_rerun_line_carries_ep_options(tmp_path, monkeypatch):
    """The CPU EP takes provider options it does not use, so the outcome cannot depend on them
    here; the rerun must still run with the same options (the DML workflow's device_id)."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--ep", "cpu", "--ep-option", "use_arena=0", "--ep-option", "device_id=0", "-k",
                 CLOSE_CASE, "--out", "first", "--jobs", "0", "--no-progress"]) == 0
    line = line_of(Path("first"), CLOSE_CASE)
    code, again = paste(line)
    assert code == 0 and outcome(again, CLOSE_CASE) == "pass"
    assert load_run(again).header["ep_options"] == {"use_arena": "0", "device_id": "0"}
    assert load_run(Path("first")).header["ep_options"] == load_run(again).header["ep_options"]


def test_pasting_twice_writes_two_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--ep", "cpu", "-k", CLOSE_CASE, "--tol", STRICT_FP32, "--strict-tolerance", "--out", "first", "--jobs", "0",
                 "--no-progress"]) == 1
    line = line_of(Path("first"), CLOSE_CASE)
    first_code, first = paste(line)
    second_code, second = paste(line)
    assert first_code == second_code == 1 and first != second
    assert outcome(first, CLOSE_CASE) == outcome(second, CLOSE_CASE) == "fail"


def test_the_report_shows_that_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(["run", "--ep", "cpu", "-k", CLOSE_CASE, "--tol", STRICT_FP32, "--strict-tolerance", "--out", "first", "--jobs", "0",
          "--no-progress"])
    page = (Path("first") / "report.html").read_text(encoding="utf-8")
    shown = [html.unescape(m) for m in re.findall(r'<div class="rerun">.*?<code>(.*?)</code>', page, re.S)]
    assert shown == [line_of(Path("first"), CLOSE_CASE)]


def test_recorded_flags_cover_the_shared_groups():
    """Every flag of the EP, tolerance and expectations groups, --seed and --timeout is recorded
    (new flags of those groups are recorded without a change here)."""
    args = parse_args(["run", "--ep", "cpu", "--ep-option", "a=b", "--graph-opt", "--seed", "3", "--timeout", "5",
                       "--no-expectations", "--expectations", "x.json", "--tol", "fp16:ulp=9"])
    words = rerun.outcome_argv(args.outcome_actions, args, parse_tolerances(None, args.tol))
    assert words == ["--ep", "cpu", "--ep-option", "a=b", "--graph-opt", "--seed", "3", "--timeout", "5.0",
                     "--expectations", "x.json", "--no-expectations", "--tol", "FLOAT16:atol=0.005,rtol=0.001,ulp=9"]
    recorded = {a.dest for a in args.outcome_actions}
    assert {"ep", "ep_option", "graph_opt", "seed", "timeout", "tol", "tolerances", "expectations",
            "no_expectations"} <= recorded


def test_a_header_without_rerun_args_still_gives_the_options():
    header = {"ep_alias": "dml", "ep_options": {"device_id": "1"}, "seed": 2,
              "session_options": {"graph_optimization_level": "ORT_ENABLE_ALL"},
              "tolerances": {"by_dtype": {"FLOAT16": {"atol": 0.01, "rtol": 0.001, "ulp": 2}}}}
    assert rerun.rerun_args(header) == ["--ep", "dml", "--ep-option", "device_id=1", "--graph-opt", "--seed", "2",
                                        "--tol", "FLOAT16:atol=0.01,rtol=0.001,ulp=2"]


def test_fresh_out_never_reuses_a_folder(tmp_path):
    template = str(tmp_path / "r-{time}")
    first = Path(fresh_out(template))
    first.mkdir()
    second = Path(fresh_out(template))
    assert second != first and "{time}" not in str(second)
    assert fresh_out(str(tmp_path / "plain")) == str(tmp_path / "plain")


def test_the_smallest_passing_tolerance_the_report_suggests_passes(tmp_path, monkeypatch):
    """A failing case's section suggests a --tol; adding it to the rerun line makes the case pass,
    and the error distribution is shown beside it."""
    monkeypatch.chdir(tmp_path)
    main(["run", "--ep", "cpu", "-k", CLOSE_CASE, "--tol", STRICT_FP32, "--strict-tolerance", "--out", "first", "--jobs", "0",
          "--no-progress"])
    page = (Path("first") / "report.html").read_text(encoding="utf-8")
    assert "Error distribution of OutputTensor" in page and "p99" in page
    suggested = html.unescape(re.search(r"Smallest tolerance that passes.*?e\.g\. <code>--tol ([^<]+)</code>",
                                        page, re.S).group(1))
    assert suggested.startswith("FLOAT32:atol=")
    code, again = paste(line_of(Path("first"), CLOSE_CASE) + " --tol " + shlex.quote(suggested))
    assert code == 0 and outcome(again, CLOSE_CASE) == "pass"
