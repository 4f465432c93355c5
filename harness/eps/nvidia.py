"""The NVIDIA GPU a CUDA-family EP runs on, read from ``nvidia-smi`` where ONNX Runtime's device
list does not name it.

onnxruntime-gpu's built-in CUDA and TensorRT EPs are not listed by ``get_ep_devices()`` (on the
H100 machine, onnxruntime-gpu 1.31.1 lists only the CPU EP's device), so a run header would say
"unknown device". The driver ships ``nvidia-smi`` with every Linux and Windows install; its
``--query-gpu`` CSV (documented in ``nvidia-smi --help-query-gpu``) gives each GPU's index, name,
PCI bus id, driver version and UUID without a compiled dependency.

Which GPU the EP uses: ``--ep-option device_id=N`` (default 0; ORT's CUDA provider options,
https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#device_id) counts the
GPUs CUDA sees, which ``CUDA_VISIBLE_DEVICES`` may narrow and reorder (indices or ``GPU-<uuid>``
prefixes, https://docs.nvidia.com/cuda/cuda-c-programming-guide/#env-vars); nvidia-smi ignores
that variable, so the mapping is applied here. With ``CUDA_DEVICE_ORDER`` unset CUDA orders GPUs
fastest first, which can differ from nvidia-smi's PCI order on a machine with unlike GPUs: the
record's ``selection`` says when the choice rests on that order.
"""

from __future__ import annotations

import csv
import os
import subprocess
from typing import Any, Callable, Optional

#: The EPs whose device is a CUDA device numbered by ``device_id``: those whose record in
#: ``harness.eps.registry`` reads its device here (``cuda_record``).
CUDA_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider", "NvTensorRTRTXExecutionProvider")
#: The fields asked of ``nvidia-smi --query-gpu``, in this order.
FIELDS = ("index", "name", "pci.bus_id", "driver_version", "uuid", "memory.total")
NVIDIA_VENDOR_ID = "0x10DE"
#: Lines of nvidia-smi output read at most (a machine has a handful of GPUs; the output is untrusted).
MAX_GPUS = 64


class NvidiaSmiError(RuntimeError):
    """nvidia-smi is absent, failed, or said nothing readable; the message says which."""


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def read_gpus(run: Runner = subprocess.run, timeout_s: float = 10.0) -> list[dict[str, str]]:
    """Every GPU nvidia-smi lists, as ``parse`` gives them; ``NvidiaSmiError`` when it cannot be
    run, fails, hangs past ``timeout_s`` or lists nothing."""
    argv = ["nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits"]
    try:
        done = run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise NvidiaSmiError("nvidia-smi is not on PATH (it comes with the NVIDIA driver)") from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise NvidiaSmiError(f"nvidia-smi could not be run: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise NvidiaSmiError(f"nvidia-smi exited {done.returncode}: {last[0][:200]}")
    gpus = parse(done.stdout)
    if not gpus:
        raise NvidiaSmiError("nvidia-smi listed no GPU")
    return gpus


def parse(text: str) -> list[dict[str, str]]:
    """The GPUs of ``nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`` output: one dict
    per well-formed line (``index`` an integer), keyed by ``FIELDS``; other lines are skipped."""
    gpus = []
    for row in csv.reader(text.splitlines()[:MAX_GPUS]):
        values = [v.strip() for v in row]
        if len(values) != len(FIELDS) or not values[0].isdigit():
            continue
        gpus.append(dict(zip(FIELDS, (v[:200] for v in values))))
    return gpus


def visible(gpus: list[dict[str, str]], cuda_visible: Optional[str]) -> tuple[list[dict[str, str]], Optional[str]]:
    """The GPUs CUDA numbers 0, 1, ... under ``CUDA_VISIBLE_DEVICES`` (None: all, in nvidia-smi's
    order), and a note when an entry names no listed GPU (CUDA stops at the first such entry)."""
    if cuda_visible is None:
        return gpus, None
    chosen: list[dict[str, str]] = []
    for entry in (e.strip() for e in cuda_visible.split(",")):
        match = [g for g in gpus if (entry.isdigit() and g["index"] == entry)
                 or (not entry.isdigit() and entry and g["uuid"].startswith(entry))]
        if len(match) != 1:
            return chosen, f"CUDA_VISIBLE_DEVICES={cuda_visible!r}: {entry!r} names no single GPU nvidia-smi lists"
        chosen.append(match[0])
    return chosen, None


def cuda_identity(options: dict[str, str], gpus: list[dict[str, str]], cuda_visible: Optional[str],
                  ort: dict[str, str]) -> dict[str, Any]:
    """The identity record (``source`` ``nvidia-smi``) of the GPU ``device_id`` names among the
    GPUs CUDA sees, with how it was chosen; ``source`` ``none`` and the reason when none is."""
    seen, note = visible(gpus, cuda_visible)
    text = (options or {}).get("device_id", "0")
    index = int(text) if str(text).isdigit() else -1
    if index < 0 or index >= len(seen):
        why = note or f"device_id={text} but CUDA sees {len(seen)} GPU(s)"
        return {"source": "none", "adapter": None, "onnxruntime": ort, "note": f"nvidia-smi: {why}"}
    gpu = seen[index]
    how = f"--ep-option device_id={text}" if "device_id" in (options or {}) else "device_id 0 (the EP's default)"
    if cuda_visible is not None:
        how += f", through CUDA_VISIBLE_DEVICES={cuda_visible}"
    if len(seen) > 1:
        how += " (CUDA's order assumed to be nvidia-smi's PCI order: set CUDA_DEVICE_ORDER=PCI_BUS_ID to make it so)"
    adapter = {"description": gpu["name"], "vendor_id": NVIDIA_VENDOR_ID, "index": int(gpu["index"]),
               "pci_bus_id": gpu["pci.bus_id"], "driver_version": gpu["driver_version"], "uuid": gpu["uuid"],
               "memory_mib": gpu["memory.total"]}
    return {"source": "nvidia-smi", "adapter": adapter, "selection": how, "onnxruntime": ort}


def words(data: dict[str, Any], runtime: str) -> str:
    """The one-line summary of a ``nvidia-smi`` record."""
    adapter = data.get("adapter") or {}
    return (f"{adapter.get('description')} (pci {adapter.get('pci_bus_id')}), driver {adapter.get('driver_version')}, "
            f"{str(data.get('selection') or '').split(' (')[0]}, {runtime}")


def cuda_record(ep: Any, ort: dict[str, str]) -> dict[str, Any]:
    """The identity record of a built-in CUDA-family EP's GPU (``cuda_identity``, ``device_id``
    counted as CUDA counts under ``CUDA_VISIBLE_DEVICES``); ``source`` none with the reason when
    nvidia-smi cannot tell, and for a plugin, whose device ONNX Runtime's device list names."""
    if ep.holder != "built-in":
        return {"source": "none", "adapter": None, "onnxruntime": ort}
    try:
        gpus = read_gpus()
    except NvidiaSmiError as exc:
        return {"source": "none", "adapter": None, "onnxruntime": ort, "note": str(exc)}
    return cuda_identity(ep.options, gpus, os.environ.get("CUDA_VISIBLE_DEVICES"), ort)


def unlisted_gpus() -> list[dict[str, str]]:
    """The GPUs ``ep-testbed devices`` lists under a CUDA-family EP that ONNX Runtime lists no device
    for (``read_gpus``, looked up when called); ``NvidiaSmiError`` as it raises."""
    return read_gpus()


def listing_line(gpu: dict[str, str]) -> str:
    """One GPU of ``read_gpus`` as ``ep-testbed devices`` lists it (index, name, PCI bus, driver)."""
    return f"{gpu['index']}: {gpu['name']} pci {gpu['pci.bus_id']}, driver {gpu['driver_version']}"
