"""``ep-testbed model run`` and ``ep-testbed model demo``: whole-model regression checks.

``model run MODEL.onnx --ep X`` loads the model through ``harness.untrusted`` (nothing outside
its folder is read), builds inputs (``harness.model_inputs``: seeded, or ``--inputs``, or the
baseline's), runs ``harness.model_run.run_model``, writes ``OUT/model_result.json``,
``inputs.npz``, ``outputs.npz``, ``reference_outputs.npz`` and ``report.html``
(``reports.model_report``), optionally saves or checks a baseline (``harness.baseline``), and
prints a summary. ``model demo`` writes the bundled models (``graphs.models``) and runs each.

Isolation: ``model demo`` runs each model in a child process (``model run`` with the same
options) with a time limit, so an EP that crashes or hangs on one model costs that model only,
and every model already finished keeps its folder. ``model run --timeout S`` does the same for
one model. Test hook (fault injection), read only from the environment, like the harness
worker's: ``EP_TESTBED_MODEL_FAULT="abort=<glob>;hang=<glob>"`` makes ``model run`` abort or
hang right before running a model whose file name matches ``<glob>``.

Exit codes: 0 every output matches the reference EP (and the baseline); 1 an output differs
beyond tolerance, a baseline regression, the EP could not build/run the model, or it crashed or
timed out; 2 the model is refused (truncated/not ONNX, external data outside its folder, an op
no EP has), or bad usage.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .options import add_ep_options, add_tolerance_options

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
FAULT_ENV = "EP_TESTBED_MODEL_FAULT"
DEMO_TIMEOUT = 300.0


def add_model(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("model", help="whole-model checks: outputs across EPs, per-node attribution, baselines",
                              description="Run whole ONNX models on an execution provider and a reference EP.")
    sub = p.add_subparsers(dest="model_command", required=True)
    run = sub.add_parser(
        "run", help="run one model on --ep and the reference EP",
        description="Run MODEL.onnx on the EP under test and on the reference EP with the same seeded inputs; "
                    "compare output by output; prove where each node ran; attribute divergence to the first "
                    "RoiAlign/MaxRoiPool/MaxPool node whose output differs from the DirectML reference.",
        epilog="exit codes: 0 ok, 1 outputs differ / baseline regression / EP failed, 2 model refused or bad usage")
    run.add_argument("model", help="the .onnx file (external data must sit in its folder)")
    _common(run)
    run.add_argument("--shape", action="append", default=[], metavar="NAME=AxB...",
                     help="a symbolic dimension (batch=2) or an input's whole shape (image=1x3x224x224); repeatable")
    run.add_argument("--inputs", metavar="NPZ", help="inputs by graph input name (default: seeded, range-aware)")
    base = run.add_mutually_exclusive_group()
    base.add_argument("--save-baseline", metavar="DIR", help="store outputs + manifest as a baseline in DIR")
    base.add_argument("--baseline", metavar="DIR", help="compare with the baseline in DIR; exit 1 on a regression")
    run.add_argument("--timeout", type=float, metavar="SECONDS",
                     help="run in a child process killed after SECONDS (default: in this process, no limit)")
    run.set_defaults(func=run_command)
    demo = sub.add_parser("demo", help="run the bundled demo models end to end",
                          description="Write the bundled models (a detection head with RoiAlign and a ResNet-style "
                                      "stem with MaxPool + Indices, seeded weights) and run each like `model run`.")
    _common(demo)
    demo.add_argument("--timeout", type=float, default=DEMO_TIMEOUT, metavar="SECONDS",
                      help=f"per-model time limit of its child process (default {DEMO_TIMEOUT:g})")
    demo.add_argument("--in-process", action="store_true", help="run the models in this process (no isolation)")
    demo.set_defaults(func=demo_command)


def _common(p: argparse.ArgumentParser) -> None:
    add_ep_options(p.add_argument)
    p.add_argument("--reference-ep", default="cpu", help="EP whose outputs are the reference (default cpu)")
    p.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    p.add_argument("--out", help="output folder (default runs/model-<name>-<ep>-<UTC time>)")
    p.add_argument("--no-cpu-fallback", action="store_true",
                   help="refuse to run when the EP declines a node (default: it runs on CPU and placement says so)")
    p.add_argument("--reading", choices=("spec", "dml-ep"), default="spec",
                   help="how from_onnx reads attributed nodes (default spec; dml-ep: as ORT's DirectML EP builds them)")
    add_tolerance_options(p.add_argument)


def _error(message: str) -> int:
    print(f"ep-testbed model: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_command(args: argparse.Namespace) -> int:
    if args.timeout:
        return run_isolated(child_argv(args.model, args, shapes=args.shape, inputs_path=args.inputs,
                                       save_baseline=args.save_baseline, baseline_dir=args.baseline),
                            args.timeout, Path(args.model).name)
    _fault_hook(args.model)
    return run_model_file(args.model, args, shapes=args.shape, inputs_path=args.inputs,
                          save_baseline=args.save_baseline, baseline_dir=args.baseline)


def child_argv(model: str, args: argparse.Namespace, *, shapes: Sequence[str] = (), inputs_path: str | None = None,
               save_baseline: str | None = None, baseline_dir: str | None = None,
               out: str | None = None) -> list[str]:
    """The ``ep-testbed model run`` command line that repeats ``args`` for ``model`` in a child."""
    argv = ["model", "run", model, "--ep", args.ep, "--reference-ep", args.reference_ep, "--seed", str(args.seed),
            "--reading", args.reading]
    for item in args.ep_option:
        argv += ["--ep-option", item]
    for item in shapes:
        argv += ["--shape", item]
    for item in args.tol:
        argv += ["--tol", item]
    for flag, value in (("--out", out or args.out), ("--inputs", inputs_path), ("--save-baseline", save_baseline),
                        ("--baseline", baseline_dir), ("--tolerances", args.tolerances)):
        if value:
            argv += [flag, str(value)]
    argv += [flag for flag, on in (("--graph-opt", args.graph_opt), ("--no-cpu-fallback", args.no_cpu_fallback)) if on]
    return argv


def run_isolated(argv: list[str], timeout: float, label: str) -> int:
    """Run ``ep-testbed <argv>`` in a child process; relay its output; a crash or timeout is exit 1."""
    return _isolated(argv, timeout, label)[0]


def _isolated(argv: list[str], timeout: float, label: str) -> tuple[int, str]:
    """``(exit code, outcome)``: outcome is pass, fail, refused, crash or timeout."""
    from .pool import describe_exit

    command = [sys.executable, "-m", "ep_testbed.harness.cli", *argv]
    try:
        child = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _relay(exc.stdout, exc.stderr)
        print(f"ep-testbed model: {label}: timeout - no result after {timeout:g} s; the child process was killed",
              file=sys.stderr)
        return EXIT_FAIL, "timeout"
    _relay(child.stdout, child.stderr)
    if child.returncode in (EXIT_OK, EXIT_FAIL, EXIT_USAGE):
        return child.returncode, {EXIT_OK: "pass", EXIT_FAIL: "fail", EXIT_USAGE: "refused"}[child.returncode]
    tail = (child.stderr or "").strip()[-2000:]
    print(f"ep-testbed model: {label}: crash - the process running it {describe_exit(child.returncode)}"
          + (f"; it printed: {tail}" if tail else ""), file=sys.stderr)
    return EXIT_FAIL, "crash"


def _relay(out: str | bytes | None, err: str | bytes | None) -> None:
    for text, stream in ((out, sys.stdout), (err, sys.stderr)):
        if text:
            stream.write(text if isinstance(text, str) else text.decode("utf-8", "replace"))
            stream.flush()


def _fault_hook(model: str) -> None:
    """Fault injection for the isolation tests (module docstring); does nothing unless the variable is set."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    name = Path(model).name
    for item in spec.split(";"):
        action, _, pattern = item.partition("=")
        if pattern and fnmatch.fnmatch(name, pattern):
            if action == "abort":
                os.abort()
            if action == "hang":
                while True:
                    time.sleep(60)


def demo_command(args: argparse.Namespace) -> int:
    from ep_testbed.graphs.models import DEMO_SHAPES, write_demo_models

    from .providers import EpNotAvailable, parse_provider_options, resolve_ep

    try:  # fail once, here, rather than once per model
        resolve_ep(args.ep, parse_provider_options(args.ep_option))
        resolve_ep(args.reference_ep)
    except (EpNotAvailable, ValueError) as exc:
        return _error(str(exc))
    out = Path(args.out or _default_out("demo", args.ep))
    started = time.perf_counter()
    paths = write_demo_models(out / "models", seed=0)
    codes, outcomes = [], []
    for name, path in paths.items():
        shapes = [f"{k}={v}" for k, v in DEMO_SHAPES.get(name, {}).items()]
        if args.in_process:
            _fault_hook(str(path))
            sub = argparse.Namespace(**{**vars(args), "out": str(out / name)})
            code = run_model_file(str(path), sub, shapes=shapes)
            outcome = {EXIT_OK: "pass", EXIT_FAIL: "fail"}.get(code, "refused")
        else:
            code, outcome = _isolated(child_argv(str(path), args, shapes=shapes, out=str(out / name)),
                                      args.timeout, name)
        codes.append(code)
        outcomes.append(f"{name} {outcome}")
    print(f"demo: {len(paths)} models ({', '.join(outcomes)}) in {time.perf_counter() - started:.2f} s; "
          f"reports under {out}")
    return max(codes) if codes else EXIT_OK


def run_model_file(model_path: str, args: argparse.Namespace, *, shapes: Sequence[str] = (),
                   inputs_path: str | None = None, save_baseline: str | None = None,
                   baseline_dir: str | None = None, command: str | None = None) -> int:
    """Everything ``model run`` does for one file; returns the exit code (module docstring)."""
    from .baseline import Baseline, BaselineError, save_baseline as write_baseline
    from .model_inputs import InputsError, ShapeError, generate_inputs, input_specs, load_inputs, parse_shapes, \
        resolve_shapes
    from .model_run import ModelRunConfig, SessionFailed, run_model
    from .providers import EpNotAvailable, SessionSettings, parse_provider_options, resolve_ep
    from .tolerances import load_tolerances
    from .untrusted import ModelRefused, load_untrusted

    try:
        ep = resolve_ep(args.ep, parse_provider_options(args.ep_option))
        reference = resolve_ep(args.reference_ep)
        tolerances = load_tolerances(args.tolerances, args.tol)
        loaded = load_untrusted(model_path)
        specs = input_specs(loaded.model)
        baseline = Baseline.load(baseline_dir, loaded.sha256) if baseline_dir else None
        baseline_tolerances = None
        if baseline is not None and not (args.tol or args.tolerances):
            baseline_tolerances = (baseline.recorded_tolerances(), "baseline manifest")
        if baseline is not None:
            feeds, source = load_inputs(Path(baseline_dir) / "inputs.npz", specs), f"baseline {baseline_dir}"
        elif inputs_path:
            feeds, source = load_inputs(inputs_path, specs), f"npz {inputs_path}"
        else:
            resolved = resolve_shapes(specs, parse_shapes(shapes))
            feeds, source = generate_inputs(loaded.model, specs, resolved, args.seed), "generated"
    except (ModelRefused, ShapeError, InputsError, BaselineError, EpNotAvailable, ValueError, OSError) as exc:
        return _error(str(exc))

    config = ModelRunConfig(ep=ep, reference=reference, tolerances=tolerances,
                            settings=SessionSettings(graph_opt=args.graph_opt),
                            allow_fallback=not args.no_cpu_fallback, reading=args.reading,
                            baseline_tolerances=baseline_tolerances)
    try:
        result = run_model(loaded, feeds, config, baseline)
    except ModelRefused as exc:
        return _error(str(exc))
    except SessionFailed as exc:
        print(f"ep-testbed model: {exc}", file=sys.stderr)
        return EXIT_FAIL

    arrays = result.pop("_arrays")
    out = Path(args.out or _default_out(loaded.path.stem, ep.alias))
    out.mkdir(parents=True, exist_ok=True)
    result["command"] = command or "ep-testbed " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    result["inputs"] = {"source": source, "seed": args.seed if source == "generated" else None,
                        "specs": [s.to_json() for s in specs],
                        "shapes": {k: list(np.shape(v)) for k, v in feeds.items()}}
    np.savez(out / "inputs.npz", **feeds)
    np.savez(out / "outputs.npz", **arrays["outputs"])
    np.savez(out / "reference_outputs.npz", **arrays["reference_outputs"])
    for row in result["attribution"]["nodes"]:
        pair = arrays["nodes"].get(row["node"])
        if pair is not None:
            (out / "nodes").mkdir(exist_ok=True)
            relative = f"nodes/{row['position']}_{_safe(row['node'])}.npz"
            np.savez(out / relative, **pair)
            row["arrays"] = relative
    if save_baseline:
        seed = args.seed if source == "generated" else None
        result["baseline_saved"] = str(write_baseline(save_baseline, result, feeds, arrays["outputs"], seed, source))
    (out / "model_result.json").write_text(json.dumps(result, indent=1, default=_json_default, allow_nan=True) + "\n",
                                           encoding="utf-8")
    try:
        from ep_testbed.reports.model_report import render_model_report

        report = render_model_report(out)
    except ImportError:  # pragma: no cover - reports not installed
        report = None
    print_summary(result, out, report)
    return EXIT_OK if result["verdict"] == "pass" else EXIT_FAIL


def print_summary(result: dict[str, Any], out: Path, report: Path | None) -> None:
    """A few lines a terminal user reads: outputs, placement counts, attribution, verdict."""
    m = result["model"]
    print(f"{m['name']}: {m['nodes']} nodes, opset {m['opset']}, on {result['ep']['provider']} vs "
          f"{result['reference_ep']['provider']} ({result['ort_flavour']} {result['ort_version']}), "
          f"{result['duration_s']:.2f} s")
    for o in result["outputs"]:
        print(f"  output {o['name']}: {o['outcome']} - {o['message']}")
    counts = ", ".join(f"{op} " + "/".join(f"{n}x{_short(p)}" for p, n in by.items())
                       for op, by in result["placement"]["by_op"].items())
    print(f"  placement ({result['placement']['on_ep']}/{result['placement']['total']} nodes on the EP): {counts}")
    for row in result["attribution"]["nodes"]:
        print(f"  node {row['node']} ({row['op_type']}, on {_short(row['provider'])}): {row['status']} - "
              f"{row['message']}")
    first = result["attribution"]["first_divergent"]
    if first:
        print(f"  first divergent node: {first['node']} ({first['op_type']}) - {first['message']}")
    elif result["attribution"]["nodes"]:
        print("  first divergent node: none (every attributed node matches the DirectML reference)")
    b = result.get("baseline")
    if b:
        print(f"  baseline {b['dir']}: {b['outcome']}" + (f" ({', '.join(b['regressed'])})" if b["regressed"] else ""))
    if result.get("baseline_saved"):
        print(f"  baseline saved to {result['baseline_saved']}")
    print(f"  verdict: {result['verdict']}; results in {out}" + (f", report {report}" if report else ""))


def _safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "node"


def _short(provider: str) -> str:
    return provider.removesuffix("ExecutionProvider")


def _default_out(name: str, ep: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return str(Path("runs") / f"model-{name}-{ep}-{stamp}")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
