"""Every field of every page: the mapping kind of each of its values, and the reason given.

Each row: (op, desc overrides, DML field, kind). The last test checks that the rows name
every member of every desc (so a field added to a page without a row here fails)."""

from __future__ import annotations

import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import UINT32_MAX
from ep_testbed.graphs.cases.max_pooling2 import max_pooling2_desc
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.graphs.cases.roi_pooling import roi_pooling_desc
from ep_testbed.reference import MaxPooling2Desc, RoiAlign1Desc, RoiAlignDesc, RoiPoolingDesc
from ep_testbed.reference.descs import dml_fields

BUILD = {
    "roi_align1": lambda **kw: roi_align_desc(True, **kw),
    "roi_align": lambda **kw: roi_align_desc(False, **kw),
    "max_pooling2": max_pooling2_desc,
    "roi_pooling": roi_pooling_desc,
}
DESC_TYPE = {"roi_align1": RoiAlign1Desc, "roi_align": RoiAlignDesc, "max_pooling2": MaxPooling2Desc,
             "roi_pooling": RoiPoolingDesc}

ROI_ALIGN_ROWS = [
    ({}, "InputTensor.DataType", "exact"),
    ({"dtype": "FLOAT16"}, "InputTensor.DataType", "exact"),
    ({"dtype": "FLOAT16", "sx": 0.5, "sy": 0.25}, "InputTensor.DataType", "composed"),
    ({}, "InputTensor.Sizes", "exact"),
    ({}, "InputTensor.Strides", "exact"),
    ({}, "ROITensor.DataType", "exact"),
    ({"roi_rank": 2}, "ROITensor.Sizes", "exact"),
    ({"roi_rank": 3}, "ROITensor.Sizes", "composed"),
    ({"roi_rank": 4}, "ROITensor.Sizes", "composed"),
    ({}, "ROITensor.Strides", "exact"),
    ({"bi_rank": 1}, "BatchIndicesTensor.Sizes", "exact"),
    ({"bi_rank": 4}, "BatchIndicesTensor.Sizes", "composed"),
    ({"bi_type": "UINT32"}, "BatchIndicesTensor.DataType", "composed"),
    ({}, "BatchIndicesTensor.Strides", "exact"),
    ({}, "OutputTensor.Sizes", "exact"),
    ({}, "OutputTensor.DataType", "exact"),
    ({}, "OutputTensor.Strides", "exact"),
    ({"reduction": "AVERAGE"}, "ReductionFunction", "exact"),
    ({"reduction": "MAX", "samples": (1, 1)}, "ReductionFunction", "composed"),
    ({"reduction": "MAX", "samples": (3, 3)}, "ReductionFunction", "composed"),
    ({"reduction": "MAX", "samples": (1, UINT32_MAX)}, "ReductionFunction", "diverges"),
    ({"interp": "LINEAR"}, "InterpolationMode", "exact"),
    ({"interp": "NEAREST_NEIGHBOR"}, "InterpolationMode", "inexpressible"),
    ({"sx": 0.5, "sy": 0.5}, "SpatialScaleX", "exact"),
    ({"sx": 0.5, "sy": 0.5}, "SpatialScaleY", "exact"),
    ({"sx": 0.25, "sy": 0.5}, "SpatialScaleX", "composed"),
    ({"sx": 0.25, "sy": 0.5}, "SpatialScaleY", "composed"),
    ({"oob": 0.0}, "OutOfBoundsInputValue", "exact"),
    ({"oob": 1.5}, "OutOfBoundsInputValue", "composed"),
    ({"oob": 1.5, "reduction": "MAX", "samples": (2, 2)}, "OutOfBoundsInputValue", "composed"),
    ({"oob": 1.5, "reduction": "MAX", "samples": (1, UINT32_MAX)}, "OutOfBoundsInputValue", "inexpressible"),
    ({"samples": (2, 2)}, "MinimumSamplesPerOutput", "exact"),
    ({"samples": (2, 2)}, "MaximumSamplesPerOutput", "exact"),
    ({"samples": (1, UINT32_MAX)}, "MinimumSamplesPerOutput", "exact"),
    ({"samples": (1, 4)}, "MaximumSamplesPerOutput", "diverges"),
    ({"samples": (2, 5)}, "MinimumSamplesPerOutput", "inexpressible"),
]
ROI_ALIGN1_ROWS = ROI_ALIGN_ROWS + [
    ({"bi_type": "UINT64"}, "BatchIndicesTensor.DataType", "exact"),
    ({"ipo": 0.5}, "InputPixelOffset", "exact"),
    ({"ipo": 0.0}, "InputPixelOffset", "composed"),
    ({"ipo": 0.25}, "InputPixelOffset", "composed"),
    ({"ipo": 0.0, "samples": (1, UINT32_MAX)}, "InputPixelOffset", "composed"),
    ({"opo": -0.5}, "OutputPixelOffset", "exact"),
    ({"opo": 0.0}, "OutputPixelOffset", "composed"),
    ({"opo": 0.0, "samples": (1, UINT32_MAX)}, "OutputPixelOffset", "inexpressible"),
    ({"corners": False}, "AlignRegionsToCorners", "exact"),
    ({"corners": True}, "AlignRegionsToCorners", "composed"),
    ({"corners": True, "samples": (1, UINT32_MAX)}, "AlignRegionsToCorners", "inexpressible"),
]
MAX_POOLING2_ROWS = [
    ({"dtype": "FLOAT32"}, "InputTensor.DataType", "exact"),
    ({"dtype": "FLOAT16"}, "InputTensor.DataType", "exact"),
    ({"dtype": "INT8"}, "InputTensor.DataType", "exact"),
    ({"dtype": "UINT8"}, "InputTensor.DataType", "exact"),
    *[({"dtype": t}, "InputTensor.DataType", "composed")
      for t in ("INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64")],
    ({"dtype": "INT32"}, "OutputTensor.DataType", "composed"),
    ({}, "InputTensor.Sizes", "exact"),
    ({"dims": 3}, "InputTensor.Sizes", "exact"),
    ({}, "InputTensor.Strides", "exact"),
    ({}, "OutputTensor.Sizes", "exact"),
    ({}, "OutputTensor.DataType", "exact"),
    ({}, "OutputTensor.Strides", "exact"),
    ({"indices": None}, "OutputIndicesTensor", "exact"),
    ({"indices": "UINT64"}, "OutputIndicesTensor.DataType", "exact"),
    ({"indices": "UINT32"}, "OutputIndicesTensor.DataType", "composed"),
    ({"indices": "UINT64"}, "OutputIndicesTensor.Sizes", "exact"),
    ({"indices": "UINT64"}, "OutputIndicesTensor.Strides", "exact"),
    ({"dims": 2}, "DimensionCount", "exact"),
    ({"dims": 3}, "DimensionCount", "exact"),
    ({"stride": 2}, "Strides", "exact"),
    ({"window": 3}, "WindowSize", "exact"),
    ({"window": 3, "start": 1}, "StartPadding", "exact"),
    ({"window": 3, "end": 2}, "EndPadding", "exact"),
    ({"window": 2, "dilation": 3, "start": 2, "end": 2, "stride": 2}, "StartPadding", "diverges"),
    ({"window": 2, "dilation": 3, "start": 2, "end": 2, "stride": 2}, "EndPadding", "diverges"),
    ({"dilation": 1}, "Dilations", "exact"),
    ({"dilation": 2}, "Dilations", "exact"),
]
ROI_POOLING_ROWS = [
    ({}, "InputTensor.DataType", "exact"),
    ({"dtype": "FLOAT16"}, "InputTensor.DataType", "exact"),
    ({}, "InputTensor.Sizes", "exact"),
    ({}, "InputTensor.Strides", "exact"),
    ({}, "ROITensor.DataType", "exact"),
    ({}, "ROITensor.Sizes", "composed"),
    ({}, "ROITensor.Strides", "exact"),
    ({}, "OutputTensor.Sizes", "exact"),
    ({}, "OutputTensor.DataType", "exact"),
    ({}, "OutputTensor.Strides", "exact"),
    ({"scale": 0.5}, "SpatialScale", "exact"),
    ({"scale": 0.0}, "SpatialScale", "composed"),
    ({"pooled": (2, 3)}, "PooledSize", "exact"),
]
ROWS = ([("roi_align1", *r) for r in ROI_ALIGN1_ROWS] + [("roi_align", *r) for r in ROI_ALIGN_ROWS]
        + [("max_pooling2", *r) for r in MAX_POOLING2_ROWS] + [("roi_pooling", *r) for r in ROI_POOLING_ROWS])


@pytest.mark.parametrize("op, overrides, field, kind", ROWS,
                         ids=[f"{op}-{field}-{kind}-{overrides}" for op, overrides, field, kind in ROWS])
def test_field_kind(op, overrides, field, kind):
    mapping = to_onnx(BUILD[op](**overrides))
    flags = [f for f in mapping.flags if f.field == field]
    assert flags, f"no flag for {field}: {[f.field for f in mapping.flags]}"
    assert {f.kind for f in flags} == {kind}, flags
    assert all(f.reason and len(f.reason) > 10 for f in flags)
    if kind == "inexpressible":
        assert not mapping.expressible and mapping.model is None


def test_every_member_of_every_page_has_a_row():
    for op, desc_type in DESC_TYPE.items():
        named = {field.split(".")[0] for o, _, field, _ in ROWS if o == op}
        members = {dml for _, dml, _ in dml_fields(desc_type)}
        assert members <= named, f"{op}: no row for {sorted(members - named)}"


def test_every_flag_field_is_a_member_and_every_member_is_flagged():
    """to_onnx flags every member of the desc (a tensor by its DataType/Sizes/Strides)."""
    for op, build in BUILD.items():
        desc = build()
        mapping = to_onnx(desc)
        members = {dml for _, dml, _ in dml_fields(type(desc))}
        flagged = {f.field.split(".")[0] for f in mapping.flags}
        assert flagged <= members, flagged - members
        missing = {m for m in members if m not in flagged}
        # OutputIndicesTensor is flagged whether present or not; every other member always is
        assert not missing, f"{op}: unflagged {missing}"


def test_flag_json():
    mapping = to_onnx(roi_align_desc(True, samples=(1, 4)))
    for f in mapping.flags:
        j = f.to_json()
        assert set(j) == {"field", "value", "kind", "reason"}
    with pytest.raises(ValueError):
        type(mapping.flags[0])("X", 1, "sort-of", "no")


def test_inexpressible_mapping_refuses_feeds():
    mapping = to_onnx(roi_align_desc(True, interp="NEAREST_NEIGHBOR"))
    assert not mapping.expressible and mapping.kind == "inexpressible"
    with pytest.raises(ValueError, match="InterpolationMode"):
        mapping.feeds({})
