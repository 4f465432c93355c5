"""Case runs and model runs build their sessions through one function, ``harness.eps.session.run_on_ep``,
and a refused model names what it refused."""

from __future__ import annotations

import pytest

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.graphs.models import DEMO_SHAPES, resnet_stem
from ep_testbed.harness.eps import session
from ep_testbed.harness.eps.providers import SessionSettings, resolve_ep
from ep_testbed.harness.models.inputs import generate_inputs, input_specs, resolve_shapes
from ep_testbed.harness.models.run import ModelRunConfig, SessionFailed, run_model, run_session
from ep_testbed.harness.models.untrusted import LoadedModel
from ep_testbed.harness.run.case_run import CaseConfig, run_case


@pytest.fixture
def session_calls(monkeypatch):
    """Every ``run_on_ep`` call as ``(graph name, provider, allow_fallback, profile)``; the real function runs."""
    calls = []
    real = session.run_on_ep

    def recording(model, feeds, ep, settings, **options):
        calls.append((model.graph.name, ep.provider, options.get("allow_fallback", False),
                      options.get("profile", True)))
        return real(model, feeds, ep, settings, **options)

    monkeypatch.setattr(session, "run_on_ep", recording)
    return calls


def test_a_case_run_and_a_model_run_go_through_the_same_session_function(tmp_path, session_calls):
    case = next(c for c in build_catalog(["max_pooling2"]) if c.id.startswith("max_pooling2/grid-float32-2d"))
    line = run_case(case, CaseConfig(ep=resolve_ep("cpu")))
    assert line["outcome"] == "pass", line["message"]
    assert line["placement_source"] == "trace-node"
    case_calls = list(session_calls)
    assert len(case_calls) == 1 and case_calls[0][1:] == ("CPUExecutionProvider", False, True)

    model = resnet_stem()
    specs = input_specs(model)
    feeds = generate_inputs(model, specs, resolve_shapes(specs, {k: (v,) for k, v in
                                                               DEMO_SHAPES.get("resnet_stem", {}).items()}), 0)
    config = ModelRunConfig(ep=resolve_ep("cpu"), reference=resolve_ep("cpu"))
    result = run_model(LoadedModel(model, tmp_path / "stem.onnx", tmp_path, "0" * 64, []), feeds, config)
    model_calls = session_calls[len(case_calls):]
    # the model on the EP (profiled) and the reference EP, then the probe copy on the reference EP
    # (its tensors feed nodes judged alone if the EP cannot run the copy) and on the EP (profiled)
    cpu = "CPUExecutionProvider"
    assert [(c[1], c[3]) for c in model_calls] == [(cpu, True), (cpu, False), (cpu, False), (cpu, True)]
    assert {c[0] for c in model_calls} == {model.graph.name}
    assert result["placement"]["source"] == "trace-node" and result["verdict"] == "pass"


def test_a_session_error_says_which_stage_failed_and_whether_it_was_a_fallback_refusal():
    refusal = RuntimeError("[ONNXRuntimeError] : 1 : FAIL : This session contains graph nodes that are assigned to "
                           "the default CPU EP, but fallback to CPU EP has been explicitly disabled by the user.\nmore")
    error = session.SessionError("build", "OpenVINOExecutionProvider", refusal)
    assert error.refused_fallback and "could not build the session" in str(error) and "more" not in str(error)
    assert not session.SessionError("run", "OpenVINOExecutionProvider", refusal).refused_fallback
    assert not session.SessionError("build", "X", RuntimeError("Pad should be smaller than kernel.")).refused_fallback


def test_a_model_the_ep_cannot_run_is_a_session_failure_naming_the_model(tmp_path):
    model = resnet_stem()
    config = ModelRunConfig(ep=resolve_ep("cpu"), reference=resolve_ep("cpu"))
    with pytest.raises(SessionFailed, match=r"CPUExecutionProvider raised while running stem\.onnx: "):
        run_session(model, {}, config.ep, config, profile=False, name="stem.onnx")  # no feeds: ORT refuses the run
    with pytest.raises(session.SessionError) as info:
        session.run_on_ep(model, {}, resolve_ep("cpu"), SessionSettings())
    assert info.value.stage == "run" and not info.value.refused_fallback
