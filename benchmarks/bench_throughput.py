"""Throughput of the testbed on an EP, batched and unbatched, next to the bare EP's ceiling, in one run.

    python benchmarks/bench_throughput.py [--ep cpu] [--batches 1,8] [--jobs N] [--fuzz-budget S]
                                          [--repeat R] [--also-on none] [--no-fuzz] [--json FILE]

For each ``--batches`` value K, interleaved ``--repeat`` times (the machine may be shared: each
row is the median of its repeats, and only rows of one run compare):

- ``run``: ``ep-testbed run --ep EP --batch K --jobs N`` on the default catalog (``--also-on``
  passed through, default none: re-checking failures on a second EP is per failing case, not
  what batching changes); cases/s over the run's own elapsed time (its end line: starting the
  workers and their warm-up included) and, beside it, cases/s over the command's wall time from
  its process's start (its closing line, ``core.walltime``: the imports, the catalog, the
  preflight, stopping the workers and the reports too);
- ``fuzz``: ``ep-testbed fuzz --batch K --shrink none --budget S``; cases/s over its generation
  time (end line), and over its wall time (closing line);
- ``bare``: the ceiling, ONNX Runtime with nothing of the testbed around it: the same catalog
  models (every expressible case's ``graphs.to_onnx`` model and feeds, made before the clock
  starts) in N processes at once, each already started and warmed up, building one session per
  model with the EP and running it once (no profiling, no placement, no comparison, ONNX
  Runtime's default session options); with K > 1, the models packed K consecutive ones at a time
  by ``harness.eps.packing.pack`` as the testbed packs them (a pack that fails runs its models
  one by one). ``--ep dml-wine``: the DirectML host's requests without the testbed (its shared
  DirectML device, no profiling, no config entries).

Each testbed row also splits a case's time from its results lines' ``timings`` (milliseconds per
case, mean over every case: prepare = map, inputs and reference; build and run = its share of
the sessions it took part in; judge = comparison and attribution) and says how much of each
worker's time lay outside the cases (``other``: waiting for the main process, pipes, starting
and warming up workers). The last columns: cases/s against the same command unbatched, and
against the bare EP at the same batch size (the testbed's share of the ceiling); for ``run``,
``warm-up``: seconds of its elapsed time before the first worker had started its EP, when no
case could run (the end line's ``warm_up_s``; the bare processes start theirs before the clock),
and ``warm/bare``: the cases/s of the rest of the run (every case over the elapsed time less the
warm-up) against the bare EP; ``wall``: seconds from launching the command to its exit (its
imports, the catalog, the preflight and the report too: what a user waits for), measured here
from launching the process to its exit. A second table says where each command's wall time went,
as its closing line names the parts (medians of the repeats' seconds). A benchmark, not a test:
nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ep_testbed.harness.core.walltime import parse_closing_line  # noqa: E402  (after the path)

SPLIT = ("prepare_s", "build_s", "run_s", "judge_s")


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``ep-testbed ARGV`` in a fresh process, without any fault injection of the environment."""
    env = {k: v for k, v in os.environ.items() if k != "EP_TESTBED_FAULT"}
    return subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", *argv], capture_output=True, text=True,
                          env=env, check=False)


def _split(lines: list[dict[str, Any]], seconds: float, jobs: int) -> dict[str, float]:
    """Milliseconds per case of each ``timings`` part, and of each worker's time outside the cases."""
    timed = [line["timings"] for line in lines if line.get("timings")]
    split = {key: 1e3 * sum(t[key] for t in timed) / max(1, len(timed)) for key in SPLIT}
    split["other"] = max(0.0, 1e3 * seconds * jobs / max(1, len(lines)) - sum(split.values()))
    split["shared_by"] = statistics.mean(t["shared_by"] for t in timed) if timed else 1.0
    return split


def testbed_run(ep: str, batch: int, jobs: int, also_on: str, root: str) -> dict[str, Any]:
    """``ep-testbed run`` on the catalog at ``batch``: cases, cases/s, the per-case split."""
    from ep_testbed.harness.core.results import read_run

    out = os.path.join(root, f"run-{batch}-{time.monotonic_ns()}")
    launched = time.monotonic()
    done = _cli("run", "--ep", ep, "--batch", str(batch), "--jobs", str(jobs), "--also-on", also_on,
                "--out", out, "--no-progress")
    wall = time.monotonic() - launched
    if done.returncode not in (0, 1):
        raise RuntimeError(f"ep-testbed run failed ({done.returncode}): {done.stderr[-2000:]}")
    _, lines, end = read_run(out)
    seconds = float(end["elapsed_s"])
    warm = end.get("warm_up_s")  # how far into the run the first worker had started its EP
    after = len(lines) / (seconds - warm) if warm is not None and seconds > warm else None
    return {"cases": len(lines), "rate": len(lines) / seconds, "split": _split(lines, seconds, jobs),
            "outcomes": end["counts"], "warm_up_s": warm, "rate_warm": after, "wall_s": wall,
            **_closing(done.stdout)}


def _closing(stdout: str) -> dict[str, Any]:
    """The command's closing line: cases/s over its wall time, and the seconds of each part."""
    closing = parse_closing_line(stdout)
    if closing is None:
        raise RuntimeError(f"no closing line in what the command printed: {stdout[-500:]}")
    return {"wall_rate": closing.rate, "parts": dict(closing.parts)}


def testbed_fuzz(ep: str, batch: int, jobs: int, budget: float, root: str) -> dict[str, Any]:
    """``ep-testbed fuzz --shrink none`` at ``batch``: cases, cases/s, the per-case split."""
    from ep_testbed.harness.core.results import read_run

    out = os.path.join(root, f"fuzz-{batch}-{time.monotonic_ns()}")
    done = _cli("fuzz", "--ep", ep, "--batch", str(batch), "--jobs", str(jobs), "--budget", str(budget),
                "--shrink", "none", "--out", out, "--no-progress")
    if done.returncode not in (0, 1):
        raise RuntimeError(f"ep-testbed fuzz failed ({done.returncode}): {done.stderr[-2000:]}")
    _, lines, end = read_run(out)
    seconds = float(end["fuzz"]["generation_s"])
    return {"cases": len(lines), "rate": len(lines) / seconds, "split": _split(lines, seconds, jobs),
            **_closing(done.stdout)}


# --- the bare EP -------------------------------------------------------------------------------

def catalog_models() -> list[tuple[Any, dict[str, Any]]]:
    """Every expressible catalog case's model and feeds, in catalog order."""
    from ep_testbed.graphs import to_onnx
    from ep_testbed.graphs.catalog import build_catalog

    models = []
    for case in build_catalog():
        mapping = to_onnx(case.desc, opset=case.opset)
        if mapping.model is not None:
            models.append((mapping.model, mapping.feeds(case.inputs())))
    return models


def packed_models(models: list[tuple[Any, dict[str, Any]]], batch: int) -> list[list[tuple[bytes, dict]]]:
    """Consecutive groups of ``batch`` models, each group split by ``packing.pack_key`` and packed
    into one model (as the testbed packs a worker's batch); each unit lists the packed model
    first, then its members (run one by one if the pack fails)."""
    from ep_testbed.harness.eps import packing

    units = []
    for start in range(0, len(models), batch):
        groups: dict[Any, list] = {}
        for model, feeds in models[start:start + batch]:
            groups.setdefault(packing.pack_key(model) or id(model), []).append((model, feeds))
        for group in groups.values():
            members = [(m.SerializeToString(), f) for m, f in group]
            if len(group) == 1:
                units.append(members)
                continue
            packed = packing.pack([m for m, _ in group])
            units.append([(packed.model.SerializeToString(), packed.feeds([f for _, f in group]))] + members)
    return units


class BareEp:
    """Sessions on the EP with nothing around them: ONNX Runtime in this process, or for
    ``dml-wine`` the DirectML host's requests."""

    def __init__(self, ep: str):
        from ep_testbed.harness.eps.adapters import adapter_for, resolve

        self.spec = resolve(ep)
        self.adapter = adapter_for(self.spec)
        self.host = self.adapter.host() if getattr(self.adapter, "holds_sessions", False) else None

    def run(self, model: bytes, feeds: dict[str, Any]) -> bool:
        """Build a session of ``model``, run it once on ``feeds``; False when either failed."""
        if self.host is not None:
            return self.host.run(model, feeds, provider="DML", shared_device=True, profile=False,
                                 config_entries={}).error_stage is None
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 4
        try:
            providers = self.adapter.attach(options)
            ort.InferenceSession(model, options, providers=providers).run(None, feeds)
        except Exception:
            return False
        return True


def _bare_worker(ep: str, units: list[list[tuple[bytes, dict]]], ready: Any, results: Any) -> None:
    """One bare process: start the EP (one untimed session), wait for the others, then run its units."""
    bare = BareEp(ep)
    bare.run(*units[0][-1])
    ready.wait()
    start = time.monotonic()
    cases = 0
    for unit in units:
        members = unit[1:] or unit
        cases += len(members)
        if not bare.run(*unit[0]) and len(unit) > 1:
            for member in members:
                bare.run(*member)
    results.put((start, time.monotonic(), cases))


def bare(ep: str, units: list[list[tuple[bytes, dict]]], jobs: int) -> dict[str, Any]:
    """The ceiling: ``units`` over ``jobs`` started and warmed-up processes; cases/s from the first
    start to the last end."""
    context = multiprocessing.get_context("spawn")
    shards = [shard for shard in (units[i::jobs] for i in range(jobs)) if shard]
    ready, results = context.Barrier(len(shards)), context.Queue()
    procs = [context.Process(target=_bare_worker, args=(ep, shard, ready, results)) for shard in shards]
    for proc in procs:
        proc.start()
    spans = [results.get(timeout=1800) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    cases = sum(n for _, _, n in spans)
    seconds = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    return {"cases": cases, "rate": cases / seconds}


# --- the table ------------------------------------------------------------------------------

def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The repeat with the median rate (its split comes with it), with the median of the wall
    rates and of each wall part's seconds over the repeats beside it."""
    ordered = sorted(rows, key=lambda r: r["rate"])
    median = dict(ordered[len(ordered) // 2], rates=[round(r["rate"], 1) for r in rows])
    if all(r.get("wall_rate") is not None for r in rows):
        median["wall_rate"] = statistics.median(r["wall_rate"] for r in rows)
        median["wall_rates"] = [round(r["wall_rate"], 1) for r in rows]
        names = list(dict.fromkeys(name for r in rows for name in r["parts"]))
        median["wall_parts"] = {name: statistics.median(r["parts"].get(name, 0.0) for r in rows) for name in names}
    return median


def measure(args: argparse.Namespace, batches: list[int], root: str) -> dict[tuple[str, int], dict[str, Any]]:
    """Every row, its repeats interleaved."""
    models = catalog_models()
    units = {k: packed_models(models, k) if k > 1 else [[(m.SerializeToString(), f)] for m, f in models]
             for k in batches}
    raw: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for repeat in range(args.repeat):
        for k in batches:
            raw.setdefault(("run", k), []).append(testbed_run(args.ep, k, args.jobs, args.also_on, root))
            if not args.no_fuzz:
                raw.setdefault(("fuzz", k), []).append(testbed_fuzz(args.ep, k, args.jobs, args.fuzz_budget, root))
            raw.setdefault(("bare", k), []).append(bare(args.ep, units[k], args.jobs))
            print(f"  repeat {repeat + 1}, batch {k} (load {os.getloadavg()[0]:.2f}): " + ", ".join(
                f"{what} {raw[(what, k)][-1]['rate']:.1f}"
                + (f" (wall {raw[(what, k)][-1]['wall_rate']:.1f})" if raw[(what, k)][-1].get("wall_rate") else "")
                for what in ("run", "fuzz", "bare") if (what, k) in raw) + " cases/s", file=sys.stderr, flush=True)
    return {key: _median(rows) for key, rows in raw.items()}


def wall_table(rows: dict[tuple[str, int], dict[str, Any]], batches: list[int]) -> list[str]:
    """Where each command's wall time went (medians over the repeats of each part's seconds,
    from its closing line) and its cases/s over the wall time against the bare EP's."""
    out = []
    for what in ("run", "fuzz"):
        for k in batches:
            row = rows.get((what, k))
            if not row or not row.get("wall_parts"):
                continue
            ceiling = rows.get(("bare", k))
            vs_bare = f", {row['wall_rate'] / ceiling['rate']:.2f} of the bare EP" if ceiling else ""
            parts = ", ".join(f"{name} {seconds:.2f}" for name, seconds in row["wall_parts"].items())
            out.append(f"{what} batch {k}: {row['wall_rate']:.1f} cases/s of wall time{vs_bare} "
                       f"(repeats {row['wall_rates']}); seconds: {parts}")
    return out


def table(rows: dict[tuple[str, int], dict[str, Any]], batches: list[int]) -> list[str]:
    """The printed table (module docstring)."""
    out = [f"{'what':6} {'batch':>5} {'cases':>6} {'cases/s':>8} {'wall c/s':>8} {'prepare':>8} {'build':>7} "
           f"{'run':>7} {'judge':>7} {'other':>7} {'shared':>7} {'vs K=1':>7} {'vs bare':>8} {'warm-up':>7} "
           f"{'warm/bare':>9} {'wall':>6}  repeats (cases/s)"]
    for what in ("run", "fuzz", "bare"):
        for k in batches:
            row = rows.get((what, k))
            if row is None:
                continue
            base = rows.get((what, batches[0]))
            ceiling = rows.get(("bare", k))
            split = row.get("split") or {}
            cells = [f"{split[key]:8.2f}" if key in split else f"{'':>8}" for key in ("prepare_s",)]
            cells += [f"{split[key]:7.2f}" if key in split else f"{'':>7}" for key in ("build_s", "run_s", "judge_s",
                                                                                      "other", "shared_by")]
            vs_one = f"{row['rate'] / base['rate']:7.2f}" if base else f"{'':>7}"
            vs_bare = f"{row['rate'] / ceiling['rate']:8.2f}" if ceiling and what != "bare" else f"{'':>8}"
            warm = f"{row['warm_up_s']:7.2f}" if row.get("warm_up_s") is not None else f"{'':>7}"
            warm_bare = (f"{row['rate_warm'] / ceiling['rate']:9.2f}" if row.get("rate_warm") and ceiling
                         else f"{'':>9}")
            wall = f"{row['wall_s']:6.2f}" if row.get("wall_s") is not None else f"{'':>6}"
            wall_rate = f"{row['wall_rate']:8.1f}" if row.get("wall_rate") is not None else f"{'':>8}"
            out.append(f"{what:6} {k:5d} {row['cases']:6d} {row['rate']:8.1f} {wall_rate} {' '.join(cells)} {vs_one} "
                       f"{vs_bare} {warm} {warm_bare} {wall}  {row['rates']}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table (module docstring)."""
    from ep_testbed.harness.eps.adapters import resolve
    from ep_testbed.harness.eps.gpu import runtime_info

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ep", default="cpu")
    parser.add_argument("--batches", default="1,8", help="comma-separated --batch values; the first is the base")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--fuzz-budget", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--also-on", default="none")
    parser.add_argument("--no-fuzz", action="store_true")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    spec = resolve(args.ep)
    info = runtime_info(spec)
    print(f"EP {spec.provider} ({args.ep}; {(info.get('gpu') or {}).get('summary', '?')}); "
          f"{info.get('ort_flavour')} {info.get('ort_version')}; {os.cpu_count()} cores, --jobs {args.jobs}; "
          f"load average before {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as root:
        rows = measure(args, batches, root)
    print(f"load average after {os.getloadavg()}; medians of {args.repeat} repeats; split in ms per case")
    print("\n".join(table(rows, batches)))
    print("where the wall time went (the closing line's parts, medians in seconds):")
    print("\n".join(wall_table(rows, batches)))
    if args.json:
        Path(args.json).write_text(json.dumps({f"{w}:{k}": v for (w, k), v in rows.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
