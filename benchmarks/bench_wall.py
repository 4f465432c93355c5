"""A command's cases per second of wall time, from launching it to its exit, against the same
command of another checkout, interleaved in one run.

    python benchmarks/bench_wall.py [--repeat 3] [--python OTHER_VENV/bin/python] -- run --ep dml-wine
    python benchmarks/bench_wall.py --repeat 3 -- fuzz --ep cpu --budget 20

Runs ``python -m ep_testbed.harness.launch ARGS --out FRESH_FOLDER`` (what the ``ep-testbed``
script runs) with this interpreter and with each ``--python`` (another checkout's venv: its
own code; e.g. a worktree of the commit before a change), in turn, ``--repeat`` times. Per run
it prints the load average just before (the machine may be shared: compare rows of one run),
the wall seconds measured here (launch to exit), the cases of the results' end line (``ran``)
and their rate over that wall time; where the command prints a closing line
(``harness.core.walltime``), its own wall figure and parts too. Then the median rate per
interpreter. A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ep_testbed.harness.core.walltime import parse_closing_line  # noqa: E402  (after the path)


def end_line(out: str) -> dict:
    """The last line of ``out``/results.jsonl (the end line of a finished run)."""
    lines = Path(out, "results.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])


def once(python: str, argv: list[str], out: str) -> dict:
    """One launch of the command: load before, wall seconds, cases run, the closing line."""
    load = os.getloadavg()
    started = time.monotonic()
    done = subprocess.run([python, "-m", "ep_testbed.harness.launch", *argv, "--out", out], capture_output=True,
                          text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{python} {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    end = end_line(out)
    return {"load": load, "wall": wall, "cases": int(end["ran"]), "rate": int(end["ran"]) / wall,
            "closing": parse_closing_line(done.stdout)}


def main(argv: list[str] | None = None) -> int:
    """Measure and print (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--python", action="append", default=[], help="another interpreter (checkout) to compare")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the ep-testbed command, without --out")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    pythons = [sys.executable, *args.python]
    rates: dict[str, list[float]] = {p: [] for p in pythons}
    print(f"ep-testbed {' '.join(command)}; {os.cpu_count()} cores; {args.repeat} repeats, interleaved")
    with tempfile.TemporaryDirectory(prefix="bench-wall-") as root:
        for n in range(args.repeat):
            for i, python in enumerate(pythons):
                row = once(python, command, os.path.join(root, f"{n}-{i}"))
                rates[python].append(row["rate"])
                closing = row["closing"]
                said = (f"; it says {closing.wall_s:.2f} s: " + ", ".join(f"{name} {s:.2f}" for name, s in closing.parts)
                        if closing else "; no closing line")
                print(f"{python}: load {row['load'][0]:.2f} {row['load'][1]:.2f} {row['load'][2]:.2f}, "
                      f"{row['cases']} cases in {row['wall']:.2f} s = {row['rate']:.1f} cases/s of wall time{said}",
                      flush=True)
    for python, values in rates.items():
        print(f"median {statistics.median(values):.1f} cases/s of wall time ({', '.join(f'{v:.1f}' for v in values)}): "
              f"{python}")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
