"""One id, one line: a corpus case that takes a catalog case's id (or another corpus case's, from
a second ``--corpus`` folder) is refused when the corpus is loaded, naming both; a corpus case
folder that is a symbolic link is refused with the message every untrusted path gets; and
``--resume`` or ``merge`` never drop one of two results that a results file holds under one id.
Each runs in the sandbox (one message, nothing read or written outside its folders)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.results import safe_id
from ep_testbed.harness.fuzz import corpus
from ep_testbed.reference import desc_to_dml

pytestmark = pytest.mark.slow  # every test here runs commands in the sandbox: -m "not slow" skips them

SMOKE = next(iter(build_catalog(["max_pooling2"], tier="smoke")))


def _corpus_case(root, case_id, case=SMOKE):
    """A corpus folder under ``root`` holding ``case`` under ``case_id``."""
    folder = root / safe_id(case_id)
    folder.mkdir(parents=True)
    (folder / corpus.DESC_FILE).write_text(json.dumps(desc_to_dml(case.desc)))
    np.savez(folder / corpus.INPUTS_FILE, **case.inputs())
    (folder / corpus.CASE_FILE).write_text(json.dumps({"format": corpus.FORMAT, "id": case_id, "op": case.op,
                                                       "opset": None, "tags": {}, "expectations": {}}))
    return folder


def _run(sandbox, run, *corpora):
    argv = ["run", "--ep", "cpu", "--tier", "smoke", "--ops", "max_pooling2", "--out", run, "--jobs", "1",
            "--no-progress", "--no-expectations"]
    for root in corpora:
        argv += ["--corpus", root]
    return sandbox.call(argv, kind="ids")


def test_a_corpus_case_with_a_catalog_id_is_refused_naming_both(sandbox, tmp_path):
    root = tmp_path / "corpus"
    folder = _corpus_case(root, SMOKE.id)
    out = _run(sandbox, tmp_path / "run", root)
    out.check((2,), reads=[root], writes=[tmp_path / "run"], temp=sandbox.temp)
    assert f"the case in {folder} has the id {SMOKE.id!r}, which the catalog case" in out.stderr, out.describe()
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_one_id_in_two_corpus_folders_is_refused_naming_both(sandbox, tmp_path):
    first = _corpus_case(tmp_path / "c1", "max_pooling2/corpus-cpu-0000000001")
    second = _corpus_case(tmp_path / "c2", "max_pooling2/corpus-cpu-0000000001")
    out = _run(sandbox, tmp_path / "run", tmp_path / "c1", tmp_path / "c2")
    out.check((2,), reads=[tmp_path / "c1", tmp_path / "c2"], writes=[tmp_path / "run"], temp=sandbox.temp)
    assert f"the cases in {first} and {second} have one id" in out.stderr, out.describe()


def test_corpus_ids_keep_their_own_form_and_run_beside_the_catalog(sandbox, tmp_path):
    root = tmp_path / "corpus"
    _corpus_case(root, "max_pooling2/corpus-cpu-0000000001")
    out = _run(sandbox, tmp_path / "run", root)
    out.check((0,), reads=[root], writes=[tmp_path / "run"], temp=sandbox.temp)
    lines = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    ids = [x["id"] for x in lines if x["type"] == "case"]
    assert len(ids) == len(set(ids)) and "max_pooling2/corpus-cpu-0000000001" in ids


def test_a_corpus_case_folder_that_is_a_symbolic_link_is_refused(sandbox, tmp_path):
    root = tmp_path / "corpus"
    _corpus_case(root, "max_pooling2/corpus-cpu-0000000001")
    elsewhere = _corpus_case(tmp_path / "elsewhere", "max_pooling2/corpus-cpu-0000000002")
    link = root / "linked"
    os.symlink(elsewhere, link)
    out = _run(sandbox, tmp_path / "run", root)
    out.check((2,), reads=[root], writes=[tmp_path / "run"], temp=sandbox.temp)
    assert f"{link}: is a symbolic link; a corpus holds case folders only" in out.stderr, out.describe()
    assert "Note: replace the link by the file or folder it points at, or delete it" in out.stderr


@pytest.fixture
def finished_run(tmp_path):
    """A finished run of three test cases whose results file then gets a second line for the first id."""
    import local_cases

    run = tmp_path / "run"
    code = run_command(parse_args(["run", "--out", str(run), "--jobs", "0", "-k=-00,-01,-02", "--no-progress"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx",
                       worker_paths=(local_cases.HERE,))
    assert code == 0
    lines = (run / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[1])
    lines.insert(2, json.dumps({**first, "outcome": "fail", "message": "the other result"}))
    (run / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # no end line: an interrupted run
    return run


def test_resume_never_drops_one_of_two_results_under_one_id(sandbox, finished_run):
    before = (finished_run / "results.jsonl").read_bytes()
    out = sandbox.call(["--out", finished_run, "--jobs", "0", "-k=-00,-01,-02", "--no-progress", "--resume"],
                       api="run-local", kind="ids")
    out.check((2,), reads=[finished_run], writes=[finished_run], temp=sandbox.temp)
    assert "case id(s) with more than one result, e.g. 'max_pooling2/local-w2-00' on lines 2, 3" in out.stderr
    assert (finished_run / "results.jsonl").read_bytes() == before, "the results file was changed"


def test_merge_never_drops_one_of_two_results_under_one_id(sandbox, finished_run, tmp_path):
    out = sandbox.call(["merge", finished_run, "--out", tmp_path / "merged", "--allow-partial"], kind="ids")
    out.check((2,), reads=[finished_run], writes=[tmp_path / "merged"], temp=sandbox.temp)
    assert "more than one result, e.g. 'max_pooling2/local-w2-00' on lines 2, 3" in out.stderr, out.describe()


@pytest.mark.parametrize("forged", ["roi_align1/corpus-cpu-0000000001", "roi_pooling/grid-x", "corpus-cpu-1",
                                    "MAX_POOLING2/corpus-cpu-1", "/corpus-cpu-1"])
def test_a_corpus_case_whose_id_names_another_operator_is_refused_naming_both(sandbox, tmp_path, forged):
    """The folder holds a max pooling desc; its case.json's id says another operator (or none):
    the run recorded the forged id before."""
    root = tmp_path / "corpus"
    _corpus_case(root, forged)
    out = _run(sandbox, tmp_path / "run", root)
    out.check((2,), reads=[root], writes=[tmp_path / "run"], temp=sandbox.temp)
    assert repr(forged) in out.stderr and "DML_OPERATOR_MAX_POOLING2 (max_pooling2)" in out.stderr, out.describe()
    assert not (tmp_path / "run" / "results.jsonl").exists()
