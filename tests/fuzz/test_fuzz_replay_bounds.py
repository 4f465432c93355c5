"""A fuzzed id is refused at once when no run can have drawn it: an index past the end of its
batch, a seed or batch number past the range a run has. Redrawing index N costs N + 1 draws, so
the refusal must come before anything is drawn."""

import time

import pytest

pytest.importorskip("hypothesis")

from ep_testbed.harness.cli import main  # noqa: E402
from ep_testbed.harness.cli.options import MAX_SEED  # noqa: E402
from ep_testbed.harness.fuzz import draw  # noqa: E402


@pytest.fixture
def no_drawing(monkeypatch):
    """Any draw fails the test: a refused id must cost nothing."""
    def refuse(*args, **kwargs):
        raise AssertionError("drew a batch for an id that should have been refused")
    monkeypatch.setattr(draw, "run_batch", refuse)


@pytest.mark.parametrize("case_id, says", [
    ("roi_pooling/fuzz-s0-b0-100", "no batch holds index 100"),
    ("roi_pooling/fuzz-s0-b0-99999999999999", "no batch holds index 99999999999999"),
    ("max_pooling2/fuzz-large-s3-b2-" + "9" * 5000, "5000 digits"),
    ("roi_align/fuzz-s" + "7" * 5000 + "-b0-001", "seed 777777777777"),
    (f"roi_align/fuzz-s{MAX_SEED + 1}-b0-001", f"seed {MAX_SEED + 1} is past the largest"),
    (f"roi_align/fuzz-s0-b{2**64}-001", "batch 18446744073709551616 is past"),
])
def test_an_id_no_batch_can_have_drawn_is_refused_before_drawing(no_drawing, case_id, says):
    with pytest.raises(ValueError) as info:
        draw.replay(case_id)
    text = str(info.value)
    assert says in text and "results.jsonl" in text and len(text) < 600, text


def test_the_largest_index_and_numbers_are_the_ones_a_run_can_draw():
    assert draw.MAX_INDEX == draw.BATCH_SIZE - 1 and draw.MAX_NUMBER == MAX_SEED
    assert draw.parse_id(f"roi_align/fuzz-s{MAX_SEED}-b{MAX_SEED}-{draw.MAX_INDEX}").index == draw.MAX_INDEX
    assert draw.parse_id("roi_align/fuzz-s0-b0-00000000000000000000007").index == 7  # zeros are no digits


def test_fuzz_replay_of_a_huge_index_exits_2_at_once_naming_the_id_and_the_largest_index(tmp_path, capsys):
    start = time.monotonic()
    code = main(["fuzz", "--ep", "cpu", "--replay", "roi_pooling/fuzz-s0-b0-99999999999999",
                 "--out", str(tmp_path / "r"), "--budget", "1", "--no-progress"])
    seconds = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2 and seconds < 10, (code, seconds)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "roi_pooling/fuzz-s0-b0-99999999999999" in err and "largest index is 099" in err
    assert "results.jsonl" in err and "report.html" in err
    assert not (tmp_path / "r").exists()


def test_fuzz_starts_no_more_workers_than_it_has_cases_to_run(tmp_path, monkeypatch):
    """``--jobs`` takes up to 2**31 - 1: the workers a fuzz run starts at once are bounded by the
    cases it can run at once (a batch; the ids of a replay), never by the number given."""
    from ep_testbed.harness.fuzz import engine

    started = []

    class Recording(engine.WorkerPool):
        def start(self, count=None):
            started.append(self.jobs)
            raise KeyboardInterrupt  # stop right there: the test is about what would start

    monkeypatch.setattr(engine, "WorkerPool", Recording)
    main(["fuzz", "--ep", "cpu", "--ops", "roi_align", "--jobs", str(2**31 - 1), "--out", str(tmp_path / "a"),
          "--budget", "1", "--no-progress", "--batch", "1"])
    main(["fuzz", "--ep", "cpu", "--replay", "roi_align/fuzz-s0-b0-001", "--jobs", "64", "--out", str(tmp_path / "b"),
          "--no-progress", "--batch", "1"])
    assert started == [draw.BATCH_SIZE, 1]
