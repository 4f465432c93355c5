"""Every shipped torchvision model (tests/data/models/) through ``ep-testbed model run`` on the CPU EP.

What must hold whatever the numbers: every RoiAlign / MaxPool node the manifest counts is
attributed and judged (none missing, none in an error), a RoiAlign fed no ROI is an empty match,
the differences a flag explains are exactly the ROIs under one feature pixel (counted here
independently from the ROIs ONNX Runtime computes), the verdict and exit code follow the node
statuses, and the report names every node. Attributed node counts (top level / in subgraphs):
faster_rcnn_tiny_fpn 4/0, mask_rcnn_tiny_fpn 6/0, keypoint_rcnn_tiny_fpn 6/0, resnet18_stem 1/0.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models_testkit import result_of, run_cli
from real_models import CORPUS, ENTRIES, RUNS, expected_counts, recorded_input, zero_roi_nodes

from ep_testbed.graphs import attributed_op_types
from ep_testbed.harness.core.model_statuses import DIVERGING, NOT_JUDGED


def _roi_sizes(file: str, image: np.ndarray) -> dict[str, np.ndarray]:
    """Per RoiAlign node: the scaled (width, height) of every ROI it is fed, from ORT's own run."""
    model = onnx.load(str(CORPUS / file))
    nodes = [n for n in model.graph.node if n.op_type == "RoiAlign"]
    for node in nodes:
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(node.input[1]))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = dict(zip(names, session.run(None, {model.graph.input[0].name: image})))
    sizes = {}
    for node in nodes:
        scale = next(a.f for a in node.attribute if a.name == "spatial_scale")
        rois = values[node.input[1]].astype(np.float64)
        sizes[node.name] = np.stack([(rois[:, 2] - rois[:, 0]) * scale, (rois[:, 3] - rois[:, 1]) * scale], axis=1)
    return sizes


@pytest.mark.parametrize("file, run_name", RUNS, ids=[f"{f.removesuffix('.onnx')}-{r}" for f, r in RUNS])
def test_each_shipped_model_runs_on_cpu_with_every_node_attributed(file, run_name, tmp_path, capsys):
    inputs = recorded_input(tmp_path, file, run_name)
    code, out, err = run_cli(["model", "run", str(CORPUS / file), "--inputs", str(inputs),
                              "--out", str(tmp_path / "run")], capsys)
    result = result_of(tmp_path / "run")
    rows = result["attribution"]["nodes"]
    top, inner = expected_counts(file)
    assert len([r for r in rows if not r["inside"]]) == top and len([r for r in rows if r["inside"]]) == inner
    assert result["attribution"]["counts"]["judged"] == top
    assert not [r for r in rows if r["status"] in NOT_JUDGED and not r["inside"]], [r["message"] for r in rows]
    assert all(o["outcome"] == "pass" for o in result["outputs"])  # CPU against CPU
    for name in zero_roi_nodes(file, run_name):
        row = next(r for r in rows if r["node"] == name)
        assert row["status"] == "match" and "ROITensor" in row["empty"] and row["compared"] == 0
    diverging = [r for r in rows if r["status"] in DIVERGING]
    assert result["verdict"] == ("fail" if diverging else "pass") and code == (1 if diverging else 0), err
    assert len(result["verdict_reasons"]) == len(diverging)
    assert f"{top} of {top + inner} {'/'.join(attributed_op_types())} nodes judged" in out
    for row in rows:
        assert f"node {row['node']} ({row['op_type']}, on CPU): {row['status']}" in out
        if row["status"] in ("explained", "flagged", "diverges"):
            assert row["reason"] and f"why: {row['reason']}" in out
    html = (tmp_path / "run" / "report.html").read_text()
    assert all(row["node"] in html for row in rows)


@pytest.mark.parametrize("file", sorted(f for f, r in RUNS if r == "uniform01_x255"))
def test_what_a_flag_explains_is_exactly_the_rois_under_one_pixel(file, tmp_path, capsys):
    """The x255 input drives box-head ROIs onto degenerate boxes: ORT raises each region under one
    feature pixel to 1x1; those rows, and only those, may be explained."""
    inputs = recorded_input(tmp_path, file, "uniform01_x255")
    run_cli(["model", "run", str(CORPUS / file), "--inputs", str(inputs), "--out", str(tmp_path / "run")], capsys)
    rows = {r["node"]: r for r in result_of(tmp_path / "run")["attribution"]["nodes"]}
    image = np.load(inputs)[ENTRIES[file]["inputs"][0]["name"]]
    explained_somewhere = False
    for node, sizes in _roi_sizes(file, image).items():
        under = set(np.flatnonzero((sizes < 1).any(axis=1)).tolist())
        row = rows[node]
        listed = [e for e in (row["explained"] or [])]
        for record in listed:
            assert record["candidate_rows"] == len(under)
            assert set(record["rows"]) <= under and record["row_count"] <= len(under)
        if not under:
            assert not listed and row["status"] != "explained"
        explained_somewhere |= bool(listed)
        if row["status"] in ("explained", "diverges") and listed:
            raw, left = row["mismatches"], row["unexplained"]["mismatches"]
            assert left < raw  # what the clamp explains is taken out of the count
    assert explained_somewhere
    html = (tmp_path / "run" / "report.html").read_text()
    for row in rows.values():
        if row["status"] in ("explained", "diverges") and row["reason"]:
            assert f"Why {row['status']}:" in html


@pytest.mark.parametrize("file", sorted(ENTRIES))
def test_each_shipped_model_runs_on_its_generated_inputs(file, tmp_path, capsys):
    """No --inputs: seeded inputs of the model's declared shape; the data-dependent parts (how many
    boxes survive NMS, how many ROIs each pyramid level gets) follow from them."""
    code, out, err = run_cli(["model", "run", str(CORPUS / file), "--out", str(tmp_path / "run")], capsys)
    result = result_of(tmp_path / "run")
    top, _ = expected_counts(file)
    assert result["attribution"]["counts"]["judged"] == top, err
    diverging = [r for r in result["attribution"]["nodes"] if r["status"] in DIVERGING]
    assert code == (1 if diverging else 0) and result["inputs"]["source"] == "generated"
