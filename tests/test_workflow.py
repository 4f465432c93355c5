"""``.github/workflows/dml-conformance.yml``, checked here since it cannot run here (it needs a
Windows GPU runner): valid against GitHub's workflow schema (SchemaStore's, as vendored by the
check-jsonschema package, a test dependency), shaped as README's "DirectML conformance in CI"
says (doctor, shards, merge and gate per GPU of the device matrix; the job summary and check
annotations printed by ``ep-testbed ci-summary``; a time limit on every job; one run at a time
per runner pool), and every ``ep-testbed`` command in it accepted by the command's own parser.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from ep_testbed.harness.cli import build_parser


def _require(module):
    """``module`` (from the test extras); skipped without it, except under CI where it is a failure."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        message = f"{module} is not installed: pip install -e '.[test]'"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOW = os.path.join(ROOT, ".github", "workflows", "dml-conformance.yml")
#: Values for the expressions and variables the commands hold.
SUBSTITUTIONS = {"${{ steps.baseline.outputs.dir }}": "baselines/dml/device-0", "$DEVICE_ID": "0", "$SHARD": "1"}
#: Shell words that end a command (what follows is the shell's, not the command's).
SHELL_OPERATORS = {"|", ">", ">>", "&&", "||", ";", "2>&1"}
#: The GPU matrix every per-GPU job runs over (README.md, "DirectML conformance in CI").
DEVICES = "${{ fromJSON(inputs.devices || vars.DML_DEVICES || format('[\"{0}\"]', vars.DML_DEVICE_ID || '0')) }}"


@pytest.fixture(scope="module")
def workflow():
    yaml = _require("ruamel.yaml")  # installed with check-jsonschema ([test] extras)
    with open(WORKFLOW, encoding="utf-8") as f:
        return yaml.YAML(typ="safe").load(f)


def _steps(job):
    return [step for step in job.get("steps", [])]


def _windows(job):
    return "windows" in str(job.get("runs-on"))


def test_the_workflow_is_valid_against_githubs_workflow_schema():
    _require("check_jsonschema")
    p = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                        WORKFLOW], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_windows_jobs_use_bash_and_a_venv_and_never_powershell_or_the_shared_interpreter(workflow):
    assert workflow["defaults"]["run"]["shell"] == "bash"
    windows = {name: job for name, job in workflow["jobs"].items() if _windows(job)}
    assert set(windows) == {"doctor", "shard", "windows-tests"}
    for name, job in windows.items():
        steps = _steps(job)
        assert not any("setup-python" in str(s.get("uses", "")) for s in steps), name
        assert not any(s.get("shell") in ("pwsh", "powershell") for s in steps), name
        scripts = "\n".join(str(s.get("run", "")) for s in steps)
        assert scripts.index("python -m venv .venv-dml") < scripts.index("pip install -e"), name
        assert "pip install" not in scripts.replace(".venv-dml/Scripts/python.exe -m pip install", ""), name
    assert "pwsh" not in open(WORKFLOW, encoding="utf-8").read().replace("PowerShell 7 is not needed", "")


def test_doctor_first_then_shards_merge_and_the_baseline_gate(workflow):
    jobs = workflow["jobs"]
    assert jobs["shard"]["needs"] == "doctor" and jobs["windows-tests"]["needs"] == "doctor"
    assert jobs["merge"]["needs"] == "shard" and jobs["merge"]["if"] == "always()"
    assert "ep-testbed.exe doctor --ep dml --ep-option \"device_id=$DEVICE_ID\"" in _script(jobs["doctor"])
    run = next(s["run"] for s in _steps(jobs["shard"]) if "ep-testbed.exe run" in str(s.get("run")))
    assert "--jobs 1" in run and '--shard "$SHARD/2"' in run and '--ep-option "device_id=$DEVICE_ID"' in run
    assert jobs["shard"]["strategy"]["matrix"]["shard"] == [1, 2]
    merge = _steps(jobs["merge"])
    scripts = [str(s.get("run", "")) for s in merge]
    gate = next(i for i, text in enumerate(scripts) if "ep-testbed diff" in text)
    assert next(i for i, text in enumerate(scripts) if "ep-testbed merge" in text) < gate
    uploads = {s["with"]["name"]: s for s in merge if "upload-artifact" in str(s.get("uses"))}
    assert set(uploads) == {"dml-results-device-${{ matrix.device }}", "dml-diff-device-${{ matrix.device }}"}
    assert all("always()" in s["if"] for s in uploads.values())
    # the baseline is the artifact this workflow uploads, for the same device
    assert '-n "dml-results-device-$DEVICE_ID"' in scripts[gate - 1]
    assert 'baselines/dml/device-$DEVICE_ID/results.jsonl' in scripts[gate - 1]
    shard_uploads = [s for s in _steps(jobs["shard"]) if "upload-artifact" in str(s.get("uses"))]
    assert shard_uploads and shard_uploads[0]["if"] == "always()"
    assert shard_uploads[0]["with"]["name"] == "dml-device-${{ matrix.device }}-shard-${{ matrix.shard }}"


def _script(job):
    """Every run script of ``job``, joined."""
    return "\n".join(str(s.get("run", "")) for s in _steps(job))


def test_each_gpu_of_the_matrix_gets_its_own_shards_run_and_baseline(workflow):
    """One matrix over DXGI adapter indices for every per-GPU job; the merge of one GPU takes only
    that GPU's shards and never --allow-mixed, so merge's refusal of mixed devices stands."""
    jobs = workflow["jobs"]
    for name in ("doctor", "shard", "merge"):
        assert jobs[name]["strategy"]["matrix"]["device"] == DEVICES, name
        assert jobs[name]["strategy"]["fail-fast"] is False, name
        assert jobs[name]["env"]["DEVICE_ID"] == "${{ matrix.device }}", name
    assert "strategy" not in jobs["windows-tests"]  # the test suite once, not per GPU
    download = next(s for s in _steps(jobs["merge"]) if "download-artifact" in str(s.get("uses")))
    assert download["with"]["pattern"] == "dml-device-${{ matrix.device }}-shard-*"
    merge = _script(jobs["merge"])
    assert '"shards/dml-device-$DEVICE_ID-shard-1" "shards/dml-device-$DEVICE_ID-shard-2"' in merge
    assert not any("--allow-mixed" in _script(job) for job in jobs.values())
    assert workflow["on"]["workflow_dispatch"]["inputs"]["devices"]["default"] == ""


def test_no_input_or_matrix_value_is_pasted_into_a_script(workflow):
    """A dispatch input reaches a script through the environment only (a quoted $DEVICE_ID), never
    as ``${{ }}`` text the shell would parse (GitHub's script injection)."""
    for name, job in workflow["jobs"].items():
        for step in _steps(job):
            pasted = re.findall(r"\$\{\{\s*([a-z_.]+)", str(step.get("run", "")))
            assert set(pasted) <= {"steps.baseline.outputs.dir", "github.event.repository.default_branch"}, (name, step)


def test_every_job_has_a_time_limit_and_one_run_holds_the_runner(workflow):
    """timeout-minutes on every job (a hung GPU job otherwise holds the runner for GitHub's 5
    days); one concurrency group per runner pool, never cancelling a run in progress."""
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int) and 0 < job["timeout-minutes"] <= 180, name
    concurrency = workflow["concurrency"]
    assert "vars.DML_RUNNER_LABELS" in concurrency["group"] and concurrency["group"].startswith("dml-conformance-")
    assert concurrency["cancel-in-progress"] is False
    runs_on = {str(job["runs-on"]) for job in workflow["jobs"].values() if _windows(job)}
    assert runs_on == {"${{ fromJSON(vars.DML_RUNNER_LABELS || '[\"self-hosted\", \"windows\", \"gpu\"]') }}"}
    assert "'[\"self-hosted\", \"windows\", \"gpu\"]'" in concurrency["group"]  # the same pool


def test_the_merge_writes_the_job_summary_and_prints_the_annotations(workflow):
    """After the merge, whatever its exit code: ``ci-summary`` Markdown appended to
    $GITHUB_STEP_SUMMARY, and its workflow commands left on the step's output (the runner reads
    them there); both before the uploads. Only GitHub's own actions run anywhere."""
    merge = _steps(workflow["jobs"]["merge"])
    at = next(i for i, s in enumerate(merge) if "ci-summary" in str(s.get("run", "")))
    step = merge[at]
    assert step["if"] == "always()" and at > next(i for i, s in enumerate(merge) if "ep-testbed merge" in str(s.get("run")))
    lines = [line.strip() for line in step["run"].splitlines()]
    summary = next(line for line in lines if "ci-summary runs/dml --title" in line)
    assert summary.endswith('>> "$GITHUB_STEP_SUMMARY"') and "--format annotations" not in summary
    annotate = next(line for line in lines if "--format annotations" in line)
    assert annotate == ".venv/bin/ep-testbed ci-summary runs/dml --format annotations"  # to stdout, unredirected
    assert "no merged run" in step["run"] and step["run"].index("no merged run") < step["run"].index("ci-summary")
    assert at < min(i for i, s in enumerate(merge) if "upload-artifact" in str(s.get("uses")))
    doctor_summary = next(s for s in _steps(workflow["jobs"]["doctor"]) if "GITHUB_STEP_SUMMARY" in str(s.get("run")))
    assert doctor_summary["if"] == "always()" and "doctor.txt" in doctor_summary["run"]
    uses = {str(s["uses"]).split("@")[0] for job in workflow["jobs"].values() for s in _steps(job) if "uses" in s}
    assert all(u.startswith("actions/") for u in uses), uses


def _commands(workflow):
    """Every ``ep-testbed`` command line of every run step, continuations joined, expressions filled."""
    for job in workflow["jobs"].values():
        for step in _steps(job):
            script = str(step.get("run", "")).replace("\\\n", " ")
            for line in script.splitlines():
                for key, value in SUBSTITUTIONS.items():
                    line = line.replace(key, value)
                words = shlex.split(line) if "ep-testbed" in line else []
                at = next((i for i, w in enumerate(words) if re.search(r"ep-testbed(\.exe)?$", w)), None)
                if at is not None:
                    end = next((i for i in range(at + 1, len(words)) if words[i] in SHELL_OPERATORS), len(words))
                    yield words[at + 1:end]


def test_every_ep_testbed_command_in_the_workflow_parses(workflow, capsys):
    commands = list(_commands(workflow))
    assert {c[0] for c in commands} == {"doctor", "run", "merge", "ci-summary", "diff"}
    for argv in commands:
        try:
            build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"ep-testbed {' '.join(argv)}: {capsys.readouterr().err}")


def _readme_test_command() -> str:
    """The command under "Run the tests:" in the README."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = re.search(r"Run the tests:\s*```sh\n(.+?)\n```", text, re.S)
    assert block, "README.md has no 'Run the tests:' command block"
    return block.group(1).strip()


def test_ci_and_the_windows_tests_job_run_exactly_the_readmes_test_command(workflow):
    command = _readme_test_command()
    assert command.startswith("python -m pytest ") and " -n " in f" {command} "  # the suite runs on every core
    ci = [line.strip() for line in open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8")
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == command, f".ci/run ends with {ci[-1]!r}, the README says {command!r}"
    run = next(str(s["run"]) for s in _steps(workflow["jobs"]["windows-tests"]) if "pytest" in str(s.get("run")))
    assert run.startswith(command.replace("python ", ".venv-dml/Scripts/python.exe ", 1)), run


def test_ci_stops_loudly_when_the_directml_host_cannot_be_set_up(tmp_path):
    """.ci/run's DirectML block, run where `bash tools/dml-wine.sh` fails: CI stops with an
    ::error line naming the script, before the test command; nothing in .ci/run opts out of the
    host's tests (EP_TESTBED_NO_DML_WINE), so a machine without it fails the suite."""
    text = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    block = re.search(r"^if ! bash tools/dml-wine\.sh; then\n.*?^fi$", text, re.S | re.M)
    assert block, ".ci/run does not guard `bash tools/dml-wine.sh`"
    assert text.index(block.group(0)) < text.rindex(_readme_test_command()) and "EP_TESTBED_NO_DML_WINE" not in text
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "dml-wine.sh").write_text("echo 'dml-wine: step x failed' >&2; exit 3\n")
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{block.group(0)}\necho RAN-ON"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "RAN-ON" not in done.stdout
    assert "::error title=DirectML under Wine not set up::bash tools/dml-wine.sh failed" in done.stderr
