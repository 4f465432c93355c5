"""Hostile desc files fed to ``ep-testbed map`` and ``ep-testbed reference``: every field of a valid
desc of each operator mutated (nasty numbers, text, types, nesting), the bytes damaged (not
UTF-8, truncated, NaN literals, 5000-digit integers, deep nesting), and files that are not
regular files. Each must get exit 0 with outputs or exit 2 with one message, never a traceback,
a hang or an allocation past the caps, and nothing read or written outside the input's folder.
"""

from __future__ import annotations

import json
import os

import pytest
from hostile_kit import SMALL_CAP, corrupt_bytes, hostile, mutate_json
from hypothesis import given
from hypothesis import strategies as st

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import desc_to_dml
from ep_testbed.reference.registry import names

pytestmark = pytest.mark.slow  # every test here runs commands in the sandbox: -m "not slow" skips them

#: Valid descs to start from: a few catalog cases of every operator.
SEEDS = [desc_to_dml(case.desc) for op in names() for case in build_catalog([op], 0)[:4]]


def _write(folder, raw: bytes):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "desc.json"
    path.write_bytes(raw)
    return path


@hostile(180)
@given(data=st.data())
def test_mutated_desc_files_get_a_result_or_one_message(sandbox, tmp_path_factory, data):
    desc = data.draw(st.sampled_from(SEEDS), label="seed desc")
    mutated = mutate_json(data, desc) if data.draw(st.integers(0, 4), label="keep") else desc
    raw = corrupt_bytes(data, json.dumps(mutated).encode())
    folder = tmp_path_factory.mktemp("desc")
    path = _write(folder / "in", raw)
    sandbox.call(["map", path], kind="map").check((0, 2), reads=[folder / "in"], temp=sandbox.temp)
    out = folder / "out"
    out.mkdir()
    result = sandbox.call(["reference", "--desc", path, "--out", out / "y.npz", *SMALL_CAP], kind="reference")
    result.check((0, 2), reads=[folder / "in"], writes=[out], temp=sandbox.temp)
    if result.code == 0:
        assert "OutputTensor: shape" in result.stdout and (out / "y.npz").is_file()


@pytest.mark.parametrize("kind", ["folder", "fifo", "missing", "empty", "devnull"])
def test_desc_paths_that_are_not_regular_files_are_refused(sandbox, tmp_path, kind):
    path = tmp_path / "desc.json"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "devnull":
        path = "/dev/null"
    for argv, command in ((["map", path], "map"), (["reference", "--desc", path], "reference")):
        result = sandbox.call(argv, kind=command, limit_s=20).check((2,), reads=[tmp_path], temp=sandbox.temp)
        assert str(path) in result.stderr
