"""Where a model's output drift starts, and what the drift policy does with it.

Two kinds of real drift on a CPU-only machine:

- a planted one: the EP under test runs a copy of the model in which one Conv's weights are
  scaled by 1 + 1e-3 (``run_model(..., run_as=copy)``), so by construction every node before
  that Conv computes exactly what the reference EP computes and the Conv is where drift starts;
- ONNX Runtime's own: the CPU EP with graph optimizations on (the reference EP,
  ``--reference-graph-opt``) sums resnet18's first Conv in another order than with them off,
  which this test measures with onnxruntime directly and holds the tool's figures to.
"""

from __future__ import annotations

import functools

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from models_testkit import result_of, run_cli

from ep_testbed.harness.core.tolerances import Tolerances
from ep_testbed.harness.eps.providers import SessionSettings, resolve_ep
from ep_testbed.harness.models.attribution import probe_model
from ep_testbed.harness.models.baseline import Baseline, save_baseline
from ep_testbed.harness.models.drift import (
    DriftPolicy,
    candidates,
    parse_drift_policy,
    plainly_within,
    prefix_probe,
    search_drift,
    value_types,
    windows,
)
from ep_testbed.harness.models.outputs import compare_named, tie_contexts
from ep_testbed.harness.models.run import ModelRunConfig, run_model
from ep_testbed.harness.models.untrusted import load_untrusted
from ep_testbed.reports.model_report import render_model_report

DATA = __import__("pathlib").Path(__file__).resolve().parent.parent / "data" / "models"
FASTER = DATA / "faster_rcnn_tiny_fpn.onnx"
STEM = DATA / "resnet18_stem.onnx"
CPU = resolve_ep("cpu")


def _detector_image() -> dict[str, np.ndarray]:
    """The recorded input of the detectors (tests/data/models/README.md: input_seed 4)."""
    return {"image": np.random.default_rng(4).random((3, 96, 128), dtype=np.float32)}


def _convs(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "Conv"]


def _with_scaled_weight(model: onnx.ModelProto, conv: onnx.NodeProto, factor: float = 1.25) -> onnx.ModelProto:
    """A copy of ``model`` whose ``conv`` has its weight initializer scaled by ``factor`` (same names)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    weight = next(t for t in copy.graph.initializer if t.name == conv.input[1])
    scaled = onnx.numpy_helper.to_array(weight) * np.float32(factor)
    weight.CopyFrom(onnx.numpy_helper.from_array(scaled.astype(np.float32), weight.name))
    return copy


@functools.lru_cache(maxsize=None)  # run once per arguments: the tests only read the result
def _planted(index: int, budget: int | None = None, mode: str = "report"):
    """faster_rcnn_tiny_fpn on the CPU EP vs the CPU EP, the EP running a copy whose ``index``-th
    Conv is scaled; the result and the Conv's name."""
    loaded = load_untrusted(str(FASTER))
    conv = _convs(loaded.model)[index]
    config = ModelRunConfig(ep=CPU, reference=CPU, drift=DriftPolicy(mode, max_elements=budget))
    result = run_model(loaded, _detector_image(), config, run_as=_with_scaled_weight(loaded.model, conv))
    return result, conv.name


@pytest.mark.parametrize("index", [0, 7])
def test_planted_drift_is_placed_at_the_scaled_conv_and_the_operators_still_pass(index):
    result, conv = _planted(index)
    drift = result["drift"]
    assert drift["outputs_differ"] and drift["policy"]["mode"] == "report"
    first = drift["search"]["first"]
    assert (first["node"], first["op_type"], first["under_test"]) == (conv, "Conv", False)
    stats = next(iter(first["error_stats"].values()))
    assert stats["outside"] == first["outside"] > 0 and stats["abs"]["max"] > 0
    assert first["elements"] == stats["elements"] and stats["min_tolerance"] is not None
    # every node before the Conv was compared and found within tolerance, and none after it
    search = drift["search"]
    names = [c.node.name for c in candidates(load_untrusted(str(FASTER)).model, _detector_image())]
    assert search["compared_nodes"] == names.index(conv) + 1 and search["divergent_nodes"] == 1
    assert search["strategy"] == "windows" and search["runs"] == len(search["parts"]) >= 1
    assert sum(search["parts"][:-1]) < search["compared_nodes"] <= sum(search["parts"])
    assert any(s.get("outside") for s in drift["downstream"].values())
    # the operators under test are judged on their own EP inputs: the drift does not fail them
    assert {r["status"] for r in result["attribution"]["nodes"]} <= {"match", "tie-only", "explained"}
    assert result["verdict"] == "pass" and result["verdict_reasons"] == []
    assert result["verdict_statement"].startswith("operators pass (4 of 4 nodes judged")
    assert f"output drift starts at Conv '{conv}' ({first['outside']}/{first['elements']} outside tolerance)" \
        in result["verdict_statement"]


@pytest.mark.parametrize("index", [0, 7])
def test_windows_under_a_tiny_budget_name_the_same_node_with_the_same_figures(index):
    whole, _ = _planted(index)
    small, _ = _planted(index, budget=20_000)
    a, b = whole["drift"]["search"], small["drift"]["search"]
    assert b["strategy"] == "windows" and b["runs"] > a["runs"] and b["estimated_elements"] > 20_000
    assert a["first"] == b["first"]
    # no run returned more than the budget, except a single node whose outputs alone exceed it
    assert b["largest_run_elements"] <= max(20_000, max_single_node(FASTER))


@functools.lru_cache(maxsize=None)
def max_single_node(path) -> int:
    """The most elements one node of the model outputs on the recorded input (onnxruntime, all marked)."""
    model = onnx.load(str(path))
    present = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in present and node.op_type != "Constant":
                model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
                present.add(name)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    values = dict(zip([o.name for o in session.get_outputs()], session.run(None, _detector_image())))
    return max(sum(values[o].size for o in n.output if o in values) for n in model.graph.node)


def test_the_search_visits_parts_in_order_and_stops_at_the_first_divergent_one():
    """A synthetic pair of EPs that differ at one known node (+1 on its output): whatever the
    budget, the answer is that node, and the last run is the one that marked it."""
    loaded = load_untrusted(str(FASTER))
    feeds = _detector_image()
    planted = _convs(loaded.model)[3]
    marked_runs = []

    def run_pair(probe):
        marked_runs.append({o.name for o in probe.graph.output})
        session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        ep = {k: (v + np.float32(1) if k == planted.output[0] else v) for k, v in ref.items()}
        return ref, ep

    for budget, window in ((10**9, 10**9), (10**9, 8), (50_000, 8), (5_000, 1)):
        marked_runs.clear()
        search = search_drift(loaded.model, feeds, run_pair, Tolerances.defaults(), budget, first_window=window)
        assert search["first"]["node"] == planted.name, budget
        assert search["first"]["outside"] == search["first"]["elements"]  # +1 moves every element
        assert search["runs"] == len(marked_runs) and planted.output[0] in marked_runs[-1]
        assert all(planted.output[0] not in run for run in marked_runs[:-1])
        # the windows are consecutive and in order: every output is marked once, up to the answer
        marked = [name for run in marked_runs for name in run]
        assert len(marked) == len(set(marked))
        assert (search["strategy"], search["runs"] == 1) == (("mark-all", True) if window == 10**9 else ("windows", False))


def _stem_inputs(tmp_path) -> str:
    image = np.random.default_rng(7).random((1, 3, 97, 129), dtype=np.float32) * np.float32(255)
    path = tmp_path / "stem.npz"
    np.savez(path, image=image)
    return str(path)


def _conv_outside_by_onnxruntime(inputs: str) -> int:
    """resnet18_stem's Conv output with graph optimizations off vs on, measured with onnxruntime
    alone: elements outside the float32 rule |a-e| <= 1e-5 + 1e-4|e| or <= 4 ulp."""
    model = onnx.load(str(STEM))
    conv = _convs(model)[0]
    model.graph.output.append(onnx.helper.make_empty_tensor_value_info(conv.output[0]))
    feeds = dict(np.load(inputs))
    values = []
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        values.append(session.run([conv.output[0]], feeds)[0])
    ep, ref = values
    ulp = np.abs(ep.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))  # same signs here
    outside = (np.abs(ep.astype(np.float64) - ref) > 1e-5 + 1e-4 * np.abs(ref.astype(np.float64))) & (ulp > 4)
    return int(outside.sum())


def test_graph_optimizations_on_the_reference_ep_drift_from_the_first_conv(tmp_path, capsys):
    inputs = _stem_inputs(tmp_path)
    expected = _conv_outside_by_onnxruntime(inputs)
    code, out, err = run_cli(["model", "run", str(STEM), "--inputs", inputs, "--reference-graph-opt",
                              "--out", str(tmp_path / "run")], capsys)
    result = result_of(tmp_path / "run")
    assert code == 0 and result["verdict"] == "pass", err
    first = (result["drift"]["search"] or {}).get("first")
    if expected == 0:  # this onnxruntime sums both ways alike: then there is nothing to place
        assert first is None or first["op_type"] != "Conv"
        return
    assert (first["node"], first["op_type"], first["position"]) == ("/0/Conv", "Conv", 0)
    assert first["outside"] == expected
    assert result["verdict_statement"].startswith("operators pass (1 of 1 nodes judged")
    assert f"output drift starts at Conv '/0/Conv' ({expected}/203840 outside tolerance)" in out
    assert "not an operator under test" in out and "downstream, output stem" in out
    assert result["drift"]["note"] and "graph optimizations are on" in result["drift"]["note"]
    html = (tmp_path / "run" / "report.html").read_text()
    assert 'id="drift-first"' in html and "/0/Conv" in html and 'verdict amber' in html


@pytest.mark.parametrize("items, fails", [([], False), (["report"], False), (["fail"], True),
                                           (["fp32:atol=1,rtol=0.01"], False), (["fp32:atol=0,rtol=0,ulp=0"], True)])
def test_the_drift_policy_decides_whether_drift_fails_the_run(items, fails):
    loaded = load_untrusted(str(STEM))
    policy = parse_drift_policy(items, Tolerances.defaults())
    feeds = {"image": np.random.default_rng(0).random((1, 3, 97, 129), dtype=np.float32)}
    planted = _with_scaled_weight(loaded.model, _convs(loaded.model)[0], 1 + 1e-3)
    result = run_model(loaded, feeds, ModelRunConfig(ep=CPU, reference=CPU, drift=policy), run_as=planted)
    assert result["drift"]["outputs_differ"] and result["drift"]["search"]["first"]["node"] == "/0/Conv"
    assert (result["verdict"] == "fail") == fails and bool(result["verdict_reasons"]) == fails
    if fails:
        reason = result["verdict_reasons"][0]
        assert reason.startswith("output stem ") and "drift starts at Conv '/0/Conv'" in reason
        assert ("--drift-tol fail" if items == ["fail"] else "beyond the --drift-tol budget") in reason
    elif items:
        assert "(reported, not failed" in result["verdict_statement"] or policy.mode == "budget"


def test_the_policy_reaches_the_child_process_of_a_model_run(tmp_path, capsys):
    inputs = _stem_inputs(tmp_path)
    if not _conv_outside_by_onnxruntime(inputs):
        pytest.skip("this onnxruntime computes the Conv alike with and without graph optimizations: no drift")
    code, out, err = run_cli(["model", "run", str(STEM), "--inputs", inputs, "--reference-graph-opt",
                              "--drift-tol", "fail", "--drift-max-elements", "100000", "--out", str(tmp_path / "run")],
                             capsys, isolated=True)
    result = result_of(tmp_path / "run")
    assert code == 1, (out, err)
    assert result["drift"]["policy"]["max_elements"] == 100_000 and result["drift"]["search"]["strategy"] == "windows"


def test_drift_against_a_baseline_saved_on_the_same_ep_is_a_regression_whatever_the_policy(tmp_path):
    loaded = load_untrusted(str(FASTER))
    feeds = _detector_image()
    config = ModelRunConfig(ep=CPU, reference=CPU)
    clean = run_model(loaded, feeds, config)
    save_baseline(tmp_path / "base", clean, feeds, clean["_arrays"]["outputs"], 4, "npz")
    baseline = Baseline.load(tmp_path / "base", loaded.sha256)
    baseline.check_ep(CPU.provider)
    drifted = run_model(loaded, feeds, config, baseline,
                        run_as=_with_scaled_weight(loaded.model, _convs(loaded.model)[0]))
    assert drifted["drift"]["policy"]["mode"] == "report"
    assert drifted["baseline"]["outcome"] == "regression" and drifted["verdict"] == "fail"
    assert any(r.startswith("baseline regression") for r in drifted["verdict_reasons"])
    assert drifted["verdict_statement"].endswith("; baseline regression")


def test_a_baseline_saved_on_another_ep_is_refused_with_a_note(tmp_path, capsys):
    code, _, err = run_cli(["model", "run", str(STEM), "--save-baseline", str(tmp_path / "base"),
                            "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    manifest = tmp_path / "base" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"CPUExecutionProvider"', '"CUDAExecutionProvider"'))
    code, _, err = run_cli(["model", "run", str(STEM), "--baseline", str(tmp_path / "base"),
                            "--out", str(tmp_path / "run2")], capsys)
    assert code == 2 and "saved on CUDAExecutionProvider, this run tests CPUExecutionProvider" in err
    assert "Note: save one on CPUExecutionProvider with --save-baseline" in err and "Traceback" not in err


def test_outputs_that_match_need_no_search_and_say_so(tmp_path, capsys):
    code, out, err = run_cli(["model", "run", str(STEM), "--out", str(tmp_path / "run")], capsys)
    result = result_of(tmp_path / "run")
    assert code == 0 and result["drift"]["outputs_differ"] is False and result["drift"]["search"] is None
    assert "outputs match CPUExecutionProvider" in result["verdict_statement"]
    render_model_report(tmp_path / "run")
    assert 'id="drift"' not in (tmp_path / "run" / "report.html").read_text()


@pytest.mark.parametrize("items, message", [
    (["report", "fail"], "'report' stands alone"),
    (["fp32:atol=nan"], "--drift-tol 'fp32:atol=nan': atol must be a finite number"),
    (["sometimes"], "--drift-tol 'sometimes': expected DTYPE:key=value"),
])
def test_a_bad_drift_policy_is_refused_naming_the_flag(items, message):
    with pytest.raises(ValueError) as caught:
        parse_drift_policy(items, Tolerances.defaults())
    assert message in str(caught.value) and "report" in str(caught.value) and "fail" in str(caught.value)


def test_a_drift_budget_applies_over_the_runs_tolerances():
    base = Tolerances.defaults().override("fp16:atol=0.5")
    policy = parse_drift_policy(["fp32:atol=1e-3"], base)
    assert policy.mode == "budget" and policy.tolerances.for_dtype("FLOAT32").atol == 1e-3
    assert policy.tolerances.for_dtype("FLOAT16").atol == 0.5
    assert parse_drift_policy([], base).mode == "report" and parse_drift_policy(["FAIL"], base).mode == "fail"


def test_the_reference_settings_are_the_reference_eps_alone(tmp_path):
    """--reference-graph-opt changes the reference EP's session, not the EP under test's."""
    loaded = load_untrusted(str(STEM))
    config = ModelRunConfig(ep=CPU, reference=CPU, reference_settings=SessionSettings(graph_opt=True))
    result = run_model(loaded, {"image": np.zeros((1, 3, 97, 129), np.float32)}, config)
    assert result["session"]["graph_optimization_level"] == "ORT_DISABLE_ALL"
    assert result["drift"]["note"] is not None


#: The bundled models (tests/data/models/README.md) and the shape of each one's recorded input.
BUNDLED = {"faster_rcnn_tiny_fpn": (3, 96, 128), "mask_rcnn_tiny_fpn": (3, 96, 128),
           "keypoint_rcnn_tiny_fpn": (3, 96, 128), "resnet18_stem": (1, 3, 97, 129)}


def _session_values(model: onnx.ModelProto, feeds) -> dict[str, np.ndarray]:
    """Every graph output of ``model`` on the CPU EP with graph optimizations off (a model run's settings)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _two_plants(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """A copy of ``model`` drifting twice: its second Conv scaled by 1 + 2e-6 (within tolerance,
    but every value after it moves), a later Conv by 1.25; and that later Conv's name (a model
    with one Conv: that Conv by 1.25 alone)."""
    convs = _convs(model)
    if len(convs) == 1:
        return _with_scaled_weight(model, convs[0]), convs[0].name
    late = convs[min(6, len(convs) - 1)]
    return _with_scaled_weight(_with_scaled_weight(model, convs[1], 1 + 2e-6), late), late.name


@pytest.mark.parametrize("budget", [2**28, 5_000])
@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_the_search_names_what_comparing_every_node_in_full_names(name, budget):
    """The search as it was: every intermediate marked in one run on each side and every node
    compared in full, in order; the first that fails. The windows, the prefix copies and the
    screen must name the same node with the same figures, on every bundled model."""
    loaded = load_untrusted(str(DATA / f"{name}.onnx"))
    model = loaded.model
    feeds = {"image": np.random.default_rng(4).random(BUNDLED[name], dtype=np.float32)}
    variant, _ = _two_plants(model)
    found = candidates(model, feeds)
    names = [n for c in found for n in c.outputs]
    ref, ep = _session_values(probe_model(model, names), feeds), _session_values(probe_model(variant, names), feeds)
    ties = tie_contexts(probe_model(model, names), {**feeds, **ref})
    old = next((c, rows) for c in found for rows in [compare_named({n: ref[n] for n in c.outputs if n in ref}, ep,
                                                                   Tolerances.defaults(), ties)]
               if any(r["outcome"] == "fail" for r in rows))
    moved = [c for c in found[:found.index(old[0])] if any(not np.array_equal(ref[n], ep[n]) for n in c.outputs)]

    def run_pair(probe):
        marked = [o.name for o in probe.graph.output]
        return _session_values(probe, feeds), _session_values(prefix_probe(variant, marked), feeds)

    search = search_drift(model, feeds, run_pair, Tolerances.defaults(), budget)
    first = search["first"]
    assert (first["node"], first["position"]) == (old[0].node.name, old[0].position)
    assert [o["mismatches"] for o in first["outputs"]] == [r["mismatches"] for r in old[1]]
    assert [o["message"] for o in first["outputs"]] == [r["message"] for r in old[1]]
    assert search["compared_nodes"] == found.index(old[0]) + 1 and search["divergent_nodes"] == 1
    if len(_convs(model)) > 1:  # values that moved within tolerance before the answer: the screen passed them
        assert moved and search["screened_nodes"] >= 1


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_what_the_screen_passes_the_comparison_passes(data):
    """``plainly_within`` is only a shortcut: whatever it passes, the one comparison passes, for
    values on either side of the rule's edge, specials, subnormals and every float type."""
    dtype = data.draw(st.sampled_from([np.float16, np.float32, np.float64]))
    tol = Tolerances.defaults().override(data.draw(st.sampled_from(
        ["fp32:atol=1e-5", "fp32:atol=0,rtol=1e-3", "fp32:atol=0,rtol=0,ulp=0", "fp16:atol=1e-3,rtol=0"])))
    expected = data.draw(hnp.arrays(dtype, st.integers(0, 40), elements=hnp.from_dtype(np.dtype(dtype))))
    rule = tol.for_dtype(np.dtype(dtype).name.upper())
    factors = data.draw(hnp.arrays(np.float64, expected.shape, elements=st.sampled_from([0.0, 0.5, 0.999, 1.0, 1.001, 2.0])))
    signs = data.draw(hnp.arrays(np.float64, expected.shape, elements=st.sampled_from([-1.0, 1.0])))
    with np.errstate(all="ignore"):  # infinities in, NaN out: cases the screen must leave to the comparison
        edge = rule.atol + rule.rtol * np.abs(expected.astype(np.float64))
        actual = (expected.astype(np.float64) + signs * factors * edge).astype(dtype)
    if plainly_within(expected, actual, tol):
        assert compare_named({"y": expected}, {"y": actual}, tol)[0]["outcome"] != "fail"
    if expected.size and np.isfinite(expected).all():
        assert plainly_within(expected, expected.copy(), tol)


def test_the_screen_passes_integers_only_when_equal_and_never_another_shape_or_type():
    tol = Tolerances.defaults()
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    assert plainly_within(a, a.copy(), tol) and not plainly_within(a, a + (a == 5), tol)
    assert not plainly_within(a, a.reshape(4, 3), tol) and not plainly_within(a, a.astype(np.int32), tol)
    assert plainly_within(np.zeros(0, np.float32), np.zeros(0, np.float32), tol)
    assert not plainly_within(np.array([np.nan], np.float32), np.array([np.nan], np.float32), tol)


def test_a_prefix_copy_computes_its_values_as_the_whole_model_does_and_nothing_downstream():
    """The copy cut after its marked values holds only the nodes they depend on, with the outer
    values an If's branches read (else ONNX Runtime could not build it), and the initializers
    those nodes read; its values are the whole model's, bit for bit."""
    model = load_untrusted(str(FASTER)).model
    feeds = _detector_image()
    types = value_types(model)
    found = candidates(model, feeds, types)
    whole = _session_values(probe_model(model, [n for c in found for n in c.outputs]), feeds)
    guard = next(c for c in found if c.node.op_type == "If")
    for marked in ([found[2]], [guard], found[-3:]):
        names = [n for c in marked for n in c.outputs]
        probe = prefix_probe(model, names, types)
        assert [o.name for o in probe.graph.output] == names
        kept = {n.name for n in probe.graph.node}
        assert max(c.position for c in marked) == max(i for i, n in enumerate(model.graph.node) if n.name in kept)
        read = {v for n in probe.graph.node for v in n.input} | {v for n in probe.graph.node for a in n.attribute
                                                                  if a.type == onnx.AttributeProto.GRAPH
                                                                  for m in a.g.node for v in m.input}
        assert {t.name for t in probe.graph.initializer} <= read
        values = _session_values(probe, feeds)
        assert all(np.array_equal(values[n], whole[n]) for n in names)
    assert len(prefix_probe(model, found[2].outputs, types).graph.node) < 10


def test_windows_are_consecutive_doubling_and_cut_at_the_budget():
    model = load_untrusted(str(FASTER)).model
    found = candidates(model, _detector_image())
    for c, size in zip(found, [10] * len(found)):
        c.elements = size
    sizes = [len(w) for w in windows(found, 10**9, 8)]
    assert sizes[:4] == [8, 16, 32, 64] and sum(sizes) == len(found)
    assert [len(w) for w in windows(found, 35, 8)][:3] == [3, 3, 3]
    found[1].elements = 100
    assert [len(w) for w in windows(found, 35, 8)][:3] == [1, 1, 3]
