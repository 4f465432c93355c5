"""``model run`` whose run folder cannot be written (a full disk, a read-only folder): exit 2 with
one message naming what is kept, what is missing, the verdict (and whether a kept file records
it), and how to finish;
never a traceback, never the verdict's 0 or 1 (a CI gate would read a run with no artifacts as
judged). The failures are injected where the files are written: this suite runs as root, whom a
read-only folder does not stop."""

from __future__ import annotations

import errno

import pytest
from models_testkit import demo_models, run_cli

from ep_testbed.harness.cli import model_command
from ep_testbed.harness.core.exit_codes import USAGE

pytestmark = pytest.mark.slow  # runs a model on the CPU EP and its reference


def _disk_full(path):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def _one_message(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and sum(line.startswith("ep-testbed") for line in lines) == 1, err
    return err


def test_a_report_that_cannot_be_written_names_what_is_kept_and_how_to_finish(tmp_path, capsys, monkeypatch):
    model = demo_models(tmp_path / "models")["resnet_stem"]
    out = tmp_path / "m"
    monkeypatch.setattr(model_command, "render_model_report", lambda folder: _disk_full(folder / "report.html"))
    code, stdout, err = run_cli(["model", "run", str(model), "--ep", "cpu", "--out", str(out)], capsys)
    assert code == USAGE and "verdict:" not in stdout  # no summary pointing at a report that is not there
    _one_message(err)
    assert f"writing the run folder {out} failed ({out / 'report.html'}): No space left on device" in err
    assert ("kept there: inputs.npz, outputs.npz, reference_outputs.npz, model_result.json (each file whole, none "
            "half-written); not written: report.html.") in err
    assert "The model was judged: its verdict pass (" in err and ") is in model_result.json." in err
    assert f"Note: make room (or choose a folder you can write), then run the same command again with --out " \
           f"NEW_FOLDER, or --overwrite to reuse {out}: the model runs again" in err
    assert sorted(p.name for p in out.iterdir()) == ["inputs.npz", "model_result.json", "outputs.npz",
                                                     "reference_outputs.npz"]  # what the message says, no lock


def test_a_result_file_that_cannot_be_written_says_the_arrays_alone_are_kept(tmp_path, capsys, monkeypatch):
    model = demo_models(tmp_path / "models")["resnet_stem"]
    out = tmp_path / "m"
    real_write = model_command.write_output

    def result_refused(path, text):
        if str(path).endswith("model_result.json"):
            _disk_full(path)
        return real_write(path, text)

    monkeypatch.setattr(model_command, "write_output", result_refused)
    code, _, err = run_cli(["model", "run", str(model), "--ep", "cpu", "--out", str(out)], capsys)
    assert code == USAGE
    _one_message(err)
    assert "kept there: inputs.npz, outputs.npz, reference_outputs.npz (each file whole" in err
    assert "not written: model_result.json, report.html. The model was judged: verdict pass (" in err
    assert "), but no file records it." in err
    assert not (out / "model_result.json").exists() and not (out / "report.html").exists()
