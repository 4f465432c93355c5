"""The shared option groups (harness/cli/options.py): one definition, one parser each, in every front end."""

import argparse
import json

import pytest

from ep_testbed.harness.cli import build_parser
from ep_testbed.harness.cli.options import (
    OptionError,
    add_ep_options,
    add_expectation_options,
    add_tolerance_options,
    parse_ep,
    parse_expectations,
    parse_tolerances,
)
from ep_testbed.harness.core.tolerances import DEFAULT_TOLERANCES, Tolerance

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
