"""The results schema (``harness.core.results``): one set of outcomes, keys and folder names that
every writer and reader agrees on -- the runner, ``ep-testbed gen``, the exit code and the reports.
"""

import json
import math
import os
import re
import subprocess
import sys
import typing
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from local_cases import HERE, build_catalog

from ep_testbed.harness.cli import main, parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core import results
from ep_testbed.harness.core.exit_codes import FAILED as EXIT_FAILED
from ep_testbed.harness.core.expectations import parse as parse_expectations
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run.case_run import CaseConfig, new_line
from ep_testbed.harness.run.runner import RunOptions, run_cases
from ep_testbed.harness.run.summary import failing_outcomes
from ep_testbed.harness.run.worker import FAULT_ENV
from ep_testbed.reports import render_junit, render_run, render_summary_json

ROOT = os.path.dirname(os.path.dirname(HERE))


def cli(*args):
    """``ep-testbed ARGS`` as a user runs it, with tests/harness importable by its workers."""
    env = dict(os.environ, PYTHONPATH=HERE)
    env.pop(FAULT_ENV, None)
    return subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def expectations_file(tmp_path, case_id, outcome="fail"):
    """An expectations file that expects ``case_id`` to end in ``outcome``."""
    path = tmp_path / "expectations.json"
    path.write_text(json.dumps({"expectations": [
        {"id": case_id, "outcome": outcome, "reason": "test", "link": "https://example.org/1",
         **({"readings": ["lowest-start"]} if outcome == "fail" else {})}]}))
    return str(path)


def test_outcome_groups_partition_the_one_outcome_tuple():
    groups = (results.PASSING, results.FAILING, results.EXPECTED_FAILURE, results.NOT_TESTED)
    named = [o for group in groups for o in group]
    assert sorted(named) == sorted(results.OUTCOMES) and len(set(named)) == len(named) == 11
    assert set(results.NO_VERDICT) < set(results.WRONG) < set(results.FAILING)
    assert "fixed" in results.FAILING and "fixed" not in results.WRONG
    assert set(results.NOT_TESTED) == {"not-on-ep", "inexpressible", "emulation-gap"}
    assert sorted(results.REPORT_ORDER) == sorted(results.OUTCOMES)
    assert results.REPORT_ORDER[:len(results.FAILING)] == results.FAILING and results.REPORT_ORDER[-1] == "pass"
    assert failing_outcomes() == results.FAILING
    assert set(failing_outcomes(True, True)) == set(results.FAILING) | {"not-on-ep", "inexpressible"}


def test_non_finite_numbers_round_trip_as_strings():
    line = {"errors": {"max_abs": math.inf, "max_rel": -math.inf, "max_ulp": math.nan}}
    text = results.dumps(line)
    assert "NaN" not in text and "Infinity" not in text
    errors = json.loads(text)["errors"]
    assert errors == {"max_abs": "inf", "max_rel": "-inf", "max_ulp": "nan"}
    decoded = {k: results.decode_number(v) for k, v in errors.items()}
    assert decoded["max_abs"] == math.inf and decoded["max_rel"] == -math.inf and math.isnan(decoded["max_ulp"])
    assert results.decode_number("Infinity") == math.inf and results.decode_number("text") == "text"
    assert results.decode_number(1.5) == 1.5


def test_a_case_line_has_exactly_the_schema_keys():
    case = build_catalog(count=1)[0]
    line = new_line(case, resolve_ep("cpu"))
    assert tuple(line) == results.CASE_KEYS
    assert line["type"] == results.CASE and line["id"] == case.id and tuple(line["errors"]) == results.ERROR_KEYS
    with pytest.raises(KeyError, match="CASE_KEYS"):
        results.case_record(id="x", colour="red")


def test_every_line_a_run_writes_carries_exactly_the_schema_keys(tmp_path):
    """A real run: passes, a crash (the pool's line) and a ``fixed`` case (the runner's
    expectation step): each line on disk has every key of CASE_KEYS and no other."""
    cases = build_catalog(count=4)
    config = CaseConfig(ep=resolve_ep("cpu"), mapper="local_cases:to_onnx")
    expectations = parse_expectations({"expectations": [
        {"id": cases[1].id, "outcome": "fail", "readings": ["lowest-start"], "reason": "test",
         "link": "https://example.org/1"}]})
    env = dict(os.environ, **{FAULT_ENV: f"abort={cases[2].id}"})
    options = RunOptions(out_dir=str(tmp_path / "r"), jobs=1, timeout=60, progress=False, env=env,
                         extra_paths=(HERE,))
    run = run_cases(cases, config, options, expectations)
    assert [line["outcome"] for line in run.lines] == ["pass", "fixed", "crash", "pass"]
    header, lines, end = results.read_run(str(tmp_path / "r"))
    assert header["type"] == results.RUN and end["type"] == results.END and len(lines) == 4
    for line in lines:
        assert tuple(line) == results.CASE_KEYS, sorted(set(line) ^ set(results.CASE_KEYS))
        assert tuple(line["errors"]) == results.ERROR_KEYS



def test_the_case_schema_is_derived_from_the_case_line_type():
    """One list of keys: ``CASE_KEYS`` and ``CASE_SCHEMA`` are ``CaseLine``'s keys in its order,
    each with its annotation as JSON kinds. The kinds of these keys follow from the contract in
    harness/README.md ("Results"): the type, id and outcome are always text; ``errors`` holds
    ``ERROR_KEYS`` (an object); ``worst`` and ``knife_edges`` list entries; ``mismatches`` counts
    elements; ``tolerance_used`` is a share and ``duration_s`` a sum of seconds (numbers: an int,
    a float or a non-finite spelling); ``input_extremes`` lists value classes."""
    r = results
    assert r.CASE_KEYS == tuple(r.CASE_SCHEMA) == tuple(typing.get_type_hints(r.CaseLine))
    assert r.CASE_SCHEMA == r.schema_of(r.CaseLine)
    assert r.CASE_SCHEMA["type"] == r.CASE_SCHEMA["id"] == r.CASE_SCHEMA["outcome"] == (r.STR,)
    assert r.CASE_SCHEMA["errors"] == (r.OBJECT, r.NULL)
    assert r.CASE_SCHEMA["worst"] == r.CASE_SCHEMA["knife_edges"] == r.CASE_SCHEMA["input_extremes"] == (r.LIST, r.NULL)
    assert r.CASE_SCHEMA["mismatches"] == (r.INT, r.NULL)
    assert r.CASE_SCHEMA["tolerance_used"] == r.CASE_SCHEMA["duration_s"] == (r.NUMBER, r.NULL)
    for number in (3, 0.25, "nan", "-inf"):  # a number is an int, a float or a non-finite spelling
        assert r.check_record({"type": "case", "id": "x", "tolerance_used": number}) is None, number
    assert "tolerance_used is a boolean" in r.check_record({"type": "case", "id": "x", "tolerance_used": True})


def test_schema_of_maps_each_annotation_to_its_json_kinds_and_refuses_any_other():
    class Line(typing.TypedDict, total=False):
        a: str
        b: int | None
        c: float
        d: dict[str, int] | None
        e: list[str]
        f: bool | None

    r = results
    assert r.schema_of(Line) == {"a": (r.STR,), "b": (r.INT, r.NULL), "c": (r.NUMBER,), "d": (r.OBJECT, r.NULL),
                                 "e": (r.LIST,), "f": (r.BOOL, r.NULL)}

    class Bad(typing.TypedDict):
        g: bytes | None

    with pytest.raises(TypeError, match="Bad.g"):
        r.schema_of(Bad)


def test_the_readme_lists_every_case_line_key_in_order():
    """harness/README.md says ``CASE_KEYS`` is "every key of a case line, no more, no fewer"."""
    text = Path(ROOT, "harness", "README.md").read_text(encoding="utf-8")
    listed = re.search(r"`CASE_KEYS`: every key of a case line.*?:\s*`(type [a-z_\s]+)`", text, re.DOTALL)
    assert listed is not None and tuple(listed.group(1).split()) == results.CASE_KEYS


@pytest.mark.slow
def test_check_record_holds_a_real_run_to_the_schema_key_by_key(tmp_path):
    """Every line a real ``run --ep cpu --tier smoke`` writes fits the schema, and each case line
    with any one key holding a kind the schema does not allow it is refused, naming that key."""
    out = tmp_path / "smoke"
    assert main(["run", "--ep", "cpu", "--tier", "smoke", "--out", str(out), "--no-progress"]) == 0
    lines = [json.loads(text) for text in (out / results.RESULTS_FILE).read_text().splitlines()]
    cases = [line for line in lines if line["type"] == results.CASE]
    assert len(cases) > 10 and [results.check_record(line) for line in lines] == [None] * len(lines)
    samples = ("text", {}, [], 7, 2.5, True, None)
    for key, kinds in results.CASE_SCHEMA.items():
        allowed = {*kinds, *((results.INT,) if results.NUMBER in kinds else ())}
        wrong = [value for value in samples if results.kind_of(value) not in allowed]
        assert wrong, key
        for line, value in zip(cases, wrong * len(cases)):
            problem = results.check_record({**line, key: value})
            assert problem is not None and problem.split()[0] == key, (key, value, problem)

@pytest.mark.slow
def test_gen_and_run_name_a_case_folder_alike(tmp_path):
    case_id = cli("run", "--ops", "roi_pooling", "--list").stdout.split()[0]
    gen = cli("gen", "--op", "roi_pooling", "--out", str(tmp_path / "gen"))
    assert gen.returncode == 0, gen.stderr
    index = json.loads((tmp_path / "gen" / "cases.json").read_text())
    gen_folder = next(c["folder"] for c in index["cases"] if c["id"] == case_id)
    assert (tmp_path / "gen" / gen_folder / "desc.json").is_file()
    # an expectation on the case makes `run` keep its folder whatever the outcome
    run = cli("run", "--ep", "cpu", "--ops", "roi_pooling", "-k", case_id, "--jobs", "0",
              "--expectations", expectations_file(tmp_path, case_id), "--out", str(tmp_path / "run"))
    assert run.returncode in (0, 1), run.stderr
    [line] = results.read_run(str(tmp_path / "run"))[1]
    assert line["artifacts"] == results.case_dir(case_id)
    assert Path(line["artifacts"]).name == gen_folder == results.safe_id(case_id)
    assert (tmp_path / "run" / line["artifacts"] / "desc.json").is_file()


def test_safe_id_is_portable_and_keeps_distinct_ids_apart():
    ids = ["roi_align1/avg-fp16", "roi_align1_avg-fp16", "a/b:c*d?<e>|f", "x" * 300]
    names = [results.safe_id(i) for i in ids]
    assert len(set(names)) == len(ids)
    for name in names:
        assert all(c.isalnum() or c in "._+=-" for c in name) and len(name) <= 129


def test_one_fixed_case_fails_the_exit_code_junit_summary_and_report_alike(tmp_path):
    """Regression: a lone ``fixed`` case used to exit 1 and fail in junit.xml while summary.json
    said ``bad: 0, failing: []``."""
    fixed_id = "max_pooling2/local-w2-00"
    out = tmp_path / "r"
    args = parse_args(["run", "--jobs", "2", "--expectations", expectations_file(tmp_path, fixed_id),
                       "--out", str(out), "--no-progress"])
    code = run_command(args, catalog="local_cases:build_catalog", mapper="local_cases:to_onnx", worker_paths=(HERE,))
    assert code == EXIT_FAILED
    lines = results.read_run(str(out))[1]
    assert len(lines) == 12 and [l["id"] for l in lines if l["outcome"] != "pass"] == [fixed_id]
    assert {l["id"] for l in lines if l["outcome"] in failing_outcomes()} == {fixed_id}

    suite = ET.parse(render_junit(out)).getroot().find("testsuite")
    junit_failing = {tc.get("name") for tc in suite.iter("testcase")
                     if tc.find("failure") is not None or tc.find("error") is not None}
    assert junit_failing == {fixed_id}
    assert int(suite.get("failures")) + int(suite.get("errors")) == 1

    summary = json.loads(render_summary_json(out).read_text())
    assert summary["bad"] == 1 and summary["counts"]["fixed"] == 1
    assert [(f["id"], f["outcome"]) for f in summary["failing"]] == [(fixed_id, "fixed")]

    html = render_run(out).read_text()
    assert "1 of 12 cases failing" in html


def test_the_schema_module_imports_neither_onnx_nor_onnxruntime():
    """The reports import it; a machine that only renders reports need not have ONNX Runtime."""
    code = ("import sys, ep_testbed.harness.core.results\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnxruntime'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


@pytest.mark.parametrize("value, said", [(5, "shard is an integer"), ({}, "shard is an object"),
                                         ([1], "shard is a list"), (True, "shard is a boolean")])
def test_a_damaged_line_names_the_kind_it_holds_with_its_article(value, said):
    from ep_testbed.harness.core.results import check_record

    why = check_record({"type": "run", "shard": value})
    assert why is not None and why.startswith(said + ";"), why
