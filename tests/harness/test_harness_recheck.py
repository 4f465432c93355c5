"""A run's failures re-checked on a second EP (harness/run/recheck.py, ``run --also-on``): each
failing case is labelled "shared with <EP>" (the same failure there) or "only on <EP>"; the
label reaches results.jsonl, the report, junit.xml and summary.json, and never changes an outcome.

Only the CPU EP exists here, so the EP under test is the CPU EP running a planted mapper
(planted_mappers.py) and the second EP runs either the same mapper (the same failure: shared)
or the default one (it passes: only on the EP under test)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest
from planted_mappers import tf32_rois

from ep_testbed.graphs.cases.common import Case
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.expectations import Expectations
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run.case_run import DEFAULT_MAPPER, CaseConfig, run_case
from ep_testbed.harness.run.recheck import MAX_JOBS, Recheck, recheck_jobs
from ep_testbed.harness.run.runner import RunOptions, run_cases

HERE = os.path.dirname(os.path.abspath(__file__))
CPU = resolve_ep("cpu")
PLANTED = CaseConfig(ep=CPU, mapper="planted_mappers:tf32_rois")
DESC = roi_align_desc(True, sx=0.37, sy=0.53, ipo=0.25, opo=-0.25, samples=(2, 2), height=16, width=16)
BROKEN = Case(id="roi_align1/recheck-rounded", op=DESC.TYPE, desc=DESC, seed=3, recipe="random")
PLAIN = Case(id="roi_align1/recheck-plain", op=DESC.TYPE, desc=roi_align_desc(True), seed=0, recipe="random")


@pytest.mark.parametrize("second_mapper, label", [("planted_mappers:tf32_rois", "shared with CPUExecutionProvider"),
                                                  (DEFAULT_MAPPER, "only on CPUExecutionProvider")])
def test_a_failure_is_labelled_by_what_the_second_ep_does(second_mapper, label):
    line = run_case(BROKEN, PLANTED, mapper=tf32_rois)
    assert line["outcome"] == "fail" and line["scope"] is None
    recheck = Recheck(replace(PLANTED, mapper=second_mapper), CPU, 60, Expectations(), extra_paths=[HERE])
    try:
        recheck.submit(BROKEN, line)
        labelled = list(recheck.finished(wait=True))
    finally:
        recheck.close()
    assert len(labelled) == 1 and line["scope"] is None  # the submitted line stays as it was
    line = labelled[0]
    assert line["scope"] == label
    other = line["also_on"]
    assert other["ep"] == "CPUExecutionProvider" and other["same_failure"] is label.startswith("shared")
    assert other["outcome"] == ("fail" if label.startswith("shared") else "pass")
    assert line["outcome"] == "fail"  # a label never changes an outcome


def test_several_re_check_workers_label_every_failure_as_one_worker_does():
    """Failures spread over three re-check workers come back labelled as one worker labels them,
    each exactly once."""
    cases = [replace(BROKEN, id=f"roi_align1/recheck-rounded-{seed}", seed=seed) for seed in range(6)]
    lines = [run_case(case, PLANTED, mapper=tf32_rois) for case in cases]
    assert all(line["outcome"] == "fail" for line in lines)
    labels = {}
    for jobs in (1, 3):
        recheck = Recheck(replace(PLANTED, mapper=DEFAULT_MAPPER), CPU, 60, Expectations(), extra_paths=[HERE],
                          jobs=jobs)
        try:
            recheck.start()  # its workers start with the run, as start_recheck starts them
            for case, line in zip(cases, lines):
                recheck.submit(case, line)
            labelled = list(recheck.finished(wait=True))
            workers = len(recheck._pool._workers) if recheck._pool else 0
        finally:
            recheck.close()
        assert sorted(line["id"] for line in labelled) == sorted(case.id for case in cases)
        assert workers == jobs
        labels[jobs] = {line["id"]: (line["scope"], line["also_on"]["outcome"], line["also_on"]["same_failure"])
                        for line in labelled}
    assert labels[3] == labels[1]
    assert set(labels[1].values()) == {("only on CPUExecutionProvider", "pass", False)}


def test_a_small_machine_keeps_one_re_check_worker_and_a_large_one_gets_more():
    assert all(recheck_jobs(cores, jobs) == 1 for cores, jobs in ((1, 1), (2, 2), (2, 1), (4, 2), (8, 8)))
    assert 1 < recheck_jobs(16, 4) <= MAX_JOBS  # a GPU EP's 4 workers on 16 cores
    assert recheck_jobs(128, 4) == MAX_JOBS


def test_a_passing_case_is_not_rechecked():
    line = run_case(PLAIN, PLANTED, mapper=tf32_rois)
    assert line["outcome"] == "pass" and not Recheck.wants(line)
    assert all(Recheck.wants({"outcome": outcome}) for outcome in ("fail", "crash", "timeout"))


def test_a_recheck_runs_beside_the_run_and_one_that_never_ends_gives_its_line_back_unlabelled():
    """The run goes on while a failure is re-checked: ``submit`` returns at once and ``finished``
    does not wait. Closed before its re-check ends (here the second EP hangs on the case), the line
    comes back as it was submitted, so the run writes it rather than lose it, and no worker stays."""
    from ep_testbed.harness.run.worker import FAULT_ENV

    line = run_case(BROKEN, PLANTED, mapper=tf32_rois)
    hanging = dict(os.environ, **{FAULT_ENV: f"hang={BROKEN.id}"})
    recheck = Recheck(PLANTED, CPU, 600, Expectations(), env=hanging, extra_paths=[HERE])
    recheck.submit(BROKEN, line)
    assert list(recheck.finished()) == []  # nothing waited for: the case hangs there until the close
    assert recheck._thread is not None and recheck._thread.is_alive()
    deadline = time.monotonic() + 120
    while not (recheck._pool and recheck._pool._workers) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the second EP's worker exists (it then hangs on the case)
    procs = [worker.proc for worker in recheck._pool._workers]
    back = recheck.close()
    assert back == [line] and back[0]["scope"] is None and back[0]["also_on"] is None
    assert procs and all(proc.poll() is not None for proc in procs)
    assert list(recheck.finished(wait=True)) == []  # nothing left to wait for


def test_a_run_records_the_labels_and_every_report_carries_them(tmp_path):
    from ep_testbed.reports import render_junit, render_run, render_summary_json

    out = tmp_path / "run"
    options = RunOptions(out_dir=str(out), jobs=1, timeout=60, progress=False, also_on=CPU,
                         header_extra={"also_on": CPU.provider}, extra_paths=(HERE,))
    result = run_cases([BROKEN, PLAIN], PLANTED, options)
    by_id = {line["id"]: line for line in result.lines}
    assert by_id[BROKEN.id]["scope"] == "shared with CPUExecutionProvider"
    assert by_id[PLAIN.id]["scope"] is None
    html = render_run(out).read_text(encoding="utf-8")
    assert "Failures shared with CPUExecutionProvider</h3>" in html
    assert "Failures by where they occur" in html and "#cases?scope=shared%20with%20CPUExecutionProvider" in html
    assert "<b>helper</b>: the operator agrees" in html
    junit = render_junit(out).read_text(encoding="utf-8")
    assert 'name="scope" value="shared with CPUExecutionProvider"' in junit and 'name="cause" value="helper"' in junit
    assert "fail (shared with CPUExecutionProvider)" in junit
    summary = json.loads(render_summary_json(out).read_text(encoding="utf-8"))
    assert summary["by_scope"] == {"shared with CPUExecutionProvider": {"fail": 1}}
    assert summary["failing"][0]["scope"] == "shared with CPUExecutionProvider"
    assert summary["failing"][0]["cause"] == "helper"


def test_also_on_the_ep_under_test_or_a_missing_ep_is_refused(tmp_path, capsys):
    for value, words in (("cpu", "that is the EP under test"), ("nosuch", "not available")):
        code = run_command(parse_args(["run", "--ep", "cpu", "--also-on", value, "--ops", "roi_pooling", "-k",
                                       "pool2x2", "--out", str(tmp_path / value), "--no-progress"]))
        assert code == 2 and words in capsys.readouterr().err


def test_the_cpu_ep_has_no_second_ep_by_default(tmp_path, capsys):
    code = run_command(parse_args(["run", "--ep", "cpu", "--ops", "roi_pooling", "-k", "edge-nan-inf", "--out",
                                   str(tmp_path / "r"), "--no-progress", "--jobs", "1"]))
    capsys.readouterr()
    lines = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert code == 0 and lines[0]["also_on"] is None
    known = [x for x in lines if x["type"] == "case"]
    assert known and all(x["outcome"] == "known" and x["scope"] is None for x in known)
