"""Validation against the doc pages: every rule is a DescError naming the field."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from descs_for_tests import max_pooling2, roi_align1, roi_pooling
from test_descs import CANONICAL, ISSUE_EXAMPLE

from ep_testbed.reference import DescError, desc_from_dml, desc_to_dml, execute, validate


def refused(d, field, level="5.0", words=None):
    with pytest.raises(DescError) as info:
        validate(desc_from_dml(d), level)
    assert info.value.field == field, str(info.value)
    if words:
        assert words in str(info.value)
    return info.value


@pytest.mark.parametrize("d", CANONICAL, ids=lambda d: d["Type"])
def test_canonical_descs_are_valid(d):
    validate(desc_from_dml(d))


def test_feature_levels_of_max_pooling2():
    """INT32 input is refused at 3.0 and taken at 5.0; INT8 at 3.0 but not 2.1; UINT64 indices need 5.0."""
    int32 = desc_to_dml(max_pooling2((1, 1, 4, 4), (2, 2), dtype="INT32", indices="UINT32"))
    validate(desc_from_dml(int32), "5.0")
    refused(int32, "InputTensor.DataType", "3.0", "FLOAT32, FLOAT16, INT8, UINT8")
    int8 = desc_to_dml(max_pooling2((1, 1, 4, 4), (2, 2), dtype="INT8", indices="UINT32"))
    validate(desc_from_dml(int8), "3.0")
    refused(int8, "InputTensor.DataType", "2.1")
    u64 = desc_to_dml(max_pooling2((1, 1, 4, 4), (2, 2), indices="UINT64"))
    refused(u64, "OutputIndicesTensor.DataType", "4.0")
    refused(u64, "feature_level", "2.0", "introduced in DML_FEATURE_LEVEL_2_1")
    refused(u64, "feature_level", "five")


def test_feature_levels_of_roi_align():
    """UINT64 batch indices: ROI_ALIGN1 at 5.0 only; ROI_ALIGN never; ROI_ALIGN1 needs 4.0."""
    a1 = desc_to_dml(roi_align1((1, 1, 4, 4), (2, 4), (2, 2), batch_type="UINT64"))
    validate(desc_from_dml(a1), "5.0")
    refused(a1, "BatchIndicesTensor.DataType", "4.0")
    refused(a1, "feature_level", "3.0")
    a0 = desc_to_dml(roi_align1((1, 1, 4, 4), (2, 4), (2, 2), batch_type="UINT64", op="DML_OPERATOR_ROI_ALIGN"))
    refused(a0, "BatchIndicesTensor.DataType", "5.0")


def test_same_data_type_constraints():
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["ROITensor"]["DataType"] = "FLOAT16"
    refused(d, "ROITensor.DataType", words="same DataType as InputTensor")
    p = copy.deepcopy(CANONICAL[3])
    p["OutputTensor"]["DataType"] = "INT64"
    refused(p, "OutputTensor.DataType", words="same DataType")


def test_dimension_counts_and_shapes():
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["ROITensor"]["Sizes"] = [2, 5, 4]
    refused(d, "ROITensor.Sizes", words="{NumROIs, 4}")
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["BatchIndicesTensor"]["Sizes"] = [4]
    refused(d, "BatchIndicesTensor.Sizes", words="NumROIs = 5")
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["OutputTensor"]["Sizes"] = [5, 2, 7, 7]
    refused(d, "OutputTensor.Sizes")
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["InputTensor"]["Sizes"] = [1, 3, 16, 16, 1]
    refused(d, "InputTensor.Sizes", words="4 dimensions")
    d = copy.deepcopy(ISSUE_EXAMPLE)
    d["InputTensor"]["Strides"] = [1, 1]
    refused(d, "InputTensor.Strides")


def test_pooled_size_must_match_output():
    """RP-6."""
    d = copy.deepcopy(CANONICAL[2])
    d["PooledSize"] = {"Height": 3, "Width": 2}
    refused(d, "OutputTensor.Sizes", words="PooledSize.Height")
    d = copy.deepcopy(CANONICAL[2])
    d["ROITensor"]["Sizes"] = [1, 3, 5]
    refused(d, "ROITensor.Sizes")
    d = copy.deepcopy(CANONICAL[2])
    d["SpatialScale"] = -1.0
    refused(d, "SpatialScale")


def test_max_pooling2_sizes_and_arrays():
    """The page's output formula (with the dilated window, MP-1), DimensionCount, array lengths."""
    d = desc_to_dml(max_pooling2((1, 1, 6, 6), (3, 3), strides=[2, 2]))
    d["OutputTensor"]["Sizes"] = [1, 1, 3, 3]
    refused(d, "OutputTensor.Sizes", words="[1, 1, 2, 2]")
    d = desc_to_dml(max_pooling2((1, 1, 6, 6), (3, 3)))
    d["DimensionCount"] = 3
    refused(d, "DimensionCount")
    d = desc_to_dml(max_pooling2((1, 1, 6, 6), (3, 3)))
    d["Dilations"] = [1]
    refused(d, "Dilations")
    d = desc_to_dml(max_pooling2((1, 1, 6, 6), (3, 3)))
    d["Strides"] = [0, 1]
    refused(d, "Strides[0]")
    d = desc_to_dml(max_pooling2((1, 1, 6, 6), (3, 3)))
    d["OutputIndicesTensor"]["Sizes"] = [1, 1, 4, 3]
    refused(d, "OutputIndicesTensor.Sizes")


def test_window_larger_than_padded_input_is_refused():
    d = desc_to_dml(max_pooling2((1, 1, 6, 6), (3, 3)))
    d["WindowSize"] = [7, 3]
    refused(d, "WindowSize[0]", words="must fit in the padded input (6)")


def test_window_of_padding_only_is_refused():
    """MP-2: H = 1, window 2, dilation 2, padding 1 each side: both windows read only padding."""
    d = {"Type": "DML_OPERATOR_MAX_POOLING2",
         "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4]},
         "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4]},
         "DimensionCount": 2, "Strides": [1, 1], "WindowSize": [2, 1], "StartPadding": [1, 0],
         "EndPadding": [1, 0], "Dilations": [2, 1]}
    refused(d, "StartPadding[0]/EndPadding[0]", words="only padding")


def test_roi_align_scalar_fields():
    for field, value, words in [("MinimumSamplesPerOutput", 0, "at least 1"),
                                ("MaximumSamplesPerOutput", 1, ">= MinimumSamplesPerOutput"),
                                ("SpatialScaleX", float("inf"), "finite"),
                                ("InputPixelOffset", float("nan"), "finite"),
                                ("ReductionFunction", "SUM", "AVERAGE or")]:
        d = copy.deepcopy(ISSUE_EXAMPLE)
        d[field] = value
        refused(d, field, words=words)


def test_undefined_tensor_values_are_refused():
    """ERR-1: values the pages leave undefined get an error naming the tensor and row."""
    a = roi_align1((2, 1, 4, 4), (2, 4), (1, 1))
    x = np.zeros((2, 1, 4, 4), np.float32)
    rois = np.zeros((2, 4), np.float32)
    with pytest.raises(DescError, match=r"BatchIndicesTensor\[1\].*\[0, 2\)"):
        execute(a, {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.array([0, 2], np.uint32)})
    with pytest.raises(DescError, match="ROITensor row 0.*finite"):
        execute(a, {"InputTensor": x, "ROITensor": np.array([[np.nan, 0, 1, 1], [0, 0, 1, 1]], np.float32),
                    "BatchIndicesTensor": np.array([0, 1], np.uint32)})
    p = roi_pooling((2, 1, 4, 4), 1, (1, 1))
    for row, words in [([1.5, 0, 0, 1, 1], "whole number"), ([2, 0, 0, 1, 1], "whole number in \\[0, 2\\)"),
                       ([0, 3, 0, 1, 1], "x2 >= x1")]:
        with pytest.raises(DescError, match=words):
            execute(p, {"InputTensor": x, "ROITensor": np.array(row, np.float32).reshape(1, 1, 1, 5)})


def test_huge_sample_counts_are_refused_not_hung():
    """A region the size of 10^6 pixels with Maximum UINT32_MAX would need 10^12 samples."""
    a = roi_align1((1, 1, 4, 4), (1, 4), (1, 1), samples=(1, 2**32 - 1))
    with pytest.raises(DescError, match="MaximumSamplesPerOutput"):
        execute(a, {"InputTensor": np.zeros((1, 1, 4, 4), np.float32),
                    "ROITensor": np.array([[0, 0, 1e6, 1e6]], np.float32),
                    "BatchIndicesTensor": np.zeros(1, np.uint32)})
