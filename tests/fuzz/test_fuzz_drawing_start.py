"""The fuzz engine starts its drawing process first, before the run header and the workers, and
stops it whether or not a batch was ever taken (``harness.fuzz.engine._Batches``)."""

from __future__ import annotations

import time

from ep_testbed.harness.fuzz.engine import FuzzOptions, _Batches


def test_a_drawing_process_started_and_never_read_is_stopped_by_close(tmp_path):
    batches = _Batches(FuzzOptions(out_dir=str(tmp_path), ops=["max_pooling2"], budget_s=5, seed=3))
    process = batches._drawer._process
    assert process.pid is not None  # started when the batches were made, before any was asked for
    batches.close()
    deadline = time.monotonic() + 20
    while process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process.is_alive()
    batches.close()  # again: nothing


def test_a_replay_draws_its_one_batch_and_ends(tmp_path):
    from ep_testbed.harness.fuzz.draw import draw_batch

    ids = [case.id for case in draw_batch("max_pooling2", 3, 0)[:2]]
    batches = _Batches(FuzzOptions(out_dir=str(tmp_path), ops=["max_pooling2"], budget_s=5, replay=ids))
    assert [[case.id for case in batch] for batch in batches] == [ids]
    batches.close()
