"""Expectations scoped by the package that provides the EP (``ep_package``), and the WebGPU EP's
predictions from its source (harness/eps/webgpu_ep.py, harness/expectations/webgpu.json)."""

import json
from dataclasses import replace

import numpy as np
import pytest

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.core import expectations as E
from ep_testbed.harness.core.untrusted_files import FileRefused
from ep_testbed.harness.eps import registry, webgpu_ep

ENTRY = {"id": "*", "outcome": "not-on-ep", "reason": "r", "link": "https://example.org/x"}


@pytest.mark.parametrize("spec,package,active", [
    ("onnxruntime-ep-webgpu>=0.4", ("onnxruntime-ep-webgpu", "0.4.0"), True),
    ("onnxruntime-ep-webgpu>=0.4", ("onnxruntime_ep_webgpu", "0.5.1"), True),
    ("onnxruntime-ep-webgpu>=0.4", ("onnxruntime-ep-webgpu", "0.3.9"), False),
    ("onnxruntime-ep-webgpu>=0.4", ("onnxruntime", "1.32.0"), False),
    ("onnxruntime-ep-webgpu>=0.4", None, False),
    ("onnxruntime-ep-webgpu>=0.4", ("onnxruntime-ep-webgpu", "unknown"), False),
    ("onnxruntime-openvino", ("onnxruntime-openvino", "1.24.1"), True),
    ("onnxruntime-openvino<1.25", ("onnxruntime-openvino", "1.25.0"), False),
    (["onnxruntime-ep-webgpu>=0.4", "onnxruntime-webgpu>=1.27"], ("onnxruntime-webgpu", "1.27.0"), True),
    (["onnxruntime-ep-webgpu>=0.4", "onnxruntime-webgpu>=1.27"], ("onnxruntime-webgpu", "1.26.0"), False),
])
def test_an_entry_scoped_by_ep_package_holds_only_for_that_package_and_range(spec, package, active):
    found = E.parse({"expectations": [dict(ENTRY, ep_package=spec)]}, ep_package=package)
    assert (len(found), len(found.inactive)) == ((1, 0) if active else (0, 1))
    if active:
        assert found.entries[0].to_json()["ep_package"] == spec


@pytest.mark.parametrize("spec,words", [
    ("", "ep_package must be a string"),
    (7, "ep_package must be a string"),
    ([], "ep_package must be a string"),
    (["onnxruntime-ep-webgpu", 3], "ep_package must be a string"),
    ("onnxruntime-ep-webgpu >= soon", "is not OP VERSION"),
    (">=1.2", "expected a distribution name"),
])
def test_a_malformed_ep_package_is_refused_naming_the_entry(spec, words, tmp_path):
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"expectations": [dict(ENTRY, ep_package=spec)]}), encoding="utf-8")
    with pytest.raises(FileRefused) as info:
        E.load(str(path), ep_package=("onnxruntime-ep-webgpu", "0.4.0"))
    assert str(path) in str(info.value) and "expectations[0]" in str(info.value) and words in str(info.value)


def test_the_shipped_webgpu_predictions_hold_for_the_plugin_and_the_webgpu_wheel_only():
    def own(expectations):
        """webgpu.json's entries (the shared causes of shared.json that apply to WebGPU say so)."""
        return [e for e in expectations.entries if not e.applies_to]

    assert len(own(E.for_ep("webgpu", ep_package=("onnxruntime-ep-webgpu", "0.4.0")))) == 5
    assert len(own(E.for_ep("webgpu", ep_package=("onnxruntime-webgpu", "1.27.0")))) == 5
    assert len(own(E.for_ep("webgpu", ep_package=("onnxruntime", "1.32.0")))) == 0
    shipped = json.load(open(E.EXPECTATIONS_DIR + "/webgpu.json", encoding="utf-8"))
    assert all(e["predicted_from"] and e["link"].startswith("https://github.com/microsoft/onnxruntime/blob/")
               for e in shipped["expectations"])


def _case(case_id):
    return next(c for c in build_catalog() if c.id == case_id)


def _kinds(case):
    return [(p["op_type"], p["field"], p["kind"]) for p in webgpu_ep.predict_case(case)]


@pytest.mark.parametrize("case_id,expected", [
    ("max_pooling2/grid-int16-2d-w2-s1-p0_1-d1-idxnone", [("MaxPool", "T", "declined")]),
    ("max_pooling2/grid-opset12-uint8-2d-w3-s2-p1_1-d2-idxuint64", [("MaxPool", "T", "declined")]),
    ("max_pooling2/grid-float32-3d-w3-s3-p0_2-d1-idxuint64", [("MaxPool", "Indices", "refused")]),
    ("max_pooling2/grid-float16-2d-w3-s1-p1_2-d2-idxnone", []),
    ("max_pooling2/edge-minus-inf-window", [("MaxPool", "Indices", "refused")]),
])
def test_maxpool_predictions_follow_the_kernel_registration_and_compute(case_id, expected):
    assert _kinds(_case(case_id)) == expected


def test_roi_operators_have_no_webgpu_kernel():
    for op, node in (("roi_align1", "RoiAlign"), ("roi_align", "RoiAlign"), ("roi_pooling", "MaxRoiPool")):
        case = next(c for c in build_catalog([op]) if webgpu_ep.predict_case(c))
        assert _kinds(case) == [(node, node, "declined")]


class _Case:
    """A catalog case with another desc (same inputs)."""

    def __init__(self, case, **fields):
        self.id, self.tags, self.opset, self.seed = case.id, case.tags, case.opset, getattr(case, "seed", None)
        self.desc, self._case = replace(case.desc, **fields), case

    def inputs(self):
        return self._case.inputs()


def test_a_window_of_only_minus_inf_is_predicted_to_start_finite_and_stay_there():
    case = _Case(_case("max_pooling2/edge-minus-inf-window"), output_indices_tensor=None)
    found = webgpu_ep.predict_case(case)
    assert [(p["field"], p["kind"], p["value"]) for p in found] == [
        ("WindowStart", "diverges", float(np.finfo(np.float32).min))]
    assert "pool.cc#L87-L97" in found[0]["source"]
    plain = _Case(_case("max_pooling2/grid-float32-2d-w2x3-s3-p1_0-d2-idxuint64"), output_indices_tensor=None)
    assert webgpu_ep.predict_case(plain) == []
    assert webgpu_ep.WINDOW_START[10] == -65504.0  # onnx.TensorProto.FLOAT16
    # the predictor comes from the WebGPU EP's record, handed to the expectations by their reader
    assert E.for_ep("webgpu", ep_package=("onnxruntime-ep-webgpu", "0.4.0")).match_case(case, []) is None
    entry = E.for_ep("webgpu", ep_package=("onnxruntime-ep-webgpu", "0.4.0"),
                     predictors=registry.predictors()).match_case(case, [])
    assert entry is not None and entry.predicted == ((("field", "WindowStart"), ("kind", "diverges"),
                                                      ("op_type", "MaxPool")),)
