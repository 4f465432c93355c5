"""EP selection, session options, placement read-back and expectations, against the installed ORT."""

import json

import numpy as np
import onnxruntime as ort
import pytest
from local_cases import max_pool_case, to_onnx

from ep_testbed.harness.core import expectations as exp
from ep_testbed.harness.core import installed
from ep_testbed.harness.core.installed import ort_flavour
from ep_testbed.harness.eps.placement import is_fallback_refusal, off_ep, placement_from_profile, read_placement
from ep_testbed.harness.eps.providers import (
    EpNotAvailable,
    EpSpec,
    SessionSettings,
    alias_of,
    parse_provider_options,
    providers_arg,
    resolve_ep,
    session_options,
)


def test_aliases_and_full_names_resolve_against_the_installed_providers():
    assert resolve_ep("cpu") == EpSpec("CPUExecutionProvider", "cpu", {})
    assert resolve_ep("CPUExecutionProvider").alias == "cpu"
    assert resolve_ep("cpuexecutionprovider").provider == "CPUExecutionProvider"
    spec = resolve_ep("dml", {"device_id": "1"}, available=["DmlExecutionProvider", "CPUExecutionProvider"])
    assert spec == EpSpec("DmlExecutionProvider", "dml", {"device_id": "1"})
    assert providers_arg(spec) == [("DmlExecutionProvider", {"device_id": "1"})]
    assert alias_of("FooExecutionProvider") == "foo"
    with pytest.raises(EpNotAvailable) as info:
        resolve_ep("openvino", available=["CPUExecutionProvider"])
    assert "onnxruntime-openvino" in str(info.value) and "Installed providers: CPUExecutionProvider" in str(info.value)


def test_provider_options_parse():
    assert parse_provider_options(["device_id=0", " performance_preference = high_performance "]) == {
        "device_id": "0", "performance_preference": "high_performance"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_provider_options(["device_id"])


def _config(so, key):
    try:
        return so.get_session_config_entry(key)
    except RuntimeError:  # "does not have configuration with key"
        return None


def test_session_options_per_ep():
    cpu = session_options(resolve_ep("cpu"), SessionSettings())
    assert cpu.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert _config(cpu, "session.disable_cpu_ep_fallback") is None  # CPU cannot fall back
    dml = EpSpec("DmlExecutionProvider", "dml")
    so = session_options(dml, SessionSettings(graph_opt=True))
    assert so.get_session_config_entry("session.disable_cpu_ep_fallback") == "1"
    assert so.enable_mem_pattern is False and so.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    relaxed = session_options(dml, SessionSettings(), allow_fallback=True)
    assert _config(relaxed, "session.disable_cpu_ep_fallback") is None
    assert SessionSettings().to_json(dml)["enable_mem_pattern"] is False


def test_flavour_is_the_installed_distribution():
    from importlib.metadata import packages_distributions

    assert ort_flavour() in packages_distributions()["onnxruntime"]


def _same(found: dict) -> dict:
    # Python 3.12's packages_distributions also names __pycache__ folders, which are no module
    return {module: sorted(set(names)) for module, names in found.items() if module != "__pycache__"}


def test_what_provides_a_module_is_read_as_importlib_metadata_reads_it(tmp_path, monkeypatch):
    """The module map (read from top_level.txt or RECORD, no stat per file) is
    packages_distributions' own, here and with a distribution that declares no top level: its
    packages and top-level modules count, its metadata, ``..`` paths and ``.libs`` folders do not."""
    from importlib.metadata import packages_distributions

    installed._module_distributions.cache_clear()
    assert _same(installed._module_distributions()) == _same(packages_distributions())
    info = tmp_path / "toy_wheel-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-wheel\nVersion: 1.0\n")
    (info / "RECORD").write_text("toy_pkg/__init__.py,,\ntoy_one.py,,\n\"toy_pkg/a,b.py\",,\n"
                                 "toy_wheel.libs/x.so,,\n../../bin/toy,,\ntoy_wheel-1.0.dist-info/RECORD,,\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed._module_distributions.cache_clear()
    try:
        assert installed.distributions_of("toy_pkg") == installed.distributions_of("toy_one") == ["toy-wheel"]
        ours = {m for m, names in installed._module_distributions().items() if "toy-wheel" in names}
        assert ours == {"toy_pkg", "toy_one"}
    finally:
        installed._module_distributions.cache_clear()


def test_placement_is_read_back_from_a_real_profile(tmp_path):
    mapping = to_onnx(max_pool_case("x").desc)
    so = session_options(resolve_ep("cpu"), SessionSettings(), profile_prefix=str(tmp_path / "prof"))
    session = ort.InferenceSession(mapping.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    session.run(None, {"X": np.zeros((1, 2, 6, 6), np.float32)})
    path = session.end_profiling()
    events = json.load(open(path))
    assert placement_from_profile(events, ["pool"]) == {"pool": "CPUExecutionProvider"}  # the profile alone
    placement, source = read_placement(session, ["pool"], path)
    assert placement == {"pool": "CPUExecutionProvider"} and source == "trace-node"
    assert not (tmp_path / path).exists()  # the trace is removed once read


def test_fused_nodes_are_attributed_only_when_unambiguous():
    fused = [{"cat": "Node", "name": "OpenVINOExecutionProvider_OpenVINO-EP-subgraph_1_0_kernel_time",
              "args": {"provider": "OpenVINOExecutionProvider"}}]
    assert placement_from_profile(fused, ["a", "b"]) == {"a": "OpenVINOExecutionProvider",
                                                         "b": "OpenVINOExecutionProvider"}
    mixed = fused + [{"cat": "Node", "name": "x_kernel_time", "args": {"provider": "OtherExecutionProvider"}}]
    assert placement_from_profile(mixed, ["a"]) == {}  # two fused providers: unproven
    direct = fused + [{"cat": "Node", "name": "a_kernel_time", "args": {"provider": "CPUExecutionProvider"}}]
    assert placement_from_profile(direct, ["a"]) == {"a": "CPUExecutionProvider"}
    assert placement_from_profile(fused, ["a"], fallback={"a": "CPUExecutionProvider"}) == {"a": "CPUExecutionProvider"}
    assert off_ep({"a": "X"}, ["a", "b"], "X") == ["b"]  # unknown placement never counts as on the EP


def test_dml_traces_prove_placement_per_node_and_say_how():
    """DirectML with graph fusion off: per-node events (provider DmlExecutionProvider, as in the
    public trace of microsoft/onnxruntime-genai issue #2031); the copies ORT inserts
    (MemcpyFromHost/MemcpyToHost are DML kernels, OperatorRegistration.cpp L1098-1099) prove
    nothing. With fusion on, the nodes hide in DmlFusedNode_<p>_<i> (DmlGraphFusionHelper.cpp
    CreateIndexedSubGraph)."""
    from ep_testbed.harness.eps.placement import describe_evidence, placement_evidence

    dml = "DmlExecutionProvider"
    copy = {"cat": "Node", "name": "Memcpy_kernel_time", "args": {"provider": dml, "op_name": "MemcpyFromHost"}}
    own = [{"cat": "Node", "name": "MaxPool_kernel_time", "args": {"provider": dml, "op_name": "MaxPool"}},
           {"cat": "Node", "name": "Cast_1_kernel_time", "args": {"provider": "CPUExecutionProvider",
                                                                  "op_name": "Cast"}}, copy]
    placement, evidence = placement_evidence(own, ["MaxPool", "Cast_1", "Cast_2"])
    assert placement == {"MaxPool": dml, "Cast_1": "CPUExecutionProvider"}  # a copy proves nothing for Cast_2
    assert evidence == {"MaxPool": "trace-node", "Cast_1": "trace-node"}
    fused = [{"cat": "Node", "name": "DmlFusedNode_0_0_kernel_time", "args": {"provider": dml,
                                                                              "op_name": "DmlFusedNode_0_0"}}, copy]
    placement, evidence = placement_evidence(fused, ["MaxPool", "Cast_2"], {"MaxPool": dml})
    assert placement == {"MaxPool": dml, "Cast_2": dml}
    assert evidence == {"MaxPool": "assignment-info", "Cast_2": "single-partition-rule"}
    assert describe_evidence(evidence) == "assignment-info: MaxPool; single-partition-rule: Cast_2"
    assert describe_evidence({"a": "trace-node", "b": "trace-node"}) == "trace-node"
    assert describe_evidence({}, "profiling trace unreadable") == "none (profiling trace unreadable)"
    only_copies = placement_evidence([copy], ["MaxPool"])
    assert only_copies == ({}, {})


def test_fallback_refusal_text_matches_onnxruntime():
    text = ("[ONNXRuntimeError] : 1 : FAIL : This session contains graph nodes that are assigned to the default "
            "CPU EP, but fallback to CPU EP has been explicitly disabled by the user.")
    assert is_fallback_refusal(RuntimeError(text))
    assert not is_fallback_refusal(RuntimeError("Pad should be smaller than kernel."))


def test_expectations_known_fixed_strict_and_flags():
    entries = exp.parse({"expectations": [
        {"id": "roi_align*", "flags": [{"field": "ReductionFunction", "value": "MAX", "kind": "diverges"}],
         "outcome": "fail", "readings": ["corner-term-max"], "reason": "r", "link": "l"},
        {"id": "max_pooling2/nan*", "outcome": "not-on-ep", "strict": False, "reason": "r", "link": "l"},
        {"id": "roi_pooling/*", "tags": {"dtype": "float16"}, "outcome": "fail", "readings": ["std-max-fold"],
         "reason": "r", "link": "l"}]})
    max_flag = [{"field": "ReductionFunction", "value": "MAX", "kind": "diverges", "reason": "x"}]
    assert entries.match("roi_align1/a", {}, max_flag) is not None
    assert entries.match("roi_align1/a", {}, []) is None and entries.match("roi_align1/a") is None
    strict = entries.match("roi_align/x", {}, max_flag)
    # without evidence, ``apply`` says what an entry would make of an outcome (a first-run outlook)
    assert exp.apply("fail", strict) == "known" and exp.apply("pass", strict) == "fixed"
    assert exp.apply("crash", strict) == "crash" and exp.apply("pass", None) == "pass"
    loose = entries.match("max_pooling2/nan-1")
    assert exp.apply("not-on-ep", loose) == "not-on-ep" and exp.apply("pass", loose) == "pass"
    assert exp.apply("crash", loose) == "crash"  # a crash is never expected
    assert entries.match("roi_pooling/a", {"dtype": "float16"}) and not entries.match("roi_pooling/a", {"dtype": "float32"})
    for bad in ({"expectations": [{"id": "x", "outcome": "fail", "reason": "r"}]},
                {"expectations": [{"id": "x", "outcome": "pass", "reason": "r", "link": "l"}]},
                {"nope": []}):
        with pytest.raises(ValueError):
            exp.parse(bad)


@pytest.mark.parametrize("alias", ["cpu", "dml", "openvino"])
def test_bundled_expectation_files_are_valid(alias):
    entries = exp.for_ep(alias)
    for entry in entries.entries:
        assert entry.reason and entry.link.startswith("https://")


def test_an_unreadable_profiling_trace_proves_nothing_but_the_assignment_info(tmp_path):
    """onnxruntime-openvino 1.24.1 writes node names into its trace unescaped; a quote in a name
    makes the file invalid JSON. Placement then comes from the graph assignment info alone, and
    a node it does not name stays unproven (so the case can never pass)."""
    from types import SimpleNamespace

    from ep_testbed.harness.eps.placement import off_ep, read_placement

    def trace():
        path = tmp_path / "trace.json"
        path.write_text('[{"cat": "Node", "name": "pool"x"_kernel_time", "args": {"provider": "X"}}]')
        return str(path)

    bare = SimpleNamespace()
    placement, source = read_placement(bare, ["pool\"x", "cast"], trace())
    assert placement == {} and source == "none (profiling trace unreadable)"
    assert off_ep(placement, ["pool\"x"], "OpenVINOExecutionProvider") == ["pool\"x"]

    node = SimpleNamespace(name="pool\"x")
    subgraph = SimpleNamespace(ep_name="OpenVINOExecutionProvider", get_nodes=lambda: [node])
    with_info = SimpleNamespace(get_provider_graph_assignment_info=lambda: [subgraph])
    placement, source = read_placement(with_info, ["pool\"x", "cast"], trace())
    assert placement == {"pool\"x": "OpenVINOExecutionProvider"}
    assert source == "assignment-info (profiling trace unreadable)"


def test_expectations_onnxruntime_ranges_pick_the_active_entries():
    data = {"expectations": [
        {"id": "a", "onnxruntime": "<1.29", "outcome": "fail", "readings": ["lowest-start"], "reason": "r", "link": "l"},
        {"id": "a", "onnxruntime": ">=1.29", "outcome": "not-on-ep", "reason": "r", "link": "l"}]}
    old, new = exp.parse(data, ort_version="1.24.4"), exp.parse(data, ort_version="1.32.0")
    assert old.match("a").outcome == ("fail",) and new.match("a").outcome == ("not-on-ep",)
    assert [e.outcome for e in old.inactive] == [("not-on-ep",)]
    assert old.match("a").to_json()["onnxruntime"] == "<1.29"
    assert exp.in_range("1.25.0.dev20250101", ">=1.25,<1.26") and not exp.in_range("1.29", "!=1.29.0")
    assert exp.in_range("2", ">1.99.9") and not exp.in_range("1.24.4", "==1.24")
    for bad in ("~=1.2", "1.2", ">=", ">=x"):
        with pytest.raises(ValueError, match=r"expectations\[0\]: onnxruntime"):
            exp.parse({"expectations": [{"id": "a", "onnxruntime": bad, "outcome": "not-on-ep", "reason": "r",
                                         "link": "l"}]}, ort_version="1.0")


def test_expectations_predicted_entries_need_the_case_and_the_eps_predictor():
    from types import SimpleNamespace

    calls = []

    def predictor(case):
        calls.append(case.id)
        return [{"node": "n", "op_type": "MaxRoiPool", "field": "PooledSize", "kind": "diverges"}]

    entries = exp.parse({"expectations": [
        {"id": "roi_pooling/*", "predicted": [{"field": "PooledSize", "kind": "diverges"}], "outcome": "not-on-ep",
         "reason": "r", "link": "l", "predicted_from": "DmlOperatorRoiPooling.cpp L29"}]})
    case = SimpleNamespace(id="roi_pooling/x", tags={}, seed=0)
    assert entries.match_case(case) is None  # no predictor: a predicted entry never matches
    entries.predictor = predictor
    hit = entries.match_case(case)
    assert hit is not None and hit.to_json()["predicted_from"] == "DmlOperatorRoiPooling.cpp L29"
    assert entries.match_case(case) is hit and calls == ["roi_pooling/x"]  # computed once per case
    assert entries.match("roi_pooling/x") is None  # by id alone it cannot be decided
    entries.predictor = lambda case: [{"field": "PooledSize", "kind": "exact"}]
    assert entries.match_case(SimpleNamespace(id="roi_pooling/y", tags={}, seed=0)) is None
    with pytest.raises(ValueError, match="predicted must be a list of objects"):
        exp.parse({"expectations": [{"id": "a", "predicted": {"field": "x"}, "outcome": "not-on-ep", "reason": "r",
                                     "link": "l"}]})
    from ep_testbed.harness.eps import dml_ep, registry

    # the file's EP picks its predictor among those the EP records hold (the DirectML EP's, here)
    predictors = registry.predictors()
    assert exp.parse({"ep": "DmlExecutionProvider", "expectations": []}, predictors=predictors).predictor \
        is dml_ep.predict_case
    assert exp.parse({"ep": "CPUExecutionProvider", "expectations": []}, predictors=predictors).predictor is None
    assert exp.parse({"ep": "DmlExecutionProvider", "expectations": []}).predictor is None  # none handed over


def test_dml_sessions_disable_graph_fusion_unless_kept():
    """ep.dml.disable_graph_fusion (onnxruntime/core/providers/dml/dml_session_options_config_keys.h):
    ORT fuses DML nodes at every optimization level (inference_session.cc), so it is off by default."""
    dml = EpSpec("DmlExecutionProvider", "dml")
    assert session_options(dml, SessionSettings()).get_session_config_entry("ep.dml.disable_graph_fusion") == "1"
    kept = session_options(dml, SessionSettings(dml_graph_fusion=True))
    assert _config(kept, "ep.dml.disable_graph_fusion") is None
    assert SessionSettings().to_json(dml)["dml_graph_fusion"] is False
    assert SessionSettings(dml_graph_fusion=True).to_json(dml)["dml_graph_fusion"] is True
    assert _config(session_options(resolve_ep("cpu"), SessionSettings()), "ep.dml.disable_graph_fusion") is None
    assert "dml_graph_fusion" not in SessionSettings().to_json(resolve_ep("cpu"))


def test_a_session_python_rebuilt_without_the_ep_is_a_build_failure(monkeypatch):
    """onnxruntime_inference_collection.py retries a failing EP on the CPU EP alone unless
    enable_fallback=0; the harness passes it and still checks get_providers()."""
    from ep_testbed.harness.eps import session as session_mod

    seen = {}

    class Fallen:
        def __init__(self, model, so, providers, **kwargs):
            seen.update(kwargs, providers=providers)

        def get_providers(self):
            return ["CPUExecutionProvider"]

    monkeypatch.setattr(ort, "InferenceSession", Fallen)
    mapping = to_onnx(max_pool_case("x").desc)
    dml = EpSpec("DmlExecutionProvider", "dml", {"device_id": "7"})
    with pytest.raises(session_mod.SessionError) as info:
        session_mod.run_on_ep(mapping.model, {}, dml, SessionSettings())
    assert seen["enable_fallback"] == 0 and seen["providers"] == [("DmlExecutionProvider", {"device_id": "7"})]
    assert info.value.stage == "build" and not info.value.refused_fallback
    assert "without DmlExecutionProvider" in str(info.value)
