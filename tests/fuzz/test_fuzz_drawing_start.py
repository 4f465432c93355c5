"""The fuzz engine draws its first round itself, while the workers start, and the rest in a
drawing process started right after it when more are wanted; ``close`` stops that process whether
or not a batch was taken from it (``harness.fuzz.engine._Batches``)."""

from __future__ import annotations

import time

import pytest

from ep_testbed.harness.fuzz.engine import Drawer, FuzzOptions, _Batches


def test_the_first_round_is_drawn_here_the_rest_by_a_process_that_close_stops(tmp_path):
    batches = _Batches(FuzzOptions(out_dir=str(tmp_path), ops=["max_pooling2"], budget_s=5, seed=3))
    assert batches._drawer is None  # nothing started before the first round is asked for
    first = next(batches)
    process = batches._drawer._process
    assert process.pid is not None  # started with the first round, before the second is asked for
    unbounded = Drawer(["max_pooling2"], 3, "default")  # what one process draws from round 0 on
    try:
        for ours in (first, next(batches)):  # the same cases (a repr: a NaN field is unequal to itself)
            assert [(c.id, repr(c.desc), c.recipe) for c in ours] == \
                [(c.id, repr(c.desc), c.recipe) for c in unbounded.next_batch()]
    finally:
        unbounded.close()
    batches.close()
    deadline = time.monotonic() + 20
    while process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process.is_alive()
    batches.close()  # again: nothing


def test_cases_the_first_round_holds_start_no_drawing_process(tmp_path):
    batches = _Batches(FuzzOptions(out_dir=str(tmp_path), ops=["max_pooling2"], budget_s=5, seed=3, max_cases=40))
    assert len(next(batches)) >= 40 and batches._drawer is None
    with pytest.raises(StopIteration):
        next(batches)
    batches.close()


def test_a_replay_draws_its_one_batch_and_ends(tmp_path):
    from ep_testbed.harness.fuzz.draw import draw_batch

    ids = [case.id for case in draw_batch("max_pooling2", 3, 0)[:2]]
    batches = _Batches(FuzzOptions(out_dir=str(tmp_path), ops=["max_pooling2"], budget_s=5, replay=ids))
    assert [[case.id for case in batch] for batch in batches] == [ids]
    batches.close()


def test_with_max_cases_the_drawing_process_draws_only_the_rounds_that_hold_them_and_ends():
    """A round of one operator is its batch of ``BATCH_SIZE`` cases: 150 cases are the first
    round and the start of the second, as an unbounded drawer draws them; then the batches end and
    the process exits by itself (before, it drew whole rounds ahead until it was stopped, on the
    cores the workers run on)."""
    from ep_testbed.harness.fuzz.draw import BATCH_SIZE

    bounded, unbounded = Drawer(["max_pooling2"], 3, "default", max_cases=BATCH_SIZE + 50), \
        Drawer(["max_pooling2"], 3, "default")
    try:
        rounds = [[case.id for case in bounded.next_batch()] for _ in range(2)]
        whole = [[case.id for case in unbounded.next_batch()] for _ in range(2)]
        assert rounds == [whole[0], whole[1][:50]] and len(whole[1]) == BATCH_SIZE
        for _ in range(2):  # the end, and the end again
            with pytest.raises(StopIteration):
                bounded.next_batch()
        bounded._process.join(timeout=20)
        assert bounded._process.exitcode == 0
    finally:
        bounded.close()
        unbounded.close()


def test_the_drawing_process_draws_one_round_beyond_those_taken_and_no_more():
    """A round is drawn once the one before it is taken: a run its budget stops has drawn at most
    one round it never ran (each round drawn for nothing costs the cores the workers run on)."""
    drawer = Drawer(["max_pooling2"], 3, "default")
    try:
        drawer.next_batch()
        deadline = time.monotonic() + 30
        while drawer._queue.qsize() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert drawer._queue.qsize() == 1  # the next round, drawn while this one runs
        time.sleep(3)  # several rounds' drawing time of one operator
        assert drawer._queue.qsize() == 1
        drawer.next_batch()
        deadline = time.monotonic() + 30
        while drawer._queue.qsize() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert drawer._queue.qsize() == 1
    finally:
        drawer.close()


def test_a_drawing_process_whose_run_was_killed_ends_by_itself(tmp_path):
    """A run killed (SIGKILL: nothing of it runs to stop its drawer) leaves no drawing process
    waiting for rounds nobody will take."""
    import os
    import signal
    import subprocess
    import sys

    code = ("from ep_testbed.harness.fuzz.engine import Drawer\n"
            "if __name__ == '__main__':\n"
            "    d = Drawer(['max_pooling2'], 3, 'default')\n"
            "    d.next_batch()\n"
            "    print(d._process.pid, flush=True)\n"
            "    import time; time.sleep(300)\n")
    script = tmp_path / "run.py"
    script.write_text(code)
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert run.stdout is not None
    pid = int(run.stdout.readline())
    run.send_signal(signal.SIGKILL)
    run.wait()

    def alive() -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 20
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the drawing process outlived its killed run by 20 s")
