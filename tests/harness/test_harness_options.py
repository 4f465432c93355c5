"""The shared option groups (harness/cli/options.py): one definition, one parser each, in every front end."""

import argparse
import ast
import json
import re
from pathlib import Path

import pytest

from ep_testbed.harness.cli import build_parser, parse_args
from ep_testbed.harness.cli.options import (
    GROUPS_ATTRIBUTE,
    OPTION_GROUPS,
    FrontEndError,
    OptionError,
    add_ep_options,
    add_expectation_options,
    add_tolerance_options,
    declare_groups,
    group_values,
    parse_ep,
    parse_expectations,
    parse_tolerances,
    run_config,
)
from ep_testbed.harness.core.tolerances import DEFAULT_TOLERANCES, Tolerance
from ep_testbed.harness.eps.packing import default_batch

ROOT = Path(__file__).resolve().parents[2]
EP_FLAGS = {"--ep", "--ep-option", "--ep-library", "--ep-device"}
SHARED = EP_FLAGS | {"--graph-opt", "--tol", "--tolerances", "--precision-model", "--strict-tolerance"}


def _subparser(parser, *path):
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _flags(parser):
    return {opt for action in parser._actions for opt in action.option_strings}


@pytest.mark.parametrize("path", [("run",), ("model", "run"), ("model", "demo")], ids=" ".join)
def test_run_and_model_commands_take_the_shared_groups(path):
    parser = _subparser(build_parser(), *path)
    assert SHARED <= _flags(parser)
    args = parser.parse_args([*(["m.onnx"] if path == ("model", "run") else []), "--tol", "fp16:ulp=9", "--tol",
                              "fp32:atol=1", "--ep-option", "a=b"])
    assert args.tol == ["fp16:ulp=9", "fp32:atol=1"] and args.ep_option == ["a=b"] and args.ep == "cpu"


def test_the_same_definitions_register_with_pytest_style_addoption():
    seen = {}

    def addoption(*names, **kwargs):
        seen[names[0]] = kwargs

    for add in (add_ep_options, add_tolerance_options, add_expectation_options):
        add(addoption)
    assert set(seen) == SHARED | {"--expectations", "--no-expectations"}
    assert seen["--tol"]["action"] == "append" and seen["--tol"]["default"] == []
    seen.clear()
    add_ep_options(addoption, graph_opt=False)
    assert set(seen) == EP_FLAGS


def _leaves(parser, path=()):
    """``(path, parser)`` of every command that runs a handler."""
    sub = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not sub:
        return [(path, parser)]
    return [leaf for name, child in sub[0].choices.items() for leaf in _leaves(child, (*path, name))]


def test_every_command_that_takes_ep_takes_the_plugin_and_device_flags():
    with_ep = [(path, parser) for path, parser in _leaves(build_parser()) if "--ep" in _flags(parser)]
    assert {path for path, _ in with_ep} >= {("run",), ("fuzz",), ("doctor",), ("devices",), ("model", "run"),
                                            ("model", "demo")}
    for path, parser in with_ep:
        assert EP_FLAGS <= _flags(parser), path


def test_parse_tolerances_applies_defaults_then_file_then_each_tol(tmp_path):
    assert parse_tolerances(None).by_dtype == DEFAULT_TOLERANCES
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"fp16": {"atol": 0.5, "rtol": 0.0, "ulp": None}}))
    tol = parse_tolerances(str(table), ["fp16:ulp=3", "float16:rtol=0.25"])
    assert tol.for_dtype("FLOAT16") == Tolerance(atol=0.5, rtol=0.25, ulp=3)
    assert tol.for_dtype("FLOAT32") == DEFAULT_TOLERANCES["FLOAT32"]


@pytest.mark.parametrize("content, overrides, words", [
    (None, ["fp16"], "expected DTYPE:key=value"),
    (None, ["fp16:speed=1"], "must be atol=X, rtol=X or ulp=N"),
    (None, ["fp16:atol=-1"], "must be a finite number >= 0"),
    (None, ["fp16:atol=nan"], "must be a finite number >= 0"),
    (None, ["flaot16:atol=1"], "is not a data type"),
    ("{not json", [], "not a tolerance table"),
    ('{"FLOAT16": {"abs": 1}}', [], "not a tolerance table"),
    ('{"FLOAT16": 3}', [], "not a tolerance table"),
    ('{"FLOAT16": {"atol": NaN}}', [], "NaN is not JSON"),
    ('{"FLOAT16": {"atol": "0.1"}}', [], "FLOAT16.atol = '0.1': must be a finite number >= 0"),
    ('{"FLOAT16": {"atol": 1e999}}', [], "overflows a float"),
    ('{"FLOAT16": {"ulp": 1.5}}', [], "FLOAT16.ulp = 1.5: must be a whole number"),
    ('{"FLAOT16": {"atol": 1}}', [], "'FLAOT16' is not a data type"),
    ('[1, 2]', [], "a tolerance table is a JSON object"),
])
def test_parse_tolerances_errors_name_the_flag_and_the_form(tmp_path, content, overrides, words):
    path = None
    if content is not None:
        path = tmp_path / "t.json"
        path.write_text(content)
    with pytest.raises(OptionError, match="--tol") as info:
        parse_tolerances(str(path) if path else None, overrides)
    assert words in str(info.value)


def test_parse_tolerances_names_a_missing_file(tmp_path):
    with pytest.raises(OptionError, match=r"--tolerances .*none\.json: cannot read it"):
        parse_tolerances(str(tmp_path / "none.json"))


def test_parse_ep_resolves_aliases_and_options_and_names_what_is_installed():
    ep = parse_ep("CPU", ["intra=1"])
    assert ep.provider == "CPUExecutionProvider" and ep.alias == "cpu" and ep.options == {"intra": "1"}
    with pytest.raises(OptionError, match="KEY=VALUE"):
        parse_ep("cpu", ["device_id"])
    with pytest.raises(OptionError, match="Installed providers: .*CPUExecutionProvider"):
        parse_ep("dml")


def test_parse_expectations_bundled_file_override_disable(tmp_path):
    assert len(parse_expectations(None, False, "cpu")) > 0
    assert len(parse_expectations(None, True, "cpu")) == 0
    assert len(parse_expectations(None, False, "no-such-ep")) == 0
    path = tmp_path / "e.json"
    path.write_text("{")
    with pytest.raises(OptionError, match="--expectations .*e.json: not an expectations file: not JSON"):
        parse_expectations(str(path), False, "cpu")
    path.write_text(json.dumps({"expectations": [{"id": "x"}]}))
    with pytest.raises(OptionError, match=r"expectations\[0\]: missing outcome, reason, link"):
        parse_expectations(str(path), False, "cpu")
    with pytest.raises(OptionError, match="cannot read it"):
        parse_expectations(str(tmp_path / "none.json"), False, "cpu")


# --- the run group and the one path from options to a run's configuration --------------------

RUN_GROUP = ("--ops", "--seed", "--jobs", "--timeout", "--out", "--overwrite", "--resume",
             "--case-timeout", "--catalog-seed")


def _definitions(path):
    """``(flag, line)`` of every call in ``path`` whose first argument is a run-group flag literal
    and that registers an option (``add_argument``, ``addoption`` or an ``add`` callable)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        flag = node.args[0].value
        if name in ("add_argument", "addoption", "add") and flag in RUN_GROUP:
            found.append((flag, node.lineno))
        if name.startswith("add_") and any(k.arg == "flag" for k in node.keywords):
            found += [(k.value.value, node.lineno) for k in node.keywords if k.arg == "flag"]
    return found


def test_each_run_group_flag_is_defined_once_in_options_py():
    harness = ROOT / "harness"
    elsewhere = {str(p.relative_to(ROOT)): _definitions(p) for p in harness.rglob("*.py") if p.name != "options.py"}
    elsewhere = {path: found for path, found in elsewhere.items()
                 if any(flag in RUN_GROUP[:7] for flag, _ in found)}
    assert not elsewhere, f"run-group flags defined outside harness/cli/options.py: {elsewhere}"
    literals = [node.value for node in ast.walk(ast.parse((harness / "cli" / "options.py").read_text()))
                if isinstance(node, ast.Constant) and node.value in RUN_GROUP]
    assert sorted(literals) == sorted(RUN_GROUP[:7]), literals  # each spelled once, where it is defined


SAME = ["--seed", "7", "--tol", "fp16:ulp=9", "--strict-tolerance", "--ep-option", "a=b", "--graph-opt"]
OPS = ["--ops", "roi_pooling,max_pooling2"]  # model run judges whatever nodes a model has: no --ops


class _PytestConfig:
    """What the pytest plugin reads options from: ``getoption`` with pytest's dests."""

    def __init__(self, **values):
        self.values = values

    def getoption(self, name):
        if name not in self.values:
            raise ValueError(name)
        return self.values[name]


def _configs():
    """``RunConfig`` of the same flags given to ``run``, ``fuzz``, ``model run`` and the pytest plugin."""
    from ep_testbed.harness.pytest_plugin import _namespace

    got = {name: run_config(parse_args(argv)) for name, argv in
           (("run", ["run", *SAME, *OPS]), ("fuzz", ["fuzz", *SAME, *OPS]), ("model run", ["model", "run", "m.onnx",
                                                                                         *SAME]))}
    plugin = _PytestConfig(ep="cpu", ep_option=["a=b"], graph_opt=True, tol=["fp16:ulp=9"], tolerances=None,
                           precision_model=None, strict_tolerance=True, expectations=None, no_expectations=False,
                           ops="roi_pooling,max_pooling2", case_timeout=120.0, catalog_seed=7)
    got["pytest plugin"] = run_config(_namespace(plugin))
    return got


def test_run_fuzz_model_run_and_the_plugin_read_the_same_flags_into_the_same_config():
    configs = _configs()
    first = configs["run"]
    for name, config in configs.items():
        assert (config.ep, config.tolerances.by_dtype, config.precision_model, config.seed, config.graph_opt) == \
            (first.ep, first.tolerances.by_dtype, "exact", 7, True), name
        assert config.ops == (None if name == "model run" else ["roi_pooling", "max_pooling2"]), name
        case = config.case_config()
        assert case.session.graph_opt is True and case.precision_model == "exact" and case.ep.options == {"a": "b"}
    assert configs["model run"].expectations.entries == []  # model run has no expectations group
    assert configs["run"].expectations.source == configs["pytest plugin"].expectations.source != ""
    assert (configs["run"].timeout, configs["fuzz"].timeout, configs["model run"].timeout) == (120.0, 30.0, None)


@pytest.mark.parametrize("value, words", [("nope", "--ops 'nope': not an operator; choose from"),
                                          ("roi_pooling,max_pool", "--ops 'max_pool': not an operator"),
                                          (",", "--ops ',' names no operator")])
def test_ops_is_refused_alike_by_run_fuzz_and_the_plugin(value, words):
    from ep_testbed.harness.pytest_plugin import _namespace

    for command in ("run", "fuzz"):
        with pytest.raises(OptionError, match=re.escape(words)):
            run_config(parse_args([command, "--ops", value]))
    with pytest.raises(OptionError, match=re.escape(words)):
        run_config(_namespace(_PytestConfig(ops=value)))


def test_fuzz_refuses_jobs_0_and_run_takes_it_in_process():
    assert run_config(parse_args(["run", "--jobs", "0"])).jobs == 0
    with pytest.raises(OptionError, match=r"--jobs 0: must be >= 1"):
        run_config(parse_args(["fuzz", "--jobs", "0"]), workers_only=True)


# --- option groups: a front end declares what it adds, run_config reads exactly that ---------

def _front_ends() -> dict[str, argparse.Namespace]:
    """The parsed options of every front end that calls ``run_config``, with no flag given."""
    from ep_testbed.harness.pytest_plugin import _namespace

    return {"run": parse_args(["run"]), "fuzz": parse_args(["fuzz"]), "model run": parse_args(["model", "run", "m.onnx"]),
            "model demo": parse_args(["model", "demo"]), "pytest plugin": _namespace(_PytestConfig())}


def test_every_front_end_declares_exactly_the_option_groups_it_adds():
    for name, args in _front_ends().items():
        declared = getattr(args, GROUPS_ATTRIBUTE)
        for group in OPTION_GROUPS.values():
            present = [hasattr(args, dest) for dest in group.dests]
            assert all(present) if group.name in declared else not any(present), (name, group.name)
        group_values(args)  # agrees with its own declaration


def _bare(*groups: str, **values) -> argparse.Namespace:
    """A front end's namespace declaring ``groups`` and holding ``values`` (the EP and tolerance
    groups, which every run needs, filled with their defaults unless given)."""
    base = {"ep": "cpu", "ep_option": [], "ep_library": None, "ep_device": None, "tol": [], "tolerances": None,
            "precision_model": None, "strict_tolerance": False}
    args = argparse.Namespace(**{**base, **values})
    declare_groups(args, "ep", "tolerances", *groups)
    return args


def test_a_group_added_but_not_declared_is_refused_not_read_as_its_defaults():
    # --no-expectations added, the expectations group forgotten: before, the run silently had none
    with pytest.raises(FrontEndError, match=r"\['expectations', 'no_expectations'\] of option group expectations "
                                            r"were added but the group is not declared"):
        run_config(_bare(expectations=None, no_expectations=False))


def test_a_group_declared_but_not_added_is_refused():
    with pytest.raises(FrontEndError, match=r"option group jobs is declared but \['jobs'\] were never added"):
        run_config(_bare("jobs"))


def test_a_run_cannot_do_without_the_ep_group_nor_a_declaration():
    args = _bare()
    declare_groups(args, "tolerances")
    for name in ("ep", "ep_option", "ep_library", "ep_device"):
        delattr(args, name)
    with pytest.raises(FrontEndError, match="option group ep is not declared, and a run cannot do without it"):
        run_config(args)
    with pytest.raises(FrontEndError, match="declare no option groups"):
        run_config(argparse.Namespace(ep="cpu"))
    with pytest.raises(FrontEndError, match=r"option group\(s\) \['nope'\] unknown"):
        declare_groups(argparse.Namespace(), "nope")


def test_an_undeclared_group_stands_for_its_absent_values():
    config = run_config(_bare())
    assert (config.jobs, config.timeout, config.seed, config.ops, config.corpus, config.also_on) == \
        (1, None, 0, None, (), None)
    assert config.expectations.entries == [] and config.batch == default_batch(config.ep)


def test_batch_and_also_on_are_read_once_by_run_config_for_every_front_end():
    assert run_config(parse_args(["run", "--ep", "cpu", "--batch", "4"])).batch == 4
    assert run_config(parse_args(["fuzz", "--ep", "cpu", "--batch", "3"])).batch == 3
    assert run_config(parse_args(["run", "--ep", "cpu", "--also-on", "none"])).also_on is None
    with pytest.raises(OptionError, match="--also-on cpu: that is the EP under test"):
        run_config(parse_args(["fuzz", "--ep", "cpu", "--also-on", "cpu"]))
    for name, args in _front_ends().items():
        if name in ("model run", "model demo", "pytest plugin"):  # no --also-on: nothing re-checked
            assert run_config(args).also_on is None, name


def test_a_front_end_that_disagrees_with_its_groups_is_an_internal_error_not_a_usage_one(monkeypatch, capsys):
    from ep_testbed.harness.cli import main
    from ep_testbed.harness.cli import options as options_mod
    from ep_testbed.harness.core.exit_codes import INTERNAL

    # a group every run needs that no front end adds yet: each command must refuse to guess it
    groups = {**OPTION_GROUPS, "extra": options_mod.OptionGroup("extra", ("extra",))}
    monkeypatch.setattr(options_mod, "OPTION_GROUPS", groups)
    assert main(["run", "--ep", "cpu", "--list"]) == INTERNAL
    assert "option group extra is not declared" in capsys.readouterr().err
