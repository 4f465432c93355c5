"""A corpus is data from elsewhere: every malformed case folder is refused with one message naming
the file and the field (exit 2 from ``ep-testbed run --corpus``), never a traceback or an
allocation its header did not announce; a good one round-trips exactly."""

import json
import shutil
import zipfile

import numpy as np
import pytest

from ep_testbed.graphs.cases.common import LiteralCase
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli import main
from ep_testbed.harness.core.results import read_run, safe_id
from ep_testbed.harness.fuzz import corpus
from ep_testbed.reference import desc_to_dml


def _write(root, case, expectations=None):
    """A corpus folder for ``case`` the way ``corpus.write_entry`` lays it out (no repro bundle)."""
    folder = root / safe_id(case.id)
    folder.mkdir(parents=True)
    (folder / corpus.DESC_FILE).write_text(json.dumps(desc_to_dml(case.desc)))
    np.savez(folder / corpus.INPUTS_FILE, **case.inputs())
    meta = {"format": corpus.FORMAT, "id": case.id, "op": case.op, "opset": case.opset,
            "tags": {"dtype": case.tags["dtype"]}, "expectations": expectations or {}}
    (folder / corpus.CASE_FILE).write_text(json.dumps(meta))
    return folder


@pytest.fixture
def good(tmp_path):
    source = next(c for c in build_catalog(["roi_align1"]) if c.id == "roi_align1/edge-outside-partly")
    case = LiteralCase(id="roi_align1/corpus-test-1", op=source.op, desc=source.desc, seed=0, tags=dict(source.tags),
                       arrays=source.inputs())
    root = tmp_path / "corpus"
    return root, _write(root, case, {"cpu": {"outcome": "fail", "readings": ["closed-edge"], "reason": "a test",
                                             "link": "https://example.org"}}), case


def test_a_case_folder_round_trips_exactly(good):
    root, _, case = good
    (entry,) = corpus.load_corpus(str(root))
    assert entry.case.id == case.id and entry.case.desc == case.desc and entry.case.tags["family"] == "corpus"
    for name, array in case.arrays.items():
        assert np.array_equal(entry.case.inputs()[name], array) and entry.case.inputs()[name].dtype == array.dtype
    assert entry.expectations["cpu"].outcome == ("fail",) and entry.expectations["cpu"].matches(case.id)
    assert corpus.content_hash(entry.case) == corpus.content_hash(case)


@pytest.mark.slow
def test_run_corpus_applies_the_case_expectation_per_ep(good, tmp_path):
    root, _, case = good
    out = tmp_path / "r"
    assert main(["run", "--ep", "cpu", "-k", "corpus-", "--corpus", str(root), "--out", str(out), "--no-progress"]) == 1
    header, (line,), _ = read_run(str(out))
    assert line["id"] == case.id and line["outcome"] == "fixed" and line["expected_outcome"]["reason"] == "a test"
    # the corpus's own expectations are applied once: the header names them once, after the EP's file
    assert header["expectations"].endswith("shared.json + 1 from the corpus"), header["expectations"]
    assert header["expectations"].count("from the corpus") == 1
    assert main(["run", "--ep", "cpu", "-k", "corpus-", "--corpus", str(root), "--no-expectations",
                 "--out", str(tmp_path / "n"), "--no-progress"]) == 0


def _npz(path, **arrays):
    np.savez(path, **arrays)


BREAKAGES = {
    "not a corpus format": (lambda f: (f / "case.json").write_text('{"format": "other", "id": "x"}'), "format"),
    "case.json not JSON": (lambda f: (f / "case.json").write_text("{nope"), "not JSON"),
    "id missing": (lambda f: (f / "case.json").write_text(json.dumps({"format": corpus.FORMAT, "op": "x"})), '"id"'),
    "desc refused": (lambda f: (f / "desc.json").write_text('{"Type": "DML_OPERATOR_NOPE"}'), "desc.json"),
    "op disagrees": (lambda f: _patch(f, op="DML_OPERATOR_ROI_POOLING"), '"op"'),
    "bad opset": (lambda f: _patch(f, opset="16"), '"opset"'),
    "bad expectation": (lambda f: _patch(f, expectations={"cpu": {"outcome": "pass"}}), "expectations.cpu"),
    "missing input": (lambda f: _npz(f / "inputs.npz", InputTensor=np.zeros((2, 3, 10, 12), np.float32)),
                      "expected exactly"),
    "wrong shape": (lambda f: _resave(f, "ROITensor", lambda a: a[:2]), "the desc says"),
    "wrong dtype": (lambda f: _resave(f, "ROITensor", lambda a: a.astype(np.float64)), "the desc says"),
    "not an npz": (lambda f: (f / "inputs.npz").write_bytes(b"PK\x03\x04 no zip"), "not a readable NPZ"),
    "bigger than announced": (lambda f: _bomb(f), "its header declares 2880 bytes"),
    "deep json": (lambda f: (f / "desc.json").write_text("[" * 5000 + "]" * 5000), "nested"),
}


def _patch(folder, **fields):
    meta = json.loads((folder / "case.json").read_text())
    meta.update(fields)
    (folder / "case.json").write_text(json.dumps(meta))


def _resave(folder, name, change):
    arrays = dict(np.load(folder / "inputs.npz"))
    arrays[name] = change(arrays[name])
    np.savez(folder / "inputs.npz", **arrays)


def _bomb(folder):
    """An NPZ member announcing the right header but holding far more bytes (compressed well)."""
    arrays = dict(np.load(folder / "inputs.npz"))
    with zipfile.ZipFile(folder / "inputs.npz", "w", zipfile.ZIP_DEFLATED) as z:
        for name, array in arrays.items():
            data = np.lib.format.header_data_from_array_1_0(array)
            buffer = __import__("io").BytesIO()
            np.lib.format.write_array_header_1_0(buffer, data)
            z.writestr(f"{name}.npy", buffer.getvalue() + b"\0" * (array.nbytes + 10**7))


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_a_broken_case_folder_is_one_message_naming_the_file(good, tmp_path, capsys, breakage):
    root, folder, _ = good
    damage, expected = BREAKAGES[breakage]
    damage(folder)
    with pytest.raises(corpus.CorpusError, match=None) as info:
        corpus.load_corpus(str(root))
    assert expected in str(info.value) and str(folder) in str(info.value)
    code = main(["run", "--ep", "cpu", "--corpus", str(root), "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err and not (tmp_path / "r").exists()


def test_a_missing_corpus_folder_and_duplicate_ids_are_refused(good, tmp_path, capsys):
    root, folder, _ = good
    assert main(["run", "--ep", "cpu", "--corpus", str(tmp_path / "none"), "--out", str(tmp_path / "r")]) == 2
    assert "not a folder" in capsys.readouterr().err
    shutil.copytree(folder, root / "copy")
    with pytest.raises(corpus.CorpusError, match="appears in two folders"):
        corpus.load_corpus(str(root))
