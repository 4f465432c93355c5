"""Measure what trying ONNX Runtime's native modules in a child first (``installed.guard_onnxruntime``)
adds to a command, against the same command without it, in the same run.

    python benchmarks/bench_load_probe.py [--rounds 10]

Each round runs ``ep-testbed run --ep cpu --tier smoke --ops max_pooling2`` twice in fresh
interpreters, in alternating order: the command as shipped (the guard begins its probe as the
command starts, beside the command's own work, and the first ``import onnxruntime`` waits for
it) and the peer, the same ``cli.main`` with the guard replaced by one that does nothing. Also
the bare ``import onnxruntime`` with the probe begun right before it (no work to overlap: the
probe's whole cost) and without. Prints medians and quartiles. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["run", "--ep", "cpu", "--tier", "smoke", "--ops", "max_pooling2", "--jobs", "1", "--no-progress", "--out"]
SHIPPED = "import sys; from ep_testbed.harness.cli import main; sys.exit(main(sys.argv[1:]))"
UNGUARDED = ("import sys; import ep_testbed.harness.cli as cli; cli.guard_onnxruntime = lambda early=False: "
             "(lambda: None); sys.exit(cli.main(sys.argv[1:]))")
IMPORT_PLAIN = ("import time; from ep_testbed.harness.core import installed; t = time.perf_counter(); "
                "import onnxruntime; print(time.perf_counter() - t)")
IMPORT_PROBED = ("import time; from ep_testbed.harness.core import installed; t = time.perf_counter(); "
                 "installed.guard_onnxruntime(); import onnxruntime; print(time.perf_counter() - t)")


def _command(code: str, folder: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *COMMAND, str(folder)], capture_output=True, check=True, cwd=ROOT)
    return time.perf_counter() - start


def _import(code: str) -> float:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(done.stdout.strip().splitlines()[-1])


def _figures(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"median {statistics.median(values) * 1000:8.1f} ms  (quartiles {q[0] * 1000:.1f} / {q[2] * 1000:.1f})"


def main() -> None:
    """Run the rounds and print the figures (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"shipped": [], "unguarded": [], "probed": [], "plain": []}
    with tempfile.TemporaryDirectory() as top:
        for n in range(args.rounds):
            order = [("shipped", SHIPPED), ("unguarded", UNGUARDED)]
            for name, code in order if n % 2 == 0 else order[::-1]:
                times[name].append(_command(code, Path(top) / f"{name}-{n}"))
            order = [("probed", IMPORT_PROBED), ("plain", IMPORT_PLAIN)]
            for name, code in order if n % 2 == 0 else order[::-1]:
                times[name].append(_import(code))
    print(f"run --tier smoke (max_pooling2), as shipped : {_figures(times['shipped'])}")
    print(f"the same without the guard (peer)           : {_figures(times['unguarded'])}")
    print(f"  difference per round                      : "
          f"{_figures([a - b for a, b in zip(times['shipped'], times['unguarded'])])}")
    print(f"import onnxruntime, probe begun just before : {_figures(times['probed'])}")
    print(f"import onnxruntime, plain (peer)            : {_figures(times['plain'])}")


if __name__ == "__main__":
    main()
