"""The library side of ``ep-testbed map`` and ``ep-testbed gen``."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort

from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli.gen import write_cases
from ep_testbed.harness.cli.map import cli_map
from ep_testbed.harness.core.results import safe_id
from ep_testbed.reference import desc_from_dml, desc_to_dml, execute, execute_reading


def test_cli_map_prints_nodes_attributes_and_every_flag(tmp_path):
    desc = roi_align_desc(True, reduction="MAX", samples=(2, 2), sx=0.25, sy=0.5)
    path = tmp_path / "desc.json"
    path.write_text(json.dumps(desc_to_dml(desc)))
    text = cli_map(path)
    assert "RoiAlign" in text and "MaxPool" in text and "sampling_ratio=1" in text
    assert "output_height=6" in text   # 3 rows x 2 samples
    for field in ("ReductionFunction", "SpatialScaleX", "InputPixelOffset", "OutOfBoundsInputValue",
                  "AlignRegionsToCorners", "BatchIndicesTensor.DataType"):
        assert field in text
    nearest = tmp_path / "nearest.json"
    nearest.write_text(json.dumps(desc_to_dml(roi_align_desc(True, interp="NEAREST_NEIGHBOR"))))
    assert "inexpressible" in cli_map(nearest) and "no ONNX model" in cli_map(nearest)


def test_write_cases_writes_files_standard_tools_open(tmp_path):
    folders = write_cases("roi_pooling", tmp_path, seed=3)
    cases = build_catalog(["roi_pooling"], seed=3)
    assert len(folders) == len(cases)
    index = json.loads((tmp_path / "cases.json").read_text())
    assert [c["id"] for c in index["cases"]] == [c.id for c in cases]
    for folder, case in list(zip(folders, cases))[::9]:
        assert folder.name == safe_id(case.id) and "/" not in folder.name
        desc = desc_from_dml(json.loads((folder / "desc.json").read_text()))
        assert desc == case.desc
        model = onnx.load(folder / "model.onnx")
        onnx.checker.check_model(model)
        feeds = dict(np.load(folder / "feeds.npz"))
        expected = dict(np.load(folder / "expected.npz"))
        out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        if not case.tags.get("expect"):  # ONNX Runtime's kernel computes the reference under its readings
            ort_reading = execute_reading(case.desc, case.inputs(), ["half-away-rounding", "float32-bins", "std-max-fold"])
            np.testing.assert_array_equal(out[0], ort_reading.outputs["OutputTensor"])
        np.testing.assert_array_equal(expected["OutputTensor"], execute(case.desc, case.inputs())["OutputTensor"])
        flags = json.loads((folder / "flags.json").read_text())
        assert flags["id"] == case.id and flags["flags"]


def test_write_cases_handles_inexpressible_cases(tmp_path):
    folders = write_cases("roi_align1", tmp_path)
    without_model = [f for f in folders if not (f / "model.onnx").exists()]
    assert without_model
    for folder in without_model:
        assert json.loads((folder / "flags.json").read_text())["kind"] == "inexpressible"
        assert "InputTensor" in np.load(folder / "inputs.npz")



def test_every_gen_folders_inputs_are_what_reference_computes_expected_from(tmp_path, capsys):
    """``ep-testbed reference --desc desc.json --inputs inputs.npz`` on a gen folder gives its
    expected.npz (inputs.npz used to hold the model's feeds: int64 batch indices, reshaped and
    rewritten ROIs, widened MaxPool inputs, which the reference refused, exit 2)."""
    from ep_testbed.harness.cli import main

    for op in ("roi_align1", "roi_align", "roi_pooling", "max_pooling2"):
        folders = write_cases(op, tmp_path / op)
        for folder in folders[::7]:
            out = tmp_path / "y.npz"
            code = main(["reference", "--desc", str(folder / "desc.json"), "--inputs", str(folder / "inputs.npz"),
                         "--out", str(out)])
            assert code == 0, (folder.name, capsys.readouterr().err)
            expected, got = np.load(folder / "expected.npz"), np.load(out)
            assert sorted(expected) == sorted(got)
            for name in expected:
                np.testing.assert_array_equal(got[name], expected[name])
    capsys.readouterr()
