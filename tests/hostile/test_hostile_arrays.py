"""Hostile ``.npz`` files fed to every command that reads arrays: ``reference --inputs``,
``model run --inputs``, ``model run --baseline`` and ``report`` (a run's case folders). Members
go missing or extra, headers lie (huge shapes, object and structured dtypes, big-endian,
Fortran order), data runs short or long, a pickle hides in a member, declared sizes lie like a
zip bomb's, bytes are damaged. Each command must answer with a result or one message; a damaged
case folder costs the report only that case's pictures.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from hostile_kit import IN_PROCESS, SMALL_CAP, hostile, hostile_npz
from hypothesis import given
from hypothesis import strategies as st

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.graphs.models import resnet_stem
from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.reference import desc_to_dml
from ep_testbed.reference.descs import member_value
from ep_testbed.reference.dtypes import numpy_dtype
from ep_testbed.reference.registry import names

pytestmark = pytest.mark.slow  # every test here runs commands in the sandbox: -m "not slow" skips them

#: One small catalog desc per operator, with the arrays its inputs take.
DESCS = [build_catalog([op], 0)[0].desc for op in names()]


def _inputs_of(desc):
    tensors = {m: member_value(desc, m) for m in desc.INPUTS}
    return (list(tensors), {m: tuple(t.sizes) for m, t in tensors.items()},
            {m: numpy_dtype(t.data_type).str for m, t in tensors.items()})


@hostile(110)
@given(data=st.data())
def test_reference_takes_hostile_inputs_npz(sandbox, tmp_path_factory, data):
    desc = data.draw(st.sampled_from(DESCS), label="desc")
    names_, shapes, dtypes = _inputs_of(desc)
    folder = tmp_path_factory.mktemp("npz")
    (folder / "desc.json").write_text(json.dumps(desc_to_dml(desc)))
    (folder / "x.npz").write_bytes(data.draw(hostile_npz(names_, shapes, dtypes), label="npz"))
    result = sandbox.call(["reference", "--desc", folder / "desc.json", "--inputs", folder / "x.npz", *SMALL_CAP],
                          kind="reference --inputs")
    result.check((0, 2), reads=[folder], temp=sandbox.temp)
    if result.code == 0:
        assert "OutputTensor: shape" in result.stdout


@pytest.fixture(scope="module")
def stem(tmp_path_factory):
    """The bundled ResNet stem on disk (input ``image`` float32 [1, 3, 64, 64])."""
    folder = tmp_path_factory.mktemp("stem")
    path = folder / "stem.onnx"
    path.write_bytes(resnet_stem().SerializeToString())
    return path


@hostile(30)
@given(data=st.data())
def test_model_run_takes_hostile_inputs_npz(sandbox, stem, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("model-npz")
    raw = data.draw(hostile_npz(["image"], {"image": (1, 3, 64, 64)}, {"image": "<f4"}), label="npz")
    (folder / "x.npz").write_bytes(raw)
    out = folder / "out"
    result = sandbox.call(["model", "run", stem, "--inputs", folder / "x.npz", "--out", out, *SMALL_CAP,
                           *IN_PROCESS],
                          kind="model run --inputs")
    result.check((0, 1, 2), reads=[folder, stem.parent], writes=[out], temp=sandbox.temp)
    if result.code in (0, 1):
        assert (out / "model_result.json").is_file()


@pytest.fixture(scope="module")
def baseline(sandbox, stem, tmp_path_factory):
    """A baseline of the stem, saved by the real command."""
    folder = tmp_path_factory.mktemp("baseline")
    result = sandbox.call(["model", "run", stem, "--save-baseline", folder / "base", "--out", folder / "run"],
                          kind="setup")
    assert result.code == 0, result.describe()
    return folder / "base"


@hostile(30)
@given(data=st.data())
def test_model_run_takes_a_hostile_baseline(sandbox, stem, baseline, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("bad-baseline")
    base = folder / "base"
    shutil.copytree(baseline, base)
    which = data.draw(st.sampled_from(["outputs.npz", "inputs.npz"]), label="file")
    with np.load(baseline / which) as npz:
        arrays = {k: npz[k] for k in npz.files}
    raw = data.draw(hostile_npz(list(arrays), {k: v.shape for k, v in arrays.items()},
                                {k: v.dtype.str for k, v in arrays.items()}), label="npz")
    (base / which).write_bytes(raw)
    out = folder / "out"
    result = sandbox.call(["model", "run", stem, "--baseline", base, "--out", out, *SMALL_CAP, *IN_PROCESS],
                          kind="model run --baseline")
    result.check((0, 1, 2), reads=[base, stem.parent], writes=[out], temp=sandbox.temp)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    """A run of the test catalog whose cases fail (a mapper that shifts indices), so that every
    case has a folder of arrays for the report to draw."""
    import local_cases

    out = tmp_path_factory.mktemp("failing") / "run"
    code = run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "-k=-00,-03", "--no-progress"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx_wrong_indices",
                       worker_paths=(local_cases.HERE,))
    assert code == 1 and any((out / "cases").iterdir())
    return out


@hostile(40)
@given(data=st.data())
def test_report_survives_hostile_case_folders(sandbox, failing_run, tmp_path_factory, data):
    run = tmp_path_factory.mktemp("report") / "run"
    shutil.copytree(failing_run, run)
    folders = sorted((run / "cases").iterdir())
    victim = data.draw(st.sampled_from(folders), label="case folder")
    which = data.draw(st.sampled_from(["expected.npz", "actual.npz", "inputs.npz"]), label="file")
    with np.load(victim / which) as npz:
        arrays = {k: npz[k] for k in npz.files}
    (victim / which).write_bytes(data.draw(hostile_npz(list(arrays), {k: v.shape for k, v in arrays.items()},
                                                       {k: v.dtype.str for k, v in arrays.items()}), label="npz"))
    result = sandbox.call(["report", run, *SMALL_CAP], kind="report (case folders)")
    result.check((0,), reads=[run], writes=[run], temp=sandbox.temp)
    html = (run / "report.html").read_text(encoding="utf-8")
    ids = [json.loads(line)["id"] for line in (run / "results.jsonl").read_text().splitlines()[1:-1]]
    assert len(ids) == 2 and all(f'id="{i}"' in html or i in html for i in ids)  # every case keeps its section
