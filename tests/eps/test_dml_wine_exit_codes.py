"""Exit codes mean one thing in every command: a case or model the EP under test did not get to
run for a reason that is not the EP's -- an emulation gap (the emulated device refused one of
DirectML's shaders, or has no float16) or not-on-ep (the EP declines the node) -- is never exit
1, in ``run``, ``fuzz`` and ``model run`` alike (README, "Exit codes"), on the real DirectML EP
under Wine.

Needs `bash tools/dml-wine.sh` (Linux); without it these tests FAIL naming it (dml_wine_kit).
"""

from __future__ import annotations

import json
import sys

import onnx
import pytest
from dml_wine_kit import needs_host
from onnx import TensorProto, helper

from ep_testbed.harness.cli import main
from ep_testbed.harness.core.results import read_run

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="the DirectML host runs under Wine on Linux")]

#: A float16 MaxPool: the emulated device has no 16-bit shader operations, so DirectML reports
#: float16 unsupported and the EP declines the node; dml.json's entry scoped to the emulated
#: device makes it an emulation gap (without expectations it is the raw not-on-ep).
FLOAT16 = "max_pooling2/grid-float16-3d-w2x3x3-s2-p0_0-d1-idxuint32"


def _outcomes(out) -> dict[str, str]:
    return {line["id"]: line["outcome"] for line in read_run(str(out))[1] if line.get("type") == "case"}


def test_run_exits_0_on_an_emulation_gap_and_on_not_on_ep(tmp_path, capsys):
    needs_host()
    gap, raw = tmp_path / "gap", tmp_path / "raw"
    assert main(["run", "--ep", "dml-wine", "-k", FLOAT16, "--out", str(gap), "--no-progress"]) == 0
    assert main(["run", "--ep", "dml-wine", "-k", FLOAT16, "--no-expectations", "--out", str(raw),
                 "--no-progress"]) == 0
    assert _outcomes(gap) == {FLOAT16: "emulation-gap"} and _outcomes(raw) == {FLOAT16: "not-on-ep"}
    capsys.readouterr()


def test_fuzz_exits_0_on_an_emulation_gap_and_on_not_on_ep(tmp_path, capsys):
    needs_host()
    from ep_testbed.harness.fuzz.draw import draw_batch

    case = next(c for c in draw_batch("max_pooling2", 0, 0) if c.desc.input_tensor.data_type == "FLOAT16")
    gap, raw = tmp_path / "gap", tmp_path / "raw"
    assert main(["fuzz", "--ep", "dml-wine", "--replay", case.id, "--out", str(gap), "--no-progress"]) == 0
    assert main(["fuzz", "--ep", "dml-wine", "--replay", case.id, "--no-expectations", "--out", str(raw),
                 "--no-progress"]) == 0
    assert _outcomes(gap) == {case.id: "emulation-gap"} and _outcomes(raw) == {case.id: "not-on-ep"}
    capsys.readouterr()


def test_model_run_exits_1_when_the_ep_declines_a_node_under_no_cpu_fallback(tmp_path, capsys):
    """A float64 MaxPool, which the DirectML EP does not take: --no-cpu-fallback asks that the EP
    take every node (a gate on full placement), so the verdict is not-on-ep and the run fails; it
    names the declined node and gives no operator a divergence."""
    needs_host()
    node = helper.make_node("MaxPool", ["X"], ["Y"], kernel_shape=[2, 2], name="pool")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [1, 1, 3, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "maxpool_float64.onnx"
    onnx.save(model, path)
    out = tmp_path / "model"
    code = main(["model", "run", str(path), "--ep", "dml-wine", "--no-cpu-fallback", "--out", str(out)])
    printed = capsys.readouterr().out
    result = json.loads((out / "model_result.json").read_text(encoding="utf-8"))
    assert result["ep_failure"]["stage"] == "fallback-refused" and "pool (MaxPool)" in result["ep_failure"]["message"]
    assert code == 1 and result["verdict"] == "not-on-ep" and result["verdict_reasons"] == []
    assert "verdict: not-on-ep" in printed
