"""The command's own streams as the attack: closed (``>&-``), full (``/dev/full``), holding a path
that would forge a line; and an interrupt that lands while the command is still starting.

A stream that cannot be written never changes what the exit code means: a clean run stays 0, a
usage error stays 2; only a command whose printed output *is* its result (``ci-summary``) says,
with 2, that it could not deliver it. Every path printed is escaped, whatever printed it.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from environment_kit import CLI, check, clean_env, cli
from sandbox import HERE, ROOT

pytestmark = pytest.mark.slow  # runs ep-testbed commands

SMOKE = ["run", "--ep", "cpu", "--tier", "smoke", "--ops", "max_pooling2", "--jobs", "1", "--no-progress"]
#: A path a terminal would show as two lines, the second clearing the screen.
FORGED = "esc\nverdict: pass\x1b[2J"


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("streams") / "run"
    done = cli(*SMOKE, "--out", out)
    assert done.returncode == 0, done.stderr
    return out


def shell(command: str, *argv, env=None) -> subprocess.CompletedProcess:
    """``ep-testbed ARGV`` with the shell redirections ``command`` names (``>&- 2>/dev/full``);
    ``$@`` in ``command`` is the command line."""
    return subprocess.run(["bash", "-c", command, "bash", *CLI, *map(str, argv)], cwd=ROOT, env=env or clean_env(),
                          capture_output=True, text=True, timeout=300)


def _cases(out):
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return sorted(line["id"] for line in lines if line["type"] == "case")


def test_ci_summary_with_stdout_closed_exits_0(run_folder):
    assert shell('"$@" >&-', "ci-summary", run_folder).returncode == 0


def test_a_clean_run_with_both_streams_closed_exits_0_and_records_every_case(tmp_path, run_folder):
    out = tmp_path / "r"
    assert shell('"$@" >&- 2>&-', *SMOKE, "--out", out).returncode == 0
    assert _cases(out) == _cases(run_folder)


def test_a_clean_run_with_stderr_full_exits_0(tmp_path):
    assert shell('"$@" 2>/dev/full', *SMOKE, "--out", tmp_path / "r").returncode == 0


def test_a_clean_run_with_stdout_full_exits_0_and_writes_its_report(tmp_path):
    out = tmp_path / "r"
    done = shell('"$@" >/dev/full', *SMOKE, "--out", out)
    assert done.returncode == 0, done.stderr
    assert (out / "report.html").is_file() and (out / "summary.json").is_file()


@pytest.mark.parametrize("redirect", ["2>/dev/full", "2>&-", ">/dev/full 2>/dev/full"])
def test_a_usage_error_stays_2_whatever_stderr_is(redirect, tmp_path):
    assert shell(f'"$@" {redirect}', "run", "--ep", "cpu", "--ops", "nosuchop", "--out", tmp_path / "r").returncode == 2


def test_ci_summary_that_cannot_print_its_summary_exits_2_saying_so(run_folder):
    done = check(shell('"$@" >/dev/full', "ci-summary", run_folder), (2,))
    assert "could not be written to stdout" in done.stderr


def test_a_reader_that_leaves_early_is_not_a_failure(run_folder):
    done = shell('set -o pipefail; "$@" | head -c 1 >/dev/null', "ci-summary", run_folder)
    assert done.returncode == 0, done.stderr


def _no_forged_line(done):
    for text in (done.stdout, done.stderr):
        assert not any(line.startswith("verdict: pass") for line in text.splitlines()), text
        assert "\\nverdict: pass\\x1b[2J" in done.stdout + done.stderr


def test_a_path_that_forges_a_line_is_printed_escaped(tmp_path):
    out = tmp_path / FORGED
    _no_forged_line(check(cli(*SMOKE, "--out", out), (0,)))
    _no_forged_line(check(cli("report", out), (0,)))
    _no_forged_line(check(cli("merge", out, "--out", tmp_path / (FORGED + "-m")), (0,)))
    _no_forged_line(check(cli(*SMOKE, "--out", out), (2,)))  # refused: it holds results
    _no_forged_line(check(cli("gen", "--op", "max_pooling2", "--out", tmp_path / (FORGED + "-g")), (0,)))


# --- an interrupt while starting ----------------------------------------------------------------

#: Modules each command imports while it starts (the standard library's, numpy's, onnx's, markupsafe's:
#: a native extension the reports escape with, Jinja2 itself loading only as a report renders; ours).
START = ["datetime", "numpy", "onnx", "markupsafe", "ep_testbed.reports", "ep_testbed.harness.run.merge",
         "ep_testbed.harness.cli.gen"]


@pytest.mark.parametrize("signal_name, code", [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("module", START)
@pytest.mark.parametrize("entry", ["module", "script"])
def test_an_interrupt_while_starting_is_one_line(tmp_path, run_folder, module, entry, signal_name, code):
    """The interrupt lands when ``module`` is first imported (``interrupt_at/sitecustomize.py``),
    through ``python -m ep_testbed.harness.cli`` and the console script's launcher alike."""
    env = clean_env(PYTHONPATH=str(HERE / "interrupt_at"), EP_TESTBED_TEST_INTERRUPT_AT=module,
                    EP_TESTBED_TEST_SIGNAL=signal_name)
    prefix = CLI[:1] + (["-m", "ep_testbed.harness.cli"] if entry == "module" else ["-m", "ep_testbed.harness.launch"])
    for argv in (["merge", run_folder, "--out", tmp_path / "m"], ["gen", "--op", "max_pooling2", "--out", tmp_path / "g"]):
        done = subprocess.run([*prefix, *map(str, argv)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        check(done, (code,))
        assert done.stderr.count("\n") == 1 and "interrupted by" in done.stderr, done.stderr
