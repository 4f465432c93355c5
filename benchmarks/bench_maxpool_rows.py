"""Time MAX_POOLING2's reference on the stress tier's int8 UINT32-index shapes against ONNX Runtime's CPU
MaxPool and against the reference's previous kernel, in one run.

    python benchmarks/bench_maxpool_rows.py [--case NAME] [--rows N] [--repeat N] [--threads T] [--skip-old]

The shape is a stress case's (default ``max_pooling2/stress-int8-idxuint32-2^32-1-elements``: an
int8 1x1x65535x65537 input, window 1x64, stride 1x64, UINT32 indices, 4 GiB in) with its own input;
``--rows N`` keeps its row length, window, stride, index type and input pattern and takes N rows,
for a machine where the whole does not fit (the previous kernel needs about twice the input more).
Timed in turn, round after round (``bench_reference.interleaved_times``), each a median over the
rounds: ``reference`` (``reference.execute``, what a run computes: the reference has no bounds for
a selection; on ``worker_threads`` threads), ``ref 1 thread`` (the same on one thread), ``previous``
(``tests/reference/max_pooling2_oracle.py``: the whole input laid out by stride phase, then flat
int64 indices; ``--skip-old`` leaves it out) and ``ORT CPU`` (a CPU EP session of the model
``graphs.to_onnx`` builds for the case, the one a run sends, ``--threads`` intra-op threads). Also
``outputs only``: allocating the two output arrays and writing them once, a floor no kernel that
returns new arrays beats where first touching memory is slow (arrays above the C allocator's
largest reused block, 32 MiB in glibc, are fresh pages on every call). Then the ratios (median of the
rounds' own), each kernel's peak memory beyond its input (tracemalloc, which sees NumPy's
allocations, not ONNX Runtime's), and whether the reference's outputs equal the previous kernel's and ORT's, bit for
bit. A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "reference"))
from bench_reference import interleaved_times, peak_memory, round_ratio  # noqa: E402  (one timing rule for the benchmarks)

DEFAULT_CASE = "max_pooling2/stress-int8-idxuint32-2^32-1-elements"


def case_with_rows(case_id: str, rows: int | None) -> Any:
    """The stress case ``case_id``, or the same desc and input recipe with ``rows`` input rows."""
    from ep_testbed.graphs.cases.max_pooling2 import STRESS, max_pooling2_desc, stress_cases

    if rows is None:
        return next(c for c in stress_cases("max_pooling2", 0) if c.id == case_id)
    name = case_id.split("/stress-", 1)[1]
    row = dict(next(r for n, r, _ in STRESS if n == name))
    row["spatial"] = (rows, *row["spatial"][1:])
    desc = max_pooling2_desc(**row)
    case = next(c for c in stress_cases("max_pooling2", 0) if c.id == case_id)
    return dataclasses.replace(case, id=f"{case_id} ({rows} rows)", desc=desc)


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Whether two output dicts hold the same arrays, dtype and bytes."""
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


def main(argv: list[str] | None = None) -> int:
    """Print the times, ratios and peaks (module docstring)."""
    import max_pooling2_oracle
    import onnxruntime as ort

    from ep_testbed.graphs import to_onnx
    from ep_testbed.reference import execute
    from ep_testbed.reference import max_pooling2 as kernel
    from ep_testbed.reference.checks import element_cap

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default=DEFAULT_CASE, help=f"a max_pooling2 stress case id (default {DEFAULT_CASE})")
    parser.add_argument("--rows", type=int, help="take this many input rows of the case's shape")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="ORT intra-op threads")
    parser.add_argument("--skip-old", action="store_true", help="leave out the previous kernel (slow, 2x the input)")
    args = parser.parse_args(argv)

    case = case_with_rows(args.case, args.rows)
    inputs = case.inputs()
    with element_cap(2**33):  # as run --tier stress maps and computes them (harness.cli.run.STRESS_ELEMENTS)
        mapping = to_onnx(case.desc, opset=case.opset)
    feeds = mapping.feeds(inputs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.log_severity_level = 3
    session = ort.InferenceSession(mapping.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x, desc = inputs["InputTensor"], case.desc
    out_shape, index_type = desc.output_tensor.sizes, np.dtype(np.uint32)
    print(f"{case.id}: input {list(x.shape)} {x.dtype} ({x.nbytes / 2**20:.0f} MiB); onnxruntime {ort.__version__} "
          f"CPU EP, {args.threads} threads; reference on {kernel.worker_threads()} threads; numpy {np.__version__}; "
          f"load average {os.getloadavg()}", flush=True)

    def one_thread() -> object:
        saved, kernel.THREADS = kernel.THREADS, 1
        try:
            return execute(desc, inputs)
        finally:
            kernel.THREADS = saved

    def outputs_only() -> object:
        values, indices = np.empty(out_shape, x.dtype), np.empty(out_shape, index_type)
        values.fill(0)
        indices.fill(0)
        return values, indices

    fns: dict[str, Callable[[], object]] = {"reference": lambda: execute(desc, inputs), "ref 1 thread": one_thread,
                                            "ORT CPU": lambda: session.run(None, feeds), "outputs only": outputs_only}
    if not args.skip_old:
        fns["previous"] = lambda: max_pooling2_oracle.max_pooling2(desc, x)
    with element_cap(2**33):
        reference = execute(desc, inputs)
        times = interleaved_times(fns, args.repeat)
        peaks = {name: peak_memory(fn) for name, fn in fns.items() if name != "outputs only"}
        agree = {"previous": same(reference, max_pooling2_oracle.max_pooling2(desc, x))} if not args.skip_old else {}
    ort_values, ort_indices = session.run(None, feeds)[:2]
    agree["ORT CPU"] = bool(np.array_equal(ort_values, reference["OutputTensor"])
                            and np.array_equal(ort_indices, reference["OutputIndicesTensor"]))
    print(f"{'kernel':14} {'median s':>9} {'/ reference':>12} {'peak MiB beyond input':>22}")
    for name in fns:
        peak = f"{peaks[name] / 2**20:22.0f}" if name in peaks else f"{'(not seen)' if name == 'ORT CPU' else '':>22}"
        print(f"{name:14} {statistics.median(times[name]):9.3f} {round_ratio(times, name, 'reference'):12.2f} {peak}")
    print("outputs equal to the reference's, bit for bit: " + ", ".join(f"{k} {v}" for k, v in agree.items()))
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
