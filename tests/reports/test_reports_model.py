"""The model report's verdict badge agrees with its first-divergent banner, and the report links
the tensors model run saved (only files inside the run folder)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from ep_testbed.harness.cli import main
from ep_testbed.reports.model_report import model_verdict, render_model_report

STEM = Path(__file__).parents[1] / "data" / "models" / "resnet18_stem.onnx"


@pytest.fixture(scope="module")
def stem_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("stem") / "run"
    assert main(["model", "run", str(STEM), "--ep", "cpu", "--out", str(out)]) == 0
    return out


def _rewrite(run: Path, edit) -> dict:
    path = run / "model_result.json"
    result = json.loads(path.read_text())
    edit(result)
    path.write_text(json.dumps(result))
    return result


def _diverging(result: dict, run: Path, arrays: str) -> None:
    """Mark the first attributed node as diverging, with its saved tensors at ``arrays``."""
    row = result["attribution"]["nodes"][0]
    row["status"] = "diverges"
    row["arrays"] = arrays
    result["attribution"]["first_divergent"] = {"node": row["node"], "op_type": row["op_type"], "position": 1,
                                                "provider": row["provider"], "message": "1 of 4 elements outside"}


def test_a_matching_run_is_green(stem_run):
    html = render_model_report(stem_run).read_text()
    assert 'class="verdict green"' in html and "every attributed node matches (exit 0)" in html
    for name in ("inputs.npz", "outputs.npz", "reference_outputs.npz"):
        assert f'href="{name}"' in html


def test_outputs_match_but_a_node_diverges_is_amber_and_links_its_tensors(stem_run, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for f in stem_run.iterdir():
        if f.is_file():
            (run / f.name).write_bytes(f.read_bytes())
    (run / "nodes").mkdir()
    e = np.zeros((1, 2, 4, 4), np.float32)
    a = e.copy()
    a[0, 1, 2, 3] = 1.0
    np.savez(run / "nodes" / "1_pool.npz", expected=e, actual=a)
    result = _rewrite(run, lambda r: _diverging(r, run, "nodes/1_pool.npz"))
    assert result["verdict"] == "pass" and model_verdict(result)[0] == "amber"
    html = render_model_report(run).read_text()
    badge = re.search(r'<div class="verdict (\w+)">([^<]*)</div>', html)
    assert badge.group(1) == "amber" and "1 node(s) diverge from the DML reference" in badge.group(2)
    assert "First divergent node:" in html
    assert html.count('href="nodes/1_pool.npz"') >= 2        # the banner, the saved-tensor list, the node
    assert 'class="heat"' in html and "1 outside tolerance" in html


def test_failing_outputs_are_red_and_a_path_outside_the_run_is_not_linked(stem_run, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for f in stem_run.iterdir():
        if f.is_file():
            (run / f.name).write_bytes(f.read_bytes())
    (tmp_path / "secret.npz").write_bytes(b"not for the report")

    def edit(r):
        _diverging(r, run, "../secret.npz")
        r["outputs"][0]["outcome"] = "fail"
        r["verdict"] = "fail"

    _rewrite(run, edit)
    html = render_model_report(run).read_text()
    assert re.search(r'<div class="verdict red">outputs differ on CPU \(exit 1\)</div>', html)
    assert "secret.npz" not in html
