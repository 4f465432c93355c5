"""What a new user of ``ep-testbed fuzz`` meets: a fuzzed case's rerun line is its
``fuzz --replay`` command (fuzz ids are in no catalog, so ``run -k`` with one selects nothing),
wherever a rerun line is shown, and pasting it reruns the case; ``--budget`` bounds the whole
command, shrinking included, and says what it left unshrunk."""

import html
import json
import os
import re
import shlex
import time
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")

from fuzz_kit import fuzz_cpu  # noqa: E402

from ep_testbed.harness.cli import main, parse_args  # noqa: E402
from ep_testbed.harness.cli.options import parse_tolerances  # noqa: E402
from ep_testbed.harness.core import rerun  # noqa: E402
from ep_testbed.harness.core.results import read_run  # noqa: E402
from ep_testbed.harness.run.worker import FAULT_ENV  # noqa: E402
from ep_testbed.reports.github import job_summary  # noqa: E402

#: The fuzzed cases whose EP output the worker's ``perturb`` fault changes (one element each):
#: early ones, so that the first chunk, which runs whatever the budget, has some.
PLANTED = "max_pooling2/fuzz-s0-b0-00*"
FUZZ_HEADER = {"ep_alias": "cpu", "seed": 0, "fuzz": {"budget_s": 5}, "rerun_args": ["--ep", "cpu", "--seed", "0"]}


def test_a_fuzzed_case_reruns_as_its_replay_and_a_catalog_or_corpus_case_as_run_k():
    drawn = {"id": "roi_align/fuzz-s0-b2-008", "tags": {"family": "fuzz"}}
    minimal = {"id": "roi_align/fuzz-s0-b2-008-min", "tags": {"family": "fuzz-minimal",
                                                              "shrunk_from": "roi_align/fuzz-s0-b2-008"}}
    words = rerun.rerun_words(FUZZ_HEADER, drawn)
    assert words[:2] == ["ep-testbed", "fuzz"] and "-k" not in words
    assert words[words.index("--replay") + 1] == drawn["id"] and "--ep" in words
    assert rerun.rerun_words(FUZZ_HEADER, minimal)[words.index("--replay") + 1] == drawn["id"]
    run_header = {"ep_alias": "cpu", "seed": 0, "rerun_args": ["--ep", "cpu", "--seed", "0", "--corpus", "c"]}
    corpus_case = {"id": "roi_align/corpus-cpu-3f2a9c01d4", "tags": {"family": "corpus"}}
    for header, line in ((run_header, corpus_case), (run_header, minimal), (FUZZ_HEADER | {"fuzz": None}, drawn),
                         (run_header, {"id": "roi_align1/edge-whole-image"})):
        words = rerun.rerun_words(header, line)
        assert words[:2] == ["ep-testbed", "run"] and words[words.index("-k") + 1] == line["id"]


def test_fuzz_records_the_options_its_replay_line_needs_and_fuzz_accepts_them():
    args = parse_args(["fuzz", "--ep", "cpu", "--ep-option", "a=b", "--graph-opt", "--seed", "3", "--timeout", "5",
                       "--no-expectations", "--tol", "fp16:ulp=9", "--budget", "7", "--size", "large"])
    words = rerun.outcome_argv(args.outcome_actions, args, parse_tolerances(None, args.tol))
    assert words == ["--ep", "cpu", "--ep-option", "a=b", "--graph-opt", "--seed", "3", "--timeout", "5.0",
                     "--no-expectations", "--tol", "FLOAT16:atol=0.005,rtol=0.001,ulp=9"]
    line = rerun.rerun_line({**FUZZ_HEADER, "rerun_args": words}, {"id": "max_pooling2/fuzz-large-s3-b1-002",
                                                                    "tags": {"family": "fuzz"}})
    again = parse_args(shlex.split(line)[1:])
    assert again.replay == ["max_pooling2/fuzz-large-s3-b1-002"] and again.graph_opt and again.timeout == 5.0


def _fuzz(out, *extra, fault=f"perturb={PLANTED}", budget="8"):
    """``fuzz_kit.fuzz_cpu`` with this module's planted failure unless told otherwise."""
    return fuzz_cpu(out, *extra, fault=fault, budget=budget)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("newcomer")
    return root / "run", _fuzz(root / "run", "--shrink-time", "5", "--tol", "fp32:ulp=3")


@pytest.mark.slow
def test_every_rerun_line_of_a_fuzz_run_is_its_replay(planted):
    run_dir, code = planted
    assert code == 1
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    shown = [html.unescape(m) for m in re.findall(r'<div class="rerun">.*?<code>(.*?)</code>', page, re.S)]
    assert shown and all(line.startswith("ep-testbed fuzz ") and " --replay max_pooling2/fuzz-s0-b" in line
                         and "FLOAT32:atol=" in line for line in shown), shown
    junit = (run_dir / "junit.xml").read_text(encoding="utf-8")
    summary = job_summary(run_dir)
    for text in (page, junit, summary):
        assert not re.search(r"ep-testbed run [^\n<]*-k [^\n<]*fuzz-s0", text)
    assert "rerun: ep-testbed fuzz " in junit and "ep-testbed fuzz " in summary and "--replay" in summary


@pytest.mark.slow
def test_the_terminal_names_the_replay_of_the_first_failure(tmp_path, capsys):
    assert _fuzz(tmp_path / "r", "--shrink", "none", budget="3") == 1
    out = capsys.readouterr().out
    first = re.search(r"^rerun the first: (.*)$", out, re.M)
    assert first and shlex.split(first.group(1))[:2] == ["ep-testbed", "fuzz"] and "--replay" in first.group(1), out


@pytest.mark.slow
def test_a_pasted_replay_line_reruns_the_case_and_fails_as_it_did(planted, tmp_path, monkeypatch):
    run_dir, _ = planted
    header, lines, _ = read_run(str(run_dir))
    line = next(line for line in lines if line["outcome"] == "fail" and line["tags"].get("family") == "fuzz"
                and re.fullmatch(PLANTED.replace("*", ".*"), line["id"]))
    words = shlex.split(rerun.rerun_line(header, line))
    monkeypatch.chdir(tmp_path)
    os.environ[FAULT_ENV] = f"perturb={PLANTED}"
    try:
        code = main(words[1:] + ["--no-progress", "--shrink", "none"])
    finally:
        del os.environ[FAULT_ENV]
    folders = list(Path("runs").glob("replay-*"))
    assert code == 1 and len(folders) == 1
    _, again, _ = read_run(str(folders[0]))
    assert [(a["id"], a["outcome"], a["tags"]) for a in again] == [(line["id"], "fail", line["tags"])]


@pytest.mark.slow
def test_the_budget_bounds_shrinking_too_and_says_what_it_left(tmp_path, capsys):
    # every shrink candidate hangs until its 1 s timeout: unbounded, 20 shrinks of 60 s would follow the budget
    fault = f"perturb={PLANTED};hang=*-shrink*"
    start = time.monotonic()
    code = _fuzz(tmp_path / "r", "--shrink-time", "60", "--timeout", "1", "--shrink", "all", fault=fault, budget="6")
    seconds = time.monotonic() - start
    assert code == 1 and seconds < 6 + 15, seconds  # the chunk in flight, the minimal cases' runs, the report
    _, _, end = read_run(str(tmp_path / "r"))
    shrinks = tmp_path / "r" / "shrinks.jsonl"
    records = [json.loads(line) for line in shrinks.read_text().splitlines()] if shrinks.exists() else []
    stopped = [r for r in records if any("stopped at" in note for note in r["notes"])]
    assert end["fuzz"]["not_shrunk"] or stopped, (end, records)
    captured = capsys.readouterr()
    if end["fuzz"]["not_shrunk"]:
        assert "not shrunk, the --budget of 6 s was spent" in captured.out
