"""Hostile command lines: every numeric or structured flag of every command given NaN, infinities,
negative, huge, empty, malformed or hostile text (``--timeout nan``, ``--seed -1``,
``--keep-worst -5``, ``--shard 1/0``, ``--limit elements=2**200``, ``--tol fp16:atol=nan``...).
Each must be used as given or refused with exit 2 and one message naming the flag; nothing runs
unbounded, nothing is written (every command here is asked to list, or points at nothing).
"""

from __future__ import annotations

import pytest
from hostile_kit import hostile
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.slow  # every test here runs commands in the sandbox: -m "not slow" skips them

NASTY_ARGS = ["nan", "NaN", "inf", "-inf", "1e10", "1e308", "-5", "-1", "0", "1", "2", "1e-300", "abc", "", " ",
              "2**64", "2**200", "99999999999999999999999", "1" * 5000, "1/0", "0/0", "3/2", "2/3", "-1/2",
              "1/99999999999999999999", "x=1", "=", "a=b=c", "fp16:atol=nan", "fp16:atol=1e999", "fp32:ulp=-1",
              "flaot16:atol=1", "elements=0", "elements=-1", "elements=2**200", "elements=1e3", "npz-bytes=8GiB",
              "nosuch=1", "batch=0", "image=1x3x0x4", "x=99999999999x99999999999", "\x1b[2J", "a\nb", "\u202e",
              "max_pooling2", "max_pool", "roi_align1,,", "device_id=1", "5.0", "99.99", "1.0.0", "-k",
              # round two: what the parser once took and the readers refused, duplicates, bad device indices
              "fp32:ulp=" + "9" * 100, f"fp32:ulp={2**64 + 1}", "fp32:atol=1,atol=2", "device_id=-1",
              "device_id=0x1", "device_id=" + "9" * 30]

#: command line -> the flags to fill with nasty values; every line ends so that nothing runs.
COMMANDS = {
    ("run", "--list"): ["--timeout", "--seed", "--jobs", "--keep-worst", "--shard", "--ops", "--ep-option", "--tol",
                        "--limit", "-k", "--exclude", "--ep", "--tier", "--corpus", "--precision-model"],
    ("fuzz", "--replay", "no-such-case-id", "--out", "no-such-fuzz"): [
        "--budget", "--max-cases", "--seed", "--timeout", "--jobs", "--shrink-time", "--max-shrinks", "--ops", "--size",
        "--tol",
        "--limit", "--ep"],
    ("doctor", "--ep", "no-such-ep"): ["--ep-option", "--limit"],
    ("model", "run", "no-such-model.onnx"): ["--timeout", "--seed", "--shape", "--tol", "--limit", "--ep",
                                             "--reference-ep", "--reading", "--drift-tol", "--drift-max-elements"],
    ("reference", "--desc", "no-such-desc.json"): ["--seed", "--feature-level", "--limit"],
    ("map", "no-such-desc.json"): ["--opset", "--limit"],
    ("report", "no-such-run"): ["--max-pictures", "--max-details", "--limit"],
    ("ci-summary", "no-such-run"): ["--top", "--max-annotations", "--format", "--title", "--limit"],
    ("diff", "no-such-run-a", "no-such-run-b"): ["--growth-factor", "--limit"],
    ("findings", "no-such-run"): ["--out", "--limit"],
    ("gen", "--op", "max_pooling2", "--out", "."): ["--seed", "--limit"],
    ("merge", "no-such-run", "--out", "no-such-merged"): ["--limit"],
}


@hostile(280)
@given(data=st.data())
def test_hostile_flag_values_are_used_or_refused_with_one_message(sandbox, tmp_path_factory, data):
    command = data.draw(st.sampled_from(sorted(COMMANDS)), label="command")
    argv = list(command)
    for flag in data.draw(st.lists(st.sampled_from(COMMANDS[command]), min_size=1, max_size=3, unique=True),
                          label="flags"):
        argv += [flag, data.draw(st.sampled_from(NASTY_ARGS), label=flag)]
    folder = tmp_path_factory.mktemp("flags")
    (folder / "busy").write_text("a file, so that gen --out . refuses to overwrite")
    result = sandbox.call(argv, kind=f"flags ({command[0]})", cwd=folder, limit_s=30)
    # model run --timeout S runs the model in a child: one killed after S seconds is a timeout (1)
    timed = command[0] == "model" and "--timeout" in argv
    result.check((0, 1, 2, 4) if timed else (0, 2, 4), reads=[folder], temp=sandbox.temp)
    if command[0] == "run" and result.code == 0:  # --list printed the case ids it selected, if any
        assert all("/" in line for line in result.stdout.splitlines()), result.describe()
    assert not (folder / "no-such-merged").exists() and not (folder / "no-such-fuzz").exists()


#: A part of a fuzzed case id no run can have drawn: an index past its batch (at most 099), or a
#: seed or batch number past the range of ``--seed``; the digits as a user or a script might paste them.
PAST_INDEX = st.one_of(st.integers(100, 10**40).map(str), st.just("9" * 5000), st.just("0" * 30 + "100"))
PAST_NUMBER = st.one_of(st.integers(2**63, 2**200).map(str), st.just("7" * 5000))


@hostile(30)
@given(data=st.data())
def test_replay_ids_no_batch_can_have_drawn_are_refused_at_once(sandbox, tmp_path_factory, data):
    op = data.draw(st.sampled_from(["max_pooling2", "roi_align", "roi_align1", "roi_pooling"]), label="op")
    size = data.draw(st.sampled_from(["", "-large"]), label="size")
    small = st.integers(0, 99).map(str)
    past = data.draw(st.sampled_from(["seed", "batch", "index"]), label="past")
    seed = data.draw(PAST_NUMBER if past == "seed" else small, label="seed")
    batch = data.draw(PAST_NUMBER if past == "batch" else small, label="batch")
    index = data.draw(PAST_INDEX if past == "index" else small, label="index")
    folder = tmp_path_factory.mktemp("replay")
    argv = ["fuzz", "--ep", "cpu", "--replay", f"{op}/fuzz{size}-s{seed}-b{batch}-{index}", "--out", "no-such-fuzz"]
    result = sandbox.call(argv, kind="fuzz --replay past its batch", cwd=folder, limit_s=20)
    result.check((2,), reads=[folder], temp=sandbox.temp)
    assert "results.jsonl" in result.stderr and not (folder / "no-such-fuzz").exists(), result.describe()
