"""Fuzzing throughput on an EP, against named peers measured in the same run.

    python benchmarks/bench_fuzz.py [--ep cpu] [--budget SECONDS] [--jobs N]

Three ways of running cases with worker isolation and placement proof on, one after another, and
the bare pipeline as the floor beneath them:

1. ``ep-testbed run`` on the default catalog (the peer: the same per-case pipeline on fixed cases);
2. ``ep-testbed fuzz --shrink none`` for ``--budget`` seconds (the default size distribution;
   cases drawn a batch ahead in a drawing process, chunks through the worker pool);
3. the textbook Hypothesis loop: ``@given(strategy)`` whose test function runs each drawn case
   in a worker and waits for it (``WorkerPool.run_one``), for the same time: what using
   Hypothesis as the engine end to end would give;
4. the bare pipeline (``floor_costs``): draw, map, session and run, reference with bounds, one case
   after another in this process, no verdict: the CPU per case below which no harness that
   judges this way can go, and the rate that allows on this machine's cores. Beside it, the fuzz
   row's worker time by outcome: what a verdict costs beyond the floor (a ``known`` case computes
   its readings and attributes its failure).

For each it prints cases per second, counted two ways: every case written to results.jsonl,
and only those that ran a session on the EP (not ``inexpressible``, not ``error``). The draw
cost of each operator's strategy (CPU milliseconds per case) and the machine's load average
before and after come with it: the machine may be shared, so compare rows of one run only.

Where the rate is bound by the machine's cores, what decides it is the CPU a fuzzed case costs
in all the command's processes together: on Linux the fuzz row also gives it, by process
(``cpu_by_role``: the command itself, its run workers, its drawing process), and the rate that
much CPU allows on this machine's cores kept busy throughout. A benchmark, not a test: nothing
here asserts.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NOT_RUN = ("inexpressible", "error")


class _Stop(BaseException):
    """Ends the Hypothesis loop at its budget (not an Exception: Hypothesis must not shrink it)."""


def _rates(run_dir: str, seconds: float) -> tuple[int, float, float]:
    """(cases, cases/s, cases that ran on the EP per s) of a run folder over ``seconds``."""
    from ep_testbed.harness.core.results import read_run

    _, lines, _ = read_run(run_dir)
    ran = sum(1 for line in lines if line["outcome"] not in NOT_RUN)
    return len(lines), len(lines) / seconds, ran / seconds


def peer_run(ep: str, jobs: int, root: str) -> tuple[int, float, float]:
    """``ep-testbed run`` on the catalog; rates over the run's own elapsed time (end line)."""
    from ep_testbed.harness.core.results import read_run

    out = os.path.join(root, "run")
    subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "run", "--ep", ep, "--jobs", str(jobs),
                    "--out", out, "--no-progress"], capture_output=True, check=False)
    _, _, end = read_run(out)
    return _rates(out, float(end["elapsed_s"]))


def fuzz_run(ep: str, jobs: int, budget: float, root: str) -> tuple[int, float, float]:
    """``ep-testbed fuzz --shrink none``; rates over its generation time (end line). Prints the
    CPU each fuzzed case cost, by process (``cpu_by_role``), where /proc shows it."""
    from ep_testbed.harness.core.results import read_run

    out = os.path.join(root, "fuzz")
    command = subprocess.Popen([sys.executable, "-m", "ep_testbed.harness.cli", "fuzz", "--ep", ep, "--jobs",
                                str(jobs), "--budget", str(budget), "--shrink", "none", "--out", out,
                                "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = cpu_by_role(command)
    _, lines, end = read_run(out)
    if cpu:
        per_case = {role: seconds / max(1, len(lines)) * 1e3 for role, seconds in cpu.items()}
        total = sum(per_case.values())
        print("  fuzz: CPU per fuzzed case (ms), whole command: " + ", ".join(
            f"{role} {ms:.1f}" for role, ms in per_case.items()) + f"; total {total:.1f}: "
            f"{usable_cores() * 1e3 / total:.0f} fuzzed cases per second of the command's wall time at most, "
            f"{usable_cores()} cores busy throughout", flush=True)
    return _rates(out, float(end["fuzz"]["generation_s"]))


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS tells it: ``taskset``)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


#: The processes of a fuzz command, by a word of their command line (the first that matches).
ROLES = (("run workers", "harness.run.forker"), ("drawing process", "multiprocessing"), ("command", ""))


def cpu_by_role(command: subprocess.Popen, every_s: float = 0.25) -> dict[str, float]:
    """CPU seconds (user + system) of ``command`` and every process it starts, by ``ROLES``,
    read from /proc while it runs (each process's last reading: a process ending between two
    readings loses at most ``every_s`` of its CPU; the fuzz's processes live the whole run);
    empty where /proc is missing. Waits for the command to end. A reading scans every process
    (about 3 ms on a 2-core machine), on the cores the command uses: every 0.25 s that is about
    1% of one core, left out of the command's figures but not of its rate."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    seen: dict[tuple[int, int], list] = {}  # (pid, start time) -> [role, CPU seconds]
    if not os.path.isdir("/proc"):
        command.wait()
        return {}
    while True:
        ended = command.poll() is not None
        _read_tree(command.pid, seen, ticks)
        if ended:
            break
        time.sleep(every_s)
    totals = {role: 0.0 for role, _ in ROLES}
    for role, seconds in seen.values():
        totals[role] += seconds
    return totals


def _read_tree(root: int, seen: dict[tuple[int, int], list], ticks: int) -> None:
    """One reading of every process whose ancestry reaches ``root`` (``cpu_by_role``)."""
    stats = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        stats[int(entry)] = (int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / ticks)
    for pid, (parent, started, seconds) in stats.items():
        ancestor = pid
        while ancestor != root and ancestor in stats:
            ancestor = stats[ancestor][0]
        if ancestor != root:
            continue
        key = (pid, started)
        if key not in seen:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    line = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                line = ""
            seen[key] = [next(role for role, word in ROLES if word in line), 0.0]
        seen[key][1] = seconds


def hypothesis_loop(ep: str, budget: float) -> tuple[int, float, float]:
    """``@given`` over every operator's strategy in turn, each example run in a worker and
    awaited; rates over the time spent (worker start-up excluded)."""
    from hypothesis import given, seed, settings
    from hypothesis import strategies as st

    from ep_testbed.harness.eps.providers import SessionSettings, resolve_ep
    from ep_testbed.harness.fuzz import draw
    from ep_testbed.harness.run.case_run import CaseConfig
    from ep_testbed.harness.run.pool import WorkerPool
    from ep_testbed.reference.registry import names

    pool = WorkerPool(CaseConfig(ep=resolve_ep(ep), session=SessionSettings(intra_op_threads=1)), 1, 60.0)
    pool.run_one(draw.draw_batch("max_pooling2", 0, 0, count=1)[0])  # start the worker
    counts = {"all": 0, "ran": 0}
    start = time.monotonic()
    strategy = st.one_of(*[st.tuples(st.just(op), draw.strategy(op, "default")) for op in names()])

    @settings(max_examples=10**9, database=None, deadline=None, phases=draw.hypothesis_settings(1).phases,
              suppress_health_check=draw.hypothesis_settings(1).suppress_health_check)
    @seed(0)
    @given(strategy)
    def run(pair):
        """Run one drawn case in the worker and wait for it."""
        if time.monotonic() - start > budget:
            raise _Stop
        op, d = pair
        line = pool.run_one(draw.fuzz_case(draw.FuzzId(op, 0, 0, counts["all"]), d))
        counts["all"] += 1
        counts["ran"] += line["outcome"] not in NOT_RUN

    try:
        run()
    except _Stop:
        pass
    finally:
        pool.close()
    seconds = min(time.monotonic() - start, budget)
    return counts["all"], counts["all"] / seconds, counts["ran"] / seconds


def draw_costs() -> dict[str, float]:
    """CPU milliseconds per drawn case, per operator (one batch each, after a warm-up batch)."""
    from ep_testbed.harness.fuzz import draw
    from ep_testbed.reference.registry import names

    costs = {}
    for op in names():
        draw.draw_batch(op, 0, 0, count=5)
        start = time.process_time()
        cases = draw.draw_batch(op, 0, 1)
        costs[op] = (time.process_time() - start) / len(cases) * 1e3
    return costs


#: The steps of the bare pipeline (``floor_costs``), in order.
FLOOR_STEPS = ("draw", "map", "inputs", "session and run", "reference with bounds")


def floor_costs(ep: str, rounds: int = 2) -> tuple[int, dict[str, float]]:
    """The bare pipeline of a fuzzed case, in this process, one case after another: draw it (the
    fuzz's own rounds), map it (``to_onnx``), make its inputs, create a session on the EP and run
    it once, compute the reference with bounds. No placement proof, comparison, verdict, readings,
    attribution, worker or results file: the CPU any harness that judges a case this way spends
    at least. Returns (cases drawn, CPU ms per drawn case by ``FLOOR_STEPS``); a case the mapper,
    the EP or the reference refuses stops there and counts what it spent."""
    import onnxruntime as ort

    from ep_testbed.graphs import to_onnx
    from ep_testbed.harness.eps.providers import resolve_ep
    from ep_testbed.harness.fuzz import draw
    from ep_testbed.reference import execute_with_bounds
    from ep_testbed.reference.registry import names

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    ort.set_default_logger_severity(4)  # RoiAlign's warning, a refused session's error: not the floor's news
    options.log_severity_level = 4
    provider = resolve_ep(ep).provider
    spent = dict.fromkeys(FLOOR_STEPS, 0.0)
    start = time.process_time()
    cases = [case for number in range(rounds) for case in draw.draw_round(list(names()), 0, number)]
    spent["draw"] = time.process_time() - start

    def step(name: str, work: Callable[[], Any]) -> Any:
        """``work()``, its CPU added to ``name``'s."""
        began = time.process_time()
        try:
            return work()
        finally:
            spent[name] += time.process_time() - began

    for case in cases:
        try:
            mapping = step("map", lambda: to_onnx(case.desc, opset=getattr(case, "opset", None)))
            if not mapping.expressible:
                continue
            inputs = step("inputs", case.inputs)
            step("session and run", lambda: ort.InferenceSession(
                mapping.model.SerializeToString(), options, providers=[provider]).run(None, mapping.feeds(inputs)))
            step("reference with bounds", lambda: execute_with_bounds(case.desc, inputs, "fp32"))
        except Exception:  # noqa: BLE001 - a refused case costs what it spent; the floor goes on
            continue
    return len(cases), {name: seconds / max(1, len(cases)) * 1e3 for name, seconds in spent.items()}


def verdict_costs(run_dir: str) -> dict[str, tuple[float, float]]:
    """Per outcome of a run folder: (share of its cases, mean worker milliseconds per case)."""
    from ep_testbed.harness.core.results import read_run

    _, lines, _ = read_run(run_dir)
    by: dict[str, list[float]] = {}
    for line in lines:
        by.setdefault(str(line["outcome"]), []).append(float(line.get("duration_s") or 0.0))
    return {outcome: (len(times) / max(1, len(lines)), sum(times) / len(times) * 1e3) for outcome, times in by.items()}


def main(argv: list[str] | None = None) -> int:
    """Print the three rows (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ep", default="cpu")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds for the fuzz and Hypothesis rows")
    parser.add_argument("--jobs", type=int, default=usable_cores())
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}; {usable_cores()} cores; --jobs {args.jobs}")
    print("draw cost (CPU ms per case): " + ", ".join(f"{op} {ms:.2f}" for op, ms in draw_costs().items()))
    print("cases/s over each way's own running time (run and fuzz: their end lines, without the command's "
          "start-up and reports; bench_throughput.py gives the wall-time rate too)")
    print(f"{'way':58} {'cases':>7} {'cases/s':>8} {'on EP/s':>8}")
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as root:
        rows = [("ep-testbed run, default catalog (peer)", peer_run(args.ep, args.jobs, root)),
                (f"ep-testbed fuzz --budget {args.budget:g} --shrink none", fuzz_run(args.ep, args.jobs, args.budget,
                                                                                    root)),
                (f"Hypothesis @given, one case at a time in a worker, {args.budget:g} s",
                 hypothesis_loop(args.ep, args.budget))]
        for name, (count, rate, ran_rate) in rows:
            print(f"{name:58} {count:7d} {rate:8.1f} {ran_rate:8.1f}", flush=True)
        print("fuzz row, worker time by outcome (share of cases, ms per case): " + ", ".join(
            f"{outcome} {share:.0%} {ms:.1f}" for outcome, (share, ms) in
            sorted(verdict_costs(os.path.join(root, "fuzz")).items(), key=lambda item: -item[1][0])))
    count, floor = floor_costs(args.ep)
    total = sum(floor.values())
    print(f"bare pipeline, {count} fuzzed cases one after another in one process, no verdict (CPU ms per case): "
          + ", ".join(f"{name} {ms:.2f}" for name, ms in floor.items())
          + f"; total {total:.2f}: {usable_cores() * 1e3 / total:.0f} cases/s on {usable_cores()} cores at most")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
