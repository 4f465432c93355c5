"""``--batch``: the catalog's results lines are the same whether cases share sessions or not
(apart from timings), batches survive Ctrl-C and resume like single cases, and every worker
starts its EP before its first case (the warm-up session)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.core import expectations
from ep_testbed.harness.core.results import dumps, read_run
from ep_testbed.harness.eps.providers import EpSpec, resolve_ep
from ep_testbed.harness.eps.registry import classes_of
from ep_testbed.harness.run.case_run import CaseConfig, warm_up, warm_up_model
from ep_testbed.harness.run.pool import WorkerPool, _Queue
from ep_testbed.harness.run.runner import RunOptions, run_cases
from ep_testbed.harness.run.worker import FAULT_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: What may differ between a case run alone and the same case in a shared session: its timings.
TIMINGS = ("duration_s", "timings")


def _catalog_lines(out, batch: int) -> dict[str, str]:
    """Each catalog line on the CPU EP as written to results.jsonl, without its timings, by id.
    No passing case folders (``keep_worst=0``): which passing cases are among the five worst so
    far depends on the order cases finish in, which two workers never fix, batched or not."""
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    options = RunOptions(out_dir=str(out), jobs=2, timeout=120, progress=False, keep_worst=0, batch=batch, env=env)
    run_cases(build_catalog(), CaseConfig(ep=resolve_ep("cpu")), options, expectations.for_ep("cpu", classes=classes_of("CPUExecutionProvider")))
    _, lines, _ = read_run(str(out))
    return {line["id"]: line for line in lines}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching")
    return _catalog_lines(root / "alone", 1), _catalog_lines(root / "shared", 8)


def test_the_catalog_gives_the_same_lines_batched_and_unbatched_on_the_cpu_ep(catalog):
    alone, shared = catalog
    assert sorted(alone) == sorted(shared) == sorted(c.id for c in build_catalog())

    def without_timings(line):
        return dumps({k: v for k, v in line.items() if k not in TIMINGS})

    differing = [case_id for case_id in alone if without_timings(alone[case_id]) != without_timings(shared[case_id])]
    assert differing == [], differing[:5]


def test_only_failures_and_what_an_expectation_explains_get_a_case_folder(catalog):
    """With no passing case kept (``keep_worst=0``), a folder is written for a failure or a case an
    expectation settles, never for a pass that a broad entry (say ``roi_align*``) merely names."""
    for lines in catalog:
        foldered = {case_id for case_id, line in lines.items() if line["artifacts"]}
        wanted = {case_id for case_id, line in lines.items()
                  if line["outcome"] in ("fail", "error", "known", "fixed", "emulation-gap")
                  or "error" in (line["expected_outcome"] or {})}  # a session refused as an entry says
        assert wanted and foldered == wanted, sorted(foldered ^ wanted)[:5]


def test_batched_cases_really_shared_sessions(catalog):
    alone, shared = catalog
    assert {line["timings"]["shared_by"] for line in alone.values()} == {1}
    sharing = Counter(line["timings"]["shared_by"] for line in shared.values())
    assert sum(n for size, n in sharing.items() if size > 1) > len(shared) // 2, sharing
    assert max(sharing) <= 8


def test_the_queue_sends_halves_first_and_spreads_the_last_cases():
    queue = _Queue(__import__("collections").deque(range(20)))
    assert queue.take(8, 2) == list(range(8))
    queue.split([100, 101, 102])
    assert queue.take(8, 2) == [100] and queue.take(8, 2) == [101, 102]  # halves first, each as it is
    assert queue.take(8, 2) == list(range(8, 14))  # 12 left for 2 workers: 6 each, not 8 and 4
    assert len(queue) == 6


def test_ctrl_c_inside_a_batch_loses_nothing_and_resume_runs_only_the_rest(tmp_path):
    """The second batch of four hangs: Ctrl-C keeps the first four lines; resume runs the other eight."""
    ids = [c.id for c in build_catalog(["max_pooling2"]) if "/grid-" in c.id][:12]
    argv = ["run", "--ops", "max_pooling2", "-k", ",".join(ids), "--jobs", "1", "--batch", "4",
            "--out", str(tmp_path / "r")]
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "ep_testbed.harness.cli", *argv, "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**env, FAULT_ENV: f"hang={ids[5]}"})
    results = tmp_path / "r" / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (results.exists() and results.read_text().count('"type": "case"') >= 4):
        time.sleep(0.1)
    time.sleep(1.0)
    before = [line for line in results.read_text().splitlines() if '"type": "case"' in line]
    assert len(before) == 4  # the first batch; the second has no answer while its session hangs
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    resumed = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", *argv, "--resume"], capture_output=True,
                             text=True, cwd=ROOT, env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "\n8 cases in " in resumed.stdout  # the closing line counts the cases run now
    records = [json.loads(line) for line in results.read_text().splitlines()]
    case_ids = [r["id"] for r in records if r["type"] == "case"]
    assert sorted(case_ids) == sorted(ids)  # every case once: nothing lost, nothing twice
    assert [line for line in results.read_text().splitlines() if '"type": "case"' in line][:4] == before


def test_a_worker_starts_the_ep_before_its_first_case(tmp_path):
    pool = WorkerPool(CaseConfig(ep=resolve_ep("cpu")), 1, 60)
    try:
        line = pool.run_one(build_catalog(["max_pooling2"])[0])
        assert line["outcome"] == "pass"
        log = open(pool._workers[0].log_path, encoding="utf-8").read()
        assert "warm-up session on CPUExecutionProvider" in log
        assert log.index("warm-up session") < log.index("--- case")  # before the first case was sent
    finally:
        pool.close()


def test_a_built_in_gpu_ep_starts_in_a_thread_while_the_worker_imports_the_rest():
    """Only a built-in EP named by ONNX Runtime itself starts before the project is imported: the
    CPU EP has nothing to start, a plugin needs its registration, a device selector the project's
    device choice, and the DirectML host the project's adapter."""
    from ep_testbed.harness.eps.adapters import early_providers
    from ep_testbed.harness.run import worker

    assert early_providers(EpSpec("CUDAExecutionProvider", "cuda", {"device_id": "1"})) == [
        ("CUDAExecutionProvider", {"device_id": "1"})]
    assert early_providers(resolve_ep("cpu")) is None
    assert early_providers(EpSpec("WebGpuExecutionProvider", "webgpu", device="type=GPU")) is None
    assert early_providers(EpSpec("WebGpuExecutionProvider", "webgpu", holder="plugin", library="x.so")) is None
    assert early_providers(EpSpec("DmlExecutionProvider", "dml-wine", holder="dml-wine")) is None
    model = warm_up_model()[0]
    assert worker._early_start(("early-start", None, model)) is None  # nothing to start: no thread
    try:  # a real session in the thread (the CPU EP stands in: it is the EP this machine has)
        thread = worker._early_start(("early-start", [("CPUExecutionProvider", {})], model))
        thread.join(60)
        assert not thread.is_alive() and len(worker._EARLY) == 1
        worker._EARLY.clear()
        failing = worker._early_start(("early-start", [("NoSuchExecutionProvider", {})], model))
        failing.join(60)  # its failure is left to the warm-up to report: the thread just ends
        assert not failing.is_alive() and worker._EARLY == []
    finally:
        worker._EARLY.clear()


def test_a_warm_up_that_fails_says_so_and_leaves_the_cases_to_report_it():
    text = warm_up(CaseConfig(ep=EpSpec("NoSuchExecutionProvider", "nosuch")))
    assert text.startswith("warm-up session failed after ") and "NoSuchExecutionProvider" in text


def test_the_pool_and_the_end_line_say_when_the_first_worker_had_started_its_ep(tmp_path):
    cases = build_catalog(["roi_pooling"])[:6]
    pool = WorkerPool(CaseConfig(ep=resolve_ep("cpu")), 2, 60)
    try:
        assert pool.first_ready_at() is None
        before = time.monotonic()
        assert len(list(pool.run(cases, keep_workers=True))) == 6
        at = pool.first_ready_at()
        assert at is not None and before < at <= time.monotonic()
        assert any(w.ready for w in pool._workers)
    finally:
        pool.close()
    options = RunOptions(out_dir=str(tmp_path / "r"), jobs=2, timeout=120, progress=False, keep_worst=0)
    run_cases(cases, CaseConfig(ep=resolve_ep("cpu")), options, expectations.for_ep("cpu", classes=classes_of("CPUExecutionProvider")))
    _, _, end = read_run(str(tmp_path / "r"))
    assert 0 <= end["warm_up_s"] <= end["elapsed_s"]


def test_keep_worst_keeps_only_the_passing_cases_among_the_worst_when_their_line_came_in(tmp_path):
    """``--keep-worst N`` with cases sent 32 at a time: a worker writes a passing case's folder on
    the bar of when its batch was sent, so the run removes each one that is not among the N worst
    passing cases recorded before it (lines in the order written), and every line's
    ``artifacts`` says whether its folder is there."""
    import heapq

    from ep_testbed.harness.run.case_run import severity

    out = tmp_path / "r"
    cases = build_catalog(["roi_align", "max_pooling2"])
    options = RunOptions(out_dir=str(out), jobs=1, timeout=120, progress=False, keep_worst=3, batch=32)
    run_cases(cases, CaseConfig(ep=resolve_ep("cpu")), options)
    worst: list[float] = []
    kept = []
    for line in (line for line in read_run(str(out))[1] if line.get("type") == "case"):
        folder = out / "cases" / os.path.basename(line["artifacts"] or "-")
        assert folder.is_dir() == bool(line["artifacts"]), line["id"]
        if line["outcome"] in ("pass", "tie-only") and severity(line) > 0:
            if line["artifacts"]:
                assert len(worst) < 3 or severity(line) >= worst[0], (line["id"], severity(line), worst)
                kept.append(line["id"])
            heapq.heappush(worst, severity(line))
            if len(worst) > 3:
                heapq.heappop(worst)
    assert 3 <= len(kept) < 20, kept


def test_a_worker_gets_its_next_case_before_its_answer_is_handed_on():
    """The caller's handling of a line (settling, writing) never holds up the worker that sent it:
    by the time the first line reaches the caller, the one worker already has the second case."""
    cases = build_catalog(["roi_pooling"])[:3]
    pool = WorkerPool(CaseConfig(ep=resolve_ep("cpu")), 1, 60)
    try:
        lines = pool.run(cases, keep_workers=True)
        first = next(lines)
        assert first["id"] == cases[0].id
        assert [case.id for case in pool._workers[0].batch] == [cases[1].id]  # sent while the caller holds line 1
        assert [line["id"] for line in lines] == [case.id for case in cases[1:]]
    finally:
        pool.close()


def test_once_hold_says_so_no_case_is_sent_and_the_run_ends_with_those_sent():
    """A caller on a budget hands over every case and stops sending with ``hold``: the case in
    flight when it said so still gets its line, the cases never sent get none."""
    cases = build_catalog(["roi_pooling"])[:5]
    seen: list[str] = []
    pool = WorkerPool(CaseConfig(ep=resolve_ep("cpu")), 1, 60)
    try:
        for line in pool.run(cases, keep_workers=True, hold=lambda: bool(seen)):
            seen.append(line["id"])
        # the second case went out with the first answer, before the caller had seen a line
        assert seen == [case.id for case in cases[:2]]
        assert [line["id"] for line in pool.run(cases[2:], keep_workers=True)] == [c.id for c in cases[2:]]
    finally:
        pool.close()
