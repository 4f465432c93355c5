"""Expectations name a cause once, say where it applies (``applies_to``: providers, aliases, a
class of EPs) and when it can show (``shows_when``); harness/expectations/shared.json holds the
causes several EPs share. A case whose inputs cannot show a known cause is judged like any
other: no ``known``, no ``fixed`` (the fuzzing false alarms this replaced)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import UINT32_MAX, Case
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.harness.core import expectations as exp
from ep_testbed.harness.core.signature import input_extremes
from ep_testbed.harness.core.untrusted_files import FileRefused
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run.case_run import CaseConfig, run_case

SHARED = ["roi_align*", "roi_align*opset10*", "max_pooling2/edge-nan-inf*", "max_pooling2/*"]


def _ids(expectations):
    return [e.id for e in expectations.entries + expectations.inactive]


def test_shared_causes_apply_where_they_say():
    shared = json.loads(open(f"{exp.EXPECTATIONS_DIR}/{exp.SHARED_FILE}", encoding="utf-8").read())
    assert all(e.get("applies_to") for e in shared["expectations"])
    cuda = exp.for_ep("cuda", provider="CUDAExecutionProvider")
    assert _ids(cuda) == SHARED  # no cuda.json: the shared causes are all it has
    webgpu = exp.for_ep("webgpu", provider="WebGpuExecutionProvider")
    shared_ids = [e.id for e in webgpu.entries + webgpu.inactive if e.applies_to]
    assert shared_ids == ["roi_align*", "roi_align*opset10*", "max_pooling2/*"]  # NaN: CPU and CUDA seen only
    assert webgpu.source.endswith("webgpu.json + " + f"{exp.EXPECTATIONS_DIR}/{exp.SHARED_FILE}")
    assert not set(_ids(exp.for_ep("dml"))) & {"roi_align*opset10*", "max_pooling2/edge-nan-inf*"}
    openvino = exp.for_ep("openvino")
    assert _ids(openvino).count("roi_align*opset10*") == 1 and "max_pooling2/edge-nan-inf*" not in _ids(openvino)
    cpu = exp.for_ep("cpu")
    assert [e.id for e in cpu.entries if e.applies_to] == SHARED and cpu.source.endswith("shared.json")
    # the cause is written once: no entry of an EP's own file repeats a shared one
    for alias in ("cpu", "openvino", "dml", "webgpu"):
        own = json.loads(open(f"{exp.EXPECTATIONS_DIR}/{alias}.json", encoding="utf-8").read())["expectations"]
        assert not {e["reason"] for e in own} & {e["reason"] for e in shared["expectations"]}


def test_applies_to_names_providers_aliases_and_classes():
    entry = exp.parse([{"id": "*", "outcome": "fail", "reason": "r", "link": "l",
                        "applies_to": ["onnxruntime-kernels", "openvino"]}]).entries[0]
    assert entry.applies("CUDAExecutionProvider", "cuda") and entry.applies("OpenVINOExecutionProvider", "openvino")
    assert not entry.applies("DmlExecutionProvider", "dml")
    assert exp.parse([{"id": "*", "outcome": "fail", "reason": "r", "link": "l"}]).entries[0].applies("X", "x")
    kept = exp.parse({"expectations": [{"id": "a", "outcome": "fail", "reason": "r", "link": "l",
                                        "applies_to": ["CPUExecutionProvider"]}]}, provider="DmlExecutionProvider")
    assert len(kept) == 0


@pytest.mark.parametrize("bad, words", [
    ({"applies_to": "cuda"}, "non-empty list"),
    ({"applies_to": ["onnxruntime-kernel"]}, "is not a provider name"),
    ({"shows_when": {"when": 1}}, "shows_when must be an object"),
    ({"shows_when": {"signature": {"colour": "red"}}}, "keys among outcome"),
    ({"shows_when": {"signature": [{"values": "nan -> number"}, "x"]}}, "or a list of such objects"),
    ({"observed_on": "llvmpipe"}, "observed_on must be an object"),
    ({"observed_on": {"device": "llvmpipe"}}, "observed_on must say device and emulated"),
    ({"observed_on": {"device": "llvmpipe", "emulated": "yes"}}, "emulated: true or false"),
    ({"emulated_device": "yes"}, "emulated_device must be true or false"),
    ({"evidence": ["seen"]}, "evidence must be a string"),
])
def test_bad_entries_are_named(bad, words):
    with pytest.raises(ValueError, match=words):
        exp.parse([{"id": "*", "outcome": "fail", "reason": "r", "link": "l", **bad}])


def test_a_shared_file_entry_must_say_where_it_applies(tmp_path):
    path = tmp_path / "shared.json"
    path.write_text(json.dumps({"expectations": [{"id": "*", "outcome": "fail", "reason": "r", "link": "l"}]}))
    with pytest.raises(FileRefused, match="must say where it applies"):
        exp.load(str(path), shared=True)


class _Case:
    id, tags = "roi_align1/x", {}


def _line(outcome, flags=(), worst=()):
    return {"outcome": outcome, "flags": list(flags), "worst": list(worst), "message": "m", "op": "X"}


def test_shows_when_flags_decides_known_fixed_or_like_any_other():
    entries = exp.parse([{"id": "*", "outcome": "fail", "reason": "corner terms", "link": "l",
                          "flags": [{"field": "ReductionFunction", "kind": "diverges"}],
                          "shows_when": {"flags": [{"field": "ReductionFunction", "shows": True}]}}])
    quiet = {"field": "ReductionFunction", "kind": "diverges", "shows": False}
    loud = dict(quiet, shows=True)
    for outcome, flag, reported in [("pass", quiet, "pass"), ("fail", quiet, "fail"), ("pass", loud, "fixed"),
                                    ("fail", loud, "known")]:
        line = _line(outcome, [flag])
        entries.settle(_Case(), line)
        assert line["outcome"] == reported, (outcome, flag)
        assert (line["expected_outcome"] is None) == (flag is quiet)
        assert ("cannot show on these inputs" in line["message"]) == (flag is quiet)


def test_shows_when_signature_keeps_only_its_own_failure():
    entries = exp.parse([{"id": "*", "outcome": "fail", "reason": "NaN first", "link": "l",
                          "shows_when": {"signature": {"values": "nan -> number"}}}])
    nan = _line("fail", worst=[{"failed": True, "expected": "nan", "actual": 1.0, "output": "OutputTensor"}])
    other = _line("fail", worst=[{"failed": True, "expected": 2.0, "actual": 1.0, "output": "OutputTensor"}])
    entries.settle(_Case(), nan)
    entries.settle(_Case(), other)
    assert nan["outcome"] == "known" and other["outcome"] == "fail"
    passing = _line("pass")
    entries.settle(_Case(), passing)
    assert passing["outcome"] == "fixed"  # a pass has no signature: strict decides, as without the condition


# ONNX's mode="max" (an adaptive count) as ORT's CPU kernel computes it, against the page
MAX = roi_align_desc(True, reduction="MAX", samples=(1, UINT32_MAX))


@pytest.mark.parametrize("recipe, shows", [("outside-wholly", False), ("random", True)])
def test_the_corner_term_max_shows_only_where_it_differs(recipe, shows):
    case = Case(id=f"roi_align1/max-{recipe}", op=MAX.TYPE, desc=MAX, seed=1, recipe=recipe)
    line = run_case(case, CaseConfig(ep=resolve_ep("cpu")), mapper=to_onnx)
    flag = next(f for f in line["flags"] if f["field"] == "ReductionFunction")
    assert flag["shows"] is shows
    raw = line["outcome"]
    exp.for_ep("cpu").settle(case, line)
    if shows:
        assert raw == "fail" and line["outcome"] == "known"
    else:  # every sample reads outside the input: both maxima are 0; before, this pass was "fixed"
        assert raw == "pass" and line["outcome"] == "pass" and line["expected_outcome"] is None
        assert "cannot show on these inputs" in line["message"]


def test_an_emulated_device_cause_is_an_emulation_gap_only_there():
    """An entry scoped to an emulated device (``emulated_device``) is inactive elsewhere; where it
    holds, the case it explains is ``emulation-gap`` (not tested, never ``known``), its message
    says the device is the cause, and the line records where and what was seen."""
    entry = {"id": "*", "outcome": "not-on-ep", "reason": "no 16-bit shaders on this device", "link": "l",
             "emulated_device": True, "evidence": "FLOAT16 unsupported",
             "observed_on": {"device": "llvmpipe", "emulated": True, "directml": "1.15.4"}}
    assert len(exp.parse([entry])) == 0 and len(exp.parse([entry]).inactive) == 1
    emulated = exp.parse([entry], emulated=True)
    line = _line("not-on-ep")
    emulated.settle(_Case(), line)
    assert line["outcome"] == "emulation-gap" and "not a result of the EP" in line["message"]
    recorded = line["expected_outcome"]
    assert recorded["emulated_device"] is True and recorded["evidence"] == "FLOAT16 unsupported"
    assert recorded["observed_on"] == {"device": "llvmpipe", "emulated": True, "directml": "1.15.4"}
    passing = _line("pass")
    emulated.settle(_Case(), passing)
    assert passing["outcome"] == "fixed"  # the device gap went away: news
    plain = exp.parse([dict(entry, emulated_device=False)], emulated=True)
    line = _line("not-on-ep")
    plain.settle(_Case(), line)
    assert line["outcome"] == "known"


def test_a_signature_list_is_any_of_them_and_untested_cases_cannot_show_it():
    entries = exp.parse([{"id": "*", "outcome": "fail", "reason": "lerp", "link": "l", "strict": False,
                          "shows_when": {"signature": [{"values": "inf -> nan"}, {"values": "-inf -> nan"}]}}])
    for expected in ("inf", "-inf"):
        line = _line("fail", worst=[{"failed": True, "expected": expected, "actual": "nan", "output": "OutputTensor"}])
        entries.settle(_Case(), line)
        assert line["outcome"] == "known"
    other = _line("fail", worst=[{"failed": True, "expected": 2.0, "actual": 1.0, "output": "OutputTensor"}])
    entries.settle(_Case(), other)
    assert other["outcome"] == "fail" and "cannot show on these inputs" in other["message"]
    for outcome in ("pass", "not-on-ep", "emulation-gap"):  # not strict: a pass stays; untested cases show nothing
        line = _line(outcome)
        entries.settle(_Case(), line)
        assert line["outcome"] == outcome and line["expected_outcome"] is None and line["message"] == "m"


def test_input_extremes_name_the_extreme_values_a_case_holds():
    """The line's ``input_extremes``: NaN, +inf, -inf and magnitudes of at least 2**120 among the
    floating-point inputs, in INPUT_CLASSES order; integers and moderate floats hold none."""
    assert input_extremes({"x": np.array([1.0, -2.0], np.float32), "i": np.array([2**62], np.int64)}) == []
    assert input_extremes({"x": np.array([np.inf, np.nan], np.float32)}) == ["nan", "inf"]
    assert input_extremes({"x": np.array([-np.inf, -2.0**120], np.float32)}) == ["-inf", "huge"]
    assert input_extremes({"x": np.array([2.0**119], np.float32), "e": np.zeros(0, np.float32)}) == []


def test_shows_when_inputs_keeps_a_failure_shape_to_the_inputs_that_can_cause_it():
    """A cause only extreme inputs trigger (DirectML's float32 lerp overflowing, say) explains a
    failure of its shape on such inputs only: the same shape on moderate inputs fails, with a note
    naming the condition; a bad class is refused naming the field and the classes."""
    entries = exp.parse([{"id": "*", "outcome": "fail", "reason": "lerp", "link": "l", "strict": False,
                          "shows_when": {"signature": {"values": "number -> nan"}, "inputs": ["nan", "huge"]}}])
    worst = [{"failed": True, "expected": 2.0, "actual": "nan", "output": "OutputTensor"}]
    for extremes, outcome in ((["huge"], "known"), (["nan", "inf"], "known"), (["inf"], "fail"), ([], "fail"),
                              (None, "fail")):
        line = _line("fail", worst=worst)
        line["input_extremes"] = extremes
        entries.settle(_Case(), line)
        assert line["outcome"] == outcome, extremes
        assert ("inputs holding nan or huge" in line["message"]) == (outcome == "fail")
    with pytest.raises(ValueError, match=r"shows_when.inputs must be a list of nan, inf, -inf, huge"):
        exp.parse([{"id": "*", "outcome": "fail", "reason": "r", "link": "l", "shows_when": {"inputs": ["big"]}}])


def test_a_cause_the_case_came_nowhere_near_adds_no_note():
    """An entry whose inputs condition fails AND whose failure shape differs says nothing on the
    case (a wrong index on moderate inputs is not 'near' an all -inf window); one of the two
    holding keeps the note (test above)."""
    entries = exp.parse([{"id": "*", "outcome": "fail", "reason": "-FLT_MAX start", "link": "l", "strict": False,
                          "shows_when": {"signature": {"values": "-inf -> number"}, "inputs": ["-inf"]}}])
    index = _line("fail", worst=[{"failed": True, "expected": 7, "actual": 8, "output": "OutputIndicesTensor"}])
    index["input_extremes"] = []
    entries.settle(_Case(), index)
    assert index["outcome"] == "fail" and index["message"] == "m"
    near = _line("fail", worst=[{"failed": True, "expected": 7, "actual": 8, "output": "OutputIndicesTensor"}])
    near["input_extremes"] = ["-inf"]
    entries.settle(_Case(), near)
    assert near["outcome"] == "fail" and "cannot show on these inputs" in near["message"]


def test_a_worker_writes_a_case_folder_for_what_an_expectation_will_explain_and_not_for_what_it_only_names():
    """The main process settles expectations; the worker writes the folder, with the EP's outputs,
    only where the settled outcome will be known, fixed or an emulation gap. An entry that names a
    case (its id and tags) but whose cause cannot show on the line explains nothing, and a broad
    entry would otherwise give every case it names a folder."""
    from ep_testbed.harness.run.case_steps import ArtifactPolicy, wants_artifacts

    refused = exp.Expectation(id="roi_align*", outcome=("not-on-ep",), reason="no kernel", link="x", strict=False)
    flagged = exp.Expectation(id="roi_align*", outcome=("fail",), reason="a field", link="x",
                              shows_flags=((("field", "output_width"),),), strict=False)
    strict = exp.Expectation(id="max_pooling2/*", outcome=("fail",), reason="ties", link="x", strict=True)
    loose = exp.Expectation(id="max_pooling2/*", outcome=("fail",), reason="ties", link="x", strict=False)

    def line(outcome, flags=()):
        return {"id": "roi_align/x", "outcome": outcome, "flags": list(flags), "input_extremes": []}

    def writes(entries, raw):
        return wants_artifacts(raw, ArtifactPolicy(expected=tuple(entries)))

    assert writes([refused], line("not-on-ep"))  # known: its folder goes into the bug report
    assert not writes([refused], line("pass"))  # named, not explained: no folder
    assert not writes([flagged], line("crash"))  # the flag its cause needs is not on the line
    assert writes([flagged, refused], line("not-on-ep"))  # the first entry that can show decides
    assert writes([strict], line("pass"))  # fixed: the folder goes into the fix
    assert not writes([loose], line("pass"))
    assert not writes([], line("not-on-ep")) and writes([], line("fail"))  # failures always
