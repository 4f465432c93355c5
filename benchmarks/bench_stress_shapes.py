"""Time the reference against ONNX Runtime's CPU EP on the stress tier's detection and classifier shapes.

    python benchmarks/bench_stress_shapes.py [--repeat N] [--threads T] [-k PATTERN]

For each shape the stress tier runs (``ep-testbed run --tier stress``; the cases of
``graphs/cases/<op>.py:STRESS``), with the tier's own inputs, and for RoiAlign and MaxRoiPool
each region distribution the tier holds (a detector's proposals at spatial scale 1/16, and
regions spanning up to half the image at scale 1: same sample count, other memory access), it
prints the median wall time of ``reference.execute``, of ``reference.execute_with_bounds`` (the
reference with its error bounds under the default precision model: what a run computes for the
case) and of a CPU EP session running the ONNX model ``graphs.to_onnx`` builds for the case (the
one the harness runs, ONNX Runtime's own kernel), all measured in this run, in turn, round after
round, and their ratios (each the median of the rounds' own). Also the machine's load average,
since the machine may be shared.
A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reference import interleaved_times, round_ratio  # noqa: E402  (one timing rule for the benchmarks)

#: Stress case ids (after ``<op>/stress-``) of the detection and classifier shapes.
SHAPES = (
    "roi_align1/stress-detection-1x256x200x304-r1000-7x7-sr2-scale1_16",
    "roi_align1/stress-detection-1x256x200x304-r1000-7x7-sr2-scale1-half-image",
    "roi_align1/stress-detection-1x256x200x304-r1000-7x7-sr2-scale1_16-fp16",
    "roi_pooling/stress-detection-1x512x38x50-r300-7x7-scale1_16",
    "roi_pooling/stress-detection-1x512x38x50-r300-7x7-scale1-half-image",
    "max_pooling2/stress-classifier-1x64x112x112-3x3-s2-p1-fp32",
    "max_pooling2/stress-classifier-1x64x112x112-3x3-s2-p1-fp16",
    "max_pooling2/stress-5d-1x16x32x56x56-3x3x3-s1x2x2-p1-d2",
)


def main(argv: list[str] | None = None) -> int:
    """Print one row per shape (module docstring)."""
    import onnxruntime as ort

    from ep_testbed.graphs import to_onnx
    from ep_testbed.graphs.catalog import build_catalog
    from ep_testbed.reference import execute, execute_with_bounds, workers
    from ep_testbed.reference.checks import element_cap

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="ORT intra-op threads (default 2: this machine)")
    parser.add_argument("-k", dest="pattern", default="")
    args = parser.parse_args(argv)
    cases = {c.id: c for c in build_catalog(tier="stress")}
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    print(f"onnxruntime {ort.__version__} CPU EP, {args.threads} threads; reference (ROI_ALIGN's kernel and bounds) "
          f"on {workers.thread_count()} worker threads of {os.cpu_count()} CPUs; load average {os.getloadavg()}")
    print(f"{'stress case':78} {'reference':>10} {'+bounds':>10} {'ORT CPU':>10} {'ref/ORT':>8} {'bnd/ORT':>8}")
    for case_id in SHAPES:
        if args.pattern not in case_id:
            continue
        case = cases[case_id]
        inputs = case.inputs()
        mapping = to_onnx(case.desc, opset=case.opset)
        feeds = mapping.feeds(inputs)
        session = ort.InferenceSession(mapping.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        session.run(None, feeds)
        execute(case.desc, inputs)
        with element_cap(2**33):  # as run --tier stress computes them
            times = interleaved_times({"ref": lambda: execute(case.desc, inputs),
                                       "bounds": lambda: execute_with_bounds(case.desc, inputs),
                                       "ort": lambda: session.run(None, feeds)}, args.repeat)
        t_ref, t_bounds, t_ort = (statistics.median(times[k]) for k in ("ref", "bounds", "ort"))
        print(f"{case_id:78} {t_ref * 1e3:8.1f}ms {t_bounds * 1e3:8.1f}ms {t_ort * 1e3:8.1f}ms "
              f"{round_ratio(times, 'ref', 'ort'):8.2f} {round_ratio(times, 'bounds', 'ort'):8.2f}", flush=True)
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
