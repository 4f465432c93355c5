"""The model report: self-contained, and every string from the model is escaped."""

from __future__ import annotations

import onnx
from models_testkit import result_of, run_cli

from ep_testbed.graphs.models import resnet_stem

EVIL = '<script>alert("x")</script>'


def test_names_from_the_model_are_inert_in_the_report(tmp_path, capsys):
    model = resnet_stem()
    model.graph.name = EVIL
    pool = next(n for n in model.graph.node if n.op_type == "MaxPool")
    pool.name = EVIL + "pool"
    pool.input[0] = "relu<img src=x onerror=alert(1)>"
    next(n for n in model.graph.node if n.op_type == "Relu").output[0] = pool.input[0]
    path = tmp_path / "evil.onnx"
    onnx.save(model, str(path))
    code, _, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    assert result_of(tmp_path / "run")["attribution"]["nodes"][0]["node"] == EVIL + "pool"
    html = (tmp_path / "run" / "report.html").read_text()
    assert "<script" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "http://" not in html and "https://" not in html  # nothing fetched from the network
