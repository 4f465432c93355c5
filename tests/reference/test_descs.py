"""Descs as data: the DML dict form, its round trip, and the errors for malformed dicts."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ep_testbed.reference import DescError, RoiAlign1Desc, desc_from_dml, desc_to_dml, execute

ROOT = Path(__file__).resolve().parents[2]

ISSUE_EXAMPLE = {  # a ROI_ALIGN1 desc as a user writes it, in DirectML's own spelling
    "Type": "DML_OPERATOR_ROI_ALIGN1",
    "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 3, 16, 16]},
    "ROITensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 1, 5, 4]},
    "BatchIndicesTensor": {"DataType": "DML_TENSOR_DATA_TYPE_UINT32", "Sizes": [5]},
    "OutputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [5, 3, 7, 7]},
    "ReductionFunction": "DML_REDUCE_FUNCTION_AVERAGE",
    "InterpolationMode": "DML_INTERPOLATION_MODE_LINEAR",
    "SpatialScaleX": 0.25, "SpatialScaleY": 0.25,
    "InputPixelOffset": 0.5, "OutputPixelOffset": -0.5, "OutOfBoundsInputValue": 0.0,
    "MinimumSamplesPerOutput": 2, "MaximumSamplesPerOutput": 2, "AlignRegionsToCorners": False,
}

CANONICAL = [
    ISSUE_EXAMPLE,
    {"Type": "DML_OPERATOR_ROI_ALIGN",
     "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "Sizes": [2, 3, 8, 8]},
     "ROITensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "Sizes": [4, 4]},
     "BatchIndicesTensor": {"DataType": "DML_TENSOR_DATA_TYPE_UINT32", "Sizes": [1, 4]},
     "OutputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "Sizes": [4, 3, 2, 2]},
     "ReductionFunction": "DML_REDUCE_FUNCTION_MAX",
     "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR",
     "SpatialScaleX": 1.0, "SpatialScaleY": 0.5, "OutOfBoundsInputValue": -1.5,
     "MinimumSamplesPerOutput": 1, "MaximumSamplesPerOutput": 4},
    {"Type": "DML_OPERATOR_ROI_POOLING",
     "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 2, 6, 6], "Strides": [72, 36, 6, 1]},
     "ROITensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 1, 3, 5]},
     "OutputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [3, 2, 2, 3]},
     "SpatialScale": 0.5, "PooledSize": {"Height": 2, "Width": 3}},
    {"Type": "DML_OPERATOR_MAX_POOLING2",
     "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_INT32", "Sizes": [1, 2, 4, 5, 6]},
     "OutputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_INT32", "Sizes": [1, 2, 3, 4, 3]},
     "OutputIndicesTensor": {"DataType": "DML_TENSOR_DATA_TYPE_UINT64", "Sizes": [1, 2, 3, 4, 3]},
     "DimensionCount": 3, "Strides": [1, 1, 2], "WindowSize": [2, 2, 2], "StartPadding": [0, 0, 0],
     "EndPadding": [0, 0, 0], "Dilations": [1, 1, 1]},
    {"Type": "DML_OPERATOR_MAX_POOLING2",
     "InputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 1, 4, 4]},
     "OutputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 1, 3, 3]},
     "OutputIndicesTensor": None,
     "DimensionCount": 2, "Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0],
     "EndPadding": [0, 0], "Dilations": [1, 1]},
]


@pytest.mark.parametrize("d", CANONICAL, ids=lambda d: d["Type"])
def test_round_trip_is_exact(d):
    desc = desc_from_dml(copy.deepcopy(d))
    assert desc_to_dml(desc) == d
    assert desc_from_dml(json.loads(json.dumps(desc_to_dml(desc)))) == desc


def test_issue_example_fields_map_one_to_one():
    desc = desc_from_dml(ISSUE_EXAMPLE)
    assert isinstance(desc, RoiAlign1Desc)
    assert (desc.spatial_scale_x, desc.input_pixel_offset, desc.output_pixel_offset) == (0.25, 0.5, -0.5)
    assert (desc.minimum_samples_per_output, desc.align_regions_to_corners) == (2, False)
    assert desc.roi_tensor.sizes == (1, 1, 5, 4) and desc.batch_indices_tensor.data_type == "UINT32"


def test_short_spellings_and_absent_indices():
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["InputTensor"]["DataType"] = "FLOAT32"
    d["ReductionFunction"], d["InterpolationMode"] = "AVERAGE", "LINEAR"
    assert desc_from_dml(d) == desc_from_dml(ISSUE_EXAMPLE)
    pool = copy.deepcopy(CANONICAL[4])
    del pool["OutputIndicesTensor"]
    assert desc_from_dml(pool).output_indices_tensor is None


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d.update(Type="DML_OPERATOR_CONVOLUTION"), "Type"),
    (lambda d: d.update(SpatialScal=1.0), "SpatialScal"),
    (lambda d: d.pop("SpatialScaleY"), "SpatialScaleY"),
    (lambda d: d.update(SpatialScaleX="0.25"), "SpatialScaleX"),
    (lambda d: d.update(MinimumSamplesPerOutput=-1), "MinimumSamplesPerOutput"),
    (lambda d: d.update(MinimumSamplesPerOutput=1.5), "MinimumSamplesPerOutput"),
    (lambda d: d.update(AlignRegionsToCorners="yes"), "AlignRegionsToCorners"),
    (lambda d: d.update(ReductionFunction="MEAN"), "ReductionFunction"),
    (lambda d: d["InputTensor"].update(DataType="FLOAT64"), "InputTensor.DataType"),
    (lambda d: d["InputTensor"].update(Sizes=[1, 3, -16, 16]), "InputTensor.Sizes[2]"),
    (lambda d: d["ROITensor"].pop("Sizes"), "ROITensor.Sizes"),
    (lambda d: d["ROITensor"].update(Flags=1), "ROITensor.Flags"),
])
def test_malformed_dicts_name_the_field(mutate, field):
    d = copy.deepcopy(ISSUE_EXAMPLE)
    mutate(d)
    with pytest.raises(DescError) as info:
        desc_from_dml(d)
    assert info.value.field == field
    assert field in str(info.value)


def test_mismatched_arrays_are_refused():
    desc = desc_from_dml(ISSUE_EXAMPLE)
    good = {"InputTensor": np.zeros((1, 3, 16, 16), np.float32), "ROITensor": np.zeros((1, 1, 5, 4), np.float32),
            "BatchIndicesTensor": np.zeros(5, np.uint32)}
    cases = [
        ({**good, "InputTensor": np.zeros((1, 3, 16, 15), np.float32)}, "InputTensor", "shape"),
        ({**good, "ROITensor": np.zeros((1, 1, 5, 4), np.float64)}, "ROITensor", "dtype"),
        ({**good, "BatchIndicesTensor": np.zeros(5, np.int64)}, "BatchIndicesTensor", "dtype"),
        ({k: v for k, v in good.items() if k != "ROITensor"}, "ROITensor", "required"),
        ({**good, "Extra": np.zeros(1)}, "Extra", "not an input"),
        ({**good, "InputTensor": [[0.0]]}, "InputTensor", "numpy.ndarray"),
    ]
    for tensors, field, words in cases:
        with pytest.raises(DescError) as info:
            execute(desc, tensors)
        assert info.value.field == field and words in str(info.value)


def test_cli_reference_runs_a_desc(tmp_path):
    """The README's main job: `ep-testbed reference --desc ...` validates, runs and writes NPZ."""
    out = tmp_path / "out.npz"
    result = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "reference", "--desc",
                             str(ROOT / "examples" / "roi_align1.json"), "--out", str(out)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    with np.load(out) as data:
        assert data["OutputTensor"].shape == (5, 3, 7, 7)


def test_cli_reports_a_bad_desc_without_traceback(tmp_path):
    bad = copy.deepcopy(ISSUE_EXAMPLE)
    bad["OutputTensor"]["Sizes"] = [5, 3, 7]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    result = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "reference", "--desc", str(path)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert "OutputTensor.Sizes" in result.stderr and "Traceback" not in result.stderr


JUNK = [None, -1, 0, 1, 2, 3, 2**33, 1.5, -0.5, float("nan"), float("inf"), "x", "FLOAT16", "UINT64", "MAX", [],
        [1], [0, 0], [5, 5, 5], {}, True, [1, 2, 3, 4, 5, 6], "NEAREST_NEIGHBOR", [[1]], {"Height": 1}]


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i in range(len(node)):
            yield prefix + (i,)


@pytest.mark.parametrize("seed", range(4))
def test_mutated_descs_raise_only_desc_errors(seed):
    """1,500 canonical descs with one to three members replaced by junk (wrong types, negative,
    huge, NaN, unknown enum names, wrong lengths): parsing, validation and execution either
    succeed or raise DescError; no other exception (a NumPy traceback) escapes."""
    import random

    from ep_testbed.reference.inputs import random_inputs

    rng = random.Random(seed)
    outcomes = {"ok": 0, "refused": 0}
    fields = set()
    for trial in range(375):
        d = copy.deepcopy(rng.choice(CANONICAL))
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(list(_paths(d)))
            target = d
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = copy.deepcopy(rng.choice(JUNK))
        try:
            desc = desc_from_dml(d)
            with np.errstate(all="ignore"):
                execute(desc, random_inputs(desc, seed=trial))
            outcomes["ok"] += 1
        except DescError as e:
            assert str(e) and e.field, d
            outcomes["refused"] += 1
            fields.add(e.field.split("[")[0])
    assert outcomes["refused"] > 200 and len(fields) >= 10, (outcomes, fields)


def test_cli_reports_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("InputTensor: 1x3x16x16")
    result = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "reference", "--desc", str(path)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert "notes.txt: not a JSON desc" in result.stderr and "Traceback" not in result.stderr
