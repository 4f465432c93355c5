"""Inputs inside every documented cap that outgrow the machine: each command runs in the sandbox
under an address-space limit (``RLIMIT_AS``: the sandbox server's own size, which has every
module a command imports loaded, plus the ``mem`` bytes a probe gives it) and must end with one
message and exit 2, or (inside a run) mark the case with its memory need and go on; never exit 0
or 1 for it, never a traceback or a ``MemoryError`` (``Outcome.check``).

The probes are the issue's, scaled so that each is fast and its outcome fixed: a limit far below
what the input needs (so the refusal is certain) or far above what the fixed code needs and far
below what the old code needed (so the old code failed for certain).
"""

from __future__ import annotations

import json
import shutil
import zipfile

import numpy as np
import pytest

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.results import read_run, safe_id
from ep_testbed.harness.fuzz import corpus
from ep_testbed.reference import desc_to_dml

pytestmark = pytest.mark.slow  # every test here runs commands in the sandbox: -m "not slow" skips them

MiB = 2**20


def _maxpool(sizes, dtype="FLOAT32"):
    """A MAX_POOLING2 desc (DML spelling) with a 1x1 window over ``sizes``: output as large as the input."""
    return {"Type": "DML_OPERATOR_MAX_POOLING2", "InputTensor": {"DataType": dtype, "Sizes": list(sizes)},
            "OutputTensor": {"DataType": dtype, "Sizes": list(sizes)}, "DimensionCount": 2, "Strides": [1, 1],
            "WindowSize": [1, 1], "StartPadding": [0, 0], "EndPadding": [0, 0], "Dilations": [1, 1]}


def _zero_npz(path, name, shape, dtype=np.float32):
    """An NPZ whose one member ``name`` is a zero array of ``shape`` (deflated: a few MB on disk
    for hundreds of MB declared), written a chunk at a time."""
    header = np.lib.format.header_data_from_array_1_0(np.zeros(0, dtype))
    header["shape"] = tuple(shape)
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, header)
            chunk = bytes(16 * MiB)
            for start in range(0, nbytes, len(chunk)):
                member.write(chunk[:min(len(chunk), nbytes - start)])


def _message(outcome):
    """The one message of an exit 2 (its first line)."""
    return outcome.stderr.strip().splitlines()[0]


# --- reference ------------------------------------------------------------------------------

def test_reference_on_a_2_28_element_max_pool_is_refused_before_allocating(sandbox, tmp_path):
    desc = tmp_path / "big.json"
    desc.write_text(json.dumps(_maxpool([1, 1, 16384, 16384])))  # 2**28 elements: the cap itself
    out = sandbox.call(["reference", "--desc", desc], kind="memory", mem=1024 * MiB)
    out.check((2,), reads=[tmp_path], temp=sandbox.temp)
    assert str(desc) in _message(out) and "needs about 2048 MiB" in _message(out), out.describe()
    assert "Note: try a smaller case" in out.stderr, out.describe()


def test_reference_inputs_npz_is_checked_against_memory_before_decompressing(sandbox, tmp_path):
    desc = tmp_path / "small.json"
    desc.write_text(json.dumps(_maxpool([1, 1, 4, 4])))
    npz = tmp_path / "big.npz"
    _zero_npz(npz, "InputTensor", (1, 1, 8192, 16384))  # 512 MiB declared: inside the 2 GiB npz-bytes cap
    out = sandbox.call(["reference", "--desc", desc, "--inputs", npz], kind="memory", mem=384 * MiB)
    out.check((2,), reads=[tmp_path], temp=sandbox.temp)
    assert f"--inputs {npz}: decompressing its arrays needs about" in _message(out), out.describe()


# --- results readers ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    """A finished run of the test catalog whose case lines are repeated under new ids up to
    about 60 MB: in the results-bytes cap, about 240 MB once parsed whole."""
    import local_cases

    out = tmp_path_factory.mktemp("big") / "run"
    code = run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "-k=-00,-01,-02", "--no-progress"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx",
                       worker_paths=(local_cases.HERE,))
    assert code == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    header, cases, end = lines[0], [json.loads(x) for x in lines[1:-1]], lines[-1]
    shutil.rmtree(out / "cases", ignore_errors=True)
    with open(out / "results.jsonl", "w") as f:
        f.write(header + "\n")
        n = 0
        while f.tell() < 60 * 10**6:
            for case in cases:
                f.write(json.dumps({**case, "id": f"{case['id']}-{n}", "artifacts": None}) + "\n")
            n += 1
        f.write(end + "\n")
    return out


def test_diff_of_two_large_runs_holds_only_what_it_compares(sandbox, big_run, tmp_path):
    other = tmp_path / "b"
    shutil.copytree(big_run, other)
    out = sandbox.call(["diff", big_run, other, "--out", tmp_path / "d"], kind="memory", mem=200 * MiB)
    out.check((0,), reads=[big_run, other], writes=[tmp_path / "d"], temp=sandbox.temp)
    assert (tmp_path / "d" / "diff.txt").is_file() and "unchanged" in out.stdout, out.describe()


def _rewritten(big_run, folder, lines_of):
    """A copy of ``big_run``'s header and end line around the case lines ``lines_of(cases)``
    yields (``cases``: the run's parsed case lines), written to ``folder``."""
    lines = (big_run / "results.jsonl").read_text().splitlines()
    header, end = lines[0], lines[-1]
    cases = [json.loads(x) for x in lines[1:] if json.loads(x)["type"] == "case"][:3]
    folder.mkdir()
    with open(folder / "results.jsonl", "w") as f:
        f.write(header + "\n")
        for line in lines_of(cases):
            f.write(json.dumps(line) + "\n")
        f.write(end + "\n")
    return folder


@pytest.fixture(scope="module")
def fat_run(big_run, tmp_path_factory):
    """About 60 MB of 2000 case lines whose message (30 kB) and worst elements make each line
    big, a third of them failing: parsed whole it needs about 240 MB (``PARSED_BYTES_PER_BYTE``),
    what ``report`` and ``merge`` checked against free memory and refused before they streamed."""
    def fat(cases):
        for n in range(2000):
            case = cases[n % len(cases)]
            worst = [{"output": "OutputTensor", "index": [0, 0, n % 7, i], "expected": 1.0, "actual": 2.0,
                      "abs": 1.0, "rel": 1.0, "ulp": 8388608} for i in range(40)]
            yield {**case, "id": f"{case['id']}-fat{n}", "artifacts": None, "worst": worst,
                   "outcome": "fail" if n % 3 == 0 else case["outcome"], "message": f"case {n}: " + "x" * 30_000}
    return _rewritten(big_run, tmp_path_factory.mktemp("fat") / "run", fat)


@pytest.fixture(scope="module")
def many_run(big_run, tmp_path_factory):
    """About 35 MB of 300,000 small case lines, each with its own id and tag: even a few keys
    of each line held for every case outgrow a 64 MiB address space."""
    def many(cases):
        for n in range(300_000):
            yield {"type": "case", "id": f"many-{n}", "op": cases[0]["op"], "outcome": "pass", "tags": {"n": str(n)}}
    return _rewritten(big_run, tmp_path_factory.mktemp("many") / "run", many)


@pytest.mark.parametrize("command", ["report", "merge"])
def test_report_and_merge_stream_a_run_too_large_to_hold_whole(sandbox, fat_run, tmp_path, command):
    """Exit 0 under a limit the whole parse does not fit (the old readers refused this file with
    exit 2 before parsing it); the merged file holds every case line as the run has it."""
    from ep_testbed.harness.core.results import PARSED_BYTES_PER_BYTE

    assert (fat_run / "results.jsonl").stat().st_size * PARSED_BYTES_PER_BYTE > 200 * MiB  # the whole parse
    run = tmp_path / "run"
    shutil.copytree(fat_run, run)
    argv = ["report", run] if command == "report" else ["merge", run, "--out", tmp_path / "m"]
    out = sandbox.call(argv, kind="memory", mem=160 * MiB)
    out.check((0, 1), reads=[run], writes=[run, tmp_path / "m"], temp=sandbox.temp)
    made = run if command == "report" else tmp_path / "m"
    summary = json.loads((made / "summary.json").read_text())
    assert summary["total"] == 2000 and summary["bad"] == 667, out.describe()
    assert (made / "junit.xml").read_text().count("<testcase ") == 2000
    assert (made / "report.html").read_text().count('<article class="case') == 500  # --max-details' default
    if command == "merge":
        cases = lambda folder: sorted(line for line in (folder / "results.jsonl").read_text().splitlines()
                                      if '"type": "case"' in line[:20])  # noqa: E731
        assert cases(made) == cases(run)


@pytest.mark.parametrize("command", ["report", "merge"])
def test_report_and_merge_of_a_run_whose_small_view_does_not_fit_are_one_message(sandbox, many_run, tmp_path,
                                                                                   command):
    run = tmp_path / "run"
    shutil.copytree(many_run, run)
    argv = ["report", run] if command == "report" else ["merge", run, "--out", tmp_path / "m"]
    out = sandbox.call(argv, kind="memory", mem=64 * MiB)
    out.check((2,), reads=[run], writes=[run, tmp_path / "m"], temp=sandbox.temp)
    assert "results.jsonl: reading its lines" in _message(out) and "needs more memory" in _message(out), \
        out.describe()
    assert not (tmp_path / "m" / "results.jsonl").exists() and not (run / "report.html").exists()


# --- run ------------------------------------------------------------------------------------

def _corpus_case(root, case_id, desc, arrays=None, big=None):
    """A corpus case folder under ``root``: ``desc`` (DML spelling) with ``arrays`` saved, or with
    a zero ``InputTensor`` of the desc's size written chunk by chunk when ``big``."""
    folder = root / safe_id(case_id)
    folder.mkdir(parents=True)
    (folder / corpus.DESC_FILE).write_text(json.dumps(desc))
    if big:
        _zero_npz(folder / corpus.INPUTS_FILE, "InputTensor", desc["InputTensor"]["Sizes"])
    else:
        np.savez(folder / corpus.INPUTS_FILE, **arrays)
    (folder / corpus.CASE_FILE).write_text(json.dumps({"format": corpus.FORMAT, "id": case_id, "op": desc["Type"],
                                                       "opset": None, "tags": {}, "expectations": {}}))
    return folder


def test_run_corpus_reads_inputs_in_the_worker_and_skips_what_does_not_fit(sandbox, tmp_path):
    root = tmp_path / "corpus"
    small = next(c for c in build_catalog(["max_pooling2"], tier="smoke"))
    _corpus_case(root, "max_pooling2/corpus-test-small", desc_to_dml(small.desc), small.inputs())
    _corpus_case(root, "max_pooling2/corpus-test-big", _maxpool([1, 3, 8192, 8192]), big=True)  # 768 MiB
    run = tmp_path / "run"
    out = sandbox.call(["run", "--ep", "cpu", "--corpus", root, "-k", "corpus-test", "--jobs", "1", "--out", run,
                        "--no-progress", "--no-expectations"], kind="memory", mem=640 * MiB)
    out.check((0,), reads=[root], writes=[run], temp=sandbox.temp)
    header, lines, end = read_run(str(run))
    assert [line["id"] for line in lines] == ["max_pooling2/corpus-test-small"], out.describe()
    (skipped,) = header["skipped"]
    assert skipped["id"] == "max_pooling2/corpus-test-big" and "address-space limit" in skipped["reason"]
    assert end is not None and not end["interrupted"]


def test_stress_cases_are_skipped_by_the_address_space_limit_with_their_need(sandbox, tmp_path):
    run = tmp_path / "run"
    out = sandbox.call(["run", "--ep", "cpu", "--tier", "stress", "-k", "roi_pooling/stress-rois-10000",
                        "-k", "roi_pooling/stress-whole-image", "--jobs", "1", "--out", run, "--no-progress"],
                       kind="memory", mem=1024 * MiB)
    out.check((0,), writes=[run], temp=sandbox.temp)
    header, lines, _ = read_run(str(run))
    assert [line["id"] for line in lines] == ["roi_pooling/stress-whole-image-1x64x200x304-r8-1x1"]
    (skipped,) = header["skipped"]
    assert skipped["id"].startswith("roi_pooling/stress-rois-10000") and skipped["memory_mb"] > 1024
    assert "needs" in skipped["reason"] and "address-space limit" in skipped["reason"]


# --- model run ------------------------------------------------------------------------------

def _pool_model(path, sizes):
    """A one-node MaxPool model (1x1 window): output as large as its input."""
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, sizes)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, sizes)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8), path)


def test_model_run_whose_session_cannot_allocate_is_a_message_not_a_failure(sandbox, tmp_path):
    """The generated 512 MiB input fits; ONNX Runtime's 512 MiB output does not (its arena says
    "Failed to allocate memory"): exit 2 naming the model and the reference EP, never exit 1, which
    would read as a judged failure."""
    model = tmp_path / "pool.onnx"
    _pool_model(model, [1, 1, 8192, 16384])
    out = sandbox.call(["model", "run", model, "--ep", "cpu", "--out", tmp_path / "m"], kind="memory",
                       mem=800 * MiB)
    out.check((2,), reads=[tmp_path], writes=[tmp_path / "m"], temp=sandbox.temp)
    assert "pool.onnx on the reference EP (CPUExecutionProvider) needs more memory" in _message(out), out.describe()
    assert "Note: try a smaller case" in out.stderr, out.describe()
