"""``ep-testbed fuzz`` end to end on the CPU EP with a planted bug (the worker's ``perturb`` fault):
the results are an ordinary run that report, diff and merge read; the failure is found, shrunk
(every step in a worker), run once more with its case folder, recorded in shrinks.jsonl, shown
side by side in the report, and written to a corpus that ``ep-testbed run --corpus`` runs."""

import fnmatch
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("hypothesis")

from fuzz_kit import fuzz_cpu  # noqa: E402

from ep_testbed.harness.cli import main  # noqa: E402
from ep_testbed.harness.core.results import read_run  # noqa: E402
from ep_testbed.harness.core.shrink_records import read_shrinks  # noqa: E402
from ep_testbed.harness.fuzz.corpus import load_corpus  # noqa: E402
from ep_testbed.harness.run.worker import FAULT_ENV, _perturb, parse_faults  # noqa: E402

pytestmark = pytest.mark.slow


#: The fuzzed cases whose EP output the worker's ``perturb`` fault changes (one element each).
PLANTED = "max_pooling2/fuzz-s0-b0-0[5-9]*"


def _fuzz(out, *extra, fault=f"perturb={PLANTED}", budget="8"):
    """``fuzz_kit.fuzz_cpu`` with this module's planted failure unless told otherwise."""
    return fuzz_cpu(out, *extra, fault=fault, budget=budget)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    # --budget bounds drawing and shrinking together: 20 s leaves the planted failure's shrink up
    # to 10 s even on a loaded machine
    code = _fuzz(root / "run", "--corpus-out", str(root / "corpus"), "--shrink-time", "20", budget="20")
    return root, code


def test_a_planted_wrong_element_is_found_shrunk_and_still_fails_the_same_way(planted):
    root, code = planted
    assert code == 1
    header, lines, end = read_run(str(root / "run"))
    records = list(read_shrinks(str(root / "run")))
    planted_records = [r for r in records if r["signature"]["diverging"] == []]
    assert planted_records, records
    record = planted_records[0]
    by_id = {line["id"]: line for line in lines}
    original, minimal = by_id[record["original"]], by_id[record["minimal"]]
    assert original["outcome"] == minimal["outcome"] == "fail" and record["same_failure"] is True
    assert minimal["worst"][0]["index"] == [0, 0, 0, 0] and minimal["tags"]["shrunk_from"] == original["id"]
    assert record["minimal_elements"] * 20 <= record["original_elements"] and record["minimal_elements"] <= 3
    assert record["stages"]["structure"]["replayed"] is True and record["candidates"] >= 1
    assert header["fuzz"]["ops"] == ["max_pooling2"] and end["fuzz"]["findings"] >= 1
    assert header["ep"] == original["ep"] == "CPUExecutionProvider" and original["placement"]
    assert all(set(line["placement"].values()) == {"CPUExecutionProvider"} for line in lines
               if line["outcome"] in ("pass", "fail"))


def test_the_minimal_case_has_a_case_folder_and_the_report_shows_both_side_by_side(planted):
    root, _ = planted
    record = next(r for r in read_shrinks(str(root / "run")) if r["signature"]["diverging"] == [])
    _, lines, _ = read_run(str(root / "run"))
    minimal = next(line for line in lines if line["id"] == record["minimal"])
    folder = root / "run" / minimal["artifacts"]
    assert {"model.onnx", "inputs.npz", "expected.npz", "actual.npz", "desc.json"} <= set(os.listdir(folder))
    html = (root / "run" / "report.html").read_text(encoding="utf-8")
    assert 'id="shrinks"' in html and record["original"] in html and record["minimal"] in html
    # the redraw line carries the run's options (rerun.replay_words), then the id
    assert "repro-minimal-" in html and re.search(rf"ep-testbed fuzz --ep cpu [^<]*--replay {re.escape(record['original'])} ",
                                                  html)


def test_report_diff_and_merge_read_a_fuzz_run_unchanged(planted, tmp_path):
    root, _ = planted
    assert _fuzz(tmp_path / "b", "--shrink", "none", fault="", budget="2") in (0, 1)  # same seed: same first ids
    assert main(["report", str(root / "run")]) == 0
    assert json.loads((root / "run" / "summary.json").read_text(encoding="utf-8"))
    # the planted bug is a regression against the run without it
    assert main(["diff", str(tmp_path / "b"), str(root / "run"), "--out", str(tmp_path / "diff")]) == 1
    assert (tmp_path / "diff").is_dir() and any((tmp_path / "diff").iterdir())
    # merging refuses a case id in two runs, and joins runs of other operators with the same seed
    assert main(["merge", str(root / "run"), str(tmp_path / "b"), "--out", str(tmp_path / "m1")]) == 2
    os.environ[FAULT_ENV] = ""
    try:
        assert main(["fuzz", "--ep", "cpu", "--ops", "roi_pooling", "--budget", "1", "--shrink", "none",
                     "--out", str(tmp_path / "c"), "--no-progress"]) in (0, 1)
    finally:
        del os.environ[FAULT_ENV]
    assert main(["merge", str(root / "run"), str(tmp_path / "c"), "--out", str(tmp_path / "m2")]) in (0, 1)
    _, merged, _ = read_run(str(tmp_path / "m2"))
    _, first, _ = read_run(str(root / "run"))
    _, second, _ = read_run(str(tmp_path / "c"))
    assert len(merged) == len(first) + len(second)


def test_the_corpus_round_trips_and_runs_next_to_the_catalog(planted, tmp_path):
    root, _ = planted
    entries = load_corpus(str(root / "corpus"))
    assert entries
    _, lines, _ = read_run(str(root / "run"))
    minimal = {line["tags"].get("shrunk_from"): line for line in lines if line["tags"].get("family") == "fuzz-minimal"}
    for entry in entries:
        assert entry.case.id.startswith("max_pooling2/corpus-cpu-") and entry.found["ep"] == "CPUExecutionProvider"
        assert re.match(r"(pass|tie-only|fail): ", entry.repro["prints"])  # repro.py's verdict line
        assert os.path.isfile(os.path.join(entry.path, "repro", "repro.py"))
        # running it once left no bytecode of this host in the corpus
        assert [p for p in Path(entry.path, "repro").rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"] == []
        assert entry.found["from"] in minimal
    out = tmp_path / "with-corpus"
    os.environ[FAULT_ENV] = "perturb=max_pooling2/corpus-*"
    try:
        code = main(["run", "--ep", "cpu", "--ops", "max_pooling2", "-k", "corpus-", "--corpus", str(root / "corpus"),
                     "--out", str(out), "--no-progress"])
    finally:
        del os.environ[FAULT_ENV]
    _, lines, _ = read_run(str(out))
    assert code == 1 and {line["id"] for line in lines} == {e.case.id for e in entries}
    planted_ids = {e.case.id for e in entries if not e.found["signature"]["diverging"]}
    assert all(line["outcome"] == "fail" for line in lines if line["id"] in planted_ids)


def test_replay_reruns_one_fuzzed_case_from_its_id(planted, tmp_path):
    root, _ = planted
    # the planted failure: a real divergence the run also found would fail again, and be shrunk, on replay
    record = next(r for r in read_shrinks(str(root / "run")) if fnmatch.fnmatchcase(r["original"], PLANTED))
    _, original_lines, _ = read_run(str(root / "run"))
    original = next(line for line in original_lines if line["id"] == record["original"])
    # without the plant the redrawn case passes: one line, the case drawn exactly as it was
    assert main(["fuzz", "--ep", "cpu", "--replay", record["original"], "--out", str(tmp_path / "r"),
                 "--no-progress"]) == 0
    _, lines, _ = read_run(str(tmp_path / "r"))
    assert [line["id"] for line in lines] == [record["original"]] and lines[0]["outcome"] == "pass"
    assert lines[0]["tags"] == original["tags"] and lines[0]["flags"] == original["flags"]
    # with the plant it fails as it did, and a failing replay is shrunk: the case, then its minimal case
    assert _fuzz(tmp_path / "p", "--replay", record["original"], "--shrink-time", "10") == 1
    _, lines, _ = read_run(str(tmp_path / "p"))
    assert [line["id"] for line in lines] == [record["original"], record["original"] + "-min"]
    assert [line["outcome"] for line in lines] == ["fail", "fail"]


@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "--budget: '0': give a finite number of seconds > 0"),
    (["--ops", "nope"], "--ops 'nope': not an operator"),
    (["--jobs", "0"], "--jobs 0: must be >= 1"),
    (["--seed", "-1"], "--seed: '-1': a seed is a whole number from 0"),
    (["--timeout", "nan"], "--timeout: 'nan': give a finite number of seconds"),
    (["--replay", "roi_align/grid-x"], "not a fuzzed case id"),
])
def test_bad_usage_exits_2_with_one_message(tmp_path, capsys, argv, message):
    try:
        code = main(["fuzz", "--ep", "cpu", "--out", str(tmp_path / "x"), *argv])
    except SystemExit as exc:  # argparse's own refusal of a flag's value
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_existing_results_are_never_overwritten_silently(planted, capsys):
    root, _ = planted
    assert main(["fuzz", "--ep", "cpu", "--out", str(root / "run"), "--budget", "1"]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_the_perturb_fault_changes_one_element_to_a_different_finite_value():
    assert parse_faults("perturb=a/*; perturb:64=b") == [("perturb", "a/*"), ("perturb:64", "b")]
    with pytest.raises(ValueError, match="perturb:N"):
        parse_faults("perturb:x=*")
    for array in (np.array([3.0, 1.0], np.float32), np.array([np.nan], np.float16), np.array([60000.0], np.float16),
                  np.array([255], np.uint8)):
        changed = _perturb(array, 0)
        assert changed[0] != array[0] and np.isfinite(changed.astype(np.float64)).all() and changed.dtype == array.dtype
    assert _perturb(np.zeros(3), 3).tolist() == [0, 0, 0]


def test_results_are_synced_by_a_thread_and_a_failed_sync_is_raised_by_the_next(tmp_path, monkeypatch):
    """``sync`` hands the fsync to a thread (the run answers its workers meanwhile); one that
    failed (a full disk) is raised by the next ``sync``, and the file is closed and synced at the end."""
    import errno
    import threading
    import time

    from ep_testbed.harness.fuzz import engine

    synced: list[str] = []
    real = engine.os.fsync

    def fsync(fd):
        synced.append(threading.current_thread().name)
        if len(synced) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(engine.os, "fsync", fsync)
    with engine._Lines(str(tmp_path)) as lines:
        lines.write({"type": "case", "id": "a"})
        lines.sync()
        deadline = time.monotonic() + 20
        while len(synced) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        lines.sync()
        lines._syncer.join(timeout=20)  # a sync that failed ends the thread
        assert len(synced) == 2
        with pytest.raises(OSError, match="No space left"):
            lines.sync()
    assert synced == ["results.jsonl sync", "results.jsonl sync", "MainThread"]  # the last one at the exit
    assert (tmp_path / "results.jsonl").read_text() == '{"type": "case", "id": "a"}\n'
