"""``ep-testbed model run`` / ``ep-testbed model demo``: whole models on an EP against a reference EP.

This module owns their flags and help texts (``add``); what they do lives in ``model_command``.

Exit codes: 0 every output matches the reference EP (and the baseline) and no attributed node
diverges unexplained; 1 an output differs beyond tolerance, a baseline regression, a node
diverges, the EP could not build/run the model, or it crashed or timed out; 2 the model is
refused, or bad usage.
"""

from __future__ import annotations

import argparse

from ep_testbed.graphs import attributed_op_types

from .model_command import DEMO_TIMEOUT, demo_command, run_command
from .options import add_ep_options, add_tolerance_options, seconds, seed


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``model run`` and ``model demo`` under ``subparsers`` (the ``ep-testbed`` parser's)."""
    p = subparsers.add_parser("model", help="whole-model checks: outputs across EPs, per-node attribution, baselines",
                              description="Run whole ONNX models on an execution provider and a reference EP.")
    sub = p.add_subparsers(dest="model_command", required=True)
    run = sub.add_parser(
        "run", help="run one model on --ep and the reference EP",
        description="Run MODEL.onnx on the EP under test and on the reference EP with the same seeded inputs; "
                    "compare output by output; prove where each node ran; attribute divergence to the first "
                    f"{'/'.join(attributed_op_types())} node whose output differs from the DirectML reference.",
        epilog="exit codes: 0 ok, 1 outputs differ / baseline regression / a node diverges / EP failed or crashed, "
               "2 model refused or bad usage")
    run.add_argument("model", help="the .onnx file (external data must sit in its folder)")
    _common(run)
    run.add_argument("--shape", action="append", default=[], metavar="NAME=AxB...",
                     help="a symbolic dimension (batch=2) or an input's whole shape (image=1x3x224x224); repeatable")
    run.add_argument("--inputs", metavar="NPZ", help="inputs by graph input name (default: seeded, range-aware)")
    base = run.add_mutually_exclusive_group()
    base.add_argument("--save-baseline", metavar="DIR", help="store outputs + manifest as a baseline in DIR")
    base.add_argument("--baseline", metavar="DIR", help="compare with the baseline in DIR; exit 1 on a regression")
    run.add_argument("--timeout", type=seconds, metavar="SECONDS",
                     help="kill the child process that runs the model after SECONDS (default: no limit)")
    run.add_argument("--in-process", action="store_true",
                     help="run in this process, not in a child (a crash of the EP then ends ep-testbed too)")
    # set by a parent process whose child crashed on the whole model: judge the nodes alone
    run.add_argument("--ep-crashed", metavar="WHAT", help=argparse.SUPPRESS)
    run.set_defaults(func=run_command)
    demo = sub.add_parser("demo", help="run the bundled demo models end to end",
                          description="Write the bundled models (a detection head and a ResNet-style stem with its "
                                      "pool's indices, seeded weights) and run each like `model run`.")
    _common(demo)
    demo.add_argument("--timeout", type=seconds, default=DEMO_TIMEOUT, metavar="SECONDS",
                      help=f"per-model time limit of its child process (default {DEMO_TIMEOUT:g})")
    demo.add_argument("--in-process", action="store_true", help="run the models in this process (no isolation)")
    demo.set_defaults(func=demo_command)


def _common(p: argparse.ArgumentParser) -> None:
    """The flags ``model run`` and ``model demo`` share (EPs, seed, output folder, session, reading, tolerances)."""
    add_ep_options(p.add_argument)
    p.add_argument("--reference-ep", default="cpu", help="EP whose outputs are the reference (default cpu)")
    p.add_argument("--seed", type=seed, default=0, help="input seed (default 0)")
    p.add_argument("--out", help="output folder (default runs/model-<name>-<ep>-<UTC time>)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what --out (and --save-baseline) already hold (default: refuse, never overwrite "
                        "silently)")
    p.add_argument("--no-cpu-fallback", action="store_true",
                   help="refuse to run when the EP declines a node (default: it runs on CPU and placement says so)")
    p.add_argument("--reading", choices=("spec", "dml-ep"), default="spec",
                   help="how from_onnx reads attributed nodes (default spec; dml-ep: as ORT's DirectML EP builds them)")
    add_tolerance_options(p.add_argument)


__all__ = ["add", "demo_command", "run_command"]
