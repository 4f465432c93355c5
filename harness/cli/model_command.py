"""What ``ep-testbed model run`` and ``ep-testbed model demo`` do: owns reading a model file and
its inputs, running it (``run.run_model``), writing the run folder and printing the summary.

``model run MODEL.onnx --ep X`` loads the model through ``untrusted`` (nothing outside its
folder is read), builds inputs (``inputs``: seeded, or ``--inputs``, or the baseline's), runs
``run.run_model``, writes ``OUT/model_result.json``, ``inputs.npz``, ``outputs.npz``,
``reference_outputs.npz``, ``nodes/*.npz`` (diverging nodes) and ``report.html``
(``reports.model_report``), optionally saves or checks a baseline (``baseline``), and prints a
summary. ``model demo`` writes the bundled models (``graphs.models``) and runs each, in a child
process unless ``--in-process`` (``isolation``).

``model run`` runs in a child process (``isolation``) unless ``--in-process``: a crash of the EP
is reported by ep-testbed, and a second child then judges the attributed nodes alone on the EP.
The same happens in process when the EP cannot build or run the whole model: the run folder and
report say so, compare no output, and hold the nodes judged alone.

Exit codes: 0 no attributed node diverges from the DirectML reference unexplained, the baseline
(if any) matches, and output drift against the reference EP stays within ``--drift-tol``
(``report`` by default: drift is placed and named, never failed); 1 a node diverges, a baseline
regression, drift beyond ``--drift-tol fail`` or a drift budget, the EP could not build/run the
model, or it crashed or timed out; 2 the model is refused (truncated/not ONNX, external data
outside its folder, an op no EP has), a baseline saved on another EP, or bad usage.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...graphs.models import DEMO_SHAPES, write_demo_models
from ...reports.model_report import REPORT_FILE, RESULT_FILE, SAVED_FILES, render_model_report
from ..core import emulation, exit_codes, memory, walltime
from ..core.model_statuses import FAILING_VERDICTS
from ..core.terminal import safe, safe_message
from ..core.tolerances import Tolerances
from ..core.untrusted_files import FileRefused, output_folder, write_arrays, write_output
from ..eps.adapters import ep_flag
from ..eps.providers import EpNotAvailable, EpSpec, SessionSettings
from ..models.baseline import Baseline, BaselineError
from ..models.baseline import save_baseline as write_baseline
from ..models.drift import DriftPolicy, parse_drift_policy
from ..models.inputs import (
    InputsError,
    InputSpec,
    ShapeError,
    check_graph_sizes,
    generate_inputs,
    input_specs,
    load_inputs,
    match_inputs,
    parse_shapes,
    resolve_shapes,
)
from ..models.isolation import (
    OUTCOMES,
    child_argv,
    child_run,
    fault_hook,
    isolated,
)
from ..models.run import ModelRunConfig, SessionFailed, quiet_default_logger, run_model
from ..models.untrusted import LoadedModel, ModelRefused, load_untrusted
from ..run.run_folder import LOCK_FILE, FolderBusy, claim, refuse_overwrite
from .options import OptionError, RunConfig, parse_ep, run_config

#: Seconds a demo model's child process may run (``model demo --timeout``'s default).
DEMO_TIMEOUT = 300.0
#: The closing line's name for each part of ``run_model``'s ``timings``.
TIMING_PARTS = {"ep_run": "on the EP", "reference_run": "on the reference EP", "capture": "probe copies",
                "judge": "judging nodes", "compare": "comparing", "drift": "drift search"}


@dataclass
class _Setup:
    """Everything a model run needs, read and checked before anything runs."""

    settings: RunConfig  # the EP, tolerances, precision model, seed, --out
    reference: EpSpec
    loaded: LoadedModel
    specs: list[InputSpec]
    feeds: dict[str, np.ndarray]
    source: str  # where the inputs come from: "generated", "npz PATH" or "baseline DIR"
    baseline: Baseline | None
    baseline_tolerances: tuple[Tolerances, str] | None
    drift: DriftPolicy


def _error(message: str) -> int:
    """Print a usage-level error (a refused model, bad options) and return exit code 2; control
    characters that came from the model are shown escaped (``terminal.safe_message``)."""
    print(f"ep-testbed model: {safe_message(message)}", file=sys.stderr)
    return exit_codes.USAGE


def run_command(args: argparse.Namespace) -> int:
    """``ep-testbed model run``: in a child process (``--timeout`` limits it; none by default), so
    that a crash of the EP is reported here, or in this process with ``--in-process``; the exit
    code. After a crash, a second child judges the attributed nodes alone on the EP, skipping the
    whole model there (``run.run_model``'s ``ep_failure``), and writes the run folder."""
    if args.in_process:
        failure = {"stage": "crash", "message": args.ep_crashed} if args.ep_crashed else None
        if failure is None:  # the fault hook stands for an EP crashing on the whole model
            fault_hook(args.model)
        return run_model_file(args.model, args, shapes=args.shape, inputs_path=args.inputs,
                              save_baseline=args.save_baseline, baseline_dir=args.baseline, ep_failure=failure)
    label = Path(args.model).name
    out = args.out or _default_out(Path(args.model).stem, args.ep)
    argv = child_argv(args.model, args, shapes=args.shape, inputs_path=args.inputs, save_baseline=args.save_baseline,
                      baseline_dir=args.baseline, out=out)
    env = {**os.environ, **walltime.child_environment()}  # the child's closing line counts from this start
    end = child_run(argv, args.timeout, label, env=env)
    if end.outcome != "crash":
        return end.code
    print(f"ep-testbed model: {label}: judging its attributed nodes alone on {args.ep} in a new process "
          "(the whole model is not run there again)", file=sys.stderr)
    second = child_run(argv + ["--ep-crashed", f"{args.ep} crashed running {label}: {end.detail}"], args.timeout,
                       label, env=env)
    return exit_codes.FAILED if second.code == exit_codes.OK else second.code


def demo_command(args: argparse.Namespace) -> int:
    """``ep-testbed model demo``: write the bundled models and run each like ``model run``; the
    worst exit code of the models."""
    try:  # fail once, here, rather than once per model
        run_config(args)
        parse_ep(args.reference_ep)
    except OptionError as exc:
        return _error(str(exc))
    out = Path(args.out or _default_out("demo", args.ep))
    try:
        refuse_overwrite(out, args.overwrite)
    except FolderBusy as exc:
        return _error(str(exc))
    paths = write_demo_models(out / "models", seed=0, write=write_output)
    walltime.mark("writing the models")
    codes, outcomes = [], []
    for name, path in paths.items():
        shapes = [f"{k}={v}" for k, v in DEMO_SHAPES.get(name, {}).items()]
        if args.in_process:
            fault_hook(str(path))
            sub = argparse.Namespace(**{**vars(args), "out": str(out / name)})
            code = run_model_file(str(path), sub, shapes=shapes)
            outcome = OUTCOMES.get(code, "refused")
        else:
            code, outcome = isolated(child_argv(str(path), args, shapes=shapes, out=str(out / name)),
                                     args.timeout, name)
        codes.append(code)
        outcomes.append(f"{name} {outcome}")
    print(f"demo: {len(paths)} models ({', '.join(outcomes)}); reports under {safe(out)}")
    print(walltime.closing_line(len(paths), "models", last="running them"))
    return max(codes) if codes else exit_codes.OK


def run_model_file(model_path: str, args: argparse.Namespace, *, shapes: Sequence[str] = (),
                   inputs_path: str | None = None, save_baseline: str | None = None,
                   baseline_dir: str | None = None, command: str | None = None,
                   ep_failure: dict[str, str] | None = None) -> int:
    """Everything ``model run`` does for one file; returns the exit code (module docstring).
    ``ep_failure``: the EP crashed on the whole model in an earlier process (``run.run_model``)."""
    try:
        for folder, flag in ((args.out, "--out"), (save_baseline, "--save-baseline")):
            if folder:  # refused before the model runs, not after
                refuse_overwrite(folder, args.overwrite, flag)
        setup = _setup(model_path, args, shapes, inputs_path, baseline_dir)
    except (ModelRefused, ShapeError, InputsError, BaselineError, EpNotAvailable, FolderBusy, FileRefused,
            ValueError, OSError) as exc:
        return _error(str(exc))
    walltime.mark("model and inputs")
    settings = setup.settings
    precision = settings.precision_model
    reference_settings = SessionSettings(graph_opt=True) if getattr(args, "reference_graph_opt", False) else None
    config = ModelRunConfig(ep=settings.ep, reference=setup.reference, tolerances=settings.tolerances,
                            settings=settings.session(), allow_fallback=not args.no_cpu_fallback, reading=args.reading,
                            baseline_tolerances=setup.baseline_tolerances, precision_model=precision, drift=setup.drift,
                            reference_settings=reference_settings)
    quiet_default_logger()
    try:
        result = run_model(setup.loaded, setup.feeds, config, setup.baseline, ep_failure=ep_failure)
    except ModelRefused as exc:
        return _error(str(exc))
    except SessionFailed as exc:  # the reference EP failed: nothing to judge against, so not a judged failure
        if memory.allocation_failed(str(exc)):
            what = f"{setup.loaded.path.name} on the reference EP ({config.reference.provider})"
            print(f"ep-testbed model: {memory.shortage_message(what, None)}", file=sys.stderr)
        else:
            print(f"ep-testbed model: {safe_message(exc)}", file=sys.stderr)
        return exit_codes.USAGE
    _mark_timings(result.get("timings") or {})
    if result.get("ep_failure"):  # the whole message follows in the summary, and in model_result.json
        print(f"ep-testbed model: {safe(result['ep_failure']['message'].splitlines()[0])}", file=sys.stderr)
    out = Path(settings.out or _default_out(setup.loaded.path.stem, ep_flag(settings.ep)))
    result["command"] = command or "ep-testbed " + " ".join(shlex.quote(a) for a in _user_argv(sys.argv[1:]))
    result["precision_model"] = precision
    result["inputs"] = {"source": setup.source, "seed": settings.seed if setup.source == "generated" else None,
                        "specs": [s.to_json() for s in setup.specs],
                        "shapes": {k: list(np.shape(v)) for k, v in setup.feeds.items()}}
    try:
        with claim(out, result["command"]):
            _write_run(out, result, setup, settings.seed, save_baseline)
            report = render_model_report(out)
    except FolderBusy as exc:
        return _error(str(exc))
    except (OSError, FileRefused) as exc:  # a full disk, a read-only folder, a link planted in it
        return _unwritten(out, exc, result)
    print_summary(result, out, report)
    print(walltime.closing_line(None, "model run", last="writing and report"))
    return exit_codes.FAILED if result["verdict"] in FAILING_VERDICTS else exit_codes.OK


def _mark_timings(timings: dict[str, float]) -> None:
    """The parts of ``run_model``'s ``timings`` as parts of the command's wall time, in order,
    each ending where the one before it ended plus its seconds (``TIMING_PARTS`` names them)."""
    wall = walltime.current()
    at = wall.start + wall.elapsed()
    for part, seconds in timings.items():
        at += float(seconds)
        wall.mark(TIMING_PARTS.get(part, part), at=at)


def _setup(model_path: str, args: argparse.Namespace, shapes: Sequence[str], inputs_path: str | None,
           baseline_dir: str | None) -> _Setup:
    """Resolve the EPs and tolerances, load the model and its baseline, and make its inputs
    (the baseline's, ``--inputs``, or seeded). Raises what ``run_model_file`` reports as exit 2."""
    settings = run_config(args)
    reference = parse_ep(args.reference_ep)
    drift = parse_drift_policy(getattr(args, "drift_tol", None) or [], settings.tolerances,
                               getattr(args, "drift_max_elements", None))
    loaded = load_untrusted(model_path)
    specs = input_specs(loaded.model)
    baseline = Baseline.load(baseline_dir, loaded.sha256) if baseline_dir else None
    if baseline is not None:
        baseline.check_ep(settings.ep.provider)
    baseline_tolerances = None
    if baseline is not None and not (args.tol or args.tolerances):
        baseline_tolerances = (baseline.recorded_tolerances(), "baseline manifest")
    if baseline is not None:
        feeds, source = match_inputs(baseline.inputs, specs, f"--baseline {baseline_dir}"), f"baseline {baseline_dir}"
    elif inputs_path:
        feeds, source = load_inputs(inputs_path, specs), f"npz {inputs_path}"
    else:
        resolved = resolve_shapes(specs, parse_shapes(shapes))
        feeds, source = generate_inputs(loaded.model, specs, resolved, settings.seed), "generated"
    check_graph_sizes(loaded.model, {name: tuple(np.shape(value)) for name, value in feeds.items()})
    return _Setup(settings, reference, loaded, specs, feeds, source, baseline, baseline_tolerances, drift)


def _write_run(out: Path, result: dict[str, Any], setup: _Setup, seed: int, save_baseline: str | None) -> None:
    """Write the run folder (inputs, both EPs' outputs, diverging nodes' arrays, the baseline if
    asked, ``model_result.json``); pops ``result["_arrays"]``."""
    arrays = result.pop("_arrays")
    output_folder(out)
    for name, content in (("inputs.npz", setup.feeds), ("outputs.npz", arrays["outputs"]),
                          ("reference_outputs.npz", arrays["reference_outputs"])):
        write_arrays(out / name, content)
    for row in result["attribution"]["nodes"]:
        pair = arrays["nodes"].get(row["node"])
        if pair is not None:
            relative = f"nodes/{row['position']}_{_safe(row['node'])}.npz"
            output_folder(out, "nodes")
            write_arrays(out / relative, pair)
            row["arrays"] = relative
    if save_baseline and result.get("ep_failure"):
        print(f"ep-testbed model: no baseline saved to {safe(save_baseline)}: the EP produced no outputs", file=sys.stderr)
    elif save_baseline:
        recorded_seed = seed if setup.source == "generated" else None
        result["baseline_saved"] = str(write_baseline(save_baseline, result, setup.feeds, arrays["outputs"],
                                                      recorded_seed, setup.source))
    write_output(out / "model_result.json", json.dumps(result, indent=1, default=_json_default, allow_nan=True) + "\n")


#: Every file a model run folder gets, in the order ``_write_run`` and the report write them.
RUN_FOLDER_FILES = (*SAVED_FILES, RESULT_FILE, REPORT_FILE)
#: Files of a folder listed by name in a message, at most.
LISTED = 8


def _unwritten(out: Path, exc: OSError | FileRefused, result: dict[str, Any]) -> int:
    """Exit 2 when the run folder could not be written: one message with why, which of its files
    are kept (each written whole or not at all: ``core.atomic_files``) and which are missing, the
    verdict (and whether a kept file records it), and how to finish (the model is run again: no command rebuilds a
    model run folder from part of it)."""
    problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
    kept = _files_under(out)
    missing = [name for name in RUN_FOLDER_FILES if name not in kept]
    listed = ", ".join(kept[:LISTED]) + (f" and {len(kept) - LISTED} more" if len(kept) > LISTED else "")
    statement = result.get("verdict_statement")
    verdict = f"verdict {safe(result.get('verdict'))}" + (f" ({safe(statement)})" if statement else "")
    recorded = f"its {verdict} is in {RESULT_FILE}" if RESULT_FILE in kept else f"{verdict}, but no file records it"
    print(f"ep-testbed model: writing the run folder {safe(out)} failed{safe(where)}: {safe_message(problem)}; kept "
          f"there: {listed or 'nothing'} (each file whole, none half-written); not written: "
          f"{', '.join(missing) or 'nothing'}. The model was judged: {recorded}."
          f"\nNote: make room (or choose a folder you can write), then run the same command again with "
          f"--out NEW_FOLDER, or --overwrite to reuse {safe(out)}: the model runs again", file=sys.stderr)
    return exit_codes.USAGE


def _files_under(out: Path) -> list[str]:
    """The regular files under ``out`` as paths relative to it, sorted, without the folder's
    lock; [] when it cannot be listed. A model run folder holds a handful (and one per
    diverging node): the walk stops after a few thousand entries."""
    found: list[str] = []
    for root, _dirs, names in os.walk(out):
        found += [os.path.relpath(os.path.join(root, n), out).replace(os.sep, "/") for n in names
                  if n != LOCK_FILE and os.path.isfile(os.path.join(root, n))]
        if len(found) > 4096:
            break
    order = {name: n for n, name in enumerate(RUN_FOLDER_FILES)}
    return sorted(found, key=lambda name: (order.get(name, len(order)), name))


def print_summary(result: dict[str, Any], out: Path, report: Path | None) -> None:
    """A few lines a terminal user reads: outputs, placement counts, attribution (every node with
    its status, and why for each that differs), the verdict and what it rests on. Every name and
    message from the model (node, output and op names, EP messages) is printed ``terminal.safe``:
    one line each, control characters escaped."""
    m = result["model"]
    print(f"{safe(m['name'])}: {m['nodes']} nodes, opset {m['opset']}, on {result['ep']['provider']} vs "
          f"{result['reference_ep']['provider']} ({result['ort_flavour']} {result['ort_version']}), "
          f"{result['duration_s']:.2f} s")
    label = emulation.label(result)
    if label:  # DirectML under Wine: not a hardware result, and another ONNX Runtime ran the EP
        print(f"  device: {safe(label)} (emulated: not a hardware result); ONNX Runtime: "
              f"{safe(emulation.ort_versions(result) or '?')}")
    mode = ((result.get("drift") or {}).get("policy") or {}).get("mode", "fail")
    for o in result["outputs"]:
        word = o["outcome"] if o["outcome"] != "fail" or mode == "fail" else "differs (drift)"
        print(f"  output {safe(o['name'])}: {word} - {safe(o['message'])}")
    counts = ", ".join(f"{safe(op)} " + "/".join(f"{n}x{safe(_short(p))}" for p, n in by.items())
                       for op, by in result["placement"]["by_op"].items())
    failure = result.get("ep_failure")
    if failure:
        print(f"  {safe(result['ep']['provider'])} did not take the whole model ({safe(failure['stage'])}): no output "
              f"compared; each attributed node was judged alone on it\n      {safe_message(failure['message'])}")
    where = "nodes judged alone" if failure else "nodes"
    print(f"  placement ({result['placement']['on_ep']}/{result['placement']['total']} {where} on the EP): {counts}")
    _print_attribution(result["attribution"])
    _print_drift(result.get("drift"))
    b = result.get("baseline")
    if b:
        print(f"  baseline {safe(b['dir'])}: {b['outcome']}"
              + (f" ({', '.join(safe(r) for r in b['regressed'])})" if b["regressed"] else ""))
    if result.get("baseline_saved"):
        print(f"  baseline saved to {safe(result['baseline_saved'])}")
    reasons = result.get("verdict_reasons") or []
    count = f" ({len(reasons)} reason{'s' * (len(reasons) != 1)})" if reasons else ""
    print(f"  verdict: {result['verdict']}{count}: {safe(result.get('verdict_statement') or '')}; results in "
          f"{safe(out)}" + (f", report {safe(report)}" if report else ""))
    for reason in reasons:
        print(f"    - {safe(reason)}")


def _print_attribution(attribution: dict[str, Any]) -> None:
    """The attribution lines of ``print_summary``: the counts, one line per node (plus why, for a
    node that differs), and the first divergent node."""
    rows = attribution["nodes"]
    ops = "/".join(attribution.get("ops") or [])
    if not rows:
        print(f"  attribution: the model has no node of an attributed op type ({ops})")
        return
    counts = attribution.get("counts") or {}
    statuses = ", ".join(f"{n} {s}" for s, n in (counts.get("by_status") or {}).items())
    how = ("alone on the EP, fed the reference EP's inputs" if any(row.get("alone") for row in rows)
           else "on their own EP inputs")
    print(f"  attribution: {counts.get('judged', '?')} of {len(rows)} {ops} nodes judged "
          f"{how} ({statuses})")
    for row in rows:
        where = f"inside the {safe(row['inside'])}" if row.get("inside") else f"on {safe(_short(row['provider']))}"
        print(f"  node {safe(row['node'])} ({safe(row['op_type'])}, {where}): {row['status']} - {safe(row['message'])}")
        if row.get("reason"):
            print(f"      why: {safe(row['reason'])}")
    first = attribution["first_divergent"]
    if first:
        print(f"  first divergent node: {safe(first['node'])} ({safe(first['op_type'])}) - "
              f"{safe((first.get('unexplained') or {}).get('message') or first['message'])}")
    elif any(row["status"] == "not-attributed" for row in rows) or counts.get("not_judged"):
        print("  first divergent node: none among the nodes judged (the lines above say which were not)")
    else:
        print("  first divergent node: none (every attributed node agrees with the DirectML reference"
              + (", some where a flag explains or predicts a difference)" if counts.get("judged", 0) > sum(
                  (counts.get("by_status") or {}).get(s, 0) for s in ("match", "tie-only")) else ")"))


def _print_drift(drift: dict[str, Any] | None) -> None:
    """The drift lines of ``print_summary``: where output drift starts (node, op type, whether it
    is an operator under test, its statistics), how the search ran, what the outputs became."""
    if not drift or not drift.get("outputs_differ"):
        return
    search = drift.get("search") or {}
    first = search.get("first")
    print(f"  drift: {safe(drift.get('statement') or '')}")
    if first:
        test = (f"an operator under test, judged {first.get('attribution_status')} on its own EP inputs"
                if first.get("under_test") else "not an operator under test")
        print(f"      node {first['position']} in topological order, {safe(first['op_type'])}: {test}")
        for name, stats in (first.get("error_stats") or {}).items():
            print(f"      {safe(name)}: {_stats_text(stats)}")
    if search:
        print(f"      search: {search['strategy']}, {search['runs']} run(s) per EP, {search['compared_nodes']} of "
              f"{search['candidate_nodes']} nodes compared, {search['seconds']:.2f} s (budget "
              f"{search['budget_elements']} elements, estimated {search['estimated_elements']})")
    elif drift.get("error"):
        print(f"      {safe_message(drift['error'])}")
    for name, stats in (drift.get("downstream") or {}).items():
        if stats.get("outside") or stats.get("differing"):
            print(f"      downstream, output {safe(name)}: {_stats_text(stats)}")
    if drift.get("note"):
        print(f"      note: {drift['note']}")


def _stats_text(stats: dict[str, Any]) -> str:
    """``"72/196608 outside tolerance, |a-e| max 3e-05 p99 1e-05, ulp max 40"`` (an error_stats entry)."""
    if "differing" in stats:
        return f"{stats['differing']}/{stats['elements']} indices differ"
    text = f"{stats.get('outside', 0)}/{stats.get('elements', 0)} outside tolerance"
    if stats.get("abs"):
        text += f", |a-e| max {stats['abs']['max']:.3g} p99 {stats['abs']['p99']:.3g}"
    if stats.get("ulp"):
        text += f", ulp max {stats['ulp']['max']:.0f}"
    return text


def _user_argv(argv: list[str]) -> list[str]:
    """``argv`` without what a parent process adds for its child (``--ep-crashed TEXT``)."""
    if "--ep-crashed" in argv:
        i = argv.index("--ep-crashed")
        return argv[:i] + argv[i + 2:]
    return argv


def _safe(name: str) -> str:
    """A node name usable in a file name (at most 80 characters)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "node"


def _short(provider: str) -> str:
    """``CPUExecutionProvider`` -> ``CPU``."""
    return provider.removesuffix("ExecutionProvider")


def _default_out(name: str, ep: str) -> str:
    """``runs/model-<name>-<ep>-<UTC time>``."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return str(Path("runs") / f"model-{name}-{ep}-{stamp}")


def _json_default(value: Any) -> Any:
    """JSON for NumPy scalars and arrays in a result; anything else as its string."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


__all__ = ["DEMO_TIMEOUT", "demo_command", "print_summary", "run_command", "run_model_file"]
