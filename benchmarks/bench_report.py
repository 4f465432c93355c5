"""Time reports.render_run (and JUnit, summary.json) on a synthetic 5,000-case run.

    python benchmarks/bench_report.py [--cases 5000] [--keep DIR]

The run is test data (tests/reports/synthetic_run.py): result lines that follow the harness
contract and real artifact files (one-node ONNX models, npz arrays) for every fail, known, fixed
and tie-only case (500 folders at 5,000 cases), so the renderer reads as much as a real run with
10% of its cases kept.  No execution provider is run.  Target: render_run < 10 s.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "reports"))

import synthetic_run  # noqa: E402

from ep_testbed.reports import render_junit, render_run, render_summary_json  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3, help="render this many times, report the best and worst")
    parser.add_argument("--all-fail", action="store_true",
                        help="worst case: every case fails and has an artifact folder")
    parser.add_argument("--keep", type=Path, help="write the run here and keep it (default: a temp folder)")
    args = parser.parse_args()
    run_dir = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-")) / "run"
    try:
        t0 = time.perf_counter()
        synthetic_run.write_run(run_dir, args.cases, pattern=["fail"] if args.all_fail else None)
        folders = len(list((run_dir / "cases").iterdir()))
        print(f"synthetic run: {args.cases} cases, {folders} artifact folders, written in "
              f"{time.perf_counter() - t0:.1f} s -> {run_dir}")
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            report = render_run(run_dir)
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        render_junit(run_dir)
        t_junit = time.perf_counter() - t0
        t0 = time.perf_counter()
        render_summary_json(run_dir)
        t_summary = time.perf_counter() - t0
        size = report.stat().st_size
        print(f"render_run: best {min(times):.2f} s, worst {max(times):.2f} s over {args.repeat} "
              f"(target < 10 s); report.html {size / 1e6:.1f} MB")
        print(f"render_junit: {t_junit:.2f} s; render_summary_json: {t_summary:.2f} s")
        return 0 if max(times) < 10 else 1
    finally:
        if args.keep is None:
            shutil.rmtree(run_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
