"""``ep-testbed run`` / ``merge`` as a user runs them: real subprocesses, real exit codes.

The cases come from tests/harness/local_cases.py through the documented ``--catalog`` and
``--mapper`` options, so these tests do not depend on the catalog's current contents.
"""

import json
import os
import signal
import subprocess
import sys
import time


from ep_testbed.harness.results import read_run
from ep_testbed.harness.worker import FAULT_ENV
from local_cases import HERE

ROOT = os.path.dirname(os.path.dirname(HERE))
LOCAL = ["--catalog", "local_cases:build_catalog", "--mapper", "local_cases:to_onnx"]


def cli(*args, env_extra=None, **kwargs):
    env = dict(os.environ, PYTHONPATH=HERE)
    env.pop(FAULT_ENV, None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300, **kwargs)


def popen(*args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=HERE, **(env_extra or {}))
    return subprocess.Popen([sys.executable, "-m", "ep_testbed.harness.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def case_lines(run_dir):
    return read_run(str(run_dir))[1]


def test_run_writes_header_lines_summary_and_exits_zero(tmp_path):
    out = tmp_path / "r"
    p = cli("run", "--ep", "cpu", *LOCAL, "--out", str(out), "--jobs", "2")
    assert p.returncode == 0, p.stderr
    assert "MAX_POOLING2" in p.stdout and "TOTAL" in p.stdout and "cases/s" in p.stdout
    records = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    header, cases, end = records[0], records[1:-1], records[-1]
    assert header["type"] == "run" and header["ep"] == "CPUExecutionProvider" and header["ep_alias"] == "cpu"
    for key in ("ort_flavour", "ort_version", "available_providers", "machine", "seed", "command", "started",
                "tolerances", "case_count"):
        assert key in header, key
    assert header["ort_flavour"] == "onnxruntime" and header["case_count"] == 12
    assert set(header["machine"]) >= {"platform", "python", "cpu", "hostname"}
    assert len(cases) == 12 and end["type"] == "end" and end["interrupted"] is False
    for line in cases:
        assert set(line) >= {"id", "op", "dtype", "tags", "outcome", "ep", "placement", "errors", "worst",
                             "mismatches", "ties", "flags", "message", "expected_outcome", "duration_s", "artifacts"}
        assert line["placement"] == {"pool": "CPUExecutionProvider"}
        assert line["outcome"] == "pass"


def test_existing_results_are_never_overwritten_silently(tmp_path):
    out = tmp_path / "r"
    assert cli("run", *LOCAL, "--out", str(out), "-k", "00").returncode == 0
    again = cli("run", *LOCAL, "--out", str(out), "-k", "00")
    assert again.returncode == 2 and "--resume" in again.stderr


def test_unavailable_ep_names_what_is_installed():
    p = cli("run", "--ep", "dml", *LOCAL)
    assert p.returncode == 2
    assert "DmlExecutionProvider is not available" in p.stderr and "CPUExecutionProvider" in p.stderr


def test_bad_arguments_are_refused_with_the_allowed_values(tmp_path):
    assert "roi_pooling" in cli("run", "--ops", "max_pool", *LOCAL).stderr
    assert "K/N" in cli("run", "--shard", "3/2", *LOCAL).stderr
    assert "KEY=VALUE" in cli("run", "--ep-option", "device_id", *LOCAL).stderr
    p = cli("run", *LOCAL, "-k", "no-such-case", "--out", str(tmp_path / "x"))
    assert p.returncode == 4 and "no case matches" in p.stderr


def test_k_filters_by_substring_and_glob():
    ids = cli("run", *LOCAL, "-k", "w3", "--list").stdout.split()
    assert ids and all("w3" in i for i in ids)
    globbed = cli("run", *LOCAL, "-k", "*-0[0-3]", "--list").stdout.split()
    assert [i[-2:] for i in globbed] == ["00", "01", "02", "03"]
    excluded = cli("run", *LOCAL, "--exclude", "w3", "--list").stdout.split()
    assert set(ids).isdisjoint(excluded) and len(ids) + len(excluded) == 12


def test_failures_make_the_exit_code_non_zero(tmp_path):
    p = cli("run", "--catalog", "local_cases:build_catalog", "--mapper", "local_cases:to_onnx_wrong_indices",
            "--out", str(tmp_path / "r"))
    assert p.returncode == 1
    assert "failures:" in p.stdout and "OutputIndicesTensor" in p.stdout
    lines = case_lines(tmp_path / "r")
    assert all(l["outcome"] == "fail" for l in lines)
    assert all(os.path.exists(tmp_path / "r" / l["artifacts"] / "actual.npz") for l in lines)


def test_inexpressible_is_counted_apart_unless_asked_to_fail(tmp_path):
    args = ("run", "--catalog", "local_cases:build_catalog", "--mapper", "local_cases:to_onnx_inexpressible_if_3x3")
    p = cli(*args, "--out", str(tmp_path / "a"))
    assert p.returncode == 0 and "inexpressible" in p.stdout
    lines = case_lines(tmp_path / "a")
    inexpressible = [l for l in lines if l["outcome"] == "inexpressible"]
    assert inexpressible and all("-w3-" in l["id"] and "ONNX cannot express" in l["message"] for l in inexpressible)
    assert cli(*args, "--out", str(tmp_path / "b"), "--fail-on-inexpressible").returncode == 1


def _expectations(tmp_path, outcome):
    path = tmp_path / f"exp-{outcome}.json"
    path.write_text(json.dumps({"expectations": [
        {"id": "max_pooling2/local-w2-*", "outcome": outcome, "reason": "test", "link": "https://example.org/1"}]}))
    return str(path)


def test_an_expected_failure_is_known_and_keeps_ci_green(tmp_path):
    p = cli("run", "--catalog", "local_cases:build_catalog", "--mapper", "local_cases:to_onnx_wrong_indices",
            "-k", "w2", "--expectations", _expectations(tmp_path, "fail"), "--out", str(tmp_path / "r"))
    assert p.returncode == 0, p.stdout
    lines = case_lines(tmp_path / "r")
    assert lines and all(l["outcome"] == "known" for l in lines)
    assert lines[0]["expected_outcome"]["link"] == "https://example.org/1"


def test_an_expected_failure_that_passes_is_fixed_and_fails_ci(tmp_path):
    p = cli("run", *LOCAL, "-k", "w2", "--expectations", _expectations(tmp_path, "fail"), "--out", str(tmp_path / "r"))
    assert p.returncode == 1
    lines = case_lines(tmp_path / "r")
    assert lines and all(l["outcome"] == "fixed" for l in lines)
    assert all(os.path.exists(tmp_path / "r" / l["artifacts"] / "expected.npz") for l in lines)


def test_shards_are_disjoint_balanced_and_merge_like_an_unsharded_run(tmp_path):
    shards = [cli("run", *LOCAL, "--shard", f"{k}/3", "--list").stdout.split() for k in (1, 2, 3)]
    everything = cli("run", *LOCAL, "--list").stdout.split()
    assert sorted(sum(shards, [])) == sorted(everything)
    assert {len(s) for s in shards} == {4}
    for k in (1, 2, 3):
        assert cli("run", *LOCAL, "--shard", f"{k}/3", "--out", str(tmp_path / f"s{k}")).returncode == 0
    full = tmp_path / "full"
    assert cli("run", *LOCAL, "--out", str(full)).returncode == 0
    partial = cli("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "partial"))
    assert partial.returncode == 2 and "3/3 missing" in partial.stderr
    merged = tmp_path / "merged"
    m = cli("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), str(tmp_path / "s3"), "--out", str(merged))
    assert m.returncode == 0, m.stderr
    head_m, lines_m, end_m = read_run(str(merged))
    head_f, lines_f, end_f = read_run(str(full))
    volatile = {"duration_s", "placement_source"}
    strip = lambda lines: sorted(({k: v for k, v in l.items() if k not in volatile} for l in lines), key=lambda l: l["id"])
    assert strip(lines_m) == strip(lines_f)
    assert end_m["counts"] == end_f["counts"] and head_m["case_count"] == head_f["case_count"] == 12
    assert [s["shard"] for s in head_m["shards"]] == ["1/3", "2/3", "3/3"]


def test_merge_refuses_overlapping_runs(tmp_path):
    for name in ("a", "b"):
        assert cli("run", *LOCAL, "-k", "00", "--out", str(tmp_path / name)).returncode == 0
    p = cli("merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m"))
    assert p.returncode == 2 and "is in both" in p.stderr


def test_ctrl_c_keeps_every_finished_case_and_resume_completes_the_run(tmp_path):
    out = tmp_path / "r"
    proc = popen("run", *LOCAL, "--jobs", "1", "--timeout", "120", "--out", str(out),
                 env_extra={FAULT_ENV: "hang=*-07"})
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until cases 00..06 are on disk and 07 hangs
        if results.exists() and results.read_text().count('"type": "case"') >= 7:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    before = [l for l in results.read_text().splitlines() if '"type": "case"' in l]
    assert len(before) == 7
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    records = [json.loads(l) for l in results.read_text().splitlines()]
    assert records[-1]["type"] == "end" and records[-1]["interrupted"] is True
    assert [l for l in results.read_text().splitlines() if '"type": "case"' in l] == before  # nothing lost or torn

    resumed = cli("run", *LOCAL, "--jobs", "1", "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "5 cases run" in resumed.stdout  # only the unfinished ones ran
    text = results.read_text().splitlines()
    assert text[1:8] == before  # the finished lines are kept verbatim
    records = [json.loads(l) for l in text]
    ids = [r["id"] for r in records if r["type"] == "case"]
    assert len(ids) == len(set(ids)) == 12
    assert [r["type"] for r in records].count("run") == 1 and records[-1] == {**records[-1], "interrupted": False}
