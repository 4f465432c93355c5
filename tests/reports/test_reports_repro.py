"""Repro bundles confirm failures: downloaded from report.html and run, each repro.py applies the
run's tolerance rule, prints the run's verdict and exits 0 on a passing case, 1 on a failing one,
and 2, with one line and no traceback, when it cannot judge (a missing or damaged file or module,
an onnxruntime without the EP).

Two runs feed them: a real CPU run of catalog cases the CPU EP fails (``--no-expectations``) and
one it passes, and a CPU run against a deliberately wrong reference (``perturbed_reference``:
about half the cases get one expected element moved outside tolerance), so that every operator
has failures and passes whose bundles hold the very files the run used. The bundles run in an
interpreter with numpy and onnxruntime alone (``bare_python``: ep-testbed and onnx cannot be
imported there) and, when a venv with onnxruntime 1.24.4 exists, under that too.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import time
import venv
import zipfile
from pathlib import Path

import bare_python
import onnx
import pytest
import repro_check
from perturbed_reference import PERTURB_ENV

from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.reports import render_run, repro
from ep_testbed.reports.artifacts import load_artifacts, resolve_folder
from ep_testbed.reports.html_report import run_tolerances
from ep_testbed.reports.results import load_run

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
ORT124_HINT = ("create it with: python -m venv .venv-ort124 && .venv-ort124/bin/pip install onnxruntime==1.24.4 "
               "numpy (or point EP_TESTBED_ORT124_PYTHON at such an interpreter)")


#: Catalog cases with a known outcome on the CPU EP when expectations are off: two real failures
#: (RoiAlign's "max" mode on ONNX Runtime's CPU kernel; MaxPool's NaN handling, whose index output
#: needs the reference's window rule to judge) and a pass close enough to its tolerance that the
#: run keeps its case folder.
CPU_CASES = {"roi_align/random-s0-009": "fail", "max_pooling2/edge-nan-inf": "fail", "roi_align/random-s0-008": "pass"}


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> str:
    """An interpreter with numpy and onnxruntime and nothing else (checked)."""
    python = bare_python.make(tmp_path_factory.mktemp("bare") / "venv")
    found = bare_python.importable(python, ["numpy", "onnxruntime", "ep_testbed", "onnx"])
    assert found == {"numpy": True, "onnxruntime": True, "ep_testbed": False, "onnx": False}
    return python


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> Path:
    """A real CPU run of ``CPU_CASES`` with its report (and a bundle per case)."""
    out = tmp_path_factory.mktemp("cpu") / "run"
    args = parse_args(["run", "--ep", "cpu", *(f"-k={cid}" for cid in CPU_CASES), "--no-expectations",
                       "--out", str(out), "--no-progress"])
    assert run_command(args) == 1
    outcomes = {c.id: c.outcome for c in load_run(out).cases}
    assert outcomes == CPU_CASES, "the catalog or the CPU EP changed: pick cases with these outcomes again"
    render_run(out)
    return out


@pytest.fixture(scope="module")
def cpu_bundles(cpu_run) -> dict[str, bytes]:
    """Case id -> the zip of its bundle, as report.html offers it for download."""
    return {cid: data for cid, _, data in repro_check.bundles(cpu_run / "report.html")}


def _extract(data: bytes, folder: Path) -> Path:
    """Unzip a bundle into ``folder``, as a user who downloaded it would."""
    zipfile.ZipFile(io.BytesIO(data)).extractall(folder)
    return folder


def _repro(python: str, folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``python repro.py ARGS`` in ``folder``, with no PYTHONPATH."""
    return subprocess.run([python, "repro.py", *args], cwd=folder, capture_output=True, text=True, timeout=300,
                          env=bare_python.clean_env())


def test_a_real_cpu_failure_reproduces_with_numpy_and_onnxruntime_alone(cpu_run, cpu_bundles, bare, tmp_path):
    said = repro_check.messages(cpu_run)
    assert sorted(cpu_bundles) == sorted(CPU_CASES)
    for cid, outcome in CPU_CASES.items():
        folder = _extract(cpu_bundles[cid], tmp_path / cid.replace("/", "_"))
        model = onnx.load(str(folder / "model.onnx"))  # the lowest IR its opset needs: older runtimes load it
        assert model.ir_version == onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        done = _repro(bare, folder)
        assert (done.returncode, done.stderr) == ({"fail": 1, "pass": 0}[outcome], ""), cid
        assert done.stdout.splitlines()[0] == f"{outcome}: {said[cid]}", cid
        # the bundle stays as downloaded: no bytecode of this host beside the vendored code
        assert [p for p in folder.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"] == [], cid


def test_bundles_ship_no_compiled_files_and_judge_with_their_own_copy(cpu_bundles):
    names = zipfile.ZipFile(io.BytesIO(cpu_bundles["max_pooling2/edge-nan-inf"])).namelist()
    assert [n for n in names if "__pycache__" in n or n.endswith(".pyc")] == []
    judging = sorted(n for n in names if n.startswith("lib/"))
    assert {"lib/ep_testbed_judging/compare.py", "lib/ep_testbed_judging/tolerances.py",
            "lib/ep_testbed_judging/reference/max_pooling2.py"} <= set(judging)
    assert not [n for n in names if n.startswith("lib/ep_testbed/")]  # no package an installed ep-testbed shadows


def test_a_bundle_is_the_same_bytes_whenever_it_is_built(cpu_run, cpu_bundles, monkeypatch):
    """A bundle's bytes depend on its files alone: built again from the same case folder at
    another time of day (the clock moved by a day and an hour), it is byte for byte the bundle
    the report offers, and each of its entries carries the fixed date."""
    run = load_run(cpu_run)
    case = next(c for c in run.cases if c.id == "max_pooling2/edge-nan-inf")
    art = load_artifacts(resolve_folder(run.path, case.artifacts))
    later = time.time() + 90_000
    monkeypatch.setattr(time, "time", lambda: later)
    again, _ = repro.build_bundle(case, run.header, art, run_tolerances(run))
    monkeypatch.undo()
    assert again == cpu_bundles[case.id]
    assert {info.date_time for info in zipfile.ZipFile(io.BytesIO(again)).infolist()} == {repro.ENTRY_DATE}


def _truncate(name: str):
    """A damage: the bundle's ``name`` cut to half its length (a download that stopped)."""
    def damage(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2])
    return damage


def _forget(name: str, then):
    """Delete ``name``'s entry from check.json's "files" (a file changed on purpose), then ``then``."""
    def damage(folder: Path) -> None:
        check = json.loads((folder / "check.json").read_text(encoding="utf-8"))
        del check["files"][name]
        (folder / "check.json").write_text(json.dumps(check), encoding="utf-8")
        then(folder)
    return damage


#: How a bundle can be damaged (or meet an interpreter it cannot use) -> the file its message names.
DAMAGE = {
    "truncated model.onnx": (_truncate("model.onnx"), "model.onnx"),
    "truncated inputs.npz": (_truncate("inputs.npz"), "inputs.npz"),
    "truncated check.json": (_truncate("check.json"), "check.json"),
    "missing lib module": (lambda f: (f / "lib/ep_testbed_judging/tolerances.py").unlink(), "tolerances.py"),
    "missing expected.npz": (lambda f: (f / "expected.npz").unlink(), "expected.npz"),
    "altered lib module": (lambda f: (f / "lib/ep_testbed_judging/compare.py").write_text("x = (\n"), "compare.py"),
    # the same damage where check.json no longer vouches for the file: caught when it is read
    "truncated model.onnx, unlisted": (_forget("model.onnx", _truncate("model.onnx")), "model.onnx"),
    "truncated inputs.npz, unlisted": (_forget("inputs.npz", _truncate("inputs.npz")), "inputs.npz"),
    "missing lib module, unlisted": (_forget("lib/ep_testbed_judging/tolerances.py",
                                             lambda f: (f / "lib/ep_testbed_judging/tolerances.py").unlink()),
                                     "tolerances.py"),
    "altered lib module, unlisted": (_forget("lib/ep_testbed_judging/compare.py",
                                             lambda f: (f / "lib/ep_testbed_judging/compare.py").write_text("x = (\n")),
                                     "compare.py"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_bundle_gets_no_verdict_and_one_line_saying_what(damage, cpu_bundles, bare, tmp_path):
    spoil, named = DAMAGE[damage]
    folder = _extract(cpu_bundles["roi_align/random-s0-009"], tmp_path / "bundle")
    spoil(folder)
    done = _repro(bare, folder)
    assert done.returncode == 2, (damage, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cannot judge: ") and "Traceback" not in done.stderr, lines
    assert named in lines[0] and "download the bundle again" in lines[0], lines[0]


def test_an_onnxruntime_without_the_ep_gets_no_verdict(cpu_bundles, bare, tmp_path):
    folder = _extract(cpu_bundles["roi_align/random-s0-009"], tmp_path / "bundle")
    done = _repro(bare, folder, "NoSuchExecutionProvider")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("cannot judge: this onnxruntime") and "has no NoSuchExecutionProvider" in done.stderr
    assert "python repro.py CPUExecutionProvider" in done.stderr and len(done.stderr.splitlines()) == 1


def test_an_interpreter_without_numpy_gets_no_verdict(cpu_bundles, tmp_path):
    empty = tmp_path / "empty"
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(empty)
    python = str(empty / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    done = _repro(python, _extract(cpu_bundles["roi_align/random-s0-008"], tmp_path / "bundle"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("cannot judge: numpy is not installed") and "pip install numpy" in done.stderr


def test_repro_check_counts_pass_reproduced_and_could_not_judge_apart(cpu_run, bare, tmp_path, capsys):
    copy = Path(shutil.copytree(cpu_run, tmp_path / "run"))
    report = copy / "report.html"
    assert repro_check.main([str(copy), "--python", bare]) == 0
    assert "pass                    1" in capsys.readouterr().out
    text = report.read_text(encoding="utf-8")  # damage one bundle's check.json inside the report
    data = dict((cid, raw) for cid, _, raw in repro_check.bundles(report))["roi_align/random-s0-009"]
    spoiled = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(spoiled, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name)[:10] if name == "check.json" else src.read(name))
    report.write_text(text.replace(base64.b64encode(data).decode(), base64.b64encode(spoiled.getvalue()).decode()),
                      encoding="utf-8")
    assert repro_check.main([str(copy), "--python", bare]) == 2
    out = capsys.readouterr().out
    assert "pass                    1" in out and "failure reproduced      1" in out
    assert "could not judge         1" in out
    assert "COULD NOT JUDGE roi_align/random-s0-009 (fail, exit 2): cannot judge: check.json is damaged" in out


@pytest.fixture(scope="module")
def perturbed_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("perturbed") / "run"
    args = parse_args(["run", "--ep", "cpu", "-k", "random-s0-00", "--no-expectations", "--keep-worst", "50",
                       "--out", str(out), "--no-progress"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PERTURB_ENV, "1")
        assert run_command(args, mapper="perturbed_reference:to_onnx", worker_paths=(str(HERE),)) == 1
    render_run(out, max_pictures=500)
    return out


@pytest.mark.slow
def test_every_bundle_exits_like_the_run_and_prints_its_verdict(perturbed_run, bare):
    ran = repro_check.run_all(perturbed_run, bare)
    said = repro_check.messages(perturbed_run)
    outcomes = {c.id: c.outcome for c in load_run(perturbed_run).cases if c.artifacts}
    assert sorted(r.case_id for r in ran) == sorted(outcomes)  # every case with a folder has a bundle
    failing = [r for r in ran if r.outcome in repro_check.FAILED]
    passing = [r for r in ran if r.outcome in repro_check.PASSED]
    assert len(failing) >= 10 and len(passing) >= 2
    assert [r.case_id for r in failing if r.code != 1] == []
    assert [r.case_id for r in passing if r.code != 0] == []
    for r in ran:  # the same verdict text as the report's message for the case
        assert r.verdict == f"{'fail' if r.outcome == 'fail' else r.outcome}: {said[r.case_id]}", r.case_id


def test_bundled_model_has_the_lowest_ir_its_opset_needs(perturbed_run):
    cid, _, data = repro_check.bundles(perturbed_run / "report.html")[0]
    bundled = onnx.load_from_string(zipfile.ZipFile(io.BytesIO(data)).read("model.onnx"))
    lowest = onnx.helper.find_min_ir_version_for(list(bundled.opset_import), ignore_unknown=True)
    assert bundled.ir_version == lowest < onnx.IR_VERSION
    run = load_run(perturbed_run)
    folder = perturbed_run / run.by_id()[cid].artifacts
    original = onnx.load(str(folder / "model.onnx"))
    assert original.ir_version >= bundled.ir_version
    assert original.graph == bundled.graph  # only the IR stamp changed


def _ort124() -> str | None:
    """The onnxruntime 1.24 interpreter: EP_TESTBED_ORT124_PYTHON, else .venv-ort124 here."""
    named = os.environ.get("EP_TESTBED_ORT124_PYTHON")
    if named:
        return named
    local = ROOT / ".venv-ort124" / "bin" / "python"
    return str(local) if local.exists() else None


def test_bundles_run_on_onnxruntime_1_24(perturbed_run, tmp_path):
    python = _ort124()
    if python is None:
        ci_has_it = ".venv-ort124" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        if os.environ.get("CI") == "true" and ci_has_it:
            pytest.fail(f".ci/run makes .venv-ort124 but it is missing; {ORT124_HINT}")
        pytest.skip(f"no onnxruntime 1.24 venv; {ORT124_HINT}")
    version = subprocess.run([python, "-c", "import onnxruntime; print(onnxruntime.__version__)"],
                             capture_output=True, text=True, timeout=120).stdout.strip()
    assert version.startswith("1.24"), f"{python} has onnxruntime {version!r}, not 1.24"
    made = subprocess.run([python, "-B", bare_python.__file__, str(tmp_path / "bare124")], capture_output=True,
                          text=True, timeout=120, env=bare_python.clean_env())
    assert made.returncode == 0, made.stderr
    bare124 = made.stdout.strip()  # that onnxruntime and its numpy, without the venv's ep-testbed
    assert bare_python.importable(bare124, ["onnxruntime", "ep_testbed"]) == {"onnxruntime": True, "ep_testbed": False}
    ran = repro_check.run_all(perturbed_run, bare124)
    assert ran and [(r.case_id, r.outcome, r.code, r.stderr[-300:]) for r in ran if not r.agrees] == []
