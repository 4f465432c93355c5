"""Nodes inside Loop / If bodies: listed as not attributed, with where they are and why, and
counted, never dropped; the nodes of the main graph are judged as usual."""

from __future__ import annotations

import onnx
from models_testkit import control_flow_model, result_of, run_cli

from ep_testbed.graphs import attributed_op_types
from ep_testbed.harness.models.attribution import subgraph_nodes


def test_subgraph_nodes_name_their_path():
    found = [(p, n.name, where) for p, n, where in subgraph_nodes(control_flow_model())]
    assert found == [(1, "pool_in_then", "then_branch of If 'if1'"), (4, "pool_in_loop", "body of Loop 'loop1'")]


def test_nested_bodies_are_walked_to_any_depth():
    model = control_flow_model()
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    inner_if = next(n for n in model.graph.node if n.op_type == "If")
    body = loop.attribute[0].g
    branches = {a.name: a.g for a in inner_if.attribute}
    nested = onnx.helper.make_node("If", ["cond_in"], ["unused"], name="if_in_loop", **branches)
    body.node.append(nested)
    wheres = [where for _, n, where in subgraph_nodes(model) if n.name == "pool_in_then"]
    assert wheres == ["then_branch of If 'if1'", "then_branch of If 'if_in_loop' in the body of Loop 'loop1'"]


def test_model_run_lists_them_as_not_attributed_and_counts_them(tmp_path, capsys):
    path = tmp_path / "cf.onnx"
    onnx.save(control_flow_model(), str(path))
    code, out, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    result = result_of(tmp_path / "run")
    rows = {r["node"]: r for r in result["attribution"]["nodes"]}
    assert [r["node"] for r in result["attribution"]["nodes"]] == ["pool_top", "pool_in_then", "pool_in_loop"]
    assert rows["pool_top"]["status"] == "match"
    for name, where in (("pool_in_then", "then_branch of If 'if1'"), ("pool_in_loop", "body of Loop 'loop1'")):
        assert rows[name]["status"] == "not-attributed" and rows[name]["inside"] == where
        assert where in rows[name]["message"]
    counts = result["attribution"]["counts"]
    assert counts["judged"] == 1 and counts["not_judged"] == 2
    assert counts["by_op"]["MaxPool"] == {"top_level": 1, "in_subgraphs": 2, "judged": 1}
    assert f"1 of 3 {'/'.join(attributed_op_types())} nodes judged" in out
    assert "node pool_in_loop (MaxPool, inside the body of Loop 'loop1'): not-attributed" in out
    assert "none among the nodes judged" in out
    html = (tmp_path / "run" / "report.html").read_text()
    assert "pool_in_loop" in html and "not-attributed" in html
