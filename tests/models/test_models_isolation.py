"""A model that crashes or hangs its EP costs that model only (fault injection, as in the harness).

``EP_TESTBED_MODEL_FAULT`` makes the child process that runs a matching model abort or hang;
the demo goes on with the next model, whose results are written, and exits 1."""

from __future__ import annotations

from models_testkit import result_of, run_cli

from ep_testbed.graphs.models import write_demo_models
from ep_testbed.harness.models.isolation import FAULT_ENV


def test_a_crashing_model_is_one_crash_and_the_demo_goes_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "abort=detection_head*")
    code, out, err = run_cli(["model", "demo", "--out", str(tmp_path)], capsys)
    assert code == 1
    assert "detection_head: crash - the process running it died of SIGABRT" in err
    assert "detection_head crash, resnet_stem pass" in out
    assert result_of(tmp_path / "resnet_stem")["verdict"] == "pass"
    assert not (tmp_path / "detection_head" / "model_result.json").exists()


def test_a_hanging_model_times_out_and_leaves_no_result(tmp_path, capsys, monkeypatch):
    """The model alone, so that the short limit is its own: a demo's one --timeout would also
    have to cover the other model's child starting on a loaded machine (a demo that goes on
    after a failed model: the crash test above)."""
    path = write_demo_models(tmp_path / "m")["resnet_stem"]
    monkeypatch.setenv(FAULT_ENV, "hang=resnet_stem*")
    code, out, err = run_cli(["model", "run", str(path), "--timeout", "2", "--out", str(tmp_path / "run")], capsys)
    assert code == 1, err
    assert "resnet_stem.onnx: timeout - no result after 2 s" in err
    assert not (tmp_path / "run" / "model_result.json").exists()


def test_model_run_with_a_timeout_runs_isolated_and_reports_the_crash(tmp_path, capsys, monkeypatch):
    path = write_demo_models(tmp_path / "m")["resnet_stem"]
    code, out, err = run_cli(["model", "run", str(path), "--timeout", "60", "--out", str(tmp_path / "ok")], capsys)
    assert code == 0, err
    assert "verdict: pass" in out  # the child's output is relayed
    monkeypatch.setenv(FAULT_ENV, "abort=resnet_stem.onnx")
    code, _, err = run_cli(["model", "run", str(path), "--timeout", "60", "--out", str(tmp_path / "bad")], capsys)
    assert code == 1 and "resnet_stem.onnx: crash" in err


def test_model_run_runs_in_a_child_by_default_and_relays_its_output(tmp_path, capsys):
    path = write_demo_models(tmp_path / "m")["resnet_stem"]
    code, out, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "ok")], capsys, isolated=True)
    assert code == 0, err
    assert "verdict: pass" in out and result_of(tmp_path / "ok")["verdict"] == "pass"
    assert "--in-process" in result_of(tmp_path / "ok")["command"]  # what the child ran


def test_a_crash_without_timeout_is_reported_by_ep_testbed_and_the_nodes_are_judged_alone(tmp_path, capsys,
                                                                                         monkeypatch):
    """The fault hook aborts the child right before the whole model runs on the EP; a second
    child, told so, judges the attributed nodes alone and writes the run folder."""
    path = write_demo_models(tmp_path / "m")["resnet_stem"]
    monkeypatch.setenv(FAULT_ENV, "abort=resnet_stem.onnx")
    code, out, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys, isolated=True)
    assert code == 1
    assert "resnet_stem.onnx: crash - the process running it died of SIGABRT" in err
    assert "judging its attributed nodes alone" in err
    result = result_of(tmp_path / "run")
    assert result["ep_failure"]["stage"] == "crash" and "SIGABRT" in result["ep_failure"]["message"]
    assert result["outputs"] == [] and result["verdict"] == "fail"
    assert "crashed on CPUExecutionProvider" in result["verdict_reasons"][0]
    [row] = result["attribution"]["nodes"]
    assert row["alone"] and row["status"] in ("match", "tie-only") and row["provider"] == "CPUExecutionProvider"
    assert "--ep-crashed" not in result["command"]
    assert "did not take the whole model (crash)" in out
    assert "did not run on CPU" in (tmp_path / "run" / "report.html").read_text()


def _non_default_words(parser) -> list[str]:
    """Words giving every option of ``parser`` (but the help) a value other than its default."""
    import argparse

    words = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:
            words.append(flag)
        elif action.choices:
            words += [flag, next(c for c in action.choices if c != action.default)]
        else:
            samples = {"seed": "7", "drift_max_elements": "99", "timeout": "9", "limit": "elements=1234",
                       "tol": "FLOAT32:atol=0.5", "drift_tol": "fail", "ep_option": "k=v", "precision_model": "exact"}
            words += [flag, samples.get(action.dest, f"x-{action.dest}")]
    return words


def test_the_child_repeats_every_option_of_the_parent_but_those_it_sets_itself():
    """``model run`` and ``model demo`` start each model as a ``model run`` child: every option
    the parent was given reaches the child (written back by the parser's own actions, so an
    option added later travels too), except those the parent sets for the child."""
    import argparse

    from ep_testbed.harness.cli import build_parser, parse_args
    from ep_testbed.harness.models.isolation import CHILD_SETS, child_argv

    model_parser = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["model"]
    commands = next(a for a in model_parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    run_words = [w for w in _non_default_words(commands["run"]) if w not in ("--save-baseline", "x-save_baseline")]
    for command, words in (("run", ["m.onnx", *run_words]), ("demo", _non_default_words(commands["demo"]))):
        parent = parse_args(["model", command, *words])
        child = parse_args(child_argv("c.onnx", parent, shapes=["batch=2"], out="o"))
        assert child.model == "c.onnx" and child.in_process and child.shape == ["batch=2"] and child.out == "o"
        carried = [a.dest for a in commands["run"]._actions
                   if a.option_strings and a.dest not in CHILD_SETS and a.dest != "help" and hasattr(parent, a.dest)]
        assert len(carried) >= 15, carried
        for dest in carried:
            assert getattr(child, dest) == getattr(parent, dest), (command, dest)
