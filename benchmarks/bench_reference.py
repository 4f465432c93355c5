"""Time the NumPy reference against ONNX Runtime's CPU EP and onnx's reference evaluator.

    python benchmarks/bench_reference.py [--repeat N] [--skip-onnx-reference] [--only NAME]

Prints, per shape, the median wall time of each implementation measured in this run, the
ratios reference / ORT CPU and onnx.reference / reference, the time of the reference with its
error bars (``execute_with_bounds`` under the default precision model: what a case run and a
model run compute), its ratio to the plain reference and to ORT CPU (the reference, the
reference with bounds and ORT timed in turn, round after round: each ratio is the median of the
rounds' own), and the peak memory of the reference and of the reference with its bounds
(tracemalloc, which sees NumPy's allocations) next to the size of its inputs plus outputs.
``bnd/ORT`` is the reference with bounds over ORT CPU. The reference runs ROI_ALIGN's chunks of
regions on worker threads (``reference/workers.py``: the CPUs this process may use, at most 8),
ORT on its 2 intra-op threads; the header line says how many, and whether the reference runs
its compiled loops (``reference/native.py``; ``EP_TESTBED_NATIVE=0`` times NumPy alone).
The configurations are ONNX-expressible so that all three compute the same thing (MaxRoiPool
has no onnx.reference implementation). It is a benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, ValueInfoProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ep_testbed.reference import desc_from_dml, execute, execute_with_bounds, native, workers  # noqa: E402

ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
              np.dtype(np.int64): TensorProto.INT64}


@dataclass
class Shape:
    name: str
    desc: dict
    tensors: dict[str, np.ndarray]
    onnx_op: str
    onnx_inputs: dict[str, np.ndarray]
    onnx_outputs: list[str]
    attrs: dict
    opset: int
    has_onnx_reference: bool = True


def model_bytes(shape: Shape) -> bytes:
    node = helper.make_node(shape.onnx_op, list(shape.onnx_inputs), shape.onnx_outputs, **shape.attrs)
    outputs = []
    for name in shape.onnx_outputs:
        info = ValueInfoProto()
        info.name = name
        outputs.append(info)
    graph = helper.make_graph([node], "bench", [helper.make_tensor_value_info(k, ONNX_TYPES[v.dtype], v.shape)
                                                 for k, v in shape.onnx_inputs.items()], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", shape.opset)])
    model.ir_version = 8
    return model.SerializeToString()


def roi_align_shape(dtype=np.float32, name="RoiAlign 1x256x200x304, 1000 ROIs, 7x7, sr 2") -> Shape:
    rng = np.random.default_rng(0)
    n, c, h, w, r = 1, 256, 200, 304, 1000
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    x1, y1 = rng.uniform(0, w * 16 * 0.8, r), rng.uniform(0, h * 16 * 0.8, r)
    rois = np.stack([x1, y1, x1 + rng.uniform(16, w * 16 * 0.4, r), y1 + rng.uniform(16, h * 16 * 0.4, r)], 1).astype(dtype)
    batch = np.zeros(r, dtype=np.int64)
    dml = "FLOAT32" if dtype == np.float32 else "FLOAT16"
    desc = {"Type": "DML_OPERATOR_ROI_ALIGN1",
            "InputTensor": {"DataType": dml, "Sizes": [n, c, h, w]},
            "ROITensor": {"DataType": dml, "Sizes": [r, 4]},
            "BatchIndicesTensor": {"DataType": "UINT64", "Sizes": [r]},
            "OutputTensor": {"DataType": dml, "Sizes": [r, c, 7, 7]},
            "ReductionFunction": "AVERAGE", "InterpolationMode": "LINEAR",
            "SpatialScaleX": 1 / 16, "SpatialScaleY": 1 / 16, "InputPixelOffset": 0.5, "OutputPixelOffset": -0.5,
            "OutOfBoundsInputValue": 0.0, "MinimumSamplesPerOutput": 2, "MaximumSamplesPerOutput": 2,
            "AlignRegionsToCorners": False}
    return Shape(name, desc, {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": batch.astype(np.uint64)},
                 "RoiAlign", {"X": x, "rois": rois, "batch_indices": batch}, ["Y"],
                 dict(output_height=7, output_width=7, sampling_ratio=2, spatial_scale=1 / 16,
                      coordinate_transformation_mode="half_pixel"), 16)


def max_pool_shape(dtype=np.float32, dims=2, name="MaxPool+Indices 1x64x112x112, 3x3, s2, p1") -> Shape:
    rng = np.random.default_rng(1)
    if dims == 2:
        sizes, window, strides, pads, dil = [1, 64, 112, 112], [3, 3], [2, 2], [1, 1], [1, 1]
    else:
        sizes, window, strides, pads, dil = [1, 16, 32, 56, 56], [3, 3, 3], [1, 2, 2], [1, 1, 1], [2, 2, 2]
    x = rng.standard_normal(sizes).astype(dtype)
    out = sizes[:2] + [(sizes[i + 2] + 2 * pads[i] - ((window[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(dims)]
    dml = "FLOAT32" if dtype == np.float32 else "FLOAT16"
    desc = {"Type": "DML_OPERATOR_MAX_POOLING2", "InputTensor": {"DataType": dml, "Sizes": sizes},
            "OutputTensor": {"DataType": dml, "Sizes": out}, "OutputIndicesTensor": {"DataType": "UINT64", "Sizes": out},
            "DimensionCount": dims, "Strides": strides, "WindowSize": window, "StartPadding": pads,
            "EndPadding": pads, "Dilations": dil}
    return Shape(name, desc, {"InputTensor": x}, "MaxPool", {"X": x}, ["Y", "Indices"],
                 dict(kernel_shape=window, strides=strides, pads=pads + pads, dilations=dil), 12)


def max_roi_pool_shape() -> Shape:
    rng = np.random.default_rng(2)
    n, c, h, w, r = 1, 512, 38, 50, 300
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    x1, y1 = rng.uniform(0, w * 16 * 0.8, r), rng.uniform(0, h * 16 * 0.8, r)
    rois = np.stack([np.zeros(r), x1, y1, x1 + rng.uniform(16, w * 16 * 0.4, r), y1 + rng.uniform(16, h * 16 * 0.4, r)],
                    1).astype(np.float32)
    desc = {"Type": "DML_OPERATOR_ROI_POOLING", "InputTensor": {"DataType": "FLOAT32", "Sizes": [n, c, h, w]},
            "ROITensor": {"DataType": "FLOAT32", "Sizes": [1, 1, r, 5]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [r, c, 7, 7]},
            "SpatialScale": 1 / 16, "PooledSize": {"Height": 7, "Width": 7}}
    return Shape("MaxRoiPool 1x512x38x50, 300 ROIs, 7x7", desc, {"InputTensor": x, "ROITensor": rois.reshape(1, 1, r, 5)},
                 "MaxRoiPool", {"X": x, "rois": rois}, ["Y"], dict(pooled_shape=[7, 7], spatial_scale=1 / 16), 1,
                 has_onnx_reference=False)


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_times(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Wall times of ``repeat`` rounds, each round calling every function once in turn: on a
    shared machine whose load drifts, each round's ratios compare calls made under the same load."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def round_ratio(times: dict[str, list[float]], top: str, bottom: str) -> float:
    """The median over the rounds of ``interleaved_times`` of ``top``'s time over ``bottom``'s."""
    return statistics.median(a / b for a, b in zip(times[top], times[bottom]))


def peak_memory(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-onnx-reference", action="store_true", help="onnx.reference takes ~1 min in all")
    parser.add_argument("--only", help="substring of a shape name")
    args = parser.parse_args(argv)

    shapes = [roi_align_shape(), max_pool_shape(), max_roi_pool_shape(),
              roi_align_shape(np.float16, "RoiAlign fp16 (same shape)"),
              max_pool_shape(np.float16, name="MaxPool+Indices fp16 (same shape)"),
              max_pool_shape(dims=3, name="MaxPool+Indices 5-D 1x16x32x56x56, 3x3x3, s1x2x2, d2")]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.log_severity_level = 3
    print(f"onnxruntime {ort.__version__} CPU EP, 2 threads; reference (ROI_ALIGN's kernel and bounds) on "
          f"{workers.thread_count()} worker threads of {os.cpu_count()} CPUs; numpy {np.__version__}; "
          f"load average {os.getloadavg()}")
    loops = native.status()
    print(f"the reference's compiled loops: {loops.detail}" + (" (EP_TESTBED_NATIVE=0 times NumPy alone)" if loops.used
                                                               else ""))
    header = (f"{'shape':58} {'reference':>10} {'ORT CPU':>10} {'onnx.ref':>10} {'ref/ORT':>8} {'onnxref/ref':>11} "
              f"{'+bounds':>10} {'bnd/ref':>7} {'bnd/ORT':>7} {'peak MiB':>9} {'+bnd MiB':>9} {'io MiB':>7} {'peak/io':>7}")
    print(header)
    for shape in shapes:
        if args.only and args.only not in shape.name:
            continue
        desc = desc_from_dml(shape.desc)
        ref = lambda: execute(desc, shape.tensors)  # noqa: E731
        session = ort.InferenceSession(model_bytes(shape), options, providers=["CPUExecutionProvider"])
        session.run(None, shape.onnx_inputs)
        ref()
        times = interleaved_times({"ref": ref, "bounds": lambda: execute_with_bounds(desc, shape.tensors),
                                   "ort": lambda: session.run(None, shape.onnx_inputs)}, args.repeat)
        t_ref, t_bounds, t_ort = (statistics.median(times[k]) for k in ("ref", "bounds", "ort"))
        t_onnx = float("nan")
        if shape.has_onnx_reference and not args.skip_onnx_reference:
            evaluator = ReferenceEvaluator(model_bytes(shape))
            t_onnx = median_time(lambda: evaluator.run(None, shape.onnx_inputs), 1)
        outputs = ref()
        io_bytes = sum(a.nbytes for a in shape.tensors.values()) + sum(a.nbytes for a in outputs.values())
        peak = peak_memory(ref)
        peak_bounds = peak_memory(lambda: execute_with_bounds(desc, shape.tensors))
        print(f"{shape.name:58} {t_ref * 1e3:8.1f}ms {t_ort * 1e3:8.1f}ms {t_onnx * 1e3:8.0f}ms "
              f"{round_ratio(times, 'ref', 'ort'):8.2f} {t_onnx / t_ref:11.1f} {t_bounds * 1e3:8.1f}ms "
              f"{round_ratio(times, 'bounds', 'ref'):7.2f} {round_ratio(times, 'bounds', 'ort'):7.2f} "
              f"{peak / 2**20:9.1f} {peak_bounds / 2**20:9.1f} {io_bytes / 2**20:7.1f} {peak / io_bytes:7.2f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
