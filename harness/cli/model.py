"""``ep-testbed model run`` / ``ep-testbed model demo``: whole models on an EP against a reference EP.

This module owns their flags and help texts (``add``); what they do lives in ``model_command``.

Exit codes: 0 no attributed node diverges unexplained, the baseline (if any) matches and output
drift against the reference EP stays within the drift policy (``--drift-tol``: by default drift is
reported, not failed); 1 a node diverges, a baseline regression, drift beyond the policy
(``--drift-tol fail`` or a drift budget), the EP could not build/run the model, or it crashed or
timed out; 2 the model or the baseline is refused, or bad usage.
"""

from __future__ import annotations

import argparse

from ...graphs import attributed_op_types
from ..eps.registry import DEFAULT_EP
from .model_command import DEMO_TIMEOUT, demo_command, run_command
from .options import (
    add_ep_options,
    add_out,
    add_overwrite,
    add_seed,
    add_timeout,
    add_tolerance_options,
    count,
    declare_groups,
)


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``model run`` and ``model demo`` under ``subparsers`` (the ``ep-testbed`` parser's)."""
    p = subparsers.add_parser("model", help="whole-model checks: outputs across EPs, per-node attribution, baselines",
                              description="Run whole ONNX models on an execution provider and a reference EP.")
    sub = p.add_subparsers(dest="model_command", required=True)
    run = sub.add_parser(
        "run", help="run one model on --ep and the reference EP",
        description="Run MODEL.onnx on the EP under test and on the reference EP with the same seeded inputs; "
                    "compare output by output; prove where each node ran; judge each "
                    f"{'/'.join(attributed_op_types())} node on its own EP inputs against the DirectML reference "
                    "(the operators under test); and when an output differs from the reference EP's, name the "
                    "first node of any op type whose outputs leave the tolerance (where output drift starts).",
        epilog="exit codes: 0 the operators under test pass (every attributed node agrees with the DirectML "
               "reference on its own EP inputs, or a flag explains it), no baseline regression, and output drift "
               "against the reference EP within --drift-tol (default report: drift is named, never failed); also "
               "the verdict emulation-gap (the emulated device could not run the whole model: not a result of the EP); "
               "1 a node diverges, a baseline regression, drift beyond --drift-tol fail or a drift budget, the EP "
               "failed or crashed, or not-on-ep (the EP declines nodes under --no-cpu-fallback); 2 model or baseline refused, or bad usage")
    run.add_argument("model", help="the .onnx file (external data must sit in its folder)")
    _common(run)
    run.add_argument("--shape", action="append", default=[], metavar="NAME=AxB...",
                     help="a symbolic dimension (batch=2) or an input's whole shape (image=1x3x224x224); repeatable")
    run.add_argument("--inputs", metavar="NPZ", help="inputs by graph input name (default: seeded, range-aware)")
    base = run.add_mutually_exclusive_group()
    base.add_argument("--save-baseline", metavar="DIR", help="store outputs + manifest as a baseline in DIR")
    base.add_argument("--baseline", metavar="DIR", help="compare with the baseline in DIR; exit 1 on a regression")
    add_timeout(run.add_argument, None, "kill the child process that runs the model after SECONDS")
    run.add_argument("--in-process", action="store_true",
                     help="run in this process, not in a child (a crash of the EP then ends ep-testbed too)")
    # set by a parent process whose child crashed on the whole model: judge the nodes alone
    run.add_argument("--ep-crashed", metavar="WHAT", help=argparse.SUPPRESS)
    run.set_defaults(func=run_command, child_parser=run)
    demo = sub.add_parser("demo", help="run the bundled demo models end to end",
                          description="Write the bundled models (a detection head and a ResNet-style stem with its "
                                      "pool's indices, seeded weights) and run each like `model run`.")
    _common(demo)
    add_timeout(demo.add_argument, DEMO_TIMEOUT, "per-model time limit of its child process, in seconds")
    demo.add_argument("--in-process", action="store_true", help="run the models in this process (no isolation)")
    demo.set_defaults(func=demo_command, child_parser=run)  # each model runs as a `model run` child


def _common(p: argparse.ArgumentParser) -> None:
    """The flags ``model run`` and ``model demo`` share (EPs, seed, output folder, session, reading, tolerances)."""
    add_ep_options(p.add_argument)
    declare_groups(p, "ep", "graph-opt", "seed", "out", "overwrite", "timeout", "tolerances")  # --timeout: each command's
    p.add_argument("--reference-ep", default=DEFAULT_EP, help=f"EP whose outputs are the reference (default {DEFAULT_EP})")
    add_seed(p.add_argument, "input seed")
    add_out(p.add_argument, "runs/model-<name>-<ep>-<UTC time>")
    add_overwrite(p.add_argument, "what --out (and --save-baseline) already hold")
    p.add_argument("--no-cpu-fallback", action="store_true",
                   help="refuse to run when the EP declines a node (default: it runs on CPU and placement says so)")
    p.add_argument("--reading", choices=("spec", "dml-ep"), default="spec",
                   help="how from_onnx reads attributed nodes (default spec; dml-ep: as ORT's DirectML EP builds them)")
    add_tolerance_options(p.add_argument)
    p.add_argument("--drift-tol", action="append", default=[], metavar="report|fail|DTYPE:atol=X,rtol=Y,ulp=N",
                   help="what output drift against the reference EP does: report (default: name the first node "
                        "whose outputs leave the tolerance, do not fail), fail (an output that differs fails the "
                        "run), or a drift budget in --tol's form, applied over the run's tolerances (an output "
                        "beyond it fails; repeatable). A baseline saved on the same EP gates regressions whatever "
                        "this says")
    p.add_argument("--drift-max-elements", type=count, default=None, metavar="N",
                   help="elements the intermediates marked as outputs in one run may hold together while searching "
                        "where drift starts (default: the elements cap, --limit elements); the nodes are marked "
                        "in windows of consecutive nodes, none holding more than this")
    p.add_argument("--reference-graph-opt", action="store_true",
                   help="build the reference EP's session with ONNX Runtime's graph optimizations on (default: as "
                        "--graph-opt says for both), e.g. to compare with the production path")


__all__ = ["add", "demo_command", "run_command"]
