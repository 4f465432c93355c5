"""Each DirectML host request gets its own share of the host's stderr (harness/eps/dml_wine/host.py,
``_StderrTail``), however late the pipe delivers it. Needs no Wine: a pipe stands in for the host."""

from __future__ import annotations

import os
import time

import pytest

from ep_testbed.harness.eps.dml_wine.host import END_MARKER, _StderrTail

MARK = b"\n" + END_MARKER + b"\n"


@pytest.fixture
def pipe():
    r, w = os.pipe()
    tail = _StderrTail(os.fdopen(r, "rb"), 64 * 1024)
    yield tail, w
    try:
        os.close(w)
    except OSError:
        pass
    tail.settle(2.0)


def test_an_unread_request_does_not_spill_into_the_next(pipe):
    # A hello's stderr is never asked for. Its marker may still be in the pipe when the next
    # request's answer arrives; the next request must get its own lines, not the hello's.
    tail, w = pipe
    os.write(w, b"startup warning" + MARK + b"vkd3d: Invalid shader.\nORT: 80004005" + MARK)
    assert tail.request_text(1) == "vkd3d: Invalid shader.\nORT: 80004005"
    assert tail.request_text(0) == "startup warning"


def test_a_marker_split_across_two_reads_is_still_found(pipe):
    tail, w = pipe
    half = len(MARK) // 2
    os.write(w, b"first" + MARK[:half])
    time.sleep(0.2)  # the pump reads the first half on its own
    os.write(w, MARK[half:] + b"second" + MARK)
    assert tail.request_text(0) == "first"
    assert tail.request_text(1) == "second"


def test_a_request_whose_marker_never_comes_gets_what_arrived(pipe):
    tail, w = pipe
    os.write(w, b"one" + MARK + b"dying words\n")
    t0 = time.monotonic()
    assert tail.request_text(1, timeout=0.3) == "dying words"
    assert time.monotonic() - t0 >= 0.25
    os.close(w)  # the process is gone: no more waiting
    t0 = time.monotonic()
    assert tail.request_text(2, timeout=5.0) == ""
    assert time.monotonic() - t0 < 2.0
