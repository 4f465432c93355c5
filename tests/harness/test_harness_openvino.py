"""The OpenVINO EP for real: placement is proven per case, and what it hands back is not-on-ep.

Runs only where the interpreter running pytest has ``OpenVINOExecutionProvider`` (the
onnxruntime-openvino wheel, e.g. CI's OpenVINO venv); skipped with the reason elsewhere.
Observed with onnxruntime-openvino 1.24.1: MaxRoiPool is never taken; MaxPool is taken for
float and 8-bit inputs (not for 16/32/64-bit integers); RoiAlign is declined when it is the
only real node of the graph (inputs straight from graph inputs or through a Cast/Identity) and
taken when any other node is there, e.g. a Reshape before it or a Relu after it (checked with
hand-built models). The case runner then retries with an exact carrier node after it
(``Mapping.with_carrier``: Mul by 1), so every expressible RoiAlign case reaches the EP.
With ``EP_TESTBED_REQUIRE_OPENVINO=1`` a missing OpenVINO EP is an error instead of a skip.
"""

import json
import os

import pytest

ort = pytest.importorskip("onnxruntime")
if "OpenVINOExecutionProvider" not in ort.get_available_providers():
    _why = (f"OpenVINOExecutionProvider is not installed in this interpreter (providers: "
            f"{', '.join(ort.get_available_providers())}); run these tests in the onnxruntime-openvino venv")
    if os.environ.get("EP_TESTBED_REQUIRE_OPENVINO") == "1":  # CI's OpenVINO step: a skip would hide a broken venv
        raise RuntimeError(_why)
    pytest.skip(_why, allow_module_level=True)

from ep_testbed.graphs.catalog import build_catalog  # noqa: E402
from ep_testbed.harness.core import expectations  # noqa: E402
from ep_testbed.harness.eps.providers import resolve_ep  # noqa: E402
from ep_testbed.harness.run.case_run import CaseConfig  # noqa: E402
from ep_testbed.harness.run.runner import RunOptions, run_cases  # noqa: E402

OV = "OpenVINOExecutionProvider"
RAN = ("pass", "tie-only", "fail", "known", "fixed")

pytestmark = pytest.mark.slow


def _catalog(out, batch=1):
    """The catalog on the OpenVINO EP, up to ``batch`` cases a session: lines by id, and the result."""
    result = run_cases(build_catalog(), CaseConfig(ep=resolve_ep("openvino")),
                       RunOptions(out_dir=str(out), jobs=2, timeout=120, progress=False, batch=batch),
                       expectations.for_ep("openvino"))
    return {line["id"]: line for line in result.lines}, result


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _catalog(tmp_path_factory.mktemp("openvino"))


def _op_node(line, op_type):
    return [n for n in line["placement"] if n.startswith(op_type)]


def test_the_run_header_records_the_openvino_flavour(run):
    _, result = run
    assert result.header["ort_flavour"] == "onnxruntime-openvino"
    assert result.header["ep"] == OV and OV in result.header["available_providers"]
    assert result.header["session_options"]["disable_cpu_ep_fallback"] is True
    gpu = result.header["gpu"]  # the device the EP reports, named in every header
    assert gpu["source"] == "openvino" and gpu["adapter"]["device"] == "CPU" and "CPU" in gpu["available_devices"]
    assert gpu["summary"].startswith("OpenVINO device CPU (") and "onnxruntime-openvino" in gpu["summary"]


def test_placement_says_what_proved_it(run):
    """OpenVINO fuses what it takes into OpenVINO-EP-subgraph nodes: a compared case's nodes are
    proven by the graph assignment info (onnxruntime-openvino >= 1.24.1) or the single-partition rule."""
    lines, _ = run
    compared = [l for l in lines.values() if l["outcome"] in RAN]
    assert compared
    sources = {line["placement_source"] for line in compared}
    assert "assignment-info" in sources  # nodes inside an OpenVINO subgraph, named by the assignment info
    assert sources <= {"assignment-info", "single-partition-rule", "trace-node"}, sources


def test_max_roi_pool_is_handed_to_cpu_and_reported_not_on_ep(run):
    lines, _ = run
    pooling = [l for l in lines.values() if l["op"] == "DML_OPERATOR_ROI_POOLING"]
    assert pooling
    for line in pooling:
        assert line["outcome"] == "not-on-ep", (line["id"], line["outcome"], line["message"])
        assert "MaxRoiPool -> CPUExecutionProvider" in line["message"]
        assert line["errors"] == {"max_abs": None, "max_rel": None, "max_ulp": None}  # never compared


def test_float_max_pool_runs_on_openvino(run):
    lines, _ = run
    floats = [l for l in lines.values() if l["op"] == "DML_OPERATOR_MAX_POOLING2"
              and l["dtype"] in ("float32", "float16") and l["outcome"] != "inexpressible"]
    assert floats
    for line in floats:
        assert line["outcome"] in RAN, (line["id"], line["outcome"], line["message"])
        nodes = _op_node(line, "MaxPool")
        assert nodes and all(line["placement"][n] == OV for n in nodes), line["placement"]
    assert sum(l["outcome"] == "pass" for l in floats) >= len(floats) // 2


def test_roi_align_declined_alone_runs_with_a_carrier(run):
    lines, _ = run
    roi_align = [l for l in lines.values() if l["op"] in ("DML_OPERATOR_ROI_ALIGN", "DML_OPERATOR_ROI_ALIGN1")]
    carried = [l for l in roi_align if any(n.startswith("Carrier_") for n in l["placement"])]
    assert carried, "expected OpenVINO to decline some RoiAlign nodes that are alone in their model"
    for line in carried:
        assert line["outcome"] in RAN and line["placement"]["RoiAlign"] == OV, (line["id"], line["message"])
        assert f"; Note: {OV} refused the operator node(s) as the only node(s) of a model" in line["message"]
    assert not [l["id"] for l in roi_align if l["outcome"] == "not-on-ep"]


def test_every_compared_case_ran_wholly_on_openvino(run):
    """The invariant behind every pass/fail: no compared case had a node anywhere but on the EP."""
    lines, _ = run
    for line in lines.values():
        if line["outcome"] in RAN:
            assert line["placement"] and set(line["placement"].values()) == {OV}, (line["id"], line["placement"])
        elif line["outcome"] == "not-on-ep":
            assert any(p != OV for p in line["placement"].values()) or "diagnostic" in line["message"], line["id"]
        assert line["outcome"] not in ("crash", "timeout"), (line["id"], line["message"])
        assert not line["message"].startswith("harness raised"), (line["id"], line["message"])


def test_the_catalog_has_the_same_outcomes_batched(run, tmp_path):
    """Eight cases a session: every case ends the same. What may differ is how a RoiAlign or
    MaxPool got onto the EP: OpenVINO takes a one-node operator inside a model it takes whole and
    declines it where it takes only part of the model, so a case needs its carrier node in
    another session than alone (the placement names the carrier, the message says so)."""
    lines, _ = run
    batched, result = _catalog(tmp_path / "batched", batch=8)
    assert {i: l["outcome"] for i, l in batched.items()} == {i: l["outcome"] for i, l in lines.items()}
    assert max(line["timings"]["shared_by"] for line in batched.values()) > 1
    for case_id, line in batched.items():
        alone = lines[case_id]
        assert line["placement"].get("RoiAlign") == alone["placement"].get("RoiAlign"), case_id
        assert line["errors"] == alone["errors"] and line["mismatches"] == alone["mismatches"], case_id
        if line["outcome"] not in ("pass", "tie-only"):  # a failure is the line of the case's own session
            same = {**alone, "duration_s": line["duration_s"], "timings": line["timings"]}
            assert json.dumps(line, sort_keys=True) == json.dumps(same, sort_keys=True), case_id  # NaN == NaN


def test_what_onnx_runtime_says_of_a_bad_ep_option_is_clean_notes_then_exit_2(tmp_path, capsys):
    """onnxruntime-openvino's factory logs coloured records to the native stderr for a bad
    ``device_id`` (then the EP is missing from the session): each becomes one clean note."""
    from ep_testbed.harness.cli import main

    code = main(["run", "--ep", "openvino", "--ep-option", "device_id=-1", "--ops", "roi_pooling", "-k", "grid-fp32",
                 "--jobs", "1", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2, err
    notes = [line for line in err.splitlines() if line.startswith("ep-testbed: note: ONNX Runtime said: ")]
    assert notes and "\x1b" not in err, err
    assert any("Unsupported device_id" in line for line in notes), err


#: The faults whose kill on the OpenVINO EP is a pinned reading of its own (openvino.json, strict):
#: each makes the reference compute what the EP computes, so its pinned case passes, reported fixed.
PINNED_ON_OPENVINO = {"mp-lowest-start": "edge-minus-inf-window",
                      "ra-closed-edge": "grid-avg-linear-fp32-scale1x0.5-oob0-n1-max-roi2d-biuint32-2d",
                      "ra-lerp-as-weighted": "edge-nan-inf", "ra-float32-accumulation": "roi_align/edge-near-flt-max"}


@pytest.mark.parametrize("name", sorted(PINNED_ON_OPENVINO))
def test_a_planted_fault_that_computes_the_eps_own_reading_is_caught_on_openvino(name):
    """The oracle checked on this EP too: the pinned case is known unmutated and fixed with the
    fault planted (tools/mutation_test.py --ep openvino runs every fault)."""
    import contextlib
    import io
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mutation"))
    from mutants import named
    from mutation_kit import OPS, judge

    mutant = named(name)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        clean = judge(None, "openvino", OPS[mutant.op], select=PINNED_ON_OPENVINO[name])
        planted = judge(mutant, "openvino", OPS[mutant.op], select=PINNED_ON_OPENVINO[name])
    assert clean.code == 0 and not clean.failing and "known" in clean.outcomes.values(), clean.outcomes
    assert planted.killed and {outcome for _, outcome in planted.failing} == {"fixed"}, planted.failing
