"""The EP registry: every EP is one record, everything asks it, and a new EP is added through it alone.

A toy EP (``toy_ep.py``: ONNX Runtime's CPU EP held under another name by an adapter of its own,
every field of its record filled) is registered with one ``register(EpRecord(...))`` call and then
runs through ``ep-testbed run``, ``fuzz``, ``doctor``, ``devices`` and the report, its workers
loading it by the module its spec names, with no other file of the testbed touched. No module
outside the EP room (``harness/eps/``) names an EP in its code.
"""

import ast
import dataclasses
import json
import os
import pathlib
import re

import pytest

from ep_testbed.harness.cli import main
from ep_testbed.harness.cli.options import parse_expectations
from ep_testbed.harness.core import expectations as exp
from ep_testbed.harness.core import walltime
from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.eps import adapters, device_loss, early_start, packing, preflight, providers, registry
from ep_testbed.harness.eps.registry import EpContractError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = pathlib.Path(HERE).parents[1]


@pytest.fixture
def toy(monkeypatch):
    """The toy EP registered for one test; worker processes find its module on PYTHONPATH."""
    import toy_ep

    registry.register(toy_ep.RECORD)  # again, in case an earlier test unregistered it
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p))
    yield toy_ep
    for name in [n.name for n in registry.records() if n.name not in registry.BUILT_IN]:
        registry.unregister(name)
    adapters.forget_adapters()


def _cli(args, capsys):
    """``ep-testbed ARGS`` in this process (the toy is registered here); exit code, stdout, stderr."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_table_of_an_ep_is_read_from_its_record():
    """The aliases, wheels, plugin packages, defaults, device-loss patterns and device-id rules are
    the records', in the order registered (the aliases message lists them in that order)."""
    records = registry.records()
    assert [r.name for r in records][:9] == list(providers.ALIASES) == list(registry.aliases())
    assert providers.ALIASES == {a: r.provider for r in records for a in r.aliases}
    assert preflight.WHEELS == {r.provider: r.wheels[0] for r in records if r.wheels}
    assert preflight.PLUGIN_PACKAGES == {r.provider: r.plugin_packages[0] for r in records if r.plugin_packages}
    assert packing.DEFAULT_BATCH == {"CUDAExecutionProvider": 32, "WebGpuExecutionProvider": 32}
    assert packing.DEFAULT_JOBS == {"CUDAExecutionProvider": 4, "WebGpuExecutionProvider": 4}
    assert device_loss.PATTERNS == tuple(p for r in records for p in r.device_loss)
    assert set(providers.INDEX_DEVICE_ID) == {r.provider for r in records if r.device_id_index}
    assert registry.of_provider("DmlExecutionProvider").name == "dml"  # the built-in EP, not its Wine hold
    wine = registry.named("dml-wine")
    assert wine.held_its_own_way and wine.alias == "dml" and registry.held_by(wine.holder) is wine
    assert set(early_start.EARLY) <= {r.name for r in records}  # an EP started early is a record's


def test_design_md_states_every_field_of_the_record():
    section = (ROOT / "DESIGN.md").read_text(encoding="utf-8").split("## One EP, one place")[1].split("\n## ")[0]
    assert [f.name for f in dataclasses.fields(registry.EpRecord) if f"`{f.name}" not in section] == []


@pytest.mark.parametrize("change, named", [
    (dict(name="Toy EP"), "name must be a lower-case word"),
    (dict(provider=""), "provider must be ONNX Runtime's provider name"),
    (dict(aliases=("cpu",)), "'cpu' already names EP record 'cpu'"),
    (dict(aliases=("toy2", "dml-wine")), "'dml-wine' already names EP record 'dml-wine'"),
    (dict(name="toy2"), "adapter ToyAdapter already holds EP record 'toy'"),
    (dict(adapter=dict), "adapter must be a subclass of harness.eps.holders.EpAdapter"),
    (dict(default_batch=0), "default_jobs and default_batch must be at least 1"),
])
def test_register_refuses_a_record_that_breaks_the_contract(toy, change, named):
    with pytest.raises(EpContractError) as caught:
        registry.register(dataclasses.replace(toy.RECORD, **change))
    assert named in str(caught.value) and "\nNote: " in str(caught.value)
    assert registry.named("toy") is toy.RECORD  # the refused record replaced nothing


def test_the_toy_runs_and_reports_under_its_own_name(toy, tmp_path, capsys):
    """``run --ep toy``: its record's defaults (one worker, two cases a session), its adapter's
    sessions in worker processes that load it from the module its spec names, every node proven on
    ``ToyExecutionProvider``, the CPU EP's verdicts, its identity in the header and the report."""
    out, cpu = tmp_path / "toy", tmp_path / "cpu"
    code, _, err = _cli(["run", "--ep", "toy", "--ops", "max_pooling2", "--tier", "smoke", "--out", out], capsys)
    assert code == 0, err
    assert f"on ToyExecutionProvider ({toy.RECORD.label}) (1 workers, up to 2 cases a session)" in err
    header, lines = read_run(str(out))[:2]
    assert header["ep"] == "ToyExecutionProvider" and header["ep_alias"] == "toy" and header["ep_flag"] == "toy"
    assert header["ep_held_by"] == {"holder": "toy", "wraps": "CPUExecutionProvider"}
    assert header["batch"] == 2 and header["jobs"] == 1
    assert toy.NOTE in header["gpu"]["summary"]
    assert lines and all(set(line["placement"].values()) == {"ToyExecutionProvider"} for line in lines)
    code, _, err = _cli(["run", "--ep", "cpu", "--ops", "max_pooling2", "--tier", "smoke", "--jobs", 1, "--out", cpu],
                        capsys)
    assert code == 0, err
    assert {line["id"]: line["outcome"] for line in lines} == {line["id"]: line["outcome"]
                                                               for line in read_run(str(cpu))[1]}
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "ToyExecutionProvider" in html and toy.NOTE in html


def test_the_toys_spec_names_the_module_a_worker_loads_it_from(toy):
    spec = adapters.resolve("toy")
    assert spec.holder == "toy" and spec.adapter_module == "toy_ep" and spec.to_json()["adapter_module"] == "toy_ep"
    assert adapters.resolve("cpu").to_json() == {"provider": "CPUExecutionProvider", "alias": "cpu", "options": {}}
    with pytest.raises(providers.EpNotAvailable, match="--ep toy is held by its own adapter"):
        adapters.resolve("toy", device="0")


def test_the_toy_fuzzes_with_the_cpu_eps_verdicts(toy, tmp_path, capsys):
    runs = {}
    for ep in ("toy", "cpu"):
        out = tmp_path / ep
        code, _, err = _cli(["fuzz", "--ep", ep, "--ops", "max_pooling2", "--max-cases", 30, "--shrink", "none",
                             "--also-on", "none", "--no-expectations", "--jobs", 1, "--out", out], capsys)
        assert code in (0, 1), err
        runs[ep] = read_run(str(out))[1]
    assert {line["id"]: line["outcome"] for line in runs["toy"]} == {line["id"]: line["outcome"] for line in runs["cpu"]}
    placed = [line["placement"] for line in runs["toy"] if line.get("placement")]
    assert placed and all(set(p.values()) == {"ToyExecutionProvider"} for p in placed)


def test_the_wait_for_re_checks_is_its_own_part_of_a_fuzz_runs_wall_time(toy, tmp_path, capsys, monkeypatch):
    """Every toy session perturbed (a wrong element: each case fails), each failure re-checked on the
    CPU EP: the closing line names the wait for the re-checks still out apart from stopping the
    workers, and only when there is a re-check."""
    monkeypatch.setenv("EP_TESTBED_FAULT", "perturb=max_pooling2/*")
    parts = {}
    for also_on in ("cpu", "none"):
        out = tmp_path / also_on
        code, printed, err = _cli(["fuzz", "--ep", "toy", "--ops", "max_pooling2", "--max-cases", 6, "--shrink", "none",
                                   "--also-on", also_on, "--no-expectations", "--jobs", 1, "--out", out], capsys)
        assert code == 1, err
        lines = read_run(str(out))[1]
        assert all(line["outcome"] == "fail" for line in lines) and len(lines) == 6
        assert all((line.get("scope") is not None) == (also_on == "cpu") for line in lines)
        closing = walltime.parse_closing_line(printed)
        assert closing is not None, printed[-600:]
        assert abs(sum(s for _, s in closing.parts) - closing.wall_s) <= 0.01 * (len(closing.parts) + 1)
        parts[also_on] = [name for name, _ in closing.parts]
    stop = parts["cpu"].index("stopping workers")
    assert parts["cpu"][stop + 1] == "re-checks", parts["cpu"]
    assert "re-checks" not in parts["none"] and "stopping workers" in parts["none"], parts["none"]


def test_doctor_runs_the_toys_own_checks(toy, capsys):
    code, out, err = _cli(["doctor", "--ep", "toy"], capsys)
    assert code == 0, err
    assert "ok   ToyExecutionProvider is available (a toy: the CPU EP under another name)" in out
    assert "ok   the toy's own preflight check ran" in out  # its record's preflight hook, through its adapter
    assert "a one-node MaxPool session built and ran on ToyExecutionProvider" in out
    assert f"run headers will record: unknown device ({toy.NOTE};" in out  # its record's identity reader
    assert preflight.explain(f"failed with {toy.CODE}") == f"failed with {toy.CODE} ({toy.MEANING})"
    code, _, err = _cli(["doctor", "--ep", "toy", "--ep-device", "0"], capsys)
    assert code == 2 and "--ep toy is held by its own adapter" in err


def test_devices_lists_what_the_toys_adapter_lists(toy, capsys):
    code, out, err = _cli(["devices", "--ep", "toy"], capsys)
    assert code == 0, err
    assert "ToyExecutionProvider (a toy EP) lists 1 device(s):\n  0: the CPU, under the toy's name" in out
    code, out, _ = _cli(["devices", "--ep", "toy", "--json"], capsys)
    assert code == 0 and json.loads(out)["hosted"] == [{"index": 0, "description": "the CPU, under the toy's name",
                                                       "chosen": True}]


def test_the_toys_device_loss_words_count_while_it_is_registered(toy):
    text = f"session failed: {toy.LOST} on queue 0"
    assert device_loss.device_lost(text) == toy.RECORD.device_loss[0]
    assert toy.RECORD.device_loss[0] not in device_loss.PATTERNS  # the testbed's own list is unchanged
    registry.unregister(toy.NAME)
    assert device_loss.device_lost(text) is None


def test_expectations_get_the_predictor_and_classes_from_the_records(toy, tmp_path):
    """The expectations of ``--ep toy`` hold the causes shared.json writes for the toy's class, and
    an expectations file for the toy's provider gets the toy's predictor; without the record's
    class, none of the shared causes apply."""
    spec = adapters.resolve("toy")
    shared = json.loads((pathlib.Path(exp.EXPECTATIONS_DIR) / exp.SHARED_FILE).read_text(encoding="utf-8"))
    found = parse_expectations(None, False, "toy", spec)
    assert sorted(e.id for e in found.entries + found.inactive) == sorted(e["id"] for e in shared["expectations"])
    registry.register(dataclasses.replace(toy.RECORD, classes=()))
    alone = parse_expectations(None, False, "toy", spec)
    assert alone.entries == [] and alone.inactive == []
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"ep": toy.PROVIDER, "expectations": [
        {"id": "max_pooling2/*", "predicted": [{"field": toy.PREDICTED_FIELD, "kind": "diverges"}],
         "outcome": "not-on-ep", "reason": "the toy predicts it", "link": "https://example.org/toy"}]}))
    assert parse_expectations(str(path), False, "toy", spec).predictor is toy.predict


def test_a_predicted_entry_decides_a_toy_run_through_the_records_predictor(toy, tmp_path, capsys):
    """A strict entry the toy's predictor matches makes a passing case ``fixed``: the run handed the
    expectations the toy record's predictor (without it a predicted entry never matches)."""
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"ep": toy.PROVIDER, "expectations": [
        {"id": "max_pooling2/*", "predicted": [{"field": toy.PREDICTED_FIELD, "kind": "diverges"}],
         "outcome": "not-on-ep", "reason": "the toy predicts it", "link": "https://example.org/toy"}]}))
    out = tmp_path / "run"
    code, _, err = _cli(["run", "--ep", "toy", "--ops", "max_pooling2", "--tier", "smoke", "--expectations", path,
                         "--also-on", "none", "--out", out], capsys)
    lines = read_run(str(out))[1]
    assert code == 1 and lines and {line["outcome"] for line in lines} == {"fixed"}, err


# --- nothing outside the EP room names an EP ---------------------------------------------------

#: Strings outside ``harness/eps`` that hold an EP's name without branching on it, and why.
NOT_A_BRANCH = {
    ("harness/cli/__init__.py", "cpu"): "the install fix names the package extras (ep-testbed[cpu], [cuda], ...)",
    ("harness/cli/__init__.py", "cuda"): "the same install fix",
    ("harness/cli/__init__.py", "openvino"): "the same install fix",
    ("harness/cli/__init__.py", "webgpu"): "the same install fix",
    ("harness/cli/options.py", "cpu"): "--ep's help text lists the common aliases",
    ("harness/cli/options.py", "dml"): "the same help text",
    ("harness/cli/options.py", "openvino"): "the same help text",
    ("harness/cli/options.py", "cuda"): "the same help text",
    ("harness/cli/options.py", "webgpu"): "the same help text",
    ("harness/cli/options.py", "dml-wine"): "the same help text",
    ("harness/cli/devices.py", "WebGpuExecutionProvider"): "an example in the refusal of --from with a plugin",
    ("harness/cli/diff.py", "dml-wine"): "--allow-mixed's help text names the emulated device's flag",
    ("harness/core/expectations.py", "CUDAExecutionProvider"): "an example in the refusal of a bad applies_to item",
    ("harness/core/expectations.py", "cuda"): "the same example",
    ("harness/core/emulation.py", "dml-wine"): "EP_FLAG, a public constant no code branches on",
    ("harness/core/installed.py", "cpu"): "machine_info's key for the machine's CPU model, not an EP",
    ("harness/core/rerun.py", "cpu"): "the rerun line of a header that names no EP (core cannot ask the registry)",
    ("harness/run/worker.py", "DmlExecutionProvider"): "the device-lost fault's planted text, the DirectML EP's words",
    ("harness/run/worker.py", "dml"): "the same planted text (a source path in it)",
}


def _code_strings(tree):
    """Every string constant of a module that is not a docstring."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_module_outside_the_ep_room_names_an_ep():
    """EP names (record names, aliases, provider names) appear in harness code only in the EP room
    (``harness/eps/``), apart from the texts ``NOT_A_BRANCH`` lists: a second table would drift."""
    words = {w for r in registry.records() for w in (r.name, r.provider, *r.aliases)}
    pattern = re.compile(r"(?<![\w-])(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")(?![\w-])")
    offenders = set()
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("harness/eps/"):
            continue
        for node in _code_strings(ast.parse(path.read_text(encoding="utf-8"))):
            offenders |= {(rel, word) for word in pattern.findall(node.value)}
    assert sorted(offenders - set(NOT_A_BRANCH)) == []
    assert sorted(set(NOT_A_BRANCH) - offenders) == []  # the list holds no stale entry
