"""Time the search for where output drift starts, against the model run it is part of, and a
whole ``model run`` at model scale against running the model once on each EP.

    python benchmarks/bench_drift.py [--model tests/data/models/faster_rcnn_tiny_fpn.onnx] [--conv 0]
    python benchmarks/bench_drift.py --scale MODEL.onnx [--repeat 3] [--ep cpu] [--budget N]

Planted (the default): a CPU-only machine has no second EP that drifts on every model, so the
drift is planted: the EP under test (the CPU EP) runs a copy of the model whose ``--conv``-th
Conv has its weights scaled by 1.25 (``run_model(..., run_as=...)``), the reference EP the
model itself. For each marking budget (``--drift-max-elements``: everything at once, then
budgets that force bisection) it prints the search's strategy, runs per EP, nodes compared, its
seconds and the whole model run's seconds; first, the same model run with no drift (outputs
match: no search) as the peer. Measured on the recorded input of the detectors (input_seed 4).

Scale (``--scale MODEL``, e.g. torchvision's Faster R-CNN exported by
``tools/export_torchvision_models.py --full-size``): real drift, not a planted one: the
reference EP runs with graph optimizations on (``--reference-graph-opt``: ONNX Runtime's CPU EP
then fuses and re-lays-out the Convs and sums them in another order), the EP under test with
them off. Per repeat, interleaved: the peer, a fresh process that loads the model and runs it
once on each EP (a session built with the same settings the model run uses, then one run; the
seconds of each); then ``ep-testbed model run MODEL --ep EP --reference-graph-opt`` (wall time
from launch to exit, and the parts its ``model_result.json`` records in ``timings``); the ratio
of the two walls is what the model run costs in runs of the model. Prints the load average beside
each repeat: the machine may be shared. A benchmark, not a test: nothing here asserts.
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

import numpy as np
import onnx

from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.models.drift import DriftPolicy
from ep_testbed.harness.models.run import ModelRunConfig, run_model
from ep_testbed.harness.models.untrusted import load_untrusted

REPO = Path(__file__).resolve().parent.parent
BUDGETS = (None, 200_000, 20_000)

#: The peer, run in a fresh process: load the model, make its seeded inputs as ``model run``
#: does, then build and run it once on each EP with the model run's session settings.
PEER = """
import json, sys, time
t0 = time.perf_counter()
from ep_testbed.harness.eps.providers import SessionSettings, resolve_ep
from ep_testbed.harness.eps.session import run_on_ep
from ep_testbed.harness.models.inputs import generate_inputs, input_specs, resolve_shapes
from ep_testbed.harness.models.untrusted import load_untrusted
loaded = load_untrusted(sys.argv[1])
specs = input_specs(loaded.model)
feeds = generate_inputs(loaded.model, specs, resolve_shapes(specs, {}), 0)
t1 = time.perf_counter()
ep, ref = resolve_ep(sys.argv[2]), resolve_ep("cpu")
run_on_ep(loaded.model, feeds, ep, SessionSettings(), quiet=True, allow_fallback=True)
t2 = time.perf_counter()
run_on_ep(loaded.model, feeds, ref, SessionSettings(graph_opt=True), quiet=True)
t3 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "ep_s": t2 - t1, "reference_s": t3 - t2}))
"""


def scaled(model: onnx.ModelProto, index: int, factor: float = 1.25) -> tuple[onnx.ModelProto, str]:
    """A copy of ``model`` whose ``index``-th Conv has its weights scaled, and that Conv's name."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    conv = [n for n in copy.graph.node if n.op_type == "Conv"][index]
    weight = next(t for t in copy.graph.initializer if t.name == conv.input[1])
    array = onnx.numpy_helper.to_array(weight) * np.float32(factor)
    weight.CopyFrom(onnx.numpy_helper.from_array(array.astype(np.float32), weight.name))
    return copy, conv.name


def planted(model: str, conv_index: int) -> None:
    """The planted measurement (module docstring): one line per run."""
    loaded = load_untrusted(model)
    feeds = {"image": np.random.default_rng(4).random((3, 96, 128), dtype=np.float32)}
    cpu = resolve_ep("cpu")
    started = time.perf_counter()
    clean = run_model(loaded, feeds, ModelRunConfig(ep=cpu, reference=cpu))
    print(f"no drift: model run {time.perf_counter() - started:.2f} s ({clean['verdict_statement']})")
    copy, conv = scaled(loaded.model, conv_index)
    for budget in BUDGETS:
        config = ModelRunConfig(ep=cpu, reference=cpu, drift=DriftPolicy(max_elements=budget))
        started = time.perf_counter()
        result = run_model(loaded, feeds, config, run_as=copy)
        total = time.perf_counter() - started
        search = result["drift"]["search"]
        first = search["first"] or {}
        print(f"budget {search['budget_elements']} elements (estimated need {search['estimated_elements']}): "
              f"{search['strategy']}, {search['runs']} run(s) per EP, {search['compared_nodes']} of "
              f"{search['candidate_nodes']} nodes compared, search {search['seconds']:.2f} s, model run {total:.2f} s; "
              f"first divergent {first.get('op_type')} '{first.get('node')}' (planted at '{conv}')")


def _timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """``argv`` in a fresh process: its wall seconds from launch to exit, and what it printed."""
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return time.monotonic() - started, done


def scale(model: str, ep: str, repeat: int, budget: int | None) -> None:
    """The scale measurement (module docstring): a line per repeat, then the medians."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-drift-") as root:
        for n in range(repeat):
            load = os.getloadavg()[0]
            peer_wall, peer = _timed([sys.executable, "-c", PEER, model, ep])
            if peer.returncode:
                raise RuntimeError(f"the peer failed: {peer.stderr[-2000:]}")
            parts = json.loads(peer.stdout.strip().splitlines()[-1])
            out = os.path.join(root, f"run-{n}")
            argv = [sys.executable, "-m", "ep_testbed.harness.launch", "model", "run", model, "--ep", ep,
                    "--reference-graph-opt", "--out", out]
            if budget is not None:
                argv += ["--drift-max-elements", str(budget)]
            wall, done = _timed(argv)
            if done.returncode not in (0, 1):
                raise RuntimeError(f"model run failed ({done.returncode}): {done.stderr[-2000:]}")
            result = json.loads(Path(out, "model_result.json").read_text())
            search = (result["drift"] or {}).get("search") or {}
            first = search.get("first") or {}
            runs = parts["ep_s"] + parts["reference_s"]
            rows.append({"wall": wall, "peer": peer_wall, "runs": runs, "ratio": wall / peer_wall})
            print(f"repeat {n + 1} (load {load:.2f} before): peer {peer_wall:.1f} s wall (start-up and load {parts['load_s']:.1f} s, "
                  f"on the EP {parts['ep_s']:.1f} s, on the reference EP {parts['reference_s']:.1f} s); model run "
                  f"{wall:.1f} s wall = {wall / peer_wall:.2f} x the peer's wall, {wall / runs:.2f} x its two runs; "
                  f"timings {result.get('timings')}; search: {search.get('strategy')}, {search.get('runs')} run(s) "
                  f"per EP, {search.get('compared_nodes')} of {search.get('candidate_nodes')} nodes compared "
                  f"({search.get('screened_nodes')} screened), {search.get('seconds')} s; first divergent "
                  f"{first.get('op_type')} '{first.get('node')}' ({first.get('outside')}/{first.get('elements')})",
                  flush=True)
    print(f"medians of {repeat}: model run {statistics.median(r['wall'] for r in rows):.1f} s, peer "
          f"{statistics.median(r['peer'] for r in rows):.1f} s, ratio {statistics.median(r['ratio'] for r in rows):.2f}; "
          f"load average after {os.getloadavg()}")


def main() -> None:
    """Run the measurement the flags choose (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "data" / "models" / "faster_rcnn_tiny_fpn.onnx"))
    parser.add_argument("--conv", type=int, default=0)
    parser.add_argument("--scale", metavar="MODEL", help="measure a whole model run on MODEL (module docstring)")
    parser.add_argument("--ep", default="cpu", help="--scale: the EP under test (the reference EP is the CPU EP)")
    parser.add_argument("--repeat", type=int, default=3, help="--scale: repeats, interleaved")
    parser.add_argument("--budget", type=int, default=None, help="--scale: --drift-max-elements")
    args = parser.parse_args()
    if args.scale:
        scale(args.scale, args.ep, args.repeat, args.budget)
    else:
        planted(args.model, args.conv)


if __name__ == "__main__":
    main()
