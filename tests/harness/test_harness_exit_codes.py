"""One meaning per exit code (``harness/core/exit_codes.py``), across every command.

Each command is driven into each class it can reach: 0 nothing wrong, 1 a judged failure or
regression, 2 bad input or usage or artifacts that cannot be finished, 4 nothing selected, 70 an
internal error, 130 / 143 interrupted. Internal errors and interrupts are injected in this process
by making a function the handler calls raise (the one top-level guard in ``cli.main`` must turn
them into one line, never a traceback, never 0 or 1); a full disk is an ``OSError(ENOSPC)``
injected in the one writer every artifact goes through (``core.atomic_files.AtomicFile``).
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import run_watch

from ep_testbed.harness.cli import SUBCOMMANDS, main
from ep_testbed.harness.core import atomic_files, exit_codes
from ep_testbed.harness.core.exit_codes import FAILED, INTERNAL, INTERRUPTED, NO_CASES, OK, TERMINATED, USAGE

ROOT = Path(__file__).resolve().parents[2]
KNOWN = "roi_pooling/edge-float32-bins"  # a CPU divergence listed in harness/expectations/cpu.json


def ep_testbed(capsys, *argv: str) -> tuple[int, str, str]:
    """``ep-testbed <argv>`` in this process: (exit code, stdout, stderr); argparse's exits too."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A passing run, a failing run and a gen folder on the CPU EP, made once for the module."""
    base = tmp_path_factory.mktemp("runs")
    good, bad, gen = base / "good", base / "bad", base / "gen"
    assert main(["run", "--ep", "cpu", "--ops", "roi_pooling", "-k", "grid-fp32", "--jobs", "1", "--out",
                 str(good)]) == OK
    assert main(["run", "--ep", "cpu", "--ops", "roi_pooling", "-k", KNOWN, "--no-expectations",
                 "--strict-tolerance", "--jobs", "1", "--out", str(bad)]) == FAILED
    assert main(["gen", "--op", "roi_pooling", "--out", str(gen)]) == OK
    desc = sorted(gen.glob("*/desc.json"))[0]
    return {"good": good, "bad": bad, "gen": gen, "desc": desc, "base": base}


def test_the_codes_are_one_list_and_the_readme_tables_it():
    assert len(set(exit_codes.MEANINGS)) == len(exit_codes.MEANINGS) == 7
    assert exit_codes.INTERNAL not in (OK, FAILED, USAGE, NO_CASES) and exit_codes.INTERNAL < 126
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("### Exit codes"):]
    for code in exit_codes.MEANINGS:
        assert re.search(rf"^\| {code}\b|^\| \d+ / {code}\b", table, re.M), code


def test_no_bare_integer_exit_code_is_left_in_the_cli():
    """No ``return N`` of a literal integer anywhere in the CLI (a handler's ``return A if .. else B``
    included), and no ``sys.exit(N)``: each is a name of ``core.exit_codes`` (the one list)."""
    bare = []
    for path in sorted((ROOT / "harness" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) \
                    and type(node.value.value) is int:
                bare.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_command"):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Return) and isinstance(inner.value, ast.IfExp) and any(
                            isinstance(b, ast.Constant) for b in (inner.value.body, inner.value.orelse)):
                        bare.append(f"{path.name}:{inner.lineno}")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "exit" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                bare.append(f"{path.name}:{node.lineno}")
    assert bare == []


# --- 0, 1, 2, 4 of every command ---------------------------------------------------------------

def test_run_exit_codes(runs, capsys, tmp_path):
    assert ep_testbed(capsys, "run", "--ep", "cpu", "--ops", "roi_pooling", "-k", "no-such-case", "--out",
                      str(tmp_path / "n"))[0] == NO_CASES
    code, _, err = ep_testbed(capsys, "run", "--ep", "cpu", "--tol", "fp32:atol=1,atol=2", "--out", str(tmp_path / "u"))
    assert code == USAGE and "atol is given twice" in err and not (tmp_path / "u").exists()
    code, _, err = ep_testbed(capsys, "run", "--ep", "cpu", "--out", str(runs["good"]))  # holds results
    assert code == USAGE and "--resume" in err


def test_diff_exit_codes(runs, capsys, tmp_path):
    assert ep_testbed(capsys, "diff", str(runs["good"]), str(runs["good"]), "--out", str(tmp_path / "d0"))[0] == OK
    assert ep_testbed(capsys, "diff", str(runs["good"]), str(runs["bad"]), "--out", str(tmp_path / "d1"))[0] == FAILED
    assert ep_testbed(capsys, "diff", str(runs["good"]), str(tmp_path / "none"), "--out",
                      str(tmp_path / "d2"))[0] == USAGE


def test_merge_exit_codes(runs, capsys, tmp_path):
    assert ep_testbed(capsys, "merge", str(runs["good"]), "--out", str(tmp_path / "m0"))[0] == OK
    assert ep_testbed(capsys, "merge", str(runs["bad"]), "--out", str(tmp_path / "m1"))[0] == FAILED
    code, _, err = ep_testbed(capsys, "merge", str(runs["good"]), str(runs["good"]), "--out", str(tmp_path / "m2"))
    assert code == USAGE, err


@pytest.mark.slow
def test_fuzz_and_model_run_reach_0_and_1(capsys, tmp_path, monkeypatch):
    """A replayed fuzz case that passes / that a planted wrong element fails (the workers' fault
    hook); a demo model whose operators pass / whose EP crashes the process running it."""
    from ep_testbed.graphs.models import write_demo_models
    from ep_testbed.harness.models.isolation import FAULT_ENV as MODEL_FAULT_ENV
    from ep_testbed.harness.run.worker import FAULT_ENV

    replay = ["fuzz", "--ep", "cpu", "--replay", "max_pooling2/fuzz-s0-b0-000", "--shrink", "none", "--jobs", "1"]
    assert ep_testbed(capsys, *replay, "--out", str(tmp_path / "f0"))[0] == OK
    monkeypatch.setenv(FAULT_ENV, "perturb=*")
    assert ep_testbed(capsys, *replay, "--out", str(tmp_path / "f1"))[0] == FAILED
    monkeypatch.delenv(FAULT_ENV)
    model = write_demo_models(tmp_path / "models")["resnet_stem"]
    assert ep_testbed(capsys, "model", "run", str(model), "--ep", "cpu", "--in-process", "--out",
                      str(tmp_path / "m0"))[0] == OK
    monkeypatch.setenv(MODEL_FAULT_ENV, "abort=resnet_stem*")
    code, _, err = ep_testbed(capsys, "model", "run", str(model), "--ep", "cpu", "--out", str(tmp_path / "m1"))
    assert code == FAILED and "crash" in err


@pytest.mark.parametrize("argv, code", [
    (["report", "{good}"], OK), (["report", "{missing}"], USAGE),
    (["ci-summary", "{bad}"], OK), (["ci-summary", "{missing}"], USAGE),
    (["findings", "{bad}", "--out", "{tmp}/f"], OK), (["findings", "{missing}"], USAGE),
    (["map", "{desc}"], OK), (["map", "{gen}/cases.json"], USAGE),
    (["reference", "--desc", "{desc}", "--out", "{tmp}/y.npz"], OK), (["reference", "--desc", "{missing}"], USAGE),
    (["gen", "--op", "roi_pooling", "--out", "{gen}"], USAGE),  # holds files, no --overwrite
    (["doctor", "--ep", "cpu"], OK), (["doctor", "--ep", "cpu", "--ep-option", "device_id=-1"], USAGE),
    (["devices", "--ep", "cpu"], OK), (["devices", "--ep", "cpu", "--ep-device", "vendor_id=0x9999"], USAGE),
    (["model", "run", "{missing}.onnx", "--ep", "cpu", "--in-process"], USAGE),
    (["fuzz", "--ep", "cpu", "--replay", "not-a-fuzz-id", "--out", "{tmp}/f"], USAGE),
])
def test_each_command_reaches_its_documented_codes(runs, capsys, tmp_path, argv, code):
    names = {**{k: str(v) for k, v in runs.items()}, "missing": str(tmp_path / "missing"), "tmp": str(tmp_path)}
    got, out, err = ep_testbed(capsys, *[a.format(**names) for a in argv])
    assert got == code, out + err
    assert "Traceback" not in err


# --- internal errors and interrupts, injected ----------------------------------------------------

#: For each command, a function its handler calls (module attribute) and the argv that reaches it.
INJECT = {
    "run": ("ep_testbed.harness.cli.run._selected_cases", ["run", "--ep", "cpu", "--out", "{tmp}/r"]),
    "fuzz": ("ep_testbed.harness.cli.fuzz._fuzz", ["fuzz", "--ep", "cpu", "--budget", "1", "--out", "{tmp}/f"]),
    "merge": ("ep_testbed.harness.cli.merge.merge_runs", ["merge", "{good}", "--out", "{tmp}/m"]),
    "report": ("ep_testbed.harness.cli.report.render_junit", ["report", "{good}"]),
    "ci-summary": ("ep_testbed.harness.cli.ci_summary.job_summary", ["ci-summary", "{good}"]),
    "findings": ("ep_testbed.harness.cli.findings.write_findings", ["findings", "{bad}", "--out", "{tmp}/f"]),
    "diff": ("ep_testbed.harness.cli.diff.diff_runs", ["diff", "{good}", "{good}", "--out", "{tmp}/d"]),
    "map": ("ep_testbed.harness.cli.map.to_onnx", ["map", "{desc}"]),
    "gen": ("ep_testbed.harness.cli.gen.write_cases", ["gen", "--op", "roi_pooling", "--out", "{tmp}/g"]),
    "reference": ("ep_testbed.harness.cli.reference.execute", ["reference", "--desc", "{desc}"]),
    "doctor": ("ep_testbed.harness.cli.doctor.check", ["doctor", "--ep", "cpu"]),
    "devices": ("ep_testbed.harness.cli.devices._live", ["devices", "--ep", "cpu"]),
    "model run": ("ep_testbed.harness.cli.model_command.run_model_file",
                  ["model", "run", "{desc}", "--ep", "cpu", "--in-process"]),
    "model demo": ("ep_testbed.harness.cli.model_command.write_demo_models",
                   ["model", "demo", "--ep", "cpu", "--in-process", "--out", "{tmp}/demo"]),
}


def test_every_subcommand_has_an_injection():
    commands = {m.__name__.rsplit(".", 1)[-1].replace("_", "-") for m in SUBCOMMANDS}
    covered = {name.split()[0] for name in INJECT}
    assert commands <= covered, commands - covered


def _raiser(exc: BaseException):
    def raise_it(*args, **kwargs):
        raise exc
    return raise_it


@pytest.mark.parametrize("command", sorted(INJECT))
@pytest.mark.parametrize("exc, code, says", [
    (RuntimeError("planted bug"), INTERNAL, "internal error: RuntimeError: planted bug"),
    (KeyboardInterrupt(), INTERRUPTED, "interrupted by Ctrl-C"),
    (exit_codes.Terminated(), TERMINATED, "interrupted by SIGTERM"),
], ids=["internal", "sigint", "sigterm"])
def test_an_unexpected_error_or_interrupt_is_one_line_and_its_own_code(runs, capsys, tmp_path, monkeypatch,
                                                                        command, exc, code, says):
    target, argv = INJECT[command]
    monkeypatch.setattr(target, _raiser(exc))
    names = {**{k: str(v) for k, v in runs.items()}, "tmp": str(tmp_path)}
    got, _, err = ep_testbed(capsys, *[a.format(**names) for a in argv])
    assert got == code, err
    assert says in err and "Traceback" not in err and "KeyboardInterrupt" not in err
    assert len(err.strip().splitlines()) == 1, err
    if code == INTERNAL:
        assert "report it" in err and exit_codes.DEBUG_ENV in err


def test_the_traceback_of_an_internal_error_is_there_when_asked_for(runs, capsys, monkeypatch):
    monkeypatch.setattr("ep_testbed.harness.cli.map.to_onnx", _raiser(ZeroDivisionError("planted")))
    monkeypatch.setenv(exit_codes.DEBUG_ENV, "1")
    code, _, err = ep_testbed(capsys, "map", str(runs["desc"]))
    assert code == INTERNAL and "Traceback" in err and "ZeroDivisionError: planted" in err


# --- artifacts that cannot be written: exit 2, nothing half-written ------------------------------

def _no_space(monkeypatch):
    """Every whole-file write (report, JUnit, summary, diff, case files of this process) fails as
    on a full disk, part-way: the first bytes go in, then ENOSPC."""
    def write(self, data):
        self._file.write(data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(atomic_files.AtomicFile, "write", write)


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob(f"{atomic_files.TEMP_PREFIX}*")]


def test_a_run_whose_report_cannot_be_written_exits_2_keeping_its_results(capsys, tmp_path, monkeypatch):
    _no_space(monkeypatch)
    out = tmp_path / "r"
    code, _, err = ep_testbed(capsys, "run", "--ep", "cpu", "--ops", "roi_pooling", "-k", "grid-fp32", "--jobs", "1",
                              "--out", str(out))
    assert code == USAGE, err
    assert "No space left on device" in err and "results.jsonl is kept" in err and f"ep-testbed report {out}" in err
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert lines[0]["type"] == "run" and lines[-1]["type"] == "end"  # every result kept
    assert not any((out / name).exists() for name in ("report.html", "junit.xml", "summary.json"))
    assert _leftovers(out) == []
    monkeypatch.undo()
    assert ep_testbed(capsys, "report", str(out))[0] == OK  # the printed way to finish works
    assert (out / "report.html").exists()


def test_report_diff_and_merge_on_a_full_disk_exit_2_and_leave_no_torn_file(runs, capsys, tmp_path, monkeypatch):
    before = (runs["good"] / "report.html").read_bytes()
    _no_space(monkeypatch)
    code, _, err = ep_testbed(capsys, "report", str(runs["good"]))
    assert code == USAGE and "no report file is left half-written" in err
    assert (runs["good"] / "report.html").read_bytes() == before and _leftovers(runs["good"]) == []
    code, _, err = ep_testbed(capsys, "diff", str(runs["good"]), str(runs["good"]), "--out", str(tmp_path / "d"))
    assert code == USAGE and "No space left" in err
    assert not (tmp_path / "d" / "diff.html").exists() and _leftovers(tmp_path) == []
    code, _, err = ep_testbed(capsys, "merge", str(runs["bad"]), "--out", str(tmp_path / "m"))
    assert code == USAGE and "no results.jsonl was left half-written" in err
    assert not (tmp_path / "m" / "results.jsonl").exists() and _leftovers(tmp_path) == []


def test_an_atomic_file_replaces_a_planted_link_and_never_writes_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (tmp_path / "run").mkdir()
    link = tmp_path / "run" / "report.html"
    link.symlink_to(outside)
    atomic_files.write_atomic(link, "new")
    assert outside.read_text() == "secret" and not link.is_symlink() and link.read_text() == "new"


# --- smaller ones ----------------------------------------------------------------------------------

def test_report_renders_an_id_holding_a_lone_surrogate_escaped(runs, capsys, tmp_path):
    """Valid JSON (``"\\ud800"``) that UTF-8 cannot hold: written as its escape, not a UnicodeEncodeError."""
    run = tmp_path / "run"
    run.mkdir()
    lines = (runs["good"] / "results.jsonl").read_text().splitlines()
    case = json.loads(lines[1])
    lines[1] = json.dumps({**case, "id": case["id"] + "\ud800"})
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = ep_testbed(capsys, "report", str(run))
    assert code == OK, err
    assert case["id"] + "\\ud800" in (run / "report.html").read_text(encoding="utf-8")
    assert json.loads((run / "summary.json").read_text())["total"] == len(lines) - 2


@pytest.mark.parametrize("value", ["-1", "x", "1.5", "99999999999"])
def test_a_device_index_that_names_no_device_is_refused_before_anything_runs(capsys, tmp_path, value):
    code, _, err = ep_testbed(capsys, "run", "--ep", "cpu", "--ep-option", f"device_id={value}", "--out",
                              str(tmp_path / "r"))
    assert code == USAGE and "takes a device index, a whole number from 0" in err
    assert not (tmp_path / "r").exists()


# --- a real signal while the catalog is being built ----------------------------------------------

#: ``ep-testbed run`` in a fresh interpreter (signals reach the main thread only) whose catalog
#: build announces itself in a file and then takes its time, so the test signals it exactly there.
SLOW_CATALOG = """
import pathlib, sys, time
import ep_testbed.graphs.catalog as catalog
def slow_catalog(*args, **kwargs):
    pathlib.Path(sys.argv[1]).write_text("building")
    time.sleep(600)
catalog.build_catalog = slow_catalog
from ep_testbed.harness.cli import main
sys.exit(main(["run", "--ep", "cpu", "--out", sys.argv[2]]))
"""


@pytest.mark.slow
@pytest.mark.skipif(os.name == "nt", reason="POSIX signals: os.kill is not Ctrl-C on Windows")
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, INTERRUPTED), (signal.SIGTERM, TERMINATED)],
                         ids=["sigint", "sigterm"])
def test_a_signal_while_the_catalog_is_built_is_one_line_and_its_code(tmp_path, signum, code):
    flag = tmp_path / "building"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_CATALOG, str(flag), str(tmp_path / "r")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    run_watch.wait_until(flag.exists, "the catalog being built", proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=run_watch.GUARD_S)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err
    assert not (tmp_path / "r" / "results.jsonl").exists()  # nothing had started: nothing written


#: What the ``ep-testbed`` console script runs (pip writes this call into the script).
LAUNCH = "import sys; from ep_testbed.harness.launch import main; sys.exit(main())"


def test_the_launcher_runs_the_command_line():
    """What the console script runs (``test_harness_cli_commands``: it is the launcher) reaches ``main``."""
    done = subprocess.run([sys.executable, "-c", LAUNCH, "map", "--help"], capture_output=True, text=True,
                          timeout=run_watch.GUARD_S)
    assert done.returncode == 0 and done.stdout.startswith("usage: ep-testbed map"), done.stderr


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals and named pipes")
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, INTERRUPTED), (signal.SIGTERM, TERMINATED)],
                         ids=["sigint", "sigterm"])
def test_a_signal_before_the_command_line_is_imported_is_one_line_and_its_code(tmp_path, signum, code):
    """The launcher's seam holds it after its handlers are installed and before numpy, onnx and
    onnxruntime are imported, until the test opens the pipe: the signal lands there, every time."""
    from ep_testbed.harness.launch import WAIT_ENV

    pipe = tmp_path / "start"
    os.mkfifo(pipe)
    # Ctrl-C raises in the child as from a terminal, whatever this test process passes on (a test
    # runner may ignore SIGINT, or hold signals blocked, and a child inherits both); set in the
    # child's own code, not in a preexec_fn, which is unsafe in a process with threads.
    interactive = ("import signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM}); "
                   "signal.signal(signal.SIGINT, signal.default_int_handler); " + LAUNCH)
    proc = subprocess.Popen([sys.executable, "-c", interactive, "--help"], env={**os.environ, WAIT_ENV: str(pipe)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held: list[int] = []

    def reading() -> bool:  # a writer opens a pipe without blocking only once its reader has it open
        try:
            held.append(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True

    run_watch.wait_until(reading, "the launcher waiting on its pipe", proc)
    try:
        proc.send_signal(signum)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"the launcher did not end within 60 s of {signum!r}; stderr: {err[-2000:]}")
    finally:
        os.close(held[0])
    assert proc.returncode == code, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and out == ""
    assert err.strip().splitlines() == [
        f"ep-testbed: interrupted by {'SIGTERM' if code == TERMINATED else 'Ctrl-C (SIGINT)'} while starting; "
        "nothing was run"]


# --- what ONNX Runtime prints of an EP's options: one clean line each ------------------------------

#: What onnxruntime-openvino 1.24.1's factory printed on this machine for ``device_id=-1`` (fd 2,
#: coloured even into a pipe): a deprecation warning, then the error, then the fallback warning.
OPENVINO_SAID = (
    "\x1b[0;93m2026-11-25 18:54:20.489586190 [W:onnxruntime:Default, openvino_provider_factory.cc:247 "
    "ParseProviderInfo] [OpenVINO] The options 'device_id' is deprecated. Upgrade to set deice_type and precision "
    "session options.\n\x1b[m\n"
    "\x1b[1;31m2026-11-25 18:54:20.495173601 [E:onnxruntime:Default, provider_bridge_ort.cc:2310 Create] "
    "/onnxruntime/onnxruntime/core/providers/openvino/openvino_provider_factory.cc:252 void "
    "onnxruntime::openvino_ep::ParseProviderInfo(const onnxruntime::ProviderOptions&, const "
    "onnxruntime::ConfigOptions*, ProviderInfo&) [ERROR] [OpenVINO] Unsupported device_id is selected. Select from "
    "available options.\n\x1b[m\n")


def test_onnx_runtime_log_records_become_one_clean_line_each():
    from ep_testbed.harness.eps.session import native_log_lines

    assert native_log_lines(OPENVINO_SAID) == [
        "warning (openvino_provider_factory.cc:247): [OpenVINO] The options 'device_id' is deprecated. Upgrade to "
        "set deice_type and precision session options.",
        "error (openvino_provider_factory.cc:252): [ERROR] [OpenVINO] Unsupported device_id is selected. Select "
        "from available options."]


def test_what_onnx_runtime_writes_to_the_native_stderr_is_caught_and_cleaned(capfd):
    """ONNX Runtime's own logger (C++, file descriptor 2) at its most verbose, building a real session."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from ep_testbed.harness.eps.session import native_stderr

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    ort.set_default_logger_severity(0)
    try:
        with native_stderr() as said:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    finally:
        ort.set_default_logger_severity(2)
    assert said and all(re.match(r"(verbose|info|warning) \([\w.]+:\d+\): ", line) for line in said), said[:3]
    assert not any("\x1b" in line for line in said)
    assert "inference_session" not in capfd.readouterr().err  # none of it reached the console raw


def test_options_the_cpu_ep_ignores_are_named_in_one_note(capsys):
    code, out, err = ep_testbed(capsys, "doctor", "--ep", "cpu", "--ep-option", "use_arena=0")
    assert code == OK
    assert "note CPUExecutionProvider takes no provider options" in out and "use_arena=0" in out


@pytest.mark.parametrize("switch", ["1", "0"])
def test_doctor_says_whether_the_reference_runs_its_compiled_loops(capsys, monkeypatch, switch):
    """One line either way, never a change of the exit code: the compiled loops are optional."""
    from ep_testbed.reference import native
    monkeypatch.setenv("EP_TESTBED_NATIVE", switch)
    code, out, _ = ep_testbed(capsys, "doctor", "--ep", "cpu")
    assert code == OK
    lines = [line for line in out.splitlines() if "the reference's compiled loops" in line]
    assert lines == [f"  {'ok   ' if native.status().used else 'note '}the reference's compiled loops: "
                     f"{native.status().detail}"], out
    assert ("switched off" in lines[0]) == (switch == "0")
