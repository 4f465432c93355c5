"""The torchvision-exported corpus in tests/data/models/: files match manifest.json and run on the CPU EP.

Needs only numpy, onnx and onnxruntime; the files are made by tools/export_torchvision_models.py in a
separate environment with torch, which this project never depends on.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

CORPUS = Path(__file__).resolve().parent.parent / "data" / "models"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
ENTRIES = {e["file"]: e for e in MANIFEST["models"]}
COUNTED = ("RoiAlign", "MaxRoiPool", "MaxPool")
CONTROL_FLOW = ("Loop", "If", "Scan")
MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_TOTAL_BYTES = 12 * 1024 * 1024


def _walk(graph: onnx.GraphProto, depth: int = 0):
    for node in graph.node:
        yield node, depth
        for attr in node.attribute:
            subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subs:
                yield from _walk(sub, depth + 1)


def _counts(model: onnx.ModelProto) -> tuple[dict, dict]:
    nodes = {"top_level": dict.fromkeys(COUNTED, 0), "in_subgraphs": dict.fromkeys(COUNTED, 0)}
    control = dict.fromkeys(CONTROL_FLOW, 0)
    for node, depth in _walk(model.graph):
        if node.op_type in COUNTED:
            nodes["top_level" if depth == 0 else "in_subgraphs"][node.op_type] += 1
        if node.op_type in control:
            control[node.op_type] += 1
    return nodes, control


def _spec(vi: onnx.ValueInfoProto) -> dict:
    t = vi.type.tensor_type
    return {"name": vi.name,
            "shape": [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim],
            "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name}


def _image(entry: dict, run: dict) -> np.ndarray:
    shape = tuple(entry["inputs"][0]["shape"])
    return np.random.default_rng(MANIFEST["input_seed"]).random(shape, dtype=np.float32) * np.float32(run["scale"])


@pytest.fixture(scope="module", params=sorted(ENTRIES))
def shipped(request):
    entry = ENTRIES[request.param]
    data = (CORPUS / entry["file"]).read_bytes()
    return entry, data, onnx.load_from_string(data)


def test_the_folder_holds_exactly_the_manifest_files_within_the_size_budget():
    on_disk = {p.name for p in CORPUS.glob("*.onnx")}
    assert on_disk == set(ENTRIES)
    sizes = {name: (CORPUS / name).stat().st_size for name in on_disk}
    assert all(size < MAX_FILE_BYTES for size in sizes.values()), sizes
    assert sum(sizes.values()) < MAX_TOTAL_BYTES, sizes


def test_the_corpus_covers_every_torchvision_detector_and_the_stem():
    classes = {e["torchvision_class"] for e in ENTRIES.values()}
    assert {"torchvision.models.detection.FasterRCNN", "torchvision.models.detection.MaskRCNN",
            "torchvision.models.detection.KeypointRCNN"} <= classes
    assert any(e["nodes"]["top_level"]["MaxPool"] == 1 and e["nodes"]["top_level"]["RoiAlign"] == 0
               for e in ENTRIES.values())
    # the zero-ROI edge case is recorded somewhere, and so is a run where every RoiAlign node gets ROIs
    runs = [r for e in ENTRIES.values() for r in e["seeded_runs"] if r["roi_align_rois"]]
    assert any(0 in r["roi_align_rois"].values() for r in runs)
    for e in ENTRIES.values():
        if e["roi_align_nodes"]:
            assert any(all(n > 0 for n in r["roi_align_rois"].values()) for r in e["seeded_runs"]), e["file"]


def test_file_bytes_and_structure_match_the_manifest(shipped):
    entry, data, model = shipped
    assert len(data) == entry["size_bytes"]
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    onnx.checker.check_model(model)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    assert (opset, model.ir_version) == (entry["opset"], entry["ir_version"])
    assert [_spec(vi) for vi in model.graph.input] == entry["inputs"]
    assert [_spec(vi) for vi in model.graph.output] == entry["outputs"]
    nodes, control = _counts(model)
    assert nodes == entry["nodes"]
    assert control == entry["control_flow_nodes"]
    for op, listed in (("RoiAlign", entry["roi_align_nodes"]), ("MaxPool", entry["max_pool_nodes"])):
        assert [n.name for n in model.graph.node if n.op_type == op] == [n["name"] for n in listed]


def test_each_recorded_run_reproduces_on_the_cpu_ep(shipped):
    entry, data, model = shipped
    # expose every top-level RoiAlign's rois so the number of ROIs it pools can be checked
    roi_nodes = [n for n in model.graph.node if n.op_type == "RoiAlign"]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for node in roi_nodes:
        if node.input[1] not in known:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(node.input[1]))
            known.add(node.input[1])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3  # the mask/keypoint Loop bodies keep trace-time shapes ORT warns about
    session = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    same_ort = ort.__version__ == MANIFEST["onnxruntime_used_for_seeded_runs"]
    assert entry["seeded_runs"]
    for run in entry["seeded_runs"]:
        image = _image(entry, run)
        assert hashlib.sha256(image.tobytes()).hexdigest() == run["input_sha256"], run["input"]
        values = dict(zip(names, session.run(None, {entry["inputs"][0]["name"]: image})))
        for name, shape in run["output_shapes"].items():
            assert np.isfinite(values[name]).all(), (entry["file"], run["input"], name)
        rois = {n.name: int(values[n.input[1]].shape[0]) for n in roi_nodes}
        shapes = {name: list(values[name].shape) for name in run["output_shapes"]}
        if same_ort:
            assert shapes == run["output_shapes"], run["input"]
            assert rois == run["roi_align_rois"], run["input"]
        else:
            # another onnxruntime may move a borderline box across a threshold, so only which nodes
            # see no ROI at all and whether anything was detected must hold
            assert {k: v == 0 for k, v in rois.items()} == {k: v == 0 for k, v in run["roi_align_rois"].items()}
            if run["detections"] is not None:
                assert (shapes["boxes"][0] == 0) == (run["detections"] == 0)
