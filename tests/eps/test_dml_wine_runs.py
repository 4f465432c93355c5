"""``--ep dml-wine`` through every front end, on the real DirectML EP in its Wine host: the
catalog with no unexplained outcome, the run header's identity, a host that dies or hangs
mid-case, merge against a hardware DirectML run, fuzz, model run, doctor and the pytest plugin;
and the catalog sixteen cases a session: the same outcome for every case, fewer sessions, and a
worker that starts its DirectML host before its first case is timed (one catalog run serves
both: the default runs one case a session).

Needs `bash tools/dml-wine.sh` (Linux); without it these tests FAIL naming it (dml_wine_kit).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dml_wine_kit import needs_host

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli import main
from ep_testbed.harness.core.results import NOT_TESTED, PASSING, read_run
from ep_testbed.harness.eps import gpu
from ep_testbed.harness.eps.adapters import resolve
from ep_testbed.harness.eps.dml_wine import host as dml_host
from ep_testbed.harness.eps.dml_wine.adapter import FAULT_ENV
from ep_testbed.harness.eps.packing import default_batch
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.pool import WorkerPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # the simulated DXGI of fake_windows
from fake_windows import FakeAdapter, FakeDxgi  # noqa: E402

pytestmark = [pytest.mark.slow,  # every test here runs commands on the DirectML host
              pytest.mark.skipif(sys.platform != "linux", reason="the DirectML host runs under Wine on Linux")]

REPO = Path(__file__).resolve().parents[2]
DML = "DmlExecutionProvider"
EXPECTATIONS = REPO / "harness" / "expectations" / "dml.json"
#: The whole catalog must fit well inside one CI test's share of the tests job (it takes ~10 s).
CATALOG_SECONDS = 120.0
#: Outcomes a catalog case may end with and still be explained (each checked for its evidence).
EXPLAINED = PASSING + ("known",) + NOT_TESTED


def _cases(run_dir: Path) -> list[dict]:
    """The case lines of a run folder."""
    return [line for line in read_run(str(run_dir))[1] if line.get("type") == "case"]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """``ep-testbed run --ep dml-wine`` over the whole default catalog: (exit code, folder, seconds)."""
    needs_host()
    out = tmp_path_factory.mktemp("catalog") / "run"
    started = time.monotonic()
    code = main(["run", "--ep", "dml-wine", "--out", str(out), "--no-progress"])
    return code, out, time.monotonic() - started


@pytest.fixture(scope="module")
def shared(catalog, tmp_path_factory):
    """The same catalog sixteen cases a session: its case lines by id (the default runs one a
    session, so ``catalog`` is the unbatched run)."""
    out = tmp_path_factory.mktemp("catalog-shared") / "run"
    assert main(["run", "--ep", "dml-wine", "--batch", "16", "--out", str(out), "--no-progress"]) == 0
    return {line["id"]: line for line in _cases(out)}


#: DirectML's and vkd3d's messages name the thread and count exceptions: not part of a verdict.
RUNNING_NUMBERS = re.compile(r"Exception\(\d+\) tid\([0-9a-f]+\)|vkd3d:[0-9a-f]+:")


def test_the_catalog_has_the_same_outcomes_and_lines_batched(catalog, shared):
    alone = {line["id"]: line for line in _cases(catalog[1])}
    assert default_batch(resolve("dml-wine")) == 1 and sorted(alone) == sorted(shared)
    assert {i: l["outcome"] for i, l in shared.items()} == {i: l["outcome"] for i, l in alone.items()}
    assert max(line["timings"]["shared_by"] for line in shared.values()) > 1

    def steady(line):
        # Which passing cases keep a case folder (the worst N) depends on the order cases finish in.
        dropped = ("duration_s", "timings") + (("artifacts",) if line["outcome"] in PASSING else ())
        return RUNNING_NUMBERS.sub("#", repr({k: v for k, v in line.items() if k not in dropped}))

    assert [i for i in alone if steady(alone[i]) != steady(shared[i])] == []


def test_batching_takes_fewer_sessions(catalog, shared):
    # Each line says how many cases shared its session: alone, one each; sixteen a session, the
    # passing cases' sessions (the sum of 1/shared_by) are far fewer than the cases (a case that
    # fails or is refused in a pack is run again alone, so only passes are counted). Counted, not
    # timed: what fewer sessions buy is measured by benchmarks/bench_throughput.py --ep dml-wine.
    alone = _cases(catalog[1])

    def sessions(lines):
        return sum(1 / line["timings"]["shared_by"] for line in lines if line["outcome"] == "pass")

    assert {line["timings"].get("shared_by", 1) for line in alone} == {1}
    assert sessions(shared.values()) <= sessions(alone) / 2


def test_no_case_pays_for_starting_the_directml_host():
    """A worker starts its DirectML host (Xvfb, Wine, Direct3D 12, DirectML: the adapter starts it
    with the first session) in its warm-up session, before its first case is sent: its log says
    so, in that order. Read from the log, not timed: a host starts in 0.25 s once Wine's server is
    warm, and a case under load can take longer than that."""
    needs_host()
    pool = WorkerPool(CaseConfig(ep=resolve("dml-wine")), 1, 300)
    try:
        line = pool.run_one(build_catalog(["max_pooling2"])[0])
        log = open(pool._workers[0].log_path, encoding="utf-8").read()
    finally:
        pool.close()
    assert line["outcome"] == "pass", line
    assert "warm-up session on DmlExecutionProvider" in log, log[-2000:]
    assert log.index("warm-up session on DmlExecutionProvider") < log.index("--- case"), log[-2000:]


def test_the_catalog_on_directml_has_no_unexplained_outcome(catalog):
    """Every non-pass is a known divergence observed on DirectML (with its evidence and the
    versions it was observed on, run on DirectML, every failing element reproduced by a reading),
    a case ONNX cannot express or the DML EP does not take or refuses (not-on-ep, with the reason),
    or an emulation gap labelled as the emulated device's; in CI's time."""
    code, out, seconds = catalog
    cases = _cases(out)
    header = read_run(str(out))[0]
    assert code == 0 and seconds < CATALOG_SECONDS, (code, seconds)
    unexplained = [(c["id"], c["outcome"], c.get("message", "")[:200]) for c in cases if c["outcome"] not in EXPLAINED]
    assert not unexplained, unexplained
    for case in cases:
        expected = case.get("expected_outcome") or {}
        if case["outcome"] == "known":  # observed, on this DirectML, not only predicted, and run there
            assert set(case["placement"].values()) == {DML}, case["id"]
            assert case["readings"]["unexplained"] == 0 and expected.get("explained_by"), case["id"]
            observed = expected.get("observed_on") or {}
            assert expected.get("evidence") and observed.get("directml") == header["gpu"]["directml"]["version"], case["id"]
            assert observed.get("onnxruntime-directml") == header["gpu"]["onnxruntime"]["version"], case["id"]
        elif case["outcome"] == "emulation-gap":  # the device's, by an entry scoped to it or vkd3d's own lines
            assert expected.get("emulated_device") or "emulated device whose Direct3D 12 layer failed" in case["message"]
        elif case["outcome"] in NOT_TESTED:
            assert case.get("message"), case["id"]
        else:  # a pass ran its operator on DirectML, proven by the profiling trace
            assert set(case["placement"].values()) == {DML} and case["placement_source"] == "trace-node", case["id"]
    assert {c["outcome"] for c in cases} >= {"pass", "known", "inexpressible", "emulation-gap"}


def test_the_run_header_names_directml_onnx_runtime_wine_vkd3d_and_the_emulated_device(catalog):
    """The header's identity is what the set-up installed and a fresh host reports, and it is the
    one dml.json's observations were made on (else they must be observed again)."""
    _, out, _ = catalog
    header = read_run(str(out))[0]
    record, setup = header["gpu"], dml_host.read_host_json()
    with dml_host.DmlWineHost() as host:
        hello = host.info
    wine = subprocess.run([setup["wine64"], "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    assert header["ep"] == DML and header["ep_held_by"]["holder"] == "dml-wine"
    assert record["source"] == "dml-wine" and record["emulated"] is True
    assert record["directml"]["version"] == hello["directml_dll"]["file_version"] == setup["versions"]["directml"]
    assert record["onnxruntime"] == {"distribution": "onnxruntime-directml", "version": hello["onnxruntime_version"]}
    assert hello["onnxruntime_version"] == setup["versions"]["onnxruntime_directml_wheel"]
    assert record["emulation"]["wine"].startswith(wine) and record["emulation"]["vkd3d"] == setup["versions"]["vkd3d"]
    assert record["adapter"]["description"] == next(a["description"] for a in hello["adapters"] if a["index"] == 0)
    assert "emulated" in record["summary"] and record["adapter"]["description"] in record["summary"]
    observed = [e["observed_on"] for e in json.loads(EXPECTATIONS.read_text())["expectations"] if "observed_on" in e]
    assert observed and all(o["directml"] == record["directml"]["version"] and o["emulated"] for o in observed)


def test_a_host_that_dies_or_hangs_mid_case_costs_exactly_that_case(catalog, monkeypatch, tmp_path):
    """EP_TESTBED_DML_WINE_FAULT: the host aborts in one case (its ``crash``) and hangs in another
    (its ``timeout``); every other case ends as in the whole catalog's run; with cases packed into
    shared sessions (--batch) too."""
    _, out, _ = catalog
    before = {c["id"]: c["outcome"] for c in _cases(out)}
    chosen = sorted(i for i, o in before.items() if i.startswith("max_pooling2/random-") and o == "pass")[:2]
    monkeypatch.setenv(FAULT_ENV, f"abort={chosen[0]};hang={chosen[1]}")
    run = tmp_path / "faults"
    code = main(["run", "--ep", "dml-wine", "--ops", "max_pooling2", "-k", "random-", "--timeout", "6",
                 "--out", str(run), "--no-progress"])
    after = {c["id"]: c for c in _cases(run)}
    assert code == 1 and len(after) > 2
    assert after[chosen[0]]["outcome"] == "crash" and "abort()" in after[chosen[0]]["message"]
    assert after[chosen[1]]["outcome"] == "timeout"
    assert {i: c["outcome"] for i, c in after.items() if i not in chosen} == {i: before[i] for i in after if i not in chosen}
    # cases packed 8 to a session: the pack the abort kills is taken apart down to that case alone
    monkeypatch.setenv(FAULT_ENV, f"abort={chosen[0]}")
    packed = tmp_path / "packed"
    code = main(["run", "--ep", "dml-wine", "--ops", "max_pooling2", "-k", "random-", "--batch", "8",
                 "--out", str(packed), "--no-progress"])
    after = {c["id"]: c["outcome"] for c in _cases(packed)}
    assert code == 1 and after.pop(chosen[0]) == "crash" and after == {i: before[i] for i in after}


def _hardware_identity(directml: str, ort: dict) -> dict:
    """The header record a Windows runner on a real GPU would write (a simulated DXGI adapter)."""
    dxgi = FakeDxgi([FakeAdapter("NVIDIA GeForce RTX 4090", 0x10DE, 0x2684, memory=24 << 30,
                                 umd=(32 << 48) | (15 << 16) | 6094)])
    return gpu.dml_identity({"device_id": "0"}, gpu.read_adapters(dxgi.create_factory), [], {"version": directml},
                            {"distribution": ort["distribution"], "version": ort["version"]})


def test_merge_never_mixes_the_emulated_device_with_a_hardware_directml_run(tmp_path, capsys):
    """Two shards on dml-wine merge; with one shard's header made a hardware DirectML run of the
    same DirectML and ONNX Runtime, merge refuses naming both devices unless --allow-mixed."""
    needs_host()
    shards = [tmp_path / f"s{k}" for k in (1, 2)]
    for k, shard in enumerate(shards, 1):
        assert main(["run", "--ep", "dml-wine", "--ops", "max_pooling2", "-k", "random-", "--shard", f"{k}/2",
                     "--out", str(shard), "--no-progress"]) == 0
    assert main(["merge", *map(str, shards), "--out", str(tmp_path / "same")]) == 0
    path = shards[1] / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["gpu"] = _hardware_identity(header["gpu"]["directml"]["version"], header["gpu"]["onnxruntime"])
    path.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n", encoding="utf-8")
    capsys.readouterr()
    code = main(["merge", *map(str, shards), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 2 and "ran on another device" in err and "--allow-mixed" in err and "Traceback" not in err
    assert "emulated" in err and "RTX 4090" in err and not (tmp_path / "m" / "results.jsonl").exists()
    assert main(["merge", *map(str, shards), "--out", str(tmp_path / "mixed"), "--allow-mixed"]) == 0
    mixed = read_run(str(tmp_path / "mixed"))[0]["mixed"]
    assert any("emulated" in m["gpu"] for m in mixed) and any("RTX 4090" in m["gpu"] for m in mixed)


def test_fuzz_on_directml_with_a_fixed_seed(tmp_path, capsys):
    """A short fuzz run (seed 7) on dml-wine: every tested case placed on DirectML, nothing
    crashed, hung or unexplained (these first draws are known to hold none), and the cases
    DirectML did not get to run (float16 on the emulated device, declined MaxPool nodes) are not
    counted as failing."""
    needs_host()
    out = tmp_path / "fuzz"
    code = main(["fuzz", "--ep", "dml-wine", "--max-cases", "100", "--budget", "60", "--seed", "7", "--shrink", "none",
                 "--out", str(out), "--no-progress"])
    header, cases = read_run(str(out))[0], _cases(out)
    assert code == 0, capsys.readouterr().err[-2000:]
    assert header["gpu"]["source"] == "dml-wine" and header["seed"] == 7
    assert len(cases) >= 50  # the drawer's first batches (one operator's, then the next's): never an empty run
    assert {c["outcome"] for c in cases} <= set(EXPLAINED)
    tested = [c for c in cases if c["outcome"] in PASSING]
    assert tested and all(set(c["placement"].values()) == {DML} for c in tested)
    end = read_run(str(out))[2]
    assert any(c["outcome"] in NOT_TESTED for c in cases) and end["fuzz"]["findings"] == 0
    assert "\n0 of " in capsys.readouterr().out


def test_model_run_on_directml_runs_a_shipped_model_whole(tmp_path, capsys):
    """``model run --ep dml-wine`` on the shipped ResNet-18 stem: every node on DirectML (trace),
    outputs within tolerance of the CPU EP, the MaxPool node judged against the reference, and
    the result names the emulated device."""
    needs_host()
    out = tmp_path / "model"
    code = main(["model", "run", "--ep", "dml-wine", str(REPO / "tests" / "data" / "models" / "resnet18_stem.onnx"),
                 "--out", str(out)])
    result = json.loads((out / "model_result.json").read_text(encoding="utf-8"))
    assert code == 0 and result["verdict"] == "pass", capsys.readouterr()
    assert result["ep"]["holder"] == "dml-wine" and result["gpu"]["emulated"] is True
    assert result["placement"]["on_ep"] == result["placement"]["total"] == 3
    assert set(result["placement"]["nodes"].values()) == {DML}


def test_doctor_says_the_directml_host_is_ready(capsys):
    """``doctor --ep dml-wine``: the host, the canary and a one-node session on DirectML."""
    needs_host()
    code = main(["doctor", "--ep", "dml-wine"])
    out = capsys.readouterr().out
    assert code == 0 and out.rstrip().endswith("ready"), out
    assert "ok   canary MaxPool exact on DirectML" in out and f"ran on {DML}" in out


def test_the_pytest_plugin_on_directml_decides_as_ep_testbed_run(catalog):
    """``pytest tests/conformance --ep dml-wine`` on a few cases gives each the outcome the run
    gave it: a pass passes (even where a failure-shaped known divergence could show), a known
    divergence xfails with the entry that explains it, an emulation gap and a case the EP does
    not take skip with their own label."""
    _, out, _ = catalog
    by_id = {c["id"]: c for c in _cases(out)}
    picks = {"pass": next(i for i, c in by_id.items() if i.startswith("max_pooling2/random-") and c["outcome"] == "pass"),
             "known": next(i for i, c in by_id.items() if c["outcome"] == "known"),
             "emulation-gap": next(i for i, c in by_id.items() if c["outcome"] == "emulation-gap"
                                   and (c.get("expected_outcome") or {}).get("emulated_device"))}
    assert by_id[picks["known"]]["outcome"] == "known"
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/conformance", "-p", "no:cacheprovider", "-rA", "-q",
                           "--ep", "dml-wine", "-k", " or ".join(picks.values())],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    report = done.stdout
    assert done.returncode == 0, report[-3000:]
    assert f"PASSED tests/conformance/test_conformance.py::test_case[{picks['pass']}]" in report
    reason = by_id[picks["known"]]["expected_outcome"]["reason"]
    assert f"XFAIL tests/conformance/test_conformance.py::test_case[{picks['known']}] - known: {reason[:60]}" in report
    assert "emulation-gap: " in report and "1 passed, 1 skipped" in report and "1 xfailed" in report


def test_the_pytest_plugin_counts_the_catalog_as_ep_testbed_run_does(catalog):
    """MAX_POOLING2 on DirectML: 42 cases run settles ``known`` (most of them a predicted
    not-on-ep) once were 31 xfailed and 41 skipped in pytest; each of run's outcomes now maps to
    one pytest outcome (``pytest_plugin.OUTCOME_TO_PYTEST``)."""
    from ep_testbed.harness.pytest_plugin import OUTCOME_TO_PYTEST

    _, out, _ = catalog
    lines = [c for c in _cases(out) if c["id"].startswith("max_pooling2/")]
    expected = {kind: 0 for kind in ("passed", "failed", "skipped", "xfailed")}
    for line in lines:
        expected[OUTCOME_TO_PYTEST[line["outcome"]]] += 1
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/conformance", "-p", "no:cacheprovider", "-q",
                           "--ep", "dml-wine", "--ops", "max_pooling2", "-n", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    last = done.stdout.strip().splitlines()[-1]
    found = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed)", last)}
    assert {kind: found.get(kind, 0) for kind in expected} == expected and "xpassed" not in found, done.stdout[-3000:]
    assert expected["xfailed"] and expected["skipped"]


def test_model_run_labels_a_shader_the_emulation_refuses_as_an_emulation_gap(tmp_path, capsys):
    """The shipped Faster R-CNN cannot be built whole on the emulated device (vkd3d refuses one of
    DirectML's shaders): model run says so with vkd3d's line, never as DirectML's result, and
    still judges its MaxPool and RoiAlign nodes alone on DirectML."""
    needs_host()
    out = tmp_path / "model"
    code = main(["model", "run", "--ep", "dml-wine", str(REPO / "tests" / "data" / "models" / "faster_rcnn_tiny_fpn.onnx"),
                 "--out", str(out)])
    printed = capsys.readouterr().out
    result = json.loads((out / "model_result.json").read_text(encoding="utf-8"))
    failure = result["ep_failure"]
    assert failure["stage"] == "build" and any("Failed to scan shader bytecode" in n for n in failure["emulation"])
    assert "emulation gap, not a result of the EP" in failure["message"]
    # not the EP's result, as in `run`: its own verdict, exit 0
    assert code == 0 and result["verdict"] == "emulation-gap" and result["verdict_reasons"] == []
    assert "emulation gap" in result["verdict_statement"] and "verdict: emulation-gap" in printed
    nodes = result["attribution"]["nodes"]
    assert {r["op_type"] for r in nodes} == {"MaxPool", "RoiAlign"} and all(r["alone"] for r in nodes)
    assert all(r["status"] == "match" for r in nodes) and set(result["placement"]["nodes"].values()) == {DML}


def test_a_run_on_the_emulated_device_is_labelled_as_one_from_its_folder_to_its_last_line(tmp_path, capsys,
                                                                                           monkeypatch):
    """The default folder is runs/dml-wine-<time> (a hardware DirectML run's is runs/dml-<time>), the
    header records the label and both ONNX Runtimes, each saying what it ran, and the terminal
    names the emulated device first and last."""
    import onnxruntime

    from ep_testbed.harness.core import emulation

    needs_host()
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--ep", "dml-wine", "--tier", "smoke", "--ops", "max_pooling2", "--no-progress"]) == 0
    captured = capsys.readouterr()
    (folder,) = (tmp_path / "runs").iterdir()
    assert re.fullmatch(r"dml-wine-\d{8}-\d{6}", folder.name), folder.name
    header = read_run(str(folder))[0]
    record, label = header["emulated_device"], emulation.label(header)
    assert header["ep_flag"] == "dml-wine" and record["label"] == label
    assert label == (f"DirectML.dll {header['gpu']['directml']['version']} on an emulated device (llvmpipe), "
                     f"ONNX Runtime {header['gpu']['onnxruntime']['version']}")
    assert record["onnxruntime"]["wine_host"]["version"] == dml_host.read_host_json()["versions"][
        "onnxruntime_directml_wheel"]
    assert record["onnxruntime"]["linux_process"]["version"] == onnxruntime.__version__ == header["ort_version"]
    assert "on an emulated device" in captured.err.splitlines()[0]
    assert f"device: {label} (emulated: not a hardware result)" in captured.out


def test_devices_lists_the_emulated_adapter_the_wine_host_sees(capsys):
    needs_host()
    with dml_host.DmlWineHost() as host:
        adapters = host.info["adapters"]
    assert main(["devices", "--ep", "dml-wine"]) == 0
    out = capsys.readouterr().out
    assert f"lists {len(adapters)} adapter(s)" in out
    first = next(a for a in adapters if a["index"] == 0)
    assert f"0: {first['description']}" in out and "an emulated Direct3D 12 device" in out
    assert "<- device_id chooses this" in out
    assert main(["devices", "--ep", "dml-wine", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["hosted"]
    assert [a["description"] for a in listed] == [a["description"] for a in adapters] and all(a["emulated"] for a in listed)


def test_directml_asked_for_on_linux_points_to_dml_wine(tmp_path, capsys):
    """No DirectML wheel on Linux: `run --ep dml` and `doctor --ep dml` refuse, naming --ep dml-wine."""
    assert main(["run", "--ep", "dml", "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    assert "--ep dml-wine" in capsys.readouterr().err
    assert main(["doctor", "--ep", "dml"]) == 2
    assert "--ep dml-wine" in capsys.readouterr().err
