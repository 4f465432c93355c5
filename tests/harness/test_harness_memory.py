"""Out of memory is a message, wherever it happens (``harness.core.memory``): the headroom an
allocation is checked against, the command line's last resort for a ``MemoryError`` no estimate
caught, and the report, which renders what fits. The commands under a real address-space limit
are ``tests/hostile/test_hostile_memory.py``."""

from __future__ import annotations

import sys
from pathlib import Path

from ep_testbed.harness.cli import common, main, parse_args
from ep_testbed.harness.cli import map as map_command
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core import exit_codes, memory
from ep_testbed.reports import html_report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # local_cases: the small test catalog
import local_cases  # noqa: E402

EXAMPLE = HERE.parents[1] / "examples" / "roi_align1.json"


def _one_message(err: str) -> bool:
    lines = [line for line in err.splitlines() if line.strip()]
    return sum(line.startswith("ep-testbed") for line in lines) == 1 and "Traceback" not in err


def test_headroom_is_the_smaller_of_free_memory_and_what_the_address_space_limit_leaves(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 8 * 2**30)
    monkeypatch.setattr(memory, "address_space_limit", lambda: 3 * 2**30)
    monkeypatch.setattr(memory, "address_space_used", lambda: 2**30)
    assert memory.headroom() == 2 * 2**30
    assert memory.check_fits("x", 2 * 2**30) is None
    text = memory.check_fits("the reference on --desc big.json", 2 * 2**30 + 1)
    assert text is not None and text.startswith("the reference on --desc big.json needs about 2049 MiB of memory; "
                                                 "2048 MiB were available")
    assert "\nNote: try a smaller case" in text and "--limit" in text
    monkeypatch.setattr(memory, "address_space_limit", lambda: None)
    assert memory.headroom() == 8 * 2**30


def test_a_memory_error_no_estimate_caught_is_exit_2_with_one_message(monkeypatch, capsys):
    def exhausted(args):
        raise MemoryError

    monkeypatch.setattr(map_command, "map_command", exhausted)  # registered by name when main builds its parser
    assert main(["map", str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert _one_message(err) and f"`ep-testbed map {EXAMPLE}` needs more memory than this process has" in err


def test_a_report_that_runs_out_of_memory_fails_the_run_with_the_command_that_finishes_it(tmp_path, monkeypatch,
                                                                                        capsys):
    def exhausted(run_dir):
        raise MemoryError

    monkeypatch.setattr(common, "render_all", exhausted)
    out = tmp_path / "run"
    code = run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "-k=-00", "--no-progress"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx",
                       worker_paths=(local_cases.HERE,))
    err = capsys.readouterr().err
    assert code == 2 and (out / "results.jsonl").is_file()
    assert err.count("was not rendered") == 1 and "Traceback" not in err and f"the report of {out} was not rendered (its results.jsonl is complete and kept): " \
        f"rendering the report of {out} needs more memory than this process has" in err
    assert f"Note: finish it with `ep-testbed report {out}` where there is more memory" in err


def test_a_results_file_the_report_cannot_hold_is_the_same_message(tmp_path, monkeypatch, capsys):
    """The report holds each case line's small view (``reports.results.SummaryView``), so a file
    that would not fit parsed whole still renders; when even the views run out, one message."""
    from ep_testbed.reports.results import SummaryView

    out = tmp_path / "run"
    run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "-k=-00", "--no-progress"]),
                catalog="local_cases:build_catalog", mapper="local_cases:to_onnx", worker_paths=(local_cases.HERE,))
    capsys.readouterr()
    monkeypatch.setattr(memory, "headroom", lambda: 1000)  # bytes: less than the file parsed whole needs
    assert common.render_report(str(out)) == exit_codes.OK
    capsys.readouterr()

    def exhausted(self, line):
        raise MemoryError

    monkeypatch.setattr(SummaryView, "__call__", exhausted)
    assert common.render_report(str(out)) == exit_codes.USAGE  # the exit code it makes the command end with
    err = capsys.readouterr().err
    assert _one_message(err) and f"{out / 'results.jsonl'}: reading its lines" in err
    assert "needs more memory than this process has" in err
    assert main(["report", str(out)]) == 2 and "reading its lines" in capsys.readouterr().err


def test_the_report_renders_what_fits_when_a_case_folders_arrays_do_not(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    code = run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "-k=-00,-01", "--no-progress"]),
                       catalog="local_cases:build_catalog", mapper="local_cases:to_onnx_wrong_indices",
                       worker_paths=(local_cases.HERE,))
    assert code == 1
    built = html_report._build_detail

    def exhausted_on_one(run, case, anchor, with_pictures):
        if case.id.endswith("-00"):
            raise MemoryError
        return built(run, case, anchor, with_pictures)

    monkeypatch.setattr(html_report, "_build_detail", exhausted_on_one)
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "its arrays did not fit in this machine" in html
    assert "max_pooling2/local-w2-00" in html and "max_pooling2/local-w2-01" in html


def test_report_is_exit_2_with_one_message_when_rendering_runs_out_of_memory(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    run_command(parse_args(["run", "--out", str(out), "--jobs", "0", "-k=-00", "--no-progress"]),
                catalog="local_cases:build_catalog", mapper="local_cases:to_onnx", worker_paths=(local_cases.HERE,))
    capsys.readouterr()

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("ep_testbed.harness.cli.report.render_run", exhausted)
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert _one_message(err) and f"rendering the report of {out} needs more memory" in err


def test_a_desc_whose_arrays_alone_outgrow_the_headroom_is_refused_before_anything_is_allocated(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(memory, "headroom", lambda: 10 * 2**20)
    assert main(["reference", "--desc", str(EXAMPLE)]) == 0  # 29 KB of arrays: fits
    big = tmp_path / "big.json"
    big.write_text(EXAMPLE.read_text().replace("[1, 3, 16, 16]", "[1, 3, 1024, 1024]"))
    capsys.readouterr()
    assert main(["reference", "--desc", str(big)]) == 2
    err = capsys.readouterr().err
    assert _one_message(err) and f"--desc {big} (its input and output arrays alone) needs about 13 MiB" in err


def test_a_case_that_runs_out_of_memory_in_its_worker_is_an_error_with_its_need():
    from types import SimpleNamespace

    from ep_testbed.graphs import to_onnx
    from ep_testbed.graphs.catalog import build_catalog
    from ep_testbed.harness.run.case_steps import prepare

    smoke = next(iter(build_catalog(["max_pooling2"], tier="smoke")))

    def exhausted():
        raise MemoryError("Unable to allocate 4.00 GiB")

    case = SimpleNamespace(id=smoke.id, desc=smoke.desc, opset=None, tags={"memory_mb": "4200"}, inputs=exhausted)
    line: dict = {}
    assert prepare(case, to_onnx, line, {}) is None
    assert line["outcome"] == "error"
    assert line["message"].startswith("the case's inputs ran out of memory (Unable to allocate 4.00 GiB); the case "
                                      "states a need of 4200 MiB. Note: rerun it alone with --jobs 1")
