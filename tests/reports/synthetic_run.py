"""Synthetic run folders for testing and benchmarking the reports (test data only, no EP ran).

The results lines follow the harness contract (brief: results.jsonl); the artifacts are real files:
one-node ONNX models built with onnx.helper (MaxPool, RoiAlign), npz arrays, desc.json in DML
spelling.  "actual" arrays are the expected arrays with deliberate perturbations, so the report
has something to draw; they are NOT outputs of any execution provider.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

OPS = ("DML_OPERATOR_ROI_ALIGN1", "DML_OPERATOR_MAX_POOLING2", "DML_OPERATOR_ROI_POOLING", "DML_OPERATOR_ROI_ALIGN")
DTYPES = ("FLOAT32", "FLOAT16")


def maxpool_model(node_name: str = "max_pooling2", attr_note: str | None = None) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 3, 4, 4])
    ind = helper.make_tensor_value_info("Indices", TensorProto.INT64, [1, 3, 4, 4])
    kwargs = {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 0]}
    node = helper.make_node("MaxPool", ["X"], ["Y", "Indices"], name=node_name, **kwargs)
    if attr_note is not None:
        node.doc_string = attr_note
        node.attribute.append(helper.make_attribute("auto_pad", attr_note))
    graph = helper.make_graph([node], "maxpool", [x], [y, ind])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)


def roialign_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, 10, 10])
    rois = helper.make_tensor_value_info("rois", TensorProto.FLOAT, [3, 4])
    bi = helper.make_tensor_value_info("batch_indices", TensorProto.INT64, [3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 2, 4, 4])
    node = helper.make_node("RoiAlign", ["X", "rois", "batch_indices"], ["Y"], name="roi_align",
                            mode="avg", output_height=4, output_width=4, sampling_ratio=2,
                            spatial_scale=1.0, coordinate_transformation_mode="half_pixel")
    graph = helper.make_graph([node], "roialign", [x, rois, bi], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def maxpool_2x2(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2 stride-2 max pooling with first-max flat indices over the whole input (N, C included)."""
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    dy, dx = arg // 2, arg % 2
    nn, cc, yy, xx = np.indices(arg.shape)
    idx = ((nn * c + cc) * h + (yy * 2 + dy)) * w + (xx * 2 + dx)
    return win.max(axis=-1), idx.astype(np.int64)


def desc_json(op: str, dtype: str, note: str = "") -> dict:
    if op.endswith("MAX_POOLING2"):
        return {"Type": op, "InputTensor": {"DataType": dtype, "Sizes": [1, 3, 8, 8]},
                "OutputTensor": {"DataType": dtype, "Sizes": [1, 3, 4, 4]},
                "OutputIndicesTensor": {"DataType": "UINT32", "Sizes": [1, 3, 4, 4]},
                "DimensionCount": 2, "Strides": [2, 2], "WindowSize": [2, 2], "StartPadding": [0, 0],
                "EndPadding": [0, 0], "Dilations": [1, 1]}
    d = {"Type": op, "InputTensor": {"DataType": dtype, "Sizes": [1, 2, 10, 10]},
         "ROITensor": {"DataType": dtype, "Sizes": [1, 1, 3, 4]},
         "BatchIndicesTensor": {"DataType": "UINT32", "Sizes": [1, 1, 1, 3]},
         "OutputTensor": {"DataType": dtype, "Sizes": [3, 2, 4, 4]},
         "ReductionFunction": "DML_REDUCE_FUNCTION_AVERAGE" + note,
         "InterpolationMode": "DML_INTERPOLATION_MODE_LINEAR", "SpatialScaleX": 1.0, "SpatialScaleY": 1.0,
         "OutOfBoundsInputValue": 0.0, "MinimumSamplesPerOutput": 1, "MaximumSamplesPerOutput": 4,
         "InputPixelOffset": 0.5, "OutputPixelOffset": -0.5, "AlignRegionsToCorners": False}
    return d


def write_artifacts(folder: Path, op: str, dtype: str, rng: np.random.Generator, broken: bool,
                    template: Path | None = None, note: str = "") -> None:
    """Real model/npz/desc files for one case; ``broken`` perturbs "actual" (a stand-in EP output)."""
    folder.mkdir(parents=True, exist_ok=True)
    if op.endswith("MAX_POOLING2"):
        if template is not None:
            shutil.copyfile(template, folder / "model.onnx")
        else:
            onnx.save(maxpool_model(), folder / "model.onnx")
        x = rng.integers(0, 6, size=(1, 3, 8, 8)).astype(np.float32)
        x[0, :, 0, 0:2] = 9.0  # the top-left window of every channel holds two equal maxima: a tie
        y, idx = maxpool_2x2(x)
        ay, aidx = y.copy(), idx.copy()
        if broken:
            ay[0, 1, 2, 3] += 1.5
            # An index pointing elsewhere: a tie if that element equals the max, else a mismatch.
            win_first = idx[0, :, 0, 0]
            aidx[0, :, 0, 0] = win_first + 1
            aidx[0, 2, 3, 3] = 0
        np.savez(folder / "inputs.npz", X=x)
        np.savez(folder / "expected.npz", OutputTensor=y, OutputIndicesTensor=idx.astype(np.uint32))
        np.savez(folder / "actual.npz", OutputTensor=ay, OutputIndicesTensor=aidx.astype(np.uint32))
    else:
        if template is not None:
            shutil.copyfile(template, folder / "model.onnx")
        else:
            onnx.save(roialign_model(), folder / "model.onnx")
        x = rng.standard_normal((1, 2, 10, 10)).astype(np.float32)
        rois = np.array([[0, 0, 5, 5], [2, 2, 9, 7], [1, 0, 4, 9]], np.float32)
        yy, xx = np.meshgrid(np.linspace(0, 1, 4), np.linspace(0, 1, 4), indexing="ij")
        y = (np.sin(3 * yy + xx)[None, None] * np.arange(1, 4)[:, None, None, None]
             * np.ones((1, 2, 1, 1))).astype(np.float32)
        a = y.copy()
        if broken:
            a[1, 0] += (rng.random((4, 4)) * 0.05).astype(np.float32)
            a[2, 1, 0, 0] = np.nan
        np.savez(folder / "inputs.npz", X=x, rois=rois, batch_indices=np.zeros(3, np.int64))
        np.savez(folder / "expected.npz", OutputTensor=y)
        np.savez(folder / "actual.npz", OutputTensor=a)
    (folder / "desc.json").write_text(json.dumps(desc_json(op, dtype, note)), encoding="utf-8")


def header(n: int, evil: str = "") -> dict:
    return {"type": "run", "ep": "CPUExecutionProvider", "ep_alias": "cpu", "ort_flavour": "onnxruntime",
            "ort_version": "1.32.0", "available_providers": ["CPUExecutionProvider"],
            "machine": {"platform": "Linux-x86_64" + evil, "python": "3.11.7", "cpu": "x86_64", "hostname": "ci-box"},
            "seed": 0, "command": "ep-testbed run --ep cpu --out runs/x" + evil, "started": "2026-11-22T12:00:00+00:00",
            "tolerances": {"FLOAT32": {"atol": 1e-5, "rtol": 1e-4, "ulp": 4}, "FLOAT16": {"atol": 1e-3, "rtol": 1e-3, "ulp": 2}},
            "case_count": n}


#: Outcome cycle for synthetic cases: mostly passes, a few of every other kind.
PATTERN = (["pass"] * 28 + ["fail", "tie-only", "not-on-ep", "inexpressible", "known", "crash", "timeout",
                            "error", "fixed"] + ["pass"] * 3)  # 40 long: each cycle shifts the op by one


def case_line(i: int, op: str, dtype: str, outcome: str, artifacts: str | None, evil: str = "") -> dict:
    compared = outcome in {"pass", "tie-only", "fail", "known", "fixed"}
    bad = outcome in {"fail", "known"}
    max_abs = (0.04 + 0.001 * (i % 17)) if bad else (1e-7 * (i % 5) if compared else None)
    is_pool = op.endswith("MAX_POOLING2")
    family = "pooling" if is_pool else "roi"
    tags = {"dtype": dtype, "family": family, "mode": ["avg", "max"][i % 2],
            "offset": ["0", "0.5", "-0.5"][i % 3]}
    worst = ([{"output": "OutputTensor", "index": [1, 0, i % 4, 2], "expected": 0.25, "actual": 0.25 + max_abs,
               "abs": max_abs}] if bad else [])
    flags = [{"field": "InputPixelOffset", "value": 0.5, "kind": "composed",
              "reason": "expressed with coordinate_transformation_mode=half_pixel"}] if not is_pool else []
    if outcome == "inexpressible":
        flags = [{"field": "OutputPixelOffset", "value": 0.25, "kind": "inexpressible",
                  "reason": "ONNX RoiAlign has no output offset" + evil}]
    message = {"crash": "worker died with SIGSEGV\nstack: ...", "timeout": "no result after 60 s",
               "error": "reference raised DescError(field='Strides')", "fail": "2 of 48 elements beyond tolerance",
               "not-on-ep": "node ran on CPUExecutionProvider"}.get(outcome, "") + evil
    return {"type": "case", "id": f"{op.removeprefix('DML_OPERATOR_').lower()}/{tags['mode']}-{dtype.lower()}-{i}{evil}",
            "op": op, "dtype": dtype, "tags": tags, "outcome": outcome, "ep": "CPUExecutionProvider",
            "placement": {("max_pooling2" if is_pool else "roi_align"): "CPUExecutionProvider"},
            "errors": {"max_abs": max_abs, "max_rel": max_abs and max_abs * 3, "max_ulp": max_abs and int(max_abs * 1e7)},
            "worst": worst, "mismatches": 2 if bad else 0, "ties": 3 if outcome == "tie-only" else 0,
            "flags": flags, "message": message,
            "expected_outcome": ({"outcome": "fail", "reason": "ORT CPU RoiAlign is half a pixel off" + evil,
                                  "link": "https://github.com/microsoft/onnxruntime/issues/1"}
                                 if outcome in {"known", "fixed"} else None),
            "duration_s": 0.01 + 0.001 * (i % 7), "artifacts": artifacts}


def write_run(run_dir: Path, n: int, *, artifacts_every_failure: bool = True, max_artifacts: int | None = None,
              seed: int = 0, pattern: list[str] | None = None, end: bool = True) -> Path:
    """A run folder with ``n`` cases cycling through ops, dtypes and ``pattern`` outcomes."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pattern = pattern or PATTERN
    templates: dict[str, Path] = {}
    written = 0
    lines = [header(n)]
    counts: dict[str, int] = {}
    for i in range(n):
        op, dtype = OPS[(i + i // len(pattern)) % len(OPS)], DTYPES[(i // len(OPS)) % len(DTYPES)]
        outcome = pattern[i % len(pattern)]
        art = None
        if artifacts_every_failure and outcome in {"fail", "known", "fixed", "tie-only"} and (
                max_artifacts is None or written < max_artifacts):
            art = f"cases/case-{i:05d}"
            folder = run_dir / art
            write_artifacts(folder, op, dtype, rng, broken=outcome in {"fail", "known"}, template=templates.get(op))
            templates.setdefault(op, folder / "model.onnx")
            written += 1
        lines.append(case_line(i, op, dtype, outcome, art))
        counts[outcome] = counts.get(outcome, 0) + 1
    if end:
        lines.append({"type": "end", "finished": "2026-11-22T12:05:00+00:00", "counts": counts, "interrupted": False})
    with (run_dir / "results.jsonl").open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return run_dir


#: A string that runs script if any renderer forgets to escape it (in HTML text, attributes or JS).
EVIL = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">'\"&</script>"


def write_evil_run(run_dir: Path) -> Path:
    """A run where every string a results line, desc, model or EP message can carry is EVIL."""
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lines: list[dict] = [header(3, evil=EVIL)]
    lines[0]["ep"] = "CPUExecutionProvider" + EVIL
    lines[0]["machine"]["hostname"] = EVIL
    for i, outcome in enumerate(["fail", "known", "crash"]):
        op = "DML_OPERATOR_MAX_POOLING2"
        art = f"cases/evil-{i}"
        folder = run_dir / art
        write_artifacts(folder, op, "FLOAT32", rng, broken=True, note=EVIL)
        onnx.save(maxpool_model(node_name=EVIL, attr_note=EVIL), folder / "model.onnx")
        desc = json.loads((folder / "desc.json").read_text())
        desc[EVIL] = {EVIL: [EVIL, 1]}
        (folder / "desc.json").write_text(json.dumps(desc))
        line = case_line(i, op, "FLOAT32" + EVIL, outcome, art, evil=EVIL)
        line["tags"][EVIL] = EVIL
        line["tags"]["mode"] = EVIL + str(i % 2)
        line["flags"].append({"field": EVIL, "value": EVIL, "kind": EVIL, "reason": EVIL})
        line["placement"] = {EVIL: EVIL}
        line["worst"] = [{"output": EVIL, "index": [0, 1], "expected": EVIL, "actual": 1.0, "abs": 1.0}]
        line["expected_outcome"] = {"outcome": EVIL, "reason": EVIL, "link": "javascript:window.__pwned=3"}
        lines.append(line)
    lines.append(case_line(9, "DML_OPERATOR_ROI_ALIGN" + EVIL, "FLOAT16", "fail", "../../outside", evil=EVIL))
    with (run_dir / "results.jsonl").open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    return run_dir
