"""Baselines: saved, compared, and a planted regression makes `model run` exit non-zero."""

from __future__ import annotations

import json

import numpy as np
import pytest
from models_testkit import result_of, run_cli

from ep_testbed.graphs.models import write_demo_models


@pytest.fixture
def stem(tmp_path):
    return write_demo_models(tmp_path / "models")["resnet_stem"]


def test_baseline_round_trip_then_a_planted_regression_fails(tmp_path, stem, capsys):
    base = tmp_path / "base"
    code, out, err = run_cli(["model", "run", str(stem), "--seed", "7", "--save-baseline", str(base),
                              "--out", str(tmp_path / "r0")], capsys)
    assert code == 0, err
    manifest = json.loads((base / "manifest.json").read_text())
    assert manifest["model"]["sha256"] == result_of(tmp_path / "r0")["model"]["sha256"]
    assert manifest["inputs"]["seed"] == 7 and manifest["ep"] == "CPUExecutionProvider"
    assert manifest["ort_version"] and manifest["tolerances"]["by_dtype"]["FLOAT32"]["ulp"] == 4
    assert manifest["outputs"]["indices"] == {"dtype": "int64", "shape": [1, 16, 16, 16]}

    code, out, err = run_cli(["model", "run", str(stem), "--baseline", str(base), "--out", str(tmp_path / "r1")],
                             capsys)
    assert code == 0, err
    r1 = result_of(tmp_path / "r1")
    assert r1["baseline"]["outcome"] == "match" and r1["inputs"]["source"].startswith("baseline")
    with np.load(base / "inputs.npz") as a, np.load(tmp_path / "r1" / "inputs.npz") as b:
        np.testing.assert_array_equal(a["image"], b["image"])  # the baseline's inputs, not --seed 0's

    # plant a regression: one feature value moved well beyond tolerance
    with np.load(base / "outputs.npz") as data:
        outputs = {k: data[k].copy() for k in data.files}
    outputs["features"][0, 3, 5, 7] += 0.01
    np.savez(base / "outputs.npz", **outputs)
    code, out, err = run_cli(["model", "run", str(stem), "--baseline", str(base), "--out", str(tmp_path / "r2")],
                             capsys)
    assert code == 1
    r2 = result_of(tmp_path / "r2")
    assert r2["verdict"] == "fail" and r2["baseline"]["regressed"] == ["features"]
    row = next(o for o in r2["baseline"]["outputs"] if o["name"] == "features")
    assert row["mismatches"] == 1 and row["worst"][0]["index"] == [0, 3, 5, 7]
    assert "regression" in out and "regression" in (tmp_path / "r2" / "report.html").read_text()


def test_a_change_within_tolerance_is_not_a_regression(tmp_path, stem, capsys):
    base = tmp_path / "base"
    assert run_cli(["model", "run", str(stem), "--save-baseline", str(base), "--out", str(tmp_path / "r0")],
                   capsys)[0] == 0
    with np.load(base / "outputs.npz") as data:
        outputs = {k: data[k].copy() for k in data.files}
    outputs["features"] = np.nextafter(outputs["features"], np.float32(np.inf))  # 1 ULP everywhere
    np.savez(base / "outputs.npz", **outputs)
    assert run_cli(["model", "run", str(stem), "--baseline", str(base), "--out", str(tmp_path / "r1")], capsys)[0] == 0


def test_a_baseline_for_another_model_or_with_pickles_is_refused(tmp_path, stem, capsys):
    base = tmp_path / "base"
    head = stem.parent / "detection_head.onnx"
    assert run_cli(["model", "run", str(stem), "--save-baseline", str(base), "--out", str(tmp_path / "r0")],
                   capsys)[0] == 0
    code, _, err = run_cli(["model", "run", str(head), "--baseline", str(base), "--shape", "batch=1",
                            "--shape", "num_rois=2", "--out", str(tmp_path / "r1")], capsys)
    assert code == 2 and "recorded for model sha256" in err

    np.savez(base / "outputs.npz", features=np.array([{"a": 1}], dtype=object))  # needs pickle to load
    code, _, err = run_cli(["model", "run", str(stem), "--baseline", str(base), "--out", str(tmp_path / "r2")], capsys)
    assert code == 2 and "has dtype object" in err and "pickle" in err.lower()

    (base / "manifest.json").unlink()
    code, _, err = run_cli(["model", "run", str(stem), "--baseline", str(base), "--out", str(tmp_path / "r3")], capsys)
    assert code == 2 and "manifest.json is missing" in err


def test_the_baseline_manifest_tolerances_apply_unless_overridden(tmp_path, stem, capsys):
    base = tmp_path / "base"
    assert run_cli(["model", "run", str(stem), "--tol", "fp32:atol=0.05,rtol=0,ulp=0", "--save-baseline", str(base),
                    "--out", str(tmp_path / "r0")], capsys)[0] == 0
    with np.load(base / "outputs.npz") as data:
        outputs = {k: data[k].copy() for k in data.files}
    outputs["features"][0, 0, 0, 0] += 0.01  # inside the recorded atol 0.05, far outside the defaults
    np.savez(base / "outputs.npz", **outputs)
    assert run_cli(["model", "run", str(stem), "--baseline", str(base), "--out", str(tmp_path / "r1")], capsys)[0] == 0
    assert result_of(tmp_path / "r1")["baseline"]["tolerances_from"] == "baseline manifest"
    code, _, _ = run_cli(["model", "run", str(stem), "--baseline", str(base), "--tol", "fp32:atol=1e-5",
                          "--out", str(tmp_path / "r2")], capsys)
    assert code == 1 and result_of(tmp_path / "r2")["baseline"]["tolerances_from"] == "command line"
