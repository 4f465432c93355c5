"""``ep-testbed diff`` shows each run's GPU identity (the run header's ``gpu.summary``) and notes
when they differ; a run made before the identity was recorded says so."""

import json

import synthetic_run

from ep_testbed.reports import diff_runs


def _set_gpu(run_dir, summary):
    path = run_dir / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    if summary is None:
        header.pop("gpu", None)
    else:
        header["gpu"] = {"source": "dxgi", "summary": summary}
    path.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n", encoding="utf-8")


def test_diff_names_both_gpus_and_notes_a_difference(tmp_path):
    a = synthetic_run.write_run(tmp_path / "a", 3, pattern=["pass"] * 3)
    b = synthetic_run.write_run(tmp_path / "b", 3, pattern=["pass"] * 3)
    _set_gpu(a, "NVIDIA GeForce RTX 4090 [10DE:2684], driver 32.0.15.6094, device_id=0, DirectML 1.15.4.0")
    _set_gpu(b, "NVIDIA GeForce RTX 4090 [10DE:2684], driver 32.0.15.7000, device_id=0, DirectML 1.15.4.0")
    res = diff_runs(a, b, tmp_path / "out")
    text = (tmp_path / "out" / "diff.txt").read_text(encoding="utf-8")
    assert "GPU A: NVIDIA GeForce RTX 4090 [10DE:2684], driver 32.0.15.6094" in text
    assert "GPU B: NVIDIA GeForce RTX 4090 [10DE:2684], driver 32.0.15.7000" in text
    assert "note: the runs name different GPU identities" in text and not res.regressed
    html = (tmp_path / "out" / "diff.html").read_text(encoding="utf-8")
    assert "driver 32.0.15.6094" in html and "driver 32.0.15.7000" in html


def test_diff_of_an_old_run_says_the_identity_was_not_recorded(tmp_path):
    a = synthetic_run.write_run(tmp_path / "a", 2, pattern=["pass"] * 2)
    b = synthetic_run.write_run(tmp_path / "b", 2, pattern=["pass"] * 2)
    _set_gpu(a, None)
    _set_gpu(b, "no GPU (CPUExecutionProvider computes on the CPU), onnxruntime 1.32.0")
    diff_runs(a, b, tmp_path / "out")
    text = (tmp_path / "out" / "diff.txt").read_text(encoding="utf-8")
    assert "GPU A: not recorded" in text and "GPU B: no GPU (CPUExecutionProvider" in text
