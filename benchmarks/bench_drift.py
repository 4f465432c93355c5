"""Time the search for where output drift starts, against the model run it is part of.

    python benchmarks/bench_drift.py [--model tests/data/models/faster_rcnn_tiny_fpn.onnx] [--conv 0]

A CPU-only machine has no second EP that drifts on every model, so the drift is planted: the EP
under test (the CPU EP) runs a copy of the model whose ``--conv``-th Conv has its weights scaled
by 1.25 (``run_model(..., run_as=...)``), the reference EP the model itself. For each marking
budget (``--drift-max-elements``: everything at once, then budgets that force bisection) it
prints the search's strategy, runs per EP, nodes compared, its seconds and the whole model run's
seconds; first, the same model run with no drift (outputs match: no search) as the peer.
Measured on the recorded input of the detectors (input_seed 4).
"""

from __future__ import annotations

import argparse
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


def scaled(model: onnx.ModelProto, index: int, factor: float = 1.25) -> tuple[onnx.ModelProto, str]:
    """A copy of ``model`` whose ``index``-th Conv has its weights scaled, and that Conv's name."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    conv = [n for n in copy.graph.node if n.op_type == "Conv"][index]
    weight = next(t for t in copy.graph.initializer if t.name == conv.input[1])
    array = onnx.numpy_helper.to_array(weight) * np.float32(factor)
    weight.CopyFrom(onnx.numpy_helper.from_array(array.astype(np.float32), weight.name))
    return copy, conv.name


def main() -> None:
    """Print one line per run (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(REPO / "tests" / "data" / "models" / "faster_rcnn_tiny_fpn.onnx"))
    parser.add_argument("--conv", type=int, default=0)
    args = parser.parse_args()
    loaded = load_untrusted(args.model)
    feeds = {"image": np.random.default_rng(4).random((3, 96, 128), dtype=np.float32)}
    cpu = resolve_ep("cpu")
    started = time.perf_counter()
    clean = run_model(loaded, feeds, ModelRunConfig(ep=cpu, reference=cpu))
    print(f"no drift: model run {time.perf_counter() - started:.2f} s ({clean['verdict_statement']})")
    planted, conv = scaled(loaded.model, args.conv)
    for budget in BUDGETS:
        config = ModelRunConfig(ep=cpu, reference=cpu, drift=DriftPolicy(max_elements=budget))
        started = time.perf_counter()
        result = run_model(loaded, feeds, config, run_as=planted)
        total = time.perf_counter() - started
        search = result["drift"]["search"]
        first = search["first"] or {}
        print(f"budget {search['budget_elements']} elements (estimated need {search['estimated_elements']}): "
              f"{search['strategy']}, {search['runs']} run(s) per EP, {search['compared_nodes']} of "
              f"{search['candidate_nodes']} nodes compared, search {search['seconds']:.2f} s, model run {total:.2f} s; "
              f"first divergent {first.get('op_type')} '{first.get('node')}' (planted at '{conv}')")


if __name__ == "__main__":
    main()
