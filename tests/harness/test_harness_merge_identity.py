"""``ep-testbed merge`` ties a run to one device: shards of different GPU identity, driver,
DirectML or ONNX Runtime version are refused unless ``--allow-mixed``. The shards are real runs
on the CPU EP whose headers are then given the identity records a Windows runner would write
(built by harness.eps.gpu from the simulated DXGI adapters of fake_windows)."""

import json

import pytest
from fake_windows import FakeAdapter, FakeDxgi
from local_cases import HERE

from ep_testbed.harness.cli import main, parse_args
from ep_testbed.harness.cli.run import run_command
from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.eps import gpu

pytestmark = pytest.mark.slow  # every test here runs cases in worker processes: -m "not slow" skips them

LOCAL = {"catalog": "local_cases:build_catalog", "mapper": "local_cases:to_onnx", "worker_paths": (HERE,)}
ORT = {"distribution": "onnxruntime-directml", "version": "1.24.4"}


def _identity(driver: int, device_id: str = "0") -> dict:
    dxgi = FakeDxgi([FakeAdapter("NVIDIA GeForce RTX 4090", 0x10DE, 0x2684, memory=24 << 30,
                                 umd=(32 << 48) | (15 << 16) | driver)])
    return gpu.dml_identity({"device_id": device_id}, gpu.read_adapters(dxgi.create_factory), [],
                            {"version": "1.15.4.0"}, ORT)


def _shards(tmp_path, capsys):
    """Two shards of one split, run for real; their folders."""
    dirs = []
    for k in (1, 2):
        out = tmp_path / f"s{k}"
        assert run_command(parse_args(["run", "--shard", f"{k}/2", "--out", str(out), "--no-progress"]), **LOCAL) == 0
        dirs.append(out)
    capsys.readouterr()
    return dirs


def _set_header(run_dir, **changes):
    path = run_dir / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header.update(changes)
    path.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n", encoding="utf-8")


def test_every_run_header_names_the_device_onnx_runtime_lists(tmp_path, capsys):
    s1, _ = _shards(tmp_path, capsys)
    header = read_run(str(s1))[0]
    device = header["gpu"]["ort_device"]["device"]
    assert header["gpu"]["source"] == "ort" and device["ep"] == "CPUExecutionProvider" and device["type"] == "CPU"
    summary = header["gpu"]["summary"]
    assert summary.startswith(f"CPU {device['vendor']} [{device['pci_ids']}]")
    assert f"<dt>Device</dt><dd>{summary}" in (s1 / "report.html").read_text(encoding="utf-8")
    assert f'name="gpu" value="{summary}"' in (s1 / "junit.xml").read_text(encoding="utf-8")
    assert json.loads((s1 / "summary.json").read_text(encoding="utf-8"))["run"]["gpu"]["summary"] == summary


def test_merge_refuses_shards_of_different_drivers_unless_allowed(tmp_path, capsys):
    s1, s2 = _shards(tmp_path, capsys)
    _set_header(s1, gpu=_identity(6094))
    _set_header(s2, gpu=_identity(7000))
    code = main(["merge", str(s1), str(s2), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 2 and "ran on another device" in err and "driver 32.0.15.6094" in err and "32.0.15.7000" in err
    assert "--allow-mixed" in err and "Traceback" not in err
    assert not (tmp_path / "m" / "results.jsonl").exists()
    code = main(["merge", str(s1), str(s2), "--out", str(tmp_path / "mixed"), "--allow-mixed"])
    capsys.readouterr()
    header = read_run(str(tmp_path / "mixed"))[0]
    assert code == 0 and [m["gpu"].split(", ")[1] for m in header["mixed"]] == ["driver 32.0.15.6094",
                                                                               "driver 32.0.15.7000"]
    assert [s["gpu"] for s in header["shards"]] == [m["gpu"] for m in header["mixed"]]


def test_same_gpu_in_another_slot_merges_and_other_runtimes_do_not(tmp_path, capsys):
    s1, s2 = _shards(tmp_path, capsys)
    _set_header(s1, gpu=_identity(6094, "0"))
    moved = _identity(6094, "0")
    moved["adapter"] = dict(moved["adapter"], luid="0x00000000:0x0000ABCD", index=1)
    _set_header(s2, gpu=moved)
    assert main(["merge", str(s1), str(s2), "--out", str(tmp_path / "same")]) == 0
    assert "mixed" not in read_run(str(tmp_path / "same"))[0]
    _set_header(s2, ort_version="1.23.0")
    assert main(["merge", str(s1), str(s2), "--out", str(tmp_path / "ort")]) == 2
    assert "another ort_version" in capsys.readouterr().err


@pytest.mark.parametrize("overwrite", [False, True])
def test_merge_into_one_of_its_own_runs_is_refused_and_deletes_nothing(tmp_path, capsys, overwrite):
    """With --overwrite, --out naming an input shard (by any spelling) deleted that shard's
    results before reading them, then failed saying the file did not exist."""
    s1, s2 = _shards(tmp_path, capsys)
    before = sorted(p.name for p in s1.iterdir())
    spelled = tmp_path / "." / s1.name
    code = main(["merge", str(s1), str(s2), "--out", str(spelled)] + (["--overwrite"] if overwrite else []))
    err = capsys.readouterr().err
    assert code == 2 and f"is the run folder {s1}" in err and "Note: choose a new folder for --out" in err, err
    assert sorted(p.name for p in s1.iterdir()) == before and (s1 / "results.jsonl").stat().st_size > 0
