"""Measure what each stress-tier case really costs: peak memory and time, next to its stated cost.

    python benchmarks/bench_stress_memory.py [--ep cpu] [-k PATTERN] [--max-mb N]

Runs every stress case (``ep-testbed run --tier stress``'s cases) alone in a fresh process,
through the same ``run_case`` a worker calls (mapper, reference, session on the EP, placement,
comparison), and prints its outcome, wall time (and of it the reference's, with its bounds),
the ``seconds`` the tier states for it (``graphs.cases.common.time_need``: a passing case), the
process's peak resident memory (``ru_maxrss``) and the ``memory_mb`` tag the tier states for it
(``graphs.cases.common.memory_need``), so the estimates can be checked against the measurement. Cases whose stated
need exceeds ``--max-mb`` (default: 80% of the memory available now) are listed, not run.
Linux/macOS (``resource``). A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHILD = r"""
import json, resource, sys, time
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.run.case_run import CaseConfig, run_case
from ep_testbed.harness.eps.providers import SessionSettings, resolve_ep
from ep_testbed.reference.checks import element_cap
case = next(c for c in build_catalog(tier="stress") if c.id == sys.argv[1])
start = time.perf_counter()
with element_cap(2**33):  # as run --tier stress runs it (harness.cli.run.STRESS_ELEMENTS)
    line = run_case(case, CaseConfig(ep=resolve_ep(sys.argv[2]), session=SessionSettings(intra_op_threads=2)))
scale = 1 if sys.platform == "darwin" else 1024
print(json.dumps({"outcome": line["outcome"], "seconds": time.perf_counter() - start,
                  "reference_s": (line.get("timings") or {}).get("reference_s"),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20,
                  "message": line["message"][:160]}))
"""


def main(argv: list[str] | None = None) -> int:
    """Print one row per stress case (module docstring)."""
    from ep_testbed.graphs.catalog import build_catalog
    from ep_testbed.harness.cli.run import available_memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ep", default="cpu")
    parser.add_argument("-k", dest="pattern", default="", help="only case ids containing this")
    parser.add_argument("--max-mb", type=int, default=int((available_memory() or 0) * 0.8) // 2**20)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()}")
    print(f"{'case':78} {'outcome':>9} {'time s':>7} {'ref s':>6} {'stated s':>8} {'peak MiB':>9} {'stated MiB':>10}")
    for case in build_catalog(tier="stress"):
        if args.pattern not in case.id:
            continue
        stated, seconds = int(case.tags["memory_mb"]), case.tags["seconds"]
        if stated > args.max_mb:
            print(f"{case.id:78} {'skipped':>9} {'':>7} {'':>6} {seconds:>8} {'':>9} {stated:10d}  (over --max-mb "
                  f"{args.max_mb})")
            continue
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, case.id, args.ep], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))
        if done.returncode:
            print(f"{case.id:78} {'died':>9} {time.perf_counter() - start:7.1f}  {done.stderr.strip()[-200:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        reference = f"{r['reference_s']:6.2f}" if r["reference_s"] is not None else f"{'-':>6}"
        print(f"{case.id:78} {r['outcome']:>9} {r['seconds']:7.1f} {reference} {seconds:>8} {r['peak_mb']:9.0f} "
              f"{stated:10d}" + ("" if r["outcome"] == "pass" else f"  {r['message']}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
