"""Expectations name a cause once, say where it applies (``applies_to``: providers, aliases, a
class of EPs) and when it can show (``shows_when``); harness/expectations/shared.json holds the
causes several EPs share. A failure is ``known`` only when readings of the reference reproduce
every failing element (the line's evidence), a refusal is ``not-on-ep`` only for its own error,
and a case whose inputs cannot show a known cause is judged like any other."""

from __future__ import annotations

import json
import platform

import numpy as np
import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import UINT32_MAX, Case
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.harness.core import expectations as exp
from ep_testbed.harness.core.signature import input_extremes
from ep_testbed.harness.core.untrusted_files import FileRefused
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.eps.registry import classes_of
from ep_testbed.harness.run.case_run import CaseConfig, run_case

SHARED = ["roi_align*", "roi_align*opset10*", "max_pooling2/edge-nan-inf*", "max_pooling2/*"]


def _ids(expectations):
    return [e.id for e in expectations.entries + expectations.inactive]


def test_shared_causes_apply_where_they_say():
    """ONNX Runtime's kernels' causes are written once, in shared.json, and apply to every EP of
    the class (CPU, CUDA, WebGPU): the CUDA EP, with no file of its own, gets exactly them; an
    entry of an EP's own file never repeats a shared one; DirectML gets none of them."""
    shared = json.loads(open(f"{exp.EXPECTATIONS_DIR}/{exp.SHARED_FILE}", encoding="utf-8").read())
    assert all(e.get("applies_to") for e in shared["expectations"])
    everything = [e["id"] for e in shared["expectations"]]
    cuda = exp.for_ep("cuda", provider="CUDAExecutionProvider", classes=classes_of("CUDAExecutionProvider"))
    assert sorted(_ids(cuda)) == sorted(everything)  # no cuda.json: the shared causes are all it has
    webgpu = exp.for_ep("webgpu", provider="WebGpuExecutionProvider", classes=classes_of("WebGpuExecutionProvider"))
    assert sorted(e.id for e in webgpu.entries + webgpu.inactive if e.applies_to) == sorted(everything)
    assert webgpu.source.endswith("webgpu.json + " + f"{exp.EXPECTATIONS_DIR}/{exp.SHARED_FILE}")
    assert not {e.id for e in exp.for_ep("dml", classes=classes_of("DmlExecutionProvider")).entries if e.applies_to}
    openvino = exp.for_ep("openvino", classes=classes_of("OpenVINOExecutionProvider"))
    assert [(e.id, e.readings) for e in openvino.entries if e.applies_to] == [("roi_align*", ("onnx-1x1-regions",))]
    cpu = exp.for_ep("cpu", classes=classes_of("CPUExecutionProvider"))
    assert sorted(e.id for e in cpu.entries + cpu.inactive if e.applies_to) == sorted(everything)
    for alias in ("cpu", "openvino", "dml", "webgpu"):
        own = json.loads(open(f"{exp.EXPECTATIONS_DIR}/{alias}.json", encoding="utf-8").read())["expectations"]
        assert not {e["reason"] for e in own} & {e["reason"] for e in shared["expectations"]}


def test_every_bundled_entry_names_readings_the_operators_have():
    """An entry of numbers names readings that exist for the operators its id can match, so a typo
    is caught here, not as a case that silently cannot be explained."""
    import fnmatch

    from ep_testbed.graphs.catalog import build_catalog
    from ep_testbed.reference import spec_named

    ids = [c.id for c in build_catalog()]
    for alias in ("cpu", "openvino", "dml", "webgpu", "shared"):
        data = json.loads(open(f"{exp.EXPECTATIONS_DIR}/{alias}.json", encoding="utf-8").read())
        for entry in data["expectations"]:
            ops = {i.split("/")[0] for i in ids if fnmatch.fnmatchcase(i, entry["id"])}
            assert ops or not entry.get("readings"), (alias, entry["id"])
            for name in entry.get("readings", []):
                assert any(name in {r.name for r in spec_named(op).readings} for op in ops), (alias, entry["id"], name)


def test_applies_to_names_providers_aliases_and_classes():
    entry = exp.parse([{"id": "*", "outcome": "fail", "readings": ["lowest-start"], "reason": "r", "link": "l",
                        "applies_to": ["onnxruntime-kernels", "openvino"]}]).entries[0]
    cuda = classes_of("CUDAExecutionProvider")  # the classes an EP is in are its record's
    assert cuda == ("onnxruntime-kernels",) and classes_of("DmlExecutionProvider") == ()
    assert entry.applies("CUDAExecutionProvider", "cuda", cuda) and entry.applies("OpenVINOExecutionProvider", "openvino")
    assert not entry.applies("CUDAExecutionProvider", "cuda")  # no class given: only names apply
    assert not entry.applies("DmlExecutionProvider", "dml", classes_of("DmlExecutionProvider"))
    assert exp.parse([{"id": "*", "outcome": "not-on-ep", "reason": "r", "link": "l"}]).entries[0].applies("X", "x")
    kept = exp.parse({"expectations": [{"id": "a", "outcome": "not-on-ep", "reason": "r", "link": "l",
                                        "applies_to": ["CPUExecutionProvider"]}]}, provider="DmlExecutionProvider")
    assert len(kept) == 0


@pytest.mark.parametrize("bad, words", [
    ({"applies_to": "cuda"}, "non-empty list"),
    ({"applies_to": ["onnxruntime-kernel"]}, "is not a provider name"),
    ({"shows_when": {"when": 1}}, "shows_when must be an object"),
    ({"observed_on": "llvmpipe"}, "observed_on must be an object"),
    ({"observed_on": {"device": "llvmpipe"}}, "observed_on must say device and emulated"),
    ({"observed_on": {"device": "llvmpipe", "emulated": "yes"}}, "emulated: true or false"),
    ({"emulated_device": "yes"}, "emulated_device must be true or false"),
    ({"evidence": ["seen"]}, "evidence must be a string"),
    ({"readings": None}, "must name the readings"),
    ({"readings": []}, "non-empty list of reading names"),
    ({"readings": ["Std Max"]}, "non-empty list of reading names"),
    ({"shows_when": {"signature": {"values": "nan -> number"}}}, "drop the signature"),
    ({"outcome": "crash"}, "a crash, a timeout or an error is never expected"),
    ({"outcome": "not-on-ep"}, "readings explain numbers"),
    ({"outcome": "not-on-ep", "readings": None, "error": "("}, "is not a regular expression"),
    ({"error": "80070057"}, "error matches a refusal"),
])
def test_bad_entries_are_named(bad, words):
    entry = {"id": "*", "outcome": "fail", "readings": ["lowest-start"], "reason": "r", "link": "l", **bad}
    with pytest.raises(ValueError, match=words):
        exp.parse([{k: v for k, v in entry.items() if v is not None}])


def test_a_shared_file_entry_must_say_where_it_applies(tmp_path):
    path = tmp_path / "shared.json"
    path.write_text(json.dumps({"expectations": [{"id": "*", "outcome": "fail", "readings": ["lowest-start"],
                                                   "reason": "r", "link": "l"}]}))
    with pytest.raises(FileRefused, match="must say where it applies"):
        exp.load(str(path), shared=True)


class _Case:
    id, tags = "roi_align1/x", {}


def _line(outcome, flags=(), worst=(), readings=None, message="m", mismatches=0):
    return {"outcome": outcome, "flags": list(flags), "worst": list(worst), "message": message, "op": "X",
            "readings": readings, "mismatches": mismatches}


def _evidence(explained, unexplained=0, tried=None):
    return {"tried": tried or sorted(explained), "mismatches": sum(explained.values()) + unexplained,
            "explained": explained, "unexplained": unexplained,
            **({"first_unexplained": {"output": "OutputTensor", "index": [0, 1], "expected": 1.0, "actual": 3.0,
                                      "readings": {"std-max-fold": 2.0}}} if unexplained else {})}


NUMBERS = [{"id": "*", "outcome": "fail", "readings": ["std-max-fold"], "reason": "ORT's fold", "link": "l1",
            "strict": False},
           {"id": "*", "outcome": "fail", "readings": ["half-away-rounding"], "reason": "ORT's round", "link": "l2",
            "strict": False}]


def test_known_needs_every_failing_element_reproduced_by_a_reading():
    """The core rule: a failure is known only when the line's evidence leaves no element
    unexplained, with readings that entries holding for the case name; the causes are the entries
    whose readings explained elements, the one explaining most first, never the first that matched."""
    entries = exp.parse(NUMBERS)
    line = _line("fail", readings=_evidence({"half-away-rounding": 5, "std-max-fold": 2}), mismatches=7)
    entries.settle(_Case(), line)
    assert line["outcome"] == "known"
    assert line["expected_outcome"]["link"] == "l2" and line["expected_outcome"]["also"][0]["link"] == "l1"
    assert line["expected_outcome"]["explained_by"] == {"half-away-rounding": 5, "std-max-fold": 2}
    assert "half-away-rounding (5), std-max-fold (2)" in line["message"]
    one_left = _line("fail", readings=_evidence({"half-away-rounding": 5}, unexplained=1), mismatches=6)
    entries.settle(_Case(), one_left)
    assert one_left["outcome"] == "fail" and one_left["expected_outcome"] is None
    assert "1 element(s) outside tolerance match none of the readings" in one_left["message"]
    assert "OutputTensor[0, 1]: expected 1.0, got 3.0 (std-max-fold gives 2.0)" in one_left["message"]
    stranger = _line("fail", readings=_evidence({"closed-edge": 3}), mismatches=3)  # no entry names it
    entries.settle(_Case(), stranger)
    assert stranger["outcome"] == "fail"
    nothing = _line("fail", mismatches=4)  # no evidence: nothing proved it
    entries.settle(_Case(), nothing)
    assert nothing["outcome"] == "fail"
    only_one = exp.parse(NUMBERS[:1])  # the combination needs both entries to hold
    both = _line("fail", readings=_evidence({"half-away-rounding+std-max-fold": 2}), mismatches=2)
    only_one.settle(_Case(), both)
    assert both["outcome"] == "fail"
    both = _line("fail", readings=_evidence({"half-away-rounding+std-max-fold": 2}), mismatches=2)
    entries.settle(_Case(), both)
    assert both["outcome"] == "known"


def test_a_failing_message_counts_the_combinations_it_tried_past_a_few():
    """The message lists what was tried while that reads at a glance; past
    ``MAX_LISTED_COMBINATIONS`` combinations it names the readings tried alone and counts the
    combinations (the line's ``readings.tried`` keeps every set)."""
    entries = exp.parse(NUMBERS)
    alone = ["half-away-rounding", "std-max-fold"]
    for combos in range(exp.MAX_LISTED_COMBINATIONS + 3):
        tried = alone + [f"{alone[0]}+{alone[1]}#{i}" for i in range(combos)]
        line = _line("fail", readings=_evidence({"half-away-rounding": 5}, unexplained=1, tried=tried), mismatches=6)
        entries.settle(_Case(), line)
        assert line["outcome"] == "fail" and line["readings"]["tried"] == tried
        if combos <= exp.MAX_LISTED_COMBINATIONS:
            assert f"(tried: {', '.join(tried)}); e.g." in line["message"], line["message"]
        else:
            assert (f"(tried {len(tried)} sets: half-away-rounding, std-max-fold, each alone, and {combos} "
                    "combinations of them; the line's readings.tried lists every set); e.g.") in line["message"]
            assert "+" not in line["message"], line["message"]


def test_readings_to_try_are_those_of_the_entries_that_hold():
    """The worker tries exactly the readings of the entries whose flags and shows_when hold for the
    raw line, in file order, once each; refusals and emulated entries name none."""
    entries = exp.parse([
        {"id": "*", "outcome": "fail", "readings": ["corner-term-max", "onnx-adaptive-count"], "reason": "r",
         "link": "l", "flags": [{"field": "ReductionFunction", "kind": "diverges"}]},
        {"id": "*", "outcome": "fail", "readings": ["onnx-adaptive-count", "closed-edge"], "reason": "r", "link": "l",
         "shows_when": {"inputs": ["nan"]}},
        {"id": "*", "outcome": "not-on-ep", "reason": "r", "link": "l"}])
    flag = {"field": "ReductionFunction", "kind": "diverges"}
    candidates = tuple(entries.entries)
    assert exp.readings_to_try(candidates, dict(_line("fail", [flag]), input_extremes=["nan"])) == (
        "corner-term-max", "onnx-adaptive-count", "closed-edge")
    assert exp.readings_to_try(candidates, dict(_line("fail"), input_extremes=[])) == ()


def test_a_refusal_is_not_on_ep_only_for_its_own_error():
    """A refusal entry makes a declined node, or a session the EP could not build whose error
    matches its ``error``, ``not-on-ep`` with the reason (never known); a build failure with
    another error, and a numeric failure, stay ``fail``."""
    entries = exp.parse([{"id": "*", "outcome": "not-on-ep", "error": "80070057", "reason": "transposed PooledSize",
                          "link": "l"}])
    declines = exp.parse([{"id": "*", "outcome": "not-on-ep", "reason": "no kernel", "link": "l"}])
    declined = _line("not-on-ep", message="X does not take the op node(s)")
    declines.settle(_Case(), declined)
    assert declined["outcome"] == "not-on-ep" and "known refusal (declined)" in declined["message"]
    assert declined["expected_outcome"]["reason"] == "no kernel"
    other = _line("not-on-ep", message="X does not take the op node(s)")
    entries.settle(_Case(), other)  # an entry naming an error explains only that error
    assert other["outcome"] == "not-on-ep" and other["expected_outcome"] is None
    for message, outcome in (("DmlExecutionProvider could not build the session: ... 80070057 Invalid parameter",
                              "not-on-ep"),
                             ("DmlExecutionProvider could not build the session: 887A0005", "fail"),
                             ("3 of 9 elements outside tolerance, 80070057", "fail")):
        line = _line("fail", message=message)
        entries.settle(_Case(), line)
        assert line["outcome"] == outcome, message
    passing = _line("pass")
    entries.settle(_Case(), passing)
    assert passing["outcome"] == "fixed"  # the EP builds it now: news


def test_shows_when_flags_is_a_precondition_of_an_entry_of_numbers():
    entries = exp.parse([{"id": "*", "outcome": "fail", "readings": ["corner-term-max"], "reason": "corner terms",
                          "link": "l", "flags": [{"field": "ReductionFunction", "kind": "diverges"}],
                          "shows_when": {"flags": [{"field": "ReductionFunction", "shows": True}]}}])
    quiet = {"field": "ReductionFunction", "kind": "diverges", "shows": False}
    loud = dict(quiet, shows=True)
    proof = _evidence({"corner-term-max": 4})
    for outcome, flag, reported in [("pass", quiet, "pass"), ("fail", quiet, "fail"), ("pass", loud, "fixed"),
                                    ("fail", loud, "known")]:
        line = _line(outcome, [flag], readings=proof if outcome == "fail" else None, mismatches=4)
        entries.settle(_Case(), line)
        assert line["outcome"] == reported, (outcome, flag)
        assert (line["expected_outcome"] is None) == (flag is quiet)
        assert ("cannot show on these inputs" in line["message"]) == (flag is quiet)


# ONNX's mode="max" (an adaptive count) as ORT's CPU kernel computes it, against the page
MAX = roi_align_desc(True, reduction="MAX", samples=(1, UINT32_MAX))


@pytest.mark.parametrize("recipe, shows", [("outside-wholly", False), ("random", True)])
def test_the_corner_term_max_shows_only_where_it_differs(recipe, shows):
    """On the CPU EP for real: the worker tries the corner-term-max reading, which reproduces every
    failing element of a random region (known); where every sample reads outside the input, both
    maxima are 0 and nothing is to explain."""
    case = Case(id=f"roi_align1/max-{recipe}", op=MAX.TYPE, desc=MAX, seed=1, recipe=recipe)
    shipped = exp.for_ep("cpu", classes=classes_of("CPUExecutionProvider"))
    from ep_testbed.harness.run.case_steps import ArtifactPolicy
    line = run_case(case, CaseConfig(ep=resolve_ep("cpu")), ArtifactPolicy(expected=shipped.candidates(case)),
                    mapper=to_onnx)
    flag = next(f for f in line["flags"] if f["field"] == "ReductionFunction")
    assert "shows" not in flag  # no shipped entry reads it: the meaning is not computed
    expectations = exp.parse([{"id": "roi_align1/*", "flags": [{"field": "ReductionFunction", "kind": "diverges"}],
                               "outcome": "fail", "readings": ["corner-term-max"], "reason": "r", "link": "l",
                               "strict": False,
                               "shows_when": {"flags": [{"field": "ReductionFunction", "shows": True}]}}])
    line = run_case(case, CaseConfig(ep=resolve_ep("cpu")), ArtifactPolicy(expected=expectations.candidates(case)),
                    mapper=to_onnx)
    flag = next(f for f in line["flags"] if f["field"] == "ReductionFunction")
    assert flag["shows"] is shows
    raw = line["outcome"]
    expectations.settle(case, line)
    if shows:
        assert raw == "fail" and line["outcome"] == "known"
        assert line["readings"]["unexplained"] == 0 and "corner-term-max" in line["expected_outcome"]["explained_by"]
    else:
        assert raw == "pass" and line["outcome"] == "pass" and line["expected_outcome"] is None


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
    assert line["outcome"] == "not-on-ep" and "known refusal" in line["message"]


def test_input_extremes_name_the_extreme_values_a_case_holds():
    """The line's ``input_extremes``: NaN, +inf, -inf and magnitudes of at least 2**120 among the
    floating-point inputs, in INPUT_CLASSES order; integers and moderate floats hold none."""
    assert input_extremes({"x": np.array([1.0, -2.0], np.float32), "i": np.array([2**62], np.int64)}) == []
    assert input_extremes({"x": np.array([np.inf, np.nan], np.float32)}) == ["nan", "inf"]
    assert input_extremes({"x": np.array([-np.inf, -2.0**120], np.float32)}) == ["-inf", "huge"]
    assert input_extremes({"x": np.array([2.0**119], np.float32), "e": np.zeros(0, np.float32)}) == []


def test_shows_when_inputs_is_a_precondition_and_a_bad_class_is_named():
    """An entry of numbers whose cause only extreme inputs trigger holds only for such inputs; a
    bad class is refused naming the field and the classes."""
    entries = exp.parse([{"id": "*", "outcome": "fail", "readings": ["float32-accumulation"], "reason": "sums",
                          "link": "l", "strict": False, "shows_when": {"inputs": ["nan", "huge"]}}])
    for extremes, outcome in ((["huge"], "known"), (["nan", "inf"], "known"), (["inf"], "fail"), ([], "fail"),
                              (None, "fail")):
        line = _line("fail", readings=_evidence({"float32-accumulation": 2}), mismatches=2)
        line["input_extremes"] = extremes
        entries.settle(_Case(), line)
        assert line["outcome"] == outcome, extremes
        assert (line["expected_outcome"] is None) == (outcome == "fail")
    with pytest.raises(ValueError, match=r"shows_when.inputs must be a list of nan, inf, -inf, huge"):
        exp.parse([{"id": "*", "outcome": "fail", "readings": ["lowest-start"], "reason": "r", "link": "l",
                    "shows_when": {"inputs": ["big"]}}])


def test_a_worker_writes_a_case_folder_for_what_an_expectation_will_explain_and_not_for_what_it_only_names():
    """The main process settles expectations; the worker writes the folder, with the EP's outputs,
    only where the settled outcome will be known, fixed or an emulation gap. An entry that names a
    case (its id and tags) but whose cause cannot show on the line explains nothing, and a broad
    entry would otherwise give every case it names a folder."""
    from ep_testbed.harness.run.case_steps import ArtifactPolicy, wants_artifacts

    refused = exp.Expectation(id="roi_align*", outcome=("not-on-ep",), reason="no kernel", link="x", strict=False,
                              error="80070057")
    flagged = exp.Expectation(id="roi_align*", outcome=("fail",), reason="a field", link="x",
                              shows_flags=((("field", "output_width"),),), strict=False, readings=("closed-edge",))
    strict = exp.Expectation(id="max_pooling2/*", outcome=("fail",), reason="ties", link="x", strict=True,
                             readings=("nan-propagates",))
    loose = exp.Expectation(id="max_pooling2/*", outcome=("fail",), reason="ties", link="x", strict=False,
                            readings=("nan-propagates",))
    proof = {"tried": ["nan-propagates"], "explained": {"nan-propagates": 3}, "unexplained": 0, "mismatches": 3}

    def line(outcome, flags=(), message="m", readings=None):
        return {"id": "roi_align/x", "outcome": outcome, "flags": list(flags), "input_extremes": [],
                "message": message, "readings": readings, "mismatches": 3}

    def writes(entries, raw):
        return wants_artifacts(raw, ArtifactPolicy(expected=tuple(entries)))

    assert writes([refused], line("fail", message="could not build the session: 80070057"))  # a refusal
    assert not writes([refused], line("pass"))  # strict: false, named, not explained: no folder
    assert not writes([flagged], line("crash"))  # the flag its cause needs is not on the line
    assert writes([strict], line("pass"))  # fixed: the folder goes into the fix
    assert not writes([loose], line("pass"))
    assert writes([loose], line("fail", readings=proof))  # known, with the EP's outputs for the report
    assert not writes([], line("not-on-ep")) and writes([], line("fail"))  # failures always


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the mlas-x86-fold reading is MLAS's x86-64 MaxPool; other CPUs fold NaN otherwise")
def test_a_sample_on_a_cell_edge_beside_minus_inf_is_known_on_the_cpu_ep():
    """The CPU EP's default-seed fuzz finding, shrunk: ORT's float32 coordinate lands on a cell
    edge beside -inf, and its composed MAX gives -FLT_MAX where the exact coordinate gives 0
    (``tests/reference/descs_for_tests.py: sample_edge_case``). The readings the shipped
    expectations name (ORT's weighted interpolation, MLAS's fold from -FLT_MAX) with that
    knife-edge alternative reproduce every element the EP gives outside tolerance: known, not fail."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
    from descs_for_tests import sample_edge_case

    from ep_testbed.graphs.cases.common import LiteralCase
    from ep_testbed.harness.run.case_run import ArtifactPolicy

    desc, arrays = sample_edge_case()
    case = LiteralCase(id="roi_align/fuzz-s0-b8-027-min", op="DML_OPERATOR_ROI_ALIGN", desc=desc, seed=0, opset=10,
                       recipe="literal", arrays=arrays)
    shipped = exp.for_ep("cpu", classes=classes_of("CPUExecutionProvider"))
    line = run_case(case, CaseConfig(ep=resolve_ep("cpu")), ArtifactPolicy(expected=shipped.candidates(case)))
    assert line["outcome"] == "fail" and line["mismatches"] == 9  # the raw outcome: 9 elements outside tolerance
    shipped.settle(case, line)
    assert line["outcome"] == "known", line["message"]
    assert line["readings"]["unexplained"] == 0 and sum(line["readings"]["explained"].values()) == 9
