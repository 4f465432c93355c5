"""A run on an emulated device (``--ep dml-wine``: DirectML under Wine on llvmpipe) reads as one
everywhere it is shown -- report banner and facts, junit.xml's properties, summary.json, the CI
job summary -- naming DirectML.dll, the emulated device and the ONNX Runtime of the Wine host
that ran the EP apart from this process's; and ``diff`` refuses to compare it with a hardware run.

The header's ``gpu`` record below is the one ``run --ep dml-wine`` wrote on this project's
machine (the set-up of ``tools/dml-wine.sh``); ``tests/eps`` checks it against a live host."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
import synthetic_run
from test_reports_html import visible_text

from ep_testbed.harness.cli import main
from ep_testbed.harness.core import emulation
from ep_testbed.reports import render_junit, render_run, render_summary_json
from ep_testbed.reports.diff import MixedRuns, diff_runs
from ep_testbed.reports.github import job_summary

DIRECTML = "1.15.4+241025-1615.1.dml-1.15.fac7597"
RECORDED_GPU = {
    "source": "dml-wine", "emulated": True,
    "adapter": {"description": "llvmpipe (LLVM 15.0.6, 256 bits)", "vendor_id": "0x10005", "device_id": "0x0000",
                "software": False, "dedicated_video_memory": 2147483648},
    "directml": {"version": DIRECTML},
    "onnxruntime": {"distribution": "onnxruntime-directml", "version": "1.24.4"},
    "emulation": {"wine": "wine-8.0 (Debian 8.0~repack-4)", "vkd3d": "1.14", "feature_level": "11_0",
                  "shader_model": "5.1"},
    "summary": "llvmpipe (LLVM 15.0.6, 256 bits) (emulated: Wine wine-8.0 (Debian 8.0~repack-4), vkd3d 1.14, feature "
               f"level 11_0, shader model 5.1), DirectML {DIRECTML}, onnxruntime-directml 1.24.4",
}
LABEL = f"DirectML.dll {DIRECTML} on an emulated device (llvmpipe), ONNX Runtime 1.24.4"


def _with_header(run_dir, **keys):
    path = run_dir / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = {**json.loads(lines[0]), **keys}
    path.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n", encoding="utf-8")
    return run_dir


@pytest.fixture
def emulated_run(tmp_path):
    """A run as ``run --ep dml-wine`` writes its header (this Linux process on onnxruntime 1.32.0)."""
    run = synthetic_run.write_run(tmp_path / "dml-wine", 8, pattern=["pass", "known", "emulation-gap", "pass"])
    return _with_header(run, ep="DmlExecutionProvider", ep_alias="dml", ep_flag="dml-wine", ort_version="1.32.0",
                        gpu=RECORDED_GPU,
                        emulated_device=emulation.emulated_device(RECORDED_GPU, "onnxruntime", "1.32.0"))


def test_the_label_names_directml_the_emulated_device_and_which_onnx_runtime_ran_what():
    record = emulation.emulated_device(RECORDED_GPU, "onnxruntime", "1.32.0")
    assert record["label"] == LABEL
    runtimes = record["onnxruntime"]
    assert runtimes["wine_host"]["version"] == "1.24.4" and "Wine host" in runtimes["wine_host"]["runs"]
    assert runtimes["linux_process"]["version"] == "1.32.0" and "Linux process" in runtimes["linux_process"]["runs"]
    assert emulation.emulated_device({**RECORDED_GPU, "emulated": False}) is None
    # a header written before the record existed still gets its label, from its gpu record
    assert emulation.label({"gpu": RECORDED_GPU, "ort_version": "1.32.0"}) == LABEL
    assert emulation.label({"gpu": {"source": "dxgi", "summary": "RTX 4090"}}) is None


def test_the_report_banner_and_facts_say_emulated_and_name_both_onnx_runtimes(emulated_run):
    html = render_run(emulated_run).read_text(encoding="utf-8")
    text = visible_text(html)
    assert f"Emulated device: {LABEL}" in text and "never a hardware result" in text
    assert "--ep dml-wine" in text and "--ep dml)" not in text
    assert "onnxruntime-directml 1.24.4 (onnxruntime.dll in the Wine host" in text
    assert "onnxruntime 1.32.0 (this Linux process" in text
    assert "<title>DmlExecutionProvider (emulated device)" in html


def test_junit_summary_json_and_the_ci_summary_say_emulated(emulated_run):
    suite = ET.parse(render_junit(emulated_run)).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["emulated_device"].startswith(LABEL) and "never a hardware result" in props["emulated_device"]
    assert "1.24.4 (onnxruntime.dll in the Wine host" in props["onnxruntime_versions"]
    assert "1.32.0 (this Linux process" in props["onnxruntime_versions"]
    assert json.loads(render_summary_json(emulated_run).read_text())["emulated_device"] == LABEL
    assert f"**Emulated device**: {LABEL}" in job_summary(emulated_run)


def test_a_hardware_run_carries_no_emulated_label(tmp_path):
    run = synthetic_run.write_run(tmp_path / "cpu", 4, pattern=["pass"])
    assert "Emulated device" not in visible_text(render_run(run).read_text(encoding="utf-8"))
    assert json.loads(render_summary_json(run).read_text())["emulated_device"] is None


def test_diff_refuses_an_emulated_run_against_a_hardware_one_unless_allowed(emulated_run, tmp_path, capsys):
    hardware = _with_header(synthetic_run.write_run(tmp_path / "gpu", 8, pattern=["pass"]), ep="DmlExecutionProvider",
                            gpu={"source": "dxgi", "summary": "NVIDIA GeForce RTX 4090 [10DE:2684], DirectML 1.15.4"})
    for a, b in ((hardware, emulated_run), (emulated_run, hardware)):
        with pytest.raises(MixedRuns, match="emulated device"):
            diff_runs(a, b, tmp_path / "out")
    assert main(["diff", str(hardware), str(emulated_run), "--out", str(tmp_path / "cli")]) == 2
    err = capsys.readouterr().err
    assert LABEL in err and "RTX 4090" in err and "--allow-mixed" in err and "Traceback" not in err
    assert not (tmp_path / "cli" / "diff.txt").exists()
    assert main(["diff", str(hardware), str(emulated_run), "--out", str(tmp_path / "cli"), "--allow-mixed",
                 "--allow-not-tested"]) in (0, 1)
    assert (tmp_path / "cli" / "diff.txt").exists()
    emulated_again = _with_header(synthetic_run.write_run(tmp_path / "again", 8, pattern=["pass"]), gpu=RECORDED_GPU)
    diff_runs(emulated_run, emulated_again, tmp_path / "same")  # two emulated runs compare as ever
