"""One honest rate: every command's closing line divides by its wall time from the process's
start and names where that time went (``harness.core.walltime``).

The commands run as a user runs them (``python -m ep_testbed.harness.launch``, the ``ep-testbed``
script's module, in a fresh process), and their closing lines are held to what they wrote:
the count of cases is the ``ran`` of ``results.jsonl``'s end line and the count summary.json
holds (events, not time), the parts add up to the wall time within the printed rounding, and the
wall time is no longer than the test saw the process live. Nothing here is timed against a
limit: the only clock read is the one bounding the process from outside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ep_testbed.harness.cli import main
from ep_testbed.harness.core import walltime
from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.run.progress import Progress

DATA = Path(__file__).resolve().parent.parent / "data" / "models"
#: Half a unit in the last printed place, per printed number: how far rounding can move a sum.
HALF = 0.5 * 10 ** -walltime.DECIMALS


def _command(*argv: str) -> tuple[subprocess.CompletedProcess, float]:
    """``ep-testbed ARGV`` as the console script runs it; what it printed and how long it lived at most."""
    launched = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ep_testbed.harness.launch", *argv], capture_output=True, text=True,
                          check=False, env={k: v for k, v in os.environ.items() if k != walltime.ENV})
    return done, time.monotonic() - launched


def _closing(done: subprocess.CompletedProcess, lived: float) -> walltime.Closing:
    """The closing line: the last line printed, its parts adding up to its wall time, which is
    no longer than the process lived."""
    assert done.stdout.strip().splitlines()[-1] == next(line for line in reversed(done.stdout.splitlines())
                                                        if " of wall time " in line), done.stdout[-600:]
    closing = walltime.parse_closing_line(done.stdout)
    assert closing is not None, done.stdout[-600:]
    assert abs(sum(s for _, s in closing.parts) - closing.wall_s) <= HALF * (len(closing.parts) + 1)
    assert closing.wall_s <= lived + HALF
    assert "of wall time from the process's start" in done.stdout or "from the command's start" in done.stdout
    return closing


@pytest.mark.slow
def test_run_closes_with_the_cases_of_its_end_line_over_its_wall_time(tmp_path):
    out = tmp_path / "run"
    done, lived = _command("run", "--ep", "cpu", "--tier", "smoke", "--jobs", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    closing = _closing(done, lived)
    _, lines, end = read_run(str(out))
    summary = json.loads((out / "summary.json").read_text())
    assert closing.counted == end["ran"] == len(lines) == summary["total"] > 0
    assert closing.rate == pytest.approx(closing.counted / closing.wall_s, abs=0.1 + closing.rate * 0.01)
    names = [name for name, _ in closing.parts]
    assert names[0] == "start-up" and names[-1] == "reports"
    assert {"catalog", "preflight", "cases", "stopping workers"} <= set(names)
    # the run's own cases/s is named for what it is, beside the whole command's
    assert f"cases {dict(closing.parts)['cases']:.2f} s (" in done.stdout and "cases/s in it alone)" in done.stdout
    assert dict(closing.parts)["cases"] == pytest.approx(end["elapsed_s"] - end.get("warm_up_s", 0.0), abs=0.02)


@pytest.mark.slow
def test_a_resumed_run_counts_the_cases_it_ran_now(tmp_path):
    out = tmp_path / "run"
    first, _ = _command("run", "--ep", "cpu", "--tier", "smoke", "-k", "roi_align", "--jobs", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr[-2000:]
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:3]) + "\n")  # the header and two cases, no end line
    done, lived = _command("run", "--ep", "cpu", "--tier", "smoke", "-k", "roi_align", "--jobs", "1", "--resume",
                           "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    _, cases, end = read_run(str(out))
    closing = _closing(done, lived)
    assert closing.counted == end["ran"] == len(cases) - 2 > 0


@pytest.mark.slow
def test_fuzz_closes_with_the_fuzzed_cases_of_its_end_line_over_its_wall_time(tmp_path):
    out = tmp_path / "fuzz"
    done, lived = _command("fuzz", "--ep", "cpu", "--max-cases", "40", "--budget", "60", "--shrink", "none",
                           "--jobs", "1", "--out", str(out))
    assert done.returncode in (0, 1), done.stderr[-2000:]
    closing = _closing(done, lived)
    _, lines, end = read_run(str(out))
    assert closing.counted == end["ran"] == len(lines) == 40 and closing.noun == "fuzzed cases"
    names = [name for name, _ in closing.parts]
    assert names[0] == "start-up" and names[-1] == "reports" and "fuzzing" in names
    assert "fuzzed cases in" not in done.stdout.replace(done.stdout.strip().splitlines()[-1], "")


@pytest.mark.slow
def test_model_run_counts_from_the_command_start_across_its_child_process(tmp_path):
    done, lived = _command("model", "run", str(DATA / "resnet18_stem.onnx"), "--out", str(tmp_path / "m"))
    assert done.returncode == 0, done.stderr[-2000:]
    closing = _closing(done, lived)
    assert closing.counted is None and closing.noun == "model run"
    assert "from the command's start (its first process)" in done.stdout
    names = [name for name, _ in closing.parts]
    assert names[0] == "start-up" and names[-1] == "writing and report"
    assert {"model and inputs", "on the EP", "on the reference EP"} <= set(names)


def test_a_command_called_inside_a_running_process_says_its_start_up_is_not_counted(tmp_path, capsys):
    code = main(["run", "--ep", "cpu", "--tier", "smoke", "-k", "max_pooling2", "--jobs", "0",
                 "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 0
    closing = walltime.parse_closing_line(out)
    assert closing is not None and closing.counted == read_run(str(tmp_path / "run"))[2]["ran"]
    assert "from the call (a command run inside a running process, whose start-up is not in it)" in out


def test_parts_are_cut_at_marks_on_one_clock_and_add_up():
    wall = walltime.Wall(time.monotonic() - 1.0, "process")
    wall.mark("start-up", at=wall.start + 0.25)
    wall.mark("catalog", at=wall.start + 0.1)  # before the last mark: it cannot go back
    wall.mark("cases", at=wall.start + 0.75)
    wall.mark("cases", at=wall.start + 0.8)  # the same part again grows
    line = walltime.closing_line(8, "cases", wall, rates={"cases": 8})
    parsed = walltime.parse_closing_line(line)
    assert [name for name, _ in parsed.parts] == ["start-up", "catalog", "cases", "reports"]
    assert dict(parsed.parts)["catalog"] == 0.0 and dict(parsed.parts)["cases"] == pytest.approx(0.55, abs=HALF)
    assert parsed.wall_s >= 1.0 and abs(sum(s for _, s in parsed.parts) - parsed.wall_s) <= HALF * 5
    assert "(14.5 cases/s in it alone)" in line and parsed.rate == pytest.approx(8 / parsed.wall_s, abs=0.1)


def test_the_command_start_comes_from_the_parent_then_the_process(monkeypatch):
    monkeypatch.setenv(walltime.ENV, repr(time.time() - 5.0))
    start, source = walltime.command_start()
    assert source == "parent" and time.monotonic() - start == pytest.approx(5.0, abs=0.5)
    for stale in ("garbage", repr(time.time() + 3600), repr(time.time() - 30 * 24 * 3600)):
        monkeypatch.setenv(walltime.ENV, stale)
        start, source = walltime.command_start()
        if sys.platform.startswith("linux"):  # the kernel's record of this process's start
            assert source == "process" and time.monotonic() - start == pytest.approx(walltime.process_age(), abs=0.5)


def test_the_live_progress_rate_says_it_counts_from_the_run():
    import io

    progress = Progress(2, enabled=True, stream=io.StringIO())
    progress.update({"outcome": "pass"})
    assert "cases/s in the run" in progress.render()


def test_the_report_templates_compile_in_the_background_and_a_broken_one_is_left_to_the_rendering(capfd):
    """``run`` and ``fuzz`` compile report.html's templates while their cases run
    (``cli.common.prepare_reports``), so the report after the last case does not wait for them;
    a template that fails there prints nothing (the rendering says why, where errors are handled)."""
    from ep_testbed.reports import rendering

    broken = rendering.warm_up("no-such-template.j2")
    broken.join(60)
    assert not broken.is_alive() and capfd.readouterr().err == ""
    rendering.warm_up("report.html.j2").join(60)
    assert any(key[1] == "report.html.j2" for key in rendering.environment().cache.keys())
