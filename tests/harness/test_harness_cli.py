"""``ep-testbed run`` / ``merge``: exit codes, results, selection, shards, Ctrl-C and resume.

Most tests run the handler in this process on tests/harness/local_cases.py through the Python
API's seams (``run_command(args, catalog=..., mapper=..., worker_paths=...)``: the workers, still
separate processes, import the local mapper by name), so they do not depend on the catalog's
current contents. The tests of what a user sees from a shell (exit codes, one message and no
traceback, Ctrl-C) run the real command in a subprocess with documented flags only.
"""

import json
import os
import signal
import subprocess
import sys

import pytest
import run_watch
from local_cases import HERE

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli import main, parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.run.worker import FAULT_ENV

ROOT = os.path.dirname(os.path.dirname(HERE))
LOCAL = {"catalog": "local_cases:build_catalog", "mapper": "local_cases:to_onnx", "worker_paths": (HERE,)}


def run_local(capsys, *argv, **seams):
    """``ep-testbed run <argv>`` in this process on the local cases; (exit code, stdout, stderr)
    (argparse's refusals exit 2, as from a shell). One worker unless ``argv`` says ``--jobs``: a
    handful of cases gains nothing from a second, and each costs the suite a process start."""
    if not any(arg == "--jobs" or arg.startswith("--jobs=") for arg in argv):
        argv = (*argv, "--jobs", "1")
    try:
        code = run_command(parse_args(["run", *argv]), **{**LOCAL, **seams})
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def listed(capsys, *argv):
    code, out, err = run_local(capsys, *argv, "--list")
    assert code == 0, err
    return out.split()


def merge(capsys, *argv):
    code = main(["merge", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli(*args, env_extra=None):
    """The installed command in a subprocess, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def case_lines(run_dir):
    return read_run(str(run_dir))[1]


def test_run_writes_header_lines_summary_and_exits_zero(tmp_path, capsys):
    out = tmp_path / "r"
    code, stdout, stderr = run_local(capsys, "--ep", "cpu", "--out", str(out), "--jobs", "2")
    assert code == 0, stderr
    assert "MAX_POOLING2" in stdout and "TOTAL" in stdout and "cases/s" in stdout
    records = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    header, cases, end = records[0], records[1:-1], records[-1]
    assert header["type"] == "run" and header["ep"] == "CPUExecutionProvider" and header["ep_alias"] == "cpu"
    for key in ("ort_flavour", "ort_version", "available_providers", "machine", "seed", "command", "started",
                "tolerances", "case_count"):
        assert key in header, key
    assert header["ort_flavour"] == "onnxruntime" and header["case_count"] == 12
    assert header["command"] == f"ep-testbed run --ep cpu --out {out} --jobs 2"
    assert header["selection"]["catalog"] == "local_cases:build_catalog"
    assert set(header["machine"]) >= {"platform", "python", "cpu", "hostname"}
    assert len(cases) == 12 and end["type"] == "end" and end["interrupted"] is False
    for line in cases:
        assert set(line) >= {"id", "op", "dtype", "tags", "outcome", "ep", "placement", "errors", "worst",
                             "mismatches", "ties", "flags", "message", "expected_outcome", "duration_s", "artifacts"}
        assert line["placement"] == {"pool": "CPUExecutionProvider"}
        assert line["outcome"] == "pass"


def test_tol_and_tolerances_reach_the_run_header(tmp_path, capsys):
    table = tmp_path / "tol.json"
    table.write_text(json.dumps({"FLOAT16": {"atol": 0.5, "rtol": 0, "ulp": 1}}))
    out = tmp_path / "r"
    code, _, stderr = run_local(capsys, "--tolerances", str(table), "--tol", "fp32:atol=0.25", "-k", "00",
                                "--out", str(out))
    assert code == 0, stderr
    by_dtype = read_run(str(out))[0]["tolerances"]["by_dtype"]
    assert by_dtype["FLOAT16"] == {"atol": 0.5, "rtol": 0, "ulp": 1}
    assert by_dtype["FLOAT32"]["atol"] == 0.25 and by_dtype["FLOAT32"]["rtol"] == 1e-4  # the rest stays default


@pytest.mark.slow
def test_existing_results_are_never_overwritten_silently(tmp_path, capsys):
    out = tmp_path / "r"
    assert run_local(capsys, "--out", str(out), "-k", "00")[0] == 0
    code, _, stderr = run_local(capsys, "--out", str(out), "-k", "00")
    assert code == 2 and "--resume" in stderr


def test_bad_arguments_are_refused_with_the_allowed_values(tmp_path, capsys):
    for argv, words in ((["--ops", "max_pool"], "roi_pooling"), (["--shard", "3/2"], "K/N"),
                        (["--ep-option", "device_id"], "KEY=VALUE"), (["--jobs", "-1"], "from 0 to"),
                        (["--timeout", "nan"], "finite number of seconds"), (["--timeout", "inf"], "finite"),
                        (["--timeout", "1e10"], "<= 604800"), (["--timeout", "0"], "> 0"),
                        (["--keep-worst", "-5"], "from 0 to"), (["--seed", "-1"], "a seed is a whole number"),
                        (["--tol", "fp16:atol"], "atol=X"), (["--tolerances", str(tmp_path / "none.json")],
                                                             "cannot read it")):
        code, _, stderr = run_local(capsys, *argv)
        assert code == 2 and words in stderr, (argv, stderr)
    code, _, stderr = run_local(capsys, "-k", "no-such-case", "--out", str(tmp_path / "x"))
    assert code == 4 and "no case matches" in stderr


def test_a_catalog_or_mapper_that_cannot_be_loaded_is_a_usage_error(capsys):
    code, _, stderr = run_local(capsys, catalog="local_cases:no_such_function")
    assert code == 2 and "the case catalog local_cases:no_such_function is not available" in stderr
    code, _, stderr = run_local(capsys, "-k", "00", mapper="no_such_module:to_onnx")
    assert code == 2 and "the mapper no_such_module:to_onnx cannot be loaded" in stderr


def test_k_filters_by_substring_and_glob(capsys):
    ids = listed(capsys, "-k", "w3")
    assert ids and all("w3" in i for i in ids)
    globbed = listed(capsys, "-k", "*-0[0-3]")
    assert [i[-2:] for i in globbed] == ["00", "01", "02", "03"]
    excluded = listed(capsys, "--exclude", "w3")
    assert set(ids).isdisjoint(excluded) and len(ids) + len(excluded) == 12


@pytest.mark.slow
def test_failures_make_the_exit_code_non_zero(tmp_path, capsys):
    code, stdout, _ = run_local(capsys, "--out", str(tmp_path / "r"), mapper="local_cases:to_onnx_wrong_indices")
    assert code == 1
    assert "failures:" in stdout and "OutputIndicesTensor" in stdout
    lines = case_lines(tmp_path / "r")
    assert all(l["outcome"] == "fail" for l in lines)
    assert all(os.path.exists(tmp_path / "r" / l["artifacts"] / "actual.npz") for l in lines)


@pytest.mark.slow
def test_inexpressible_is_counted_apart_unless_asked_to_fail(tmp_path, capsys):
    mapper = "local_cases:to_onnx_inexpressible_if_3x3"
    code, stdout, _ = run_local(capsys, "--out", str(tmp_path / "a"), mapper=mapper)
    assert code == 0 and "inexpressible" in stdout
    lines = case_lines(tmp_path / "a")
    inexpressible = [l for l in lines if l["outcome"] == "inexpressible"]
    assert inexpressible and all("-w3-" in l["id"] and "ONNX cannot express" in l["message"] for l in inexpressible)
    assert run_local(capsys, "--out", str(tmp_path / "b"), "--fail-on-inexpressible", mapper=mapper)[0] == 1


def _expectations(tmp_path, **entry):
    path = tmp_path / "expectations.json"
    path.write_text(json.dumps({"expectations": [{"reason": "test", "link": "https://example.org/1", **entry}]}))
    return str(path)


def test_an_expected_failure_is_known_and_keeps_ci_green(tmp_path):
    """A real divergence of the CPU EP (float32 bin ends) under an entry naming the reading that
    computes it: every failing element is reproduced, so the case is known and CI stays green."""
    exp = _expectations(tmp_path, id="roi_pooling/edge-float32-bins", outcome="fail", readings=["float32-bins"])
    done = cli("run", "--ops", "roi_pooling", "-k", "edge-float32-bins", "--expectations", exp, "--out",
               str(tmp_path / "r"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = case_lines(tmp_path / "r")
    assert lines and all(l["outcome"] == "known" for l in lines)
    assert lines[0]["expected_outcome"]["link"] == "https://example.org/1"
    assert lines[0]["expected_outcome"]["explained_by"] == {"float32-bins": lines[0]["mismatches"]}


def test_an_expectation_whose_readings_do_not_reproduce_a_failure_leaves_it_failed(tmp_path, capsys):
    """A failure of the right case but another cause (a mapper that shifts every index) is not
    known: no reading the entry names reproduces its elements, so the case fails and says so."""
    exp = _expectations(tmp_path, id="max_pooling2/local-w2-*", outcome="fail",
                        readings=["lowest-start", "nan-first-wins", "nan-propagates", "lowest-start-index-minus-one"])
    code, stdout, _ = run_local(capsys, "-k", "w2", "--expectations", exp, "--out", str(tmp_path / "r"),
                                mapper="local_cases:to_onnx_wrong_indices")
    assert code == 1, stdout
    lines = case_lines(tmp_path / "r")
    assert lines and all(l["outcome"] == "fail" and l["expected_outcome"] is None for l in lines)
    assert all("no reading" in l["message"] or "match none of the readings" in l["message"] for l in lines)


def test_an_expected_failure_that_passes_is_fixed_and_fails_ci(tmp_path, capsys):
    exp = _expectations(tmp_path, id="max_pooling2/local-w2-*", outcome="fail", readings=["nan-propagates"])
    code, _, _ = run_local(capsys, "-k", "w2", "--expectations", exp, "--out", str(tmp_path / "r"))
    assert code == 1
    lines = case_lines(tmp_path / "r")
    assert lines and all(l["outcome"] == "fixed" for l in lines)
    assert all(os.path.exists(tmp_path / "r" / l["artifacts"] / "expected.npz") for l in lines)


@pytest.mark.slow
def test_shards_are_disjoint_balanced_and_merge_like_an_unsharded_run(tmp_path, capsys):
    shards = [listed(capsys, "--shard", f"{k}/3") for k in (1, 2, 3)]
    assert sorted(sum(shards, [])) == sorted(listed(capsys))
    assert {len(s) for s in shards} == {4}
    for k in (1, 2, 3):
        assert run_local(capsys, "--shard", f"{k}/3", "--out", str(tmp_path / f"s{k}"))[0] == 0
    full = tmp_path / "full"
    assert run_local(capsys, "--out", str(full))[0] == 0
    code, _, stderr = merge(capsys, str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "partial"))
    assert code == 2 and "3/3 missing" in stderr
    merged = tmp_path / "merged"
    code, _, stderr = merge(capsys, str(tmp_path / "s1"), str(tmp_path / "s2"), str(tmp_path / "s3"),
                            "--out", str(merged))
    assert code == 0, stderr
    head_m, lines_m, end_m = read_run(str(merged))
    head_f, lines_f, end_f = read_run(str(full))
    volatile = {"duration_s", "timings", "placement_source"}

    def strip(lines):
        """Lines without what varies run to run: times, and which passing cases got a keep-worst
        folder (that depends on the order several workers finish in, DESIGN.md "Same lines")."""
        kept = ({k: v for k, v in l.items() if k not in volatile and not (k == "artifacts" and l["outcome"] == "pass")}
                for l in lines)
        return sorted(kept, key=lambda l: l["id"])
    assert strip(lines_m) == strip(lines_f)
    assert end_m["counts"] == end_f["counts"] and head_m["case_count"] == head_f["case_count"] == 12
    assert [s["shard"] for s in head_m["shards"]] == ["1/3", "2/3", "3/3"]


@pytest.mark.slow
def test_merge_refuses_overlapping_runs(tmp_path, capsys):
    for name in ("a", "b"):
        assert run_local(capsys, "-k", "00", "--out", str(tmp_path / name))[0] == 0
    code, _, stderr = merge(capsys, str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m"))
    assert code == 2 and "is in both" in stderr


# --- the real command in a subprocess: documented flags only ---------------------------------

@pytest.mark.slow
def test_case_source_and_mapper_are_not_command_line_options():
    for flag in ("--catalog", "--mapper"):
        p = cli("run", flag, "local_cases:build_catalog", "--list")
        assert p.returncode == 2 and f"unrecognized arguments: {flag}" in p.stderr and "Traceback" not in p.stderr


def test_unavailable_ep_names_what_is_installed():
    p = cli("run", "--ep", "dml", "--ops", "max_pooling2")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "DmlExecutionProvider is not available" in p.stderr and "CPUExecutionProvider" in p.stderr


@pytest.mark.slow
def test_exit_codes_of_the_real_command(tmp_path):
    bad = cli("run", "--tol", "fp16:speed=1", "--list")
    assert bad.returncode == 2 and "must be atol=X, rtol=X or ulp=N" in bad.stderr and "Traceback" not in bad.stderr
    none = cli("run", "--ops", "roi_pooling", "-k", "no-such-case", "--out", str(tmp_path / "n"))
    assert none.returncode == 4 and "no case matches" in none.stderr
    known = "roi_pooling/edge-float32-bins"  # a CPU divergence listed in harness/expectations/shared.json
    assert known in {c.id for c in build_catalog(["roi_pooling"])}
    ok = cli("run", "--ops", "roi_pooling", "-k", f"{known},grid-fp32", "--strict-tolerance", "--out",
             str(tmp_path / "ok"))
    assert ok.returncode == 0, ok.stdout + ok.stderr  # the CPU EP's known divergence is `known`
    failed = cli("run", "--ops", "roi_pooling", "-k", known, "--no-expectations", "--strict-tolerance", "--out",
                 str(tmp_path / "f"))
    assert failed.returncode == 1 and "failures:" in failed.stdout and known in failed.stdout
    # Its float32 bin end is a reading of its own, not a rounding the default precision model allows.
    plain = cli("run", "--ops", "roi_pooling", "-k", known, "--no-expectations", "--out", str(tmp_path / "d"))
    assert plain.returncode == 1 and "knife-edge" not in plain.stdout, plain.stdout + plain.stderr


def _twelve_passing_ids():
    ids = [c.id for c in build_catalog(["max_pooling2"]) if "/grid-" in c.id][:12]
    assert len(ids) == 12
    return ids


POSIX_SIGNALS = pytest.mark.skipif(os.name == "nt", reason="POSIX signals: Windows delivers Ctrl-C as a console "
                                   "event and a cancelled job as TerminateProcess, which no handler sees")


@pytest.mark.slow
@POSIX_SIGNALS
def test_ctrl_c_keeps_every_finished_case_and_resume_completes_the_run(tmp_path):
    ids = _twelve_passing_ids()
    argv = ["run", "--ops", "max_pooling2", "-k", ",".join(ids), "--jobs", "1", "--out", str(tmp_path / "r")]
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "ep_testbed.harness.cli", *argv, "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**env, FAULT_ENV: f"hang={ids[7]}", "TMPDIR": str(temp)})
    results = tmp_path / "r" / "results.jsonl"
    # the first seven cases are on disk and the eighth is running (and hangs): the worker says so
    run_watch.wait_until(run_watch.fault_injected(temp, "hang", ids[7]), "the eighth case hanging", proc)
    # the worker gets the eighth case before the parent writes the seventh's line: it may follow
    run_watch.wait_until(run_watch.has_lines(results, "case", 7), "the seven lines before", proc)
    before = run_watch.lines_of(results, "case")
    assert len(before) == 7
    stdout, stderr = run_watch.stop(proc, results, signal.SIGINT)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    records = [json.loads(l) for l in results.read_text().splitlines()]
    assert records[-1]["type"] == "end" and records[-1]["interrupted"] is True
    assert [l for l in results.read_text().splitlines() if '"type": "case"' in l] == before  # nothing lost or torn

    resumed = cli(*argv, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "\n5 cases in " in resumed.stdout  # only the unfinished ones ran (the closing line counts them)
    text = results.read_text().splitlines()
    assert text[1:8] == before  # the finished lines are kept verbatim
    records = [json.loads(l) for l in text]
    case_ids = [r["id"] for r in records if r["type"] == "case"]
    assert sorted(case_ids) == sorted(ids) and len(set(case_ids)) == 12
    assert [r["type"] for r in records].count("run") == 1 and records[-1] == {**records[-1], "interrupted": False}


@pytest.mark.slow
@POSIX_SIGNALS
def test_a_cancelled_ci_job_stops_like_ctrl_c(tmp_path):
    ids = _twelve_passing_ids()
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "ep_testbed.harness.cli", "run", "--ops", "max_pooling2", "-k",
                             ",".join(ids), "--jobs", "1", "--out", str(tmp_path / "r")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**env, FAULT_ENV: f"hang={ids[2]}", "TMPDIR": str(temp)})
    results = tmp_path / "r" / "results.jsonl"
    run_watch.wait_until(run_watch.fault_injected(temp, "hang", ids[2]), "the third case hanging", proc)
    _, stderr = run_watch.stop(proc, results, signal.SIGTERM)  # what a CI runner sends when a job is cancelled
    assert proc.returncode == 143, stderr  # 128 + SIGTERM: told apart from a Ctrl-C (core.exit_codes)
    assert json.loads(results.read_text().splitlines()[-1])["interrupted"] is True
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["interrupted"] is True
    assert "Traceback" not in stderr
