"""CUDA-family EPs' device from nvidia-smi (harness/eps/nvidia.py): the reader runs against a
stand-in ``subprocess.run`` that answers as ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``
does (one line per GPU, fields in the order asked; the H100 line is what the driver 580.159.04
printed on the GPU machine); nothing here needs a GPU."""

import subprocess

import pytest

from ep_testbed.harness.eps import gpu, nvidia
from ep_testbed.harness.eps.providers import EpSpec

ORT = {"distribution": "onnxruntime-gpu", "version": "1.31.1"}
H100 = "0, NVIDIA H100 80GB HBM3, 00000000:00:06.0, 580.159.04, GPU-1a2b3c4d-0000-1111-2222-333344445555, 81559"
L4 = "1, NVIDIA L4, 00000000:00:07.0, 580.159.04, GPU-99990000-aaaa-bbbb-cccc-ddddeeeeffff, 23034"


def _answer(stdout="", returncode=0, stderr="", raises=None):
    """A ``subprocess.run`` stand-in recording its argv."""
    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        if raises is not None:
            raise raises
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)
    run.calls = calls
    return run


def test_the_query_asks_every_field_parse_reads_and_parse_skips_what_is_not_a_gpu_line():
    run = _answer(f"{H100}\n{L4}\nNo devices were found\n, , ,\n")
    gpus = nvidia.read_gpus(run)
    assert run.calls[0][1] == "--query-gpu=" + ",".join(nvidia.FIELDS)
    assert [g["name"] for g in gpus] == ["NVIDIA H100 80GB HBM3", "NVIDIA L4"]
    assert gpus[0]["pci.bus_id"] == "00000000:00:06.0" and gpus[1]["index"] == "1"


@pytest.mark.parametrize("run, why", [
    (_answer(raises=FileNotFoundError()), "not on PATH"),
    (_answer(raises=subprocess.TimeoutExpired("nvidia-smi", 10)), "could not be run"),
    (_answer(returncode=9, stdout="NVIDIA-SMI has failed because it couldn't communicate with the driver"), "exited 9"),
    (_answer("garbage\n"), "listed no GPU"),
])
def test_a_reader_that_cannot_tell_says_why(run, why):
    with pytest.raises(nvidia.NvidiaSmiError, match=why):
        nvidia.read_gpus(run)


def test_device_id_counts_the_gpus_cuda_sees_through_cuda_visible_devices():
    gpus = nvidia.parse(f"{H100}\n{L4}\n")
    first = nvidia.cuda_identity({}, gpus, None, ORT)
    assert first["adapter"]["description"] == "NVIDIA H100 80GB HBM3" and "default" in first["selection"]
    assert "CUDA_DEVICE_ORDER" in first["selection"]  # two GPUs: the order is an assumption, said so
    second = nvidia.cuda_identity({"device_id": "1"}, gpus, None, ORT)
    assert second["adapter"]["description"] == "NVIDIA L4"
    swapped = nvidia.cuda_identity({"device_id": "0"}, gpus, "1,0", ORT)
    assert swapped["adapter"]["description"] == "NVIDIA L4" and "CUDA_VISIBLE_DEVICES=1,0" in swapped["selection"]
    by_uuid = nvidia.cuda_identity({}, gpus, "GPU-9999", ORT)
    assert by_uuid["adapter"]["index"] == 1 and "CUDA_DEVICE_ORDER" not in by_uuid["selection"]
    for options, visible, why in (({"device_id": "2"}, None, "CUDA sees 2 GPU(s)"),
                                  ({"device_id": "0"}, "7", "'7' names no single GPU"),
                                  ({"device_id": "-1"}, None, "device_id=-1")):
        record = nvidia.cuda_identity(options, gpus, visible, ORT)
        assert record["source"] == "none" and why in record["note"]


def test_a_cuda_run_header_names_the_h100_and_its_driver(monkeypatch):
    monkeypatch.setattr(nvidia, "read_gpus", lambda: nvidia.parse(H100 + "\n"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    record = gpu.identity(EpSpec("CUDAExecutionProvider", "cuda"))
    assert record["source"] == "nvidia-smi"
    assert record["summary"].startswith("NVIDIA H100 80GB HBM3 (pci 00000000:00:06.0), driver 580.159.04, device_id 0")
    newer = dict(record, adapter=dict(record["adapter"], driver_version="590.1"))
    assert gpu.identity_key(record) != gpu.identity_key(newer)  # merge keeps refusing a driver change


def test_without_nvidia_smi_the_header_says_unknown_and_why(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    record = gpu.identity(EpSpec("CUDAExecutionProvider", "cuda"))
    assert record["source"] == "none" and "nvidia-smi is not on PATH" in record["summary"]


def test_devices_lists_nvidia_smis_gpus_under_an_unlisted_cuda_ep(monkeypatch, capsys):
    """onnxruntime-gpu's CUDA EP is available but absent from ORT's device list: ``devices``
    shows nvidia-smi's GPUs under it, in the listing and in ``--json``; without the EP, nothing."""
    import json

    import onnxruntime

    from ep_testbed.harness.cli import main

    real = onnxruntime.get_available_providers()
    monkeypatch.setattr(nvidia, "read_gpus", lambda: nvidia.parse(H100 + "\n"))
    assert main(["devices"]) == 0
    assert "CUDAExecutionProvider" not in capsys.readouterr().out
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", *real])
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "CUDAExecutionProvider: ONNX Runtime lists no device; nvidia-smi lists" in out
    assert "0: NVIDIA H100 80GB HBM3 pci 00000000:00:06.0, driver 580.159.04" in out
    assert main(["devices", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["nvidia_smi"]["CUDAExecutionProvider"]
    assert listed[0]["uuid"].startswith("GPU-1a2b")
