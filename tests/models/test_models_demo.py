"""The bundled demo models and `ep-testbed model demo` / `model run` on the CPU EP."""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import pytest
from models_testkit import result_of, run_cli, shape_args

from ep_testbed.graphs.models import DEMO_MODELS, detection_head, resnet_stem
from ep_testbed.graphs.runtime import DEFAULT_OPSET


@pytest.mark.parametrize("name", sorted(DEMO_MODELS))
def test_demo_models_are_checker_clean_seeded_and_loadable(name):
    build = DEMO_MODELS[name]
    model = build(0)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == onnx.helper.find_min_ir_version_for(list(model.opset_import))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", DEFAULT_OPSET)]
    digest = lambda m: hashlib.sha256(m.SerializeToString()).hexdigest()  # noqa: E731
    assert digest(build(0)) == digest(model)
    assert digest(build(1)) != digest(model)
    initializers = {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in ("RoiAlign", "MaxPool"):
            assert node.input[0] not in initializers  # an activation, never foldable


def test_the_demo_models_have_the_layers_the_issue_names():
    head = [n.op_type for n in detection_head().graph.node]
    assert head == ["Conv", "Relu", "MaxPool", "RoiAlign", "Flatten", "Gemm"]
    assert [i.name for i in detection_head().graph.input] == ["image", "rois", "batch_indices"]
    stem = resnet_stem()
    assert [n.op_type for n in stem.graph.node] == ["Conv", "BatchNormalization", "Relu", "MaxPool"]
    assert [o.name for o in stem.graph.output] == ["features", "indices"]


def test_model_demo_on_cpu_runs_both_models_with_attribution(tmp_path, capsys):
    code, out, _ = run_cli(["model", "demo", "--out", str(tmp_path)], capsys)
    assert code == 0, out
    head = result_of(tmp_path / "detection_head")
    assert head["verdict"] == "pass"
    assert head["placement"]["on_ep"] == head["placement"]["total"] == 6
    assert head["placement"]["by_op"]["RoiAlign"] == {"CPUExecutionProvider": 1}
    rows = {r["node"]: r for r in head["attribution"]["nodes"]}
    assert [r["node"] for r in head["attribution"]["nodes"]] == ["pool1", "roi_align1"]
    assert rows["pool1"]["desc_type"] == "DML_OPERATOR_MAX_POOLING2"
    assert rows["roi_align1"]["desc_type"] == "DML_OPERATOR_ROI_ALIGN1"
    assert all(r["status"] == "match" and r["provider"] == "CPUExecutionProvider" for r in rows.values())
    assert head["attribution"]["first_divergent"] is None
    stem = result_of(tmp_path / "resnet_stem")
    assert [o["name"] for o in stem["outputs"]] == ["features", "indices"]
    assert stem["attribution"]["nodes"][0]["compared"] == 2 * 16 * 16 * 16  # values and indices
    html = (tmp_path / "detection_head" / "report.html").read_text()
    assert "Per-node attribution" in html and "roi_align1" in html and "ROI_ALIGN1" in html
    assert "<script" not in html  # static page, nothing to run
    assert "demo: 2 models" in out


def test_model_run_writes_inputs_outputs_and_reproduces_with_the_seed(tmp_path, capsys):
    from ep_testbed.graphs.models import write_demo_models

    path = write_demo_models(tmp_path / "m")["detection_head"]
    for out in ("a", "b"):
        code, text, err = run_cli(["model", "run", str(path), *shape_args("detection_head"), "--seed", "3",
                                   "--out", str(tmp_path / out)], capsys)
        assert code == 0, err
    with np.load(tmp_path / "a" / "inputs.npz") as a, np.load(tmp_path / "b" / "inputs.npz") as b:
        assert a.files == b.files == ["image", "rois", "batch_indices"]
        for k in a.files:
            np.testing.assert_array_equal(a[k], b[k])
    result = result_of(tmp_path / "a")
    assert result["inputs"]["seed"] == 3 and result["inputs"]["shapes"]["rois"] == [6, 4]
    assert "first divergent node: none" in text


def test_an_unresolved_symbolic_dimension_is_named(tmp_path, capsys):
    from ep_testbed.graphs.models import write_demo_models

    path = write_demo_models(tmp_path)["detection_head"]
    code, _, err = run_cli(["model", "run", str(path), "--shape", "batch=1", "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert "'num_rois'" in err and "--shape num_rois=N" in err
    code, _, err = run_cli(["model", "run", str(path), "--shape", "batsh=1", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "no input or symbolic dimension named 'batsh'" in err
    code, _, err = run_cli(["model", "run", str(path), "--shape", "batch=1", "--shape", "rois=3x4",
                            "--shape", "batch_indices=3", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err


def test_given_inputs_are_checked_against_the_model(tmp_path, capsys):
    from ep_testbed.graphs.models import write_demo_models

    path = write_demo_models(tmp_path)["resnet_stem"]
    np.savez(tmp_path / "bad.npz", image=np.zeros((1, 3, 64, 64), np.float64))
    code, _, err = run_cli(["model", "run", str(path), "--inputs", str(tmp_path / "bad.npz")], capsys)
    assert code == 2 and "'image' is float64, the model takes float32" in err
    np.savez(tmp_path / "good.npz", image=np.ones((1, 3, 64, 64), np.float32))
    code, _, err = run_cli(["model", "run", str(path), "--inputs", str(tmp_path / "good.npz"),
                            "--out", str(tmp_path / "o")], capsys)
    assert code == 0, err
    assert result_of(tmp_path / "o")["inputs"]["source"].startswith("npz ")


def test_an_ep_that_is_not_installed_is_one_clear_error(tmp_path, capsys):
    code, _, err = run_cli(["model", "demo", "--ep", "NoSuchExecutionProvider", "--out", str(tmp_path)], capsys)
    assert code == 2 and "NoSuchExecutionProvider is not available" in err and "Installed providers" in err
    assert not any(tmp_path.iterdir())
