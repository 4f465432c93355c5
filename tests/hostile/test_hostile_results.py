"""Hostile ``results.jsonl`` files fed to every command that reads a run: ``report``, ``findings``,
``ci-summary``, ``diff``, ``merge`` and ``run --resume``. Lines are mutated field by field (wrong types, 400-digit
numbers, control characters, paths that leave the run folder), deleted, repeated, swapped,
torn or replaced by garbage; case folders get links to a file outside the run. Besides the
sandbox's contract (a result or one message, nothing read or written outside the run folders):

- ``merge`` never drops a case silently: when it succeeds, every line that is a case record of
  a readable id is in the merged run;
- ``run --resume`` never loses or repeats a case and never leaves two headers;
- no command opens the file outside the run folder that a link or a path points at.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from hostile_kit import NASTY_TEXT, hostile, mutate_json
from hypothesis import given
from hypothesis import strategies as st

from ep_testbed.harness.cli import parse_args
from ep_testbed.harness.cli.run import run_command

pytestmark = pytest.mark.slow  # every test here runs commands in the sandbox: -m "not slow" skips them

SELECT = "-k=-00,-01,-02"
#: A mapper whose read-back shifts every index: the cases fail, so each has a case folder.
MAPPER = "local_cases:to_onnx_wrong_indices"


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A finished run of three failing test cases, each with its case folder."""
    import local_cases

    out = tmp_path_factory.mktemp("base") / "run"
    code = run_command(parse_args(["run", "--out", str(out), "--jobs", "0", SELECT, "--no-progress"]),
                       catalog="local_cases:build_catalog", mapper=MAPPER, worker_paths=(local_cases.HERE,))
    assert code == 1 and len(list((out / "cases").iterdir())) == 3
    return out


def _mutate_lines(data, lines: list[str]) -> list[str]:
    """One to three edits of a results file's lines (module docstring)."""
    lines = list(lines)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        how = data.draw(st.sampled_from(["field", "field", "field", "artifacts", "id", "delete", "repeat", "swap",
                                         "garbage", "tear", "type"]), label="edit")
        i = data.draw(st.integers(0, len(lines) - 1), label="line") if lines else 0
        if not lines:
            lines.append(data.draw(st.sampled_from(["{}", "[]", "null"])))
        elif how == "field":
            try:
                lines[i] = json.dumps(mutate_json(data, json.loads(lines[i]), "line"))
            except ValueError:
                pass
        elif how == "artifacts":
            try:  # an earlier edit may have torn or garbled the line: then there is no field to set
                record = json.loads(lines[i]) if lines[i].startswith("{\"type\": \"case\"") else None
            except ValueError:
                record = None
            if record is not None:
                record["artifacts"] = data.draw(st.sampled_from(
                    ["../p", "../../secret.txt", "/etc", "cases/../../outside", "cases", ".", "", "cases/x\x1b[2J",
                     *NASTY_TEXT[:6]]), label="artifacts")
                lines[i] = json.dumps(record)
        elif how == "id" and lines[i].startswith('{"type": "case"'):
            try:
                record = json.loads(lines[i])
            except ValueError:  # torn or garbled by an earlier edit
                continue
            record["id"] = data.draw(st.sampled_from(NASTY_TEXT[1:8]), label="id")  # printed by every command
            record["message"] = data.draw(st.sampled_from(NASTY_TEXT[1:8]), label="message")
            lines[i] = json.dumps(record)
        elif how == "delete":
            del lines[i]
        elif how == "repeat":
            lines.insert(i, lines[i])
        elif how == "swap":
            j = data.draw(st.integers(0, len(lines) - 1), label="other line")
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "garbage":
            lines.insert(i, data.draw(st.sampled_from(["{", "not json", "\x00\x01", '{"type": "case"}', "1" * 400,
                                                       '{"type": "case", "id": "x", "errors": [1]}', "[]"])))
        elif how == "tear":
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])), label="cut")]
        elif how == "type":
            lines[i] = lines[i].replace('"type": "case"', '"type": "run"', 1)
    return lines


def _readable_case_ids(lines: list[str]) -> set[str]:
    """Ids of the lines that are JSON objects saying they are cases with a text id."""
    ids = set()
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == "case" and isinstance(record.get("id"), str) \
                and record["id"]:
            ids.add(record["id"])
    return ids


def _hostile_run(base_run, folder, data):
    """A copy of ``base_run`` with its results file mutated and maybe a link to ``secret`` in a
    case folder; returns (run folder, its lines, the secret file)."""
    run = folder / "run"
    shutil.copytree(base_run, run)
    secret = folder / "secret.txt"
    secret.write_text("TOP SECRET")
    lines = _mutate_lines(data, (run / "results.jsonl").read_text().splitlines())
    torn_end = data.draw(st.booleans(), label="no final newline")
    (run / "results.jsonl").write_text("\n".join(lines) + ("" if torn_end else "\n"))
    if data.draw(st.booleans(), label="link"):
        case = sorted((run / "cases").iterdir())[0]
        name = data.draw(st.sampled_from(["expected.npz", "desc.json", "model.onnx", "extra.bin"]), label="linked")
        (case / name).unlink(missing_ok=True)
        os.symlink(secret, case / name)
    return run, lines, secret


@hostile(40)
@given(data=st.data())
def test_report_findings_diff_and_merge_take_hostile_results(sandbox, base_run, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("results")
    run, lines, secret = _hostile_run(base_run, folder, data)
    fenced = dict(temp=sandbox.temp, secrets=[secret])
    sandbox.call(["report", run], kind="report").check((0, 2), reads=[run], writes=[run], **fenced)
    for form in ("markdown", "annotations"):  # prints only; every annotation line one workflow command of ours
        shown = sandbox.call(["ci-summary", run, "--format", form], kind="ci-summary")
        shown.check((0, 2), reads=[run], **fenced)
        if form == "annotations" and shown.code == 0:
            assert all(line.startswith(("::error title=", "::warning title=", "::notice title="))
                       for line in shown.stdout.splitlines()), shown.describe()
    found = folder / "findings"  # the failing cases' folders and lines, bundles of what they hold
    sandbox.call(["findings", run, "--out", found], kind="findings").check((0, 2), reads=[run], writes=[found],
                                                                           **fenced)
    diff_out = folder / "diff"
    sandbox.call(["diff", base_run, run, "--out", diff_out], kind="diff").check(
        (0, 1, 2), reads=[base_run, run], writes=[diff_out], **fenced)
    merged = folder / "merged"
    result = sandbox.call(["merge", run, "--out", merged], kind="merge")
    result.check((0, 1, 2), reads=[run], writes=[merged], **fenced)
    if result.code in (0, 1):
        kept = _readable_case_ids((merged / "results.jsonl").read_text().splitlines())
        assert _readable_case_ids(lines) <= kept, "merge dropped a case: " + result.describe()


@hostile(30)
@given(data=st.data())
def test_resume_takes_a_hostile_results_file(sandbox, base_run, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("resume")
    run, lines, secret = _hostile_run(base_run, folder, data)
    result = sandbox.call(["--out", run, "--jobs", "0", SELECT, "--no-progress", "--resume"],
                          api="run-local", mapper=MAPPER, kind="run --resume")
    result.check((0, 1, 2), reads=[run], writes=[run], temp=sandbox.temp, secrets=[secret])
    if result.code in (0, 1):
        text = (run / "results.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in text]
        ids = [r["id"] for r in records if r["type"] == "case"]
        assert sorted(ids) == ["max_pooling2/local-w2-00", "max_pooling2/local-w2-01", "max_pooling2/local-w3-02"]
        assert [r["type"] for r in records].count("run") == 1, result.describe()
