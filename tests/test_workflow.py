"""``.github/workflows/dml-conformance.yml``, checked here since it cannot run here (it needs a
Windows GPU runner): valid against GitHub's workflow schema (SchemaStore's, as vendored by the
check-jsonschema package, a test dependency), shaped as README's "DirectML conformance in CI"
says, and every ``ep-testbed`` command in it accepted by the command's own parser.
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
SUBSTITUTIONS = {"${{ matrix.shard }}": "1", "${{ steps.baseline.outputs.dir }}": "baselines/dml", "$DEVICE_ID": "0"}


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
    assert "ep-testbed.exe doctor --ep dml" in str(_steps(jobs["doctor"])[-1]["run"])
    run = next(s["run"] for s in _steps(jobs["shard"]) if "ep-testbed.exe run" in str(s.get("run")))
    assert "--jobs 1" in run and "--shard ${{ matrix.shard }}/2" in run
    assert jobs["shard"]["strategy"]["matrix"]["shard"] == [1, 2]
    merge = _steps(jobs["merge"])
    scripts = [str(s.get("run", "")) for s in merge]
    gate = next(i for i, text in enumerate(scripts) if "ep-testbed diff" in text)
    assert next(i for i, text in enumerate(scripts) if "ep-testbed merge" in text) < gate
    uploads = {s["with"]["name"]: s for s in merge if "upload-artifact" in str(s.get("uses"))}
    assert set(uploads) == {"dml-results", "dml-diff"} and all("always()" in s["if"] for s in uploads.values())
    assert "-n dml-results" in scripts[gate - 1]  # the baseline is the artifact this workflow uploads
    shard_uploads = [s for s in _steps(jobs["shard"]) if "upload-artifact" in str(s.get("uses"))]
    assert shard_uploads and shard_uploads[0]["if"] == "always()"


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
                    yield words[at + 1:]


def test_every_ep_testbed_command_in_the_workflow_parses(workflow, capsys):
    commands = list(_commands(workflow))
    assert {c[0] for c in commands} == {"doctor", "run", "merge", "diff"}
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
