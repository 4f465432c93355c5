"""The ``ep-testbed`` command line as a whole: the one list of subcommands, every ``--help``, the
entry points, and the small subcommands (``map``, ``gen``, ``reference``) run through ``main``."""

import importlib.metadata
import json
import subprocess
import sys

import numpy as np
import pytest

from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.harness import cli
from ep_testbed.harness.cli import SUBCOMMANDS, build_parser, main, parse_args
from ep_testbed.reference import desc_to_dml

NAMES = ["doctor", "devices", "run", "fuzz", "merge", "report", "ci-summary", "findings", "diff", "map", "gen", "reference",
         "model"]


def run_main(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_one_explicit_list_registers_every_subcommand_in_help_order(capsys):
    assert [m.__name__.rsplit(".", 1)[1].replace("_", "-") for m in SUBCOMMANDS] == NAMES  # ci_summary: ci-summary
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert [out.index(f"\n    {name}") for name in NAMES] == sorted(out.index(f"\n    {name}") for name in NAMES)


@pytest.mark.parametrize("argv", [[name] for name in NAMES] + [["model", "run"], ["model", "demo"]], ids=" ".join)
def test_every_subcommand_has_help_that_exits_zero(argv, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([*argv, "--help"])
    assert info.value.code == 0 and f"usage: ep-testbed {' '.join(argv)}" in capsys.readouterr().out


def test_unknown_subcommand_or_flag_is_exit_2_with_argparse_message(capsys):
    for argv in (["frobnicate"], ["run", "--no-such-flag"], ["gen", "--op", "max_pool", "--out", "x"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2 and "usage: ep-testbed" in capsys.readouterr().err


def test_the_console_script_and_python_m_reach_main():
    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "ep-testbed"]
    # the launcher (stdlib only until it imports the command line, then main); main stays public
    assert script.value == "ep_testbed.harness.launch:main" and script.load().__module__ == "ep_testbed.harness.launch"
    assert callable(main)
    p = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "--help"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and all(name in p.stdout for name in NAMES)


def test_the_command_line_is_recorded_shell_quoted():
    args = parse_args(["run", "-k", "a b", "--ops", "roi_align"])
    assert args.command_line == "ep-testbed run -k 'a b' --ops roi_align"


def test_gen_then_map_through_main(tmp_path, capsys):
    code, out, _ = run_main(capsys, "gen", "--op", "roi_align", "--out", str(tmp_path), "--seed", "2")
    assert code == 0 and "cases.json" in out
    first = json.loads((tmp_path / "cases.json").read_text())["cases"][0]["folder"]
    desc = str(tmp_path / first / "desc.json")
    code, out, _ = run_main(capsys, "map", desc)
    assert code == 0 and "Flags:" in out
    code, out, _ = run_main(capsys, "map", desc, "--opset", "10")
    assert code == 0 and "DirectML EP builds InputPixelOffset 0.5" in out
    code, _, err = run_main(capsys, "map", desc, "--opset", "9")
    assert code == 2 and "RoiAlign exists from opset 10" in err


def test_map_and_reference_refuse_a_bad_desc_with_exit_2(tmp_path, capsys):
    bad = desc_to_dml(roi_align_desc(True))
    bad["OutputTensor"]["Sizes"] = bad["OutputTensor"]["Sizes"][:3]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    for argv in (["map", str(path)], ["reference", "--desc", str(path)]):
        code, _, err = run_main(capsys, *argv)
        assert code == 2 and f"invalid desc ({path}): " in err and "OutputTensor.Sizes" in err, err


def test_reference_names_unusable_files(tmp_path, capsys):
    desc = tmp_path / "desc.json"
    desc.write_text(json.dumps(desc_to_dml(roi_align_desc(True))))
    code, _, err = run_main(capsys, "reference", "--desc", str(tmp_path / "missing.json"))
    assert code == 2 and "--desc" in err and "missing.json" in err and "cannot read it" in err
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros(3))
    code, _, err = run_main(capsys, "reference", "--desc", str(desc), "--inputs", str(npy))
    assert code == 2 and "not an NPZ of named arrays" in err and "numpy.savez" in err
    text = tmp_path / "x.npz"
    text.write_text("not a zip")
    code, _, err = run_main(capsys, "reference", "--desc", str(desc), "--inputs", str(text))
    assert code == 2 and "--inputs" in err and "x.npz" in err
    code, out, _ = run_main(capsys, "reference", "--desc", str(desc), "--out", str(tmp_path / "y.npz"))
    assert code == 0 and "OutputTensor: shape" in out and (tmp_path / "y.npz").exists()



def test_reference_refuses_an_out_it_cannot_write_before_computing(tmp_path, capsys):
    """A missing folder gave a raw OSError naming a temporary file, after the computation."""
    desc = tmp_path / "desc.json"
    desc.write_text(json.dumps(desc_to_dml(roi_align_desc(True))))
    code, out, err = run_main(capsys, "reference", "--desc", str(desc), "--out", str(tmp_path / "no" / "y.npz"))
    assert code == 2 and "its folder" in err and "does not exist" in err and "Note: create it first" in err, err
    assert "OutputTensor" not in out and ".ep-testbed-tmp" not in err
    (tmp_path / "taken.npz").mkdir()
    code, out, err = run_main(capsys, "reference", "--desc", str(desc), "--out", str(tmp_path / "taken"))
    assert code == 2 and "taken.npz: exists and is not a regular file" in err and "OutputTensor" not in out, err


def test_no_subcommand_is_found_by_scanning(monkeypatch):
    """Adding a module attribute named add_* registers nothing: only SUBCOMMANDS does."""
    monkeypatch.setattr(cli, "add_extra", lambda sub: sub.add_parser("extra"), raising=False)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["extra"])
