"""Every defect a hostile review found, reproduced as it was reported, each a named test.

The defect numbers are those of the review's list (merge containment, corrupt lines, concurrent
runs, resume, the MaxPool hang, unbounded memory, tracebacks, silent wrong answers, terminal
injection, silent overwrites, scratch folders). Commands run in the sandbox (``sandbox``) where
a hang, a crash or a memory blow-up must be contained, in a real subprocess where processes
and signals are the point.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import run_watch
from hostile_kit import npy_bytes, npz_bytes
from onnx import TensorProto, helper
from sandbox import ROOT

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.graphs.models import resnet_stem
from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.results import case_dir
from ep_testbed.harness.run.worker import FAULT_ENV
from ep_testbed.reference import desc_to_dml
from ep_testbed.reference.max_pooling2 import first_window_without_input

EXAMPLE = ROOT / "examples" / "roi_align1.json"
LOCAL = {"catalog": "local_cases:build_catalog", "mapper": "local_cases:to_onnx_wrong_indices"}


def _local_run(out, *argv):
    """A run of the test catalog in this process (its cases fail, so each has a case folder)."""
    import local_cases

    return run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "--no-progress", *argv]), **LOCAL,
                       worker_paths=(local_cases.HERE,))


def _cli(*argv, env=None, **kwargs):
    """The installed command in a subprocess, without fault injection unless ``env`` asks."""
    clean = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    return subprocess.Popen([sys.executable, "-m", "ep_testbed.harness.cli", *map(str, argv)], cwd=ROOT,
                            env={**clean, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


# --- 1. merge containment --------------------------------------------------------------------

def test_defect_1_merge_refuses_an_artifacts_path_that_leaves_the_shard(sandbox, tmp_path):
    shard = tmp_path / "shard"
    assert _local_run(shard, "-k", "00") == 1
    lines = (shard / "results.jsonl").read_text().splitlines()
    case = json.loads(lines[1])
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "payload.txt").write_text("outside")
    case["artifacts"] = "../p"
    lines[1] = json.dumps(case)
    (shard / "results.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "merged"
    result = sandbox.call(["merge", shard, "--out", out], kind="regression")
    result.check((2,), reads=[shard], writes=[out], temp=sandbox.temp)
    assert "'../p'" in result.stderr and case_dir(case["id"]) in result.stderr
    assert not (tmp_path / "p" / "cases").exists() and sorted(os.listdir(tmp_path / "p")) == ["payload.txt"]


def test_defect_1_merge_never_copies_through_a_link(sandbox, tmp_path):
    shard = tmp_path / "shard"
    assert _local_run(shard, "-k", "00") == 1
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    folder = shard / json.loads((shard / "results.jsonl").read_text().splitlines()[1])["artifacts"]
    (folder / "expected.npz").unlink()
    os.symlink(secret, folder / "expected.npz")
    out = tmp_path / "merged"
    result = sandbox.call(["merge", shard, "--out", out], kind="regression")
    result.check((2,), reads=[shard], writes=[out], secrets=[secret], temp=sandbox.temp)
    assert "symbolic link" in result.stderr
    assert not any(p.read_bytes() == b"TOP SECRET" for p in out.rglob("*") if p.is_file())


# --- 2. corrupt lines ------------------------------------------------------------------------

def test_defect_2_merge_refuses_a_corrupt_line_in_the_middle(sandbox, tmp_path):
    shard = tmp_path / "shard"
    assert _local_run(shard, "-k", "0") == 1
    lines = (shard / "results.jsonl").read_text().splitlines()
    lines[3] = lines[3][:40]
    (shard / "results.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "merged"
    result = sandbox.call(["merge", shard, "--out", out], kind="regression")
    result.check((2,), reads=[shard], writes=[out], temp=sandbox.temp)
    assert "line 4 is damaged" in result.stderr and "would lose a case" in result.stderr
    assert not (out / "results.jsonl").exists()


# --- 3. concurrent runs ----------------------------------------------------------------------

def _ids(n=4):
    return [c.id for c in build_catalog(["max_pooling2"]) if "/grid-" in c.id][:n]


@pytest.mark.slow
def test_defect_3_a_second_run_into_the_same_out_is_refused_naming_the_first(tmp_path):
    ids = _ids()
    out = tmp_path / "r"
    temp = tmp_path / "tmp"
    temp.mkdir()
    argv = ["run", "--ops", "max_pooling2", "-k", ",".join(ids), "--jobs", "1", "--out", out, "--no-progress"]
    first = _cli(*argv, env={FAULT_ENV: f"hang={ids[1]}", "TMPDIR": str(temp)})
    try:
        run_watch.wait_until(run_watch.fault_injected(temp, "hang", ids[1]), "the first run's second case hanging",
                             first)
        second = _cli(*argv)
        _, err = second.communicate(timeout=run_watch.GUARD_S)
        assert second.returncode == 2 and f"in use by another ep-testbed run: pid {first.pid}" in err, err
        assert "Traceback" not in err
    finally:
        if first.poll() is None:
            run_watch.stop(first, out / "results.jsonl")
    text = (out / "results.jsonl").read_text()
    assert text.count('"type": "run"') == 1
    ids_written = [json.loads(l)["id"] for l in text.splitlines() if '"type": "case"' in l]
    assert len(ids_written) == len(set(ids_written)) >= 1


# --- 4. resume -------------------------------------------------------------------------------

@pytest.mark.parametrize("changed, listed", [(["--seed", "1"], "seed: 0 -> 1"),
                                             (["--tol", "fp32:atol=0.5"], "tolerances:")])
def test_defect_4_resume_refuses_another_seed_or_tolerance(sandbox, tmp_path, changed, listed):
    out = tmp_path / "r"
    assert _local_run(out, "-k", "00") == 1
    before = (out / "results.jsonl").read_bytes()
    result = sandbox.call(["-k", "00", "--out", out, "--jobs", "0", "--no-progress", "--resume", *changed],
                          api="run-local", mapper=LOCAL["mapper"], kind="regression")
    result.check((2,), reads=[out], writes=[out], temp=sandbox.temp)
    assert listed in result.stderr and (out / "results.jsonl").read_bytes() == before


@pytest.mark.slow
def test_defect_4_ctrl_c_before_the_first_case_then_resume_leaves_one_header(tmp_path):
    ids = _ids(3)
    out = tmp_path / "r"
    argv = ["run", "--ops", "max_pooling2", "-k", ",".join(ids), "--jobs", "1", "--out", out, "--no-progress"]
    first = _cli(*argv, env={FAULT_ENV: f"hang={ids[0]}"})
    # Ctrl-C as soon as the header is on disk: no case has finished (the first one hangs)
    run_watch.wait_until(run_watch.has_lines(out / "results.jsonl", "run"), "the run header", first)
    run_watch.stop(first, out / "results.jsonl")
    assert first.returncode == 130
    resumed = _cli(*argv, "--resume")
    _, err = resumed.communicate(timeout=run_watch.GUARD_S)
    assert resumed.returncode == 0, err
    records = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records].count("run") == 1
    assert sorted(r["id"] for r in records if r["type"] == "case") == sorted(ids)


def test_defect_4_a_damaged_header_is_refused_the_same_way_every_time(sandbox, tmp_path):
    out = tmp_path / "r"
    assert _local_run(out, "-k", "0") == 1
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(["{\"type\": \"run\", \"ep\"", *lines[1:]]) + "\n")
    for _ in range(2):
        result = sandbox.call(["-k", "0", "--out", out, "--jobs", "0", "--no-progress", "--resume"],
                              api="run-local", mapper=LOCAL["mapper"], kind="regression")
        result.check((2,), reads=[out], writes=[out], temp=sandbox.temp)
        assert "no readable run header (line 1" in result.stderr


# --- 5. the MaxPool hang ---------------------------------------------------------------------

HUGE_MAXPOOL = {"Type": "DML_OPERATOR_MAX_POOLING2",
                "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4294967295]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4294967295]},
                "DimensionCount": 2, "Strides": [1, 1], "WindowSize": [1, 1], "StartPadding": [0, 0],
                "EndPadding": [0, 0], "Dilations": [1, 1]}


def test_defect_5_a_maxpool_of_4294967295_outputs_is_refused_at_once(sandbox, tmp_path):
    path = tmp_path / "desc.json"
    path.write_text(json.dumps(HUGE_MAXPOOL))
    for argv in (["map", path], ["reference", "--desc", path]):
        result = sandbox.call(argv, kind="regression", limit_s=20)
        result.check((2,), reads=[tmp_path], temp=sandbox.temp)
        assert "4294967295" in result.stderr and "--limit elements" in result.stderr
    # Raising the cap skips only the cap: finding a window of padding is arithmetic, not a scan.
    assert first_window_without_input(4294967295, 4294967295, 1, 1, 0, 1) is None
    assert first_window_without_input(4294967295, 4294967295, 2, 1, 0, 1) is None
    assert first_window_without_input(3, 4294967295, 1, 1, 0, 1) == 3


# --- 6. unbounded memory ---------------------------------------------------------------------

def test_defect_6_huge_output_sizes_are_refused_before_allocation(sandbox, tmp_path):
    roi_align = json.loads(EXAMPLE.read_text())
    roi_align["OutputTensor"]["Sizes"] = [5, 3, 65536, 65536]
    roi_pool = desc_to_dml(build_catalog(["roi_pooling"], 0)[0].desc)
    roi_pool["PooledSize"] = {"Height": 100000, "Width": 100000}
    roi_pool["OutputTensor"]["Sizes"][2:] = [100000, 100000]
    for name, desc in (("roi_align", roi_align), ("roi_pooling", roi_pool)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(desc))
        result = sandbox.call(["reference", "--desc", path], kind="regression", mem=512 * 2**20)
        result.check((2,), reads=[tmp_path], temp=sandbox.temp)
        assert "OutputTensor.Sizes" in result.stderr and "this reference computes at most" in result.stderr


def test_defect_6_a_zip_bomb_is_refused_before_it_is_decompressed(sandbox, tmp_path):
    """The review's bomb was 4 MB of zip holding 4 GB of zeros; this one holds 320 MiB (quick to
    build) and the command runs with caps below that, in an address space that could not hold
    it: the refusal comes from the sizes the zip declares, before a byte is decompressed."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (80 * 2**20,)}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("InputTensor.npy", "w", force_zip64=True) as member:
            member.write(npy_bytes(header, b""))
            for _ in range(20):
                member.write(bytes(2**24))
    (tmp_path / "bomb.npz").write_bytes(buffer.getvalue())
    assert (tmp_path / "bomb.npz").stat().st_size < 2**20
    model = tmp_path / "stem.onnx"
    model.write_bytes(resnet_stem().SerializeToString())
    caps = ["--limit", "npz-bytes=256MiB", "--limit", "elements=2**26"]
    for argv in (["reference", "--desc", EXAMPLE, "--inputs", tmp_path / "bomb.npz", *caps],
                 ["model", "run", model, "--inputs", tmp_path / "bomb.npz", "--out", tmp_path / "out", *caps]):
        result = sandbox.call(argv, kind="regression", mem=200 * 2**20)
        result.check((2,), reads=[tmp_path, ROOT / "examples"], writes=[tmp_path / "out"], temp=sandbox.temp)
        assert "more than the" in result.stderr and "--limit" in result.stderr


def test_defect_6_a_declared_input_of_10_to_the_12_elements_is_not_generated(sandbox, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [100000, 100000, 100])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [100000, 100000, 100])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    (tmp_path / "big.onnx").write_bytes(model.SerializeToString())
    result = sandbox.call(["model", "run", tmp_path / "big.onnx", "--out", tmp_path / "out"], kind="regression",
                          mem=512 * 2**20)
    result.check((2,), reads=[tmp_path], writes=[tmp_path / "out"], temp=sandbox.temp)
    assert "1000000000000 elements" in result.stderr and "--shape" in result.stderr


# --- 7. tracebacks ---------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b'{"Type": "\xff\xfe"}', b"[" * 100000 + b"]" * 100000,
                                     b'{"Type": ' + b"9" * 5000 + b"}", b"/dev/zero"])
def test_defect_7_desc_files_that_are_not_utf8_deep_huge_or_not_files(sandbox, tmp_path, content):
    path = "/dev/zero" if content == b"/dev/zero" else tmp_path / "desc.json"
    if path != "/dev/zero":
        path.write_bytes(content)
    for argv in (["map", path], ["reference", "--desc", path]):
        sandbox.call(argv, kind="regression", limit_s=20).check((2,), reads=[tmp_path], temp=sandbox.temp)


def _npz_kinds(tmp_path):
    """The ten kinds of bad NPZ the review fed ``reference --inputs``."""
    good = {"InputTensor": np.zeros((1, 3, 16, 16), np.float32), "ROITensor": np.zeros((1, 1, 5, 4), np.float32),
            "BatchIndicesTensor": np.zeros(5, np.uint32)}
    np.savez(tmp_path / "good.npz", **good)
    raw = (tmp_path / "good.npz").read_bytes()
    kinds = {
        "object": npz_bytes([("InputTensor.npy", npy_bytes({"descr": "|O", "fortran_order": False, "shape": (1,)},
                                                           b"\x80\x04N."))]),
        "pickle": npz_bytes([("InputTensor.npy", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00N.")]),
        "truncated": raw[: len(raw) // 2], "empty": npz_bytes([]), "zero-bytes": b"",
        "lying-header": npz_bytes([("InputTensor.npy", npy_bytes({"descr": "<f4", "fortran_order": False,
                                                                   "shape": (10**12,)}, bytes(16)))]),
        "short-data": npz_bytes([("InputTensor.npy", npy_bytes({"descr": "<f4", "fortran_order": False,
                                                                 "shape": (1, 3, 16, 16)}, bytes(16)))]),
        "structured": npz_bytes([("InputTensor.npy", npy_bytes({"descr": [("a", "<f4")], "fortran_order": False,
                                                                 "shape": (2,)}, bytes(8)))]),
        "text": b"InputTensor = zeros\n",
    }
    paths = {name: tmp_path / f"{name}.npz" for name in kinds}
    for name, data in kinds.items():
        paths[name].write_bytes(data)
    np.save(tmp_path / "plain.npy", good["InputTensor"])
    paths["plain-npy"] = tmp_path / "plain.npy"
    return paths


def test_defect_7_ten_kinds_of_bad_npz_get_one_message_each(sandbox, tmp_path):
    paths = _npz_kinds(tmp_path)
    assert len(paths) == 10
    for name, path in paths.items():
        result = sandbox.call(["reference", "--desc", EXAMPLE, "--inputs", path], kind="regression")
        result.check((2,), reads=[tmp_path, ROOT / "examples"], temp=sandbox.temp)
        assert str(path) in result.stderr, name


def test_defect_7_a_spatial_scale_that_overflows_float32_is_refused(sandbox, tmp_path):
    for field in ("SpatialScaleX", "OutOfBoundsInputValue"):
        desc = json.loads(EXAMPLE.read_text())
        desc[field] = 1e39
        (tmp_path / "d.json").write_text(json.dumps(desc))
        result = sandbox.call(["reference", "--desc", tmp_path / "d.json"], kind="regression")
        result.check((2,), reads=[tmp_path], temp=sandbox.temp)
        assert f"{field} = 1e+39" in result.stderr and "float32" in result.stderr


@pytest.mark.parametrize("argv, words", [(["--timeout", "inf"], "finite"), (["--timeout", "1e10"], "a week"),
                                         (["--timeout", "nan"], "finite"), (["--keep-worst", "-5"], "from 0"),
                                         (["--seed", "-1"], "a seed is")])
def test_defect_7_and_8_flags_out_of_range_are_refused(sandbox, argv, words):
    result = sandbox.call(["run", "--ops", "max_pooling2", "--list", *argv], kind="regression")
    result.check((2,), temp=sandbox.temp)
    assert argv[0] in result.stderr and words in result.stderr


def test_defect_7_a_catalog_that_is_not_a_catalog_is_a_usage_error(capsys):
    code = run_command(parse_args(["run", "--list"]), catalog="json:loads")
    assert code == 2 and "the case catalog json:loads raised TypeError" in capsys.readouterr().err


@pytest.mark.parametrize("edit", [{"errors": [1, 2]}, {"flags": 7}, {"id": None}, {"mismatches": "1" * 400}])
def test_defect_7_type_confused_result_lines(sandbox, tmp_path, edit):
    run = tmp_path / "run"
    assert _local_run(run, "-k", "0") == 1
    lines = (run / "results.jsonl").read_text().splitlines()
    case = json.loads(lines[2])
    case.update(edit)
    text = json.dumps(case)
    if edit.get("mismatches"):
        text = text.replace('"' + "1" * 400 + '"', "1" * 400)  # a 400-digit number, not a string
    lines[2] = text
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    sandbox.call(["report", run], kind="regression").check((0,), reads=[run], writes=[run], temp=sandbox.temp)
    diff = sandbox.call(["diff", run, run, "--out", tmp_path / "d"], kind="regression")
    diff.check((0, 1), reads=[run], writes=[tmp_path / "d"], temp=sandbox.temp)
    merge = sandbox.call(["merge", run, "--out", tmp_path / "m"], kind="regression")
    merge.check((2,), reads=[run], writes=[tmp_path / "m"], temp=sandbox.temp)
    assert "line 3 is damaged" in merge.stderr


def test_defect_7_a_truncated_expected_npz_costs_only_that_case(sandbox, tmp_path):
    run = tmp_path / "run"
    assert _local_run(run, "-k=-00,-01") == 1
    folders = sorted((run / "cases").iterdir())
    (folders[0] / "expected.npz").write_bytes((folders[0] / "expected.npz").read_bytes()[:100])
    result = sandbox.call(["report", run], kind="regression")
    result.check((0,), reads=[run], writes=[run], temp=sandbox.temp)
    html = (run / "report.html").read_text()
    assert "expected.npz unreadable" in html and html.count("data:image/png") > 0


def test_defect_7_a_tampered_baseline_manifest_is_refused(sandbox, tmp_path):
    model = tmp_path / "stem.onnx"
    model.write_bytes(resnet_stem().SerializeToString())
    base = tmp_path / "base"
    assert sandbox.call(["model", "run", model, "--save-baseline", base, "--out", tmp_path / "r0"],
                        kind="regression").code == 0
    manifest = json.loads((base / "manifest.json").read_text())
    for tampered in ({**manifest, "model": "x"}, {**manifest, "inputs": [1]}, {**manifest, "tolerances": {"X": 1}}):
        (base / "manifest.json").write_text(json.dumps(tampered))
        out = tmp_path / f"r{len(os.listdir(tmp_path))}"
        result = sandbox.call(["model", "run", model, "--baseline", base, "--out", out], kind="regression")
        result.check((2,), reads=[tmp_path], writes=[out], temp=sandbox.temp)
        assert "--baseline" in result.stderr and "manifest" in result.stderr


# --- 8. silently wrong -----------------------------------------------------------------------

@pytest.mark.parametrize("table, words", [('{"FLOAT32": {"atol": NaN}}', "NaN is not JSON"),
                                          ('{"FLOAT32": {"atol": "0.1"}}', "must be a finite number"),
                                          ('{"FLOAT32": {"rtol": -1}}', "must be a finite number")])
def test_defect_8_tolerance_files_with_nan_or_strings_are_refused(sandbox, tmp_path, table, words):
    (tmp_path / "tol.json").write_text(table)
    result = sandbox.call(["run", "--list", "--tolerances", tmp_path / "tol.json"], kind="regression")
    result.check((2,), reads=[tmp_path], temp=sandbox.temp)
    assert "--tolerances" in result.stderr and words in result.stderr


def test_defect_8_a_scalar_bool_input_is_generated_as_an_array(sandbox, tmp_path):
    flag = helper.make_tensor_value_info("flag", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.BOOL, [])
    model = helper.make_model(helper.make_graph([helper.make_node("Not", ["flag"], ["y"], name="not")], "g", [flag],
                                                [y]), opset_imports=[helper.make_opsetid("", 16)], ir_version=8)
    (tmp_path / "bool.onnx").write_bytes(model.SerializeToString())
    result = sandbox.call(["model", "run", tmp_path / "bool.onnx", "--out", tmp_path / "out"], kind="regression")
    result.check((0,), reads=[tmp_path], writes=[tmp_path / "out"], temp=sandbox.temp)
    assert "verdict: pass" in result.stdout


# --- 9. terminal injection -------------------------------------------------------------------

def test_defect_9_names_cannot_clear_the_screen_or_forge_a_verdict(sandbox, tmp_path):
    model = resnet_stem()
    model.graph.node[-1].name = "pool\x1b[2J\x1b[H\n  verdict: pass"
    model.graph.output[0].name = "features\r  verdict: pass"
    for node in model.graph.node:
        node.output[:] = ["features\r  verdict: pass" if o == "features" else o for o in node.output]
    (tmp_path / "evil.onnx").write_bytes(model.SerializeToString())
    result = sandbox.call(["model", "run", tmp_path / "evil.onnx", "--out", tmp_path / "out"], kind="regression")
    result.check((0, 1), reads=[tmp_path], writes=[tmp_path / "out"], temp=sandbox.temp)  # no control characters
    assert [line.strip()[:8] for line in result.stdout.splitlines()].count("verdict:") == 1
    assert "\\x1b[2J" in result.stdout and "\\n" in result.stdout


# --- 10. silent overwrites -------------------------------------------------------------------

def test_defect_10_model_run_baseline_and_gen_never_overwrite_silently(sandbox, tmp_path):
    model = tmp_path / "stem.onnx"
    model.write_bytes(resnet_stem().SerializeToString())
    for folder in ("out", "base", "gen"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "keep.txt").write_text("mine")
    for argv, flag in ((["model", "run", model, "--out", tmp_path / "out"], "--out"),
                       (["model", "run", model, "--save-baseline", tmp_path / "base", "--out", tmp_path / "o2"],
                        "--save-baseline"),
                       (["gen", "--op", "roi_pooling", "--out", tmp_path / "gen"], "--out")):
        result = sandbox.call(argv, kind="regression")
        result.check((2,), reads=[tmp_path], writes=[tmp_path], temp=sandbox.temp)
        assert f"{flag} " in result.stderr and "--overwrite" in result.stderr
    for folder in ("out", "base", "gen"):
        assert os.listdir(tmp_path / folder) == ["keep.txt"]
    assert not (tmp_path / "o2").exists()


# --- 11. scratch folders of killed workers ---------------------------------------------------

@pytest.mark.slow
def test_defect_11_killed_workers_leave_no_profiling_folder(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    ids = _ids(4)
    run = _cli("run", "--ops", "max_pooling2", "-k", ",".join(ids), "--jobs", "2", "--timeout", "2",
               "--out", tmp_path / "r", "--no-progress",
               env={"TMPDIR": str(temp), FAULT_ENV: f"segfault={ids[0]};abort={ids[1]};hang={ids[2]}"})
    _, err = run.communicate(timeout=300)
    assert run.returncode == 1, err
    assert [p.name for p in temp.iterdir() if p.name.startswith("ep-testbed")] == []
    shutil.rmtree(tmp_path / "r")


# --- round two: exit codes, atomic artifacts, the smaller ones -------------------------------

SURROGATES = ["\ud800", "a\udfffb", "\udc80" * 3]


def test_round_two_results_holding_lone_surrogates_are_read_by_every_reader(sandbox, tmp_path):
    """Valid JSON (``"\\ud800"``) that UTF-8 cannot hold, in ids, messages and operator names:
    report, ci-summary, diff and merge end in one of their codes, never an encoding traceback."""
    run = tmp_path / "run"
    _local_run(run, "-k", "00")
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    for i, line in enumerate(lines):
        if line["type"] == "case":
            evil = SURROGATES[i % len(SURROGATES)]
            lines[i] = {**line, "id": line["id"] + evil, "message": evil + (line.get("message") or "")}
    (run / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    for argv, codes in ((["report", run], (0,)), (["ci-summary", run], (0,)),
                        (["ci-summary", run, "--format", "annotations"], (0,)),
                        (["diff", run, run, "--out", tmp_path / "d"], (0,)),
                        (["merge", run, "--out", tmp_path / "m"], (2,))):  # an edited id no longer names its folder
        result = sandbox.call(argv, kind="regression")
        result.check(codes, reads=[run], writes=[run, tmp_path / "d", tmp_path / "m"], temp=sandbox.temp)
    html = (run / "report.html").read_text(encoding="utf-8")
    assert any(evil.encode("utf-8", "backslashreplace").decode() in html for evil in SURROGATES)  # shown escaped


@pytest.mark.parametrize("argv, says", [
    (["--tol", "fp32:ulp=" + "9" * 100], "too long"),
    (["--tol", "fp32:atol=1,atol=2"], "atol is given twice"),
    (["--ep-option", "device_id=-1"], "takes a device index"),
])
def test_round_two_options_the_readers_would_refuse_are_refused_before_anything_is_written(sandbox, tmp_path, argv,
                                                                                          says):
    out = tmp_path / "r"
    result = sandbox.call(["run", "--ep", "cpu", "--out", out, *argv], kind="regression")
    result.check((2,), writes=[out], temp=sandbox.temp)
    assert says in result.stderr and not out.exists()
