"""How a run on an emulated device is labelled, in one place.

``--ep dml-wine`` runs ONNX Runtime's real DirectML EP (``DirectML.dll`` and ``onnxruntime.dll``
of onnxruntime-directml) in a Windows host process under Wine, on a Direct3D 12 device that vkd3d
emulates on Mesa's lavapipe (llvmpipe): DirectML's and the EP's own algorithms, never a hardware
result. Two ONNX Runtimes take part: the Wine host's ``onnxruntime.dll``, which builds and runs
every session on the EP, and this Linux process's ``onnxruntime`` (the harness: the reference EP
of model runs, the re-check of failures on ``--also-on``), usually another version.

``emulated_device(gpu, flavour, version)`` is the run header's (and ``model_result.json``'s)
``emulated_device`` record: the one-line ``label`` every front end shows -- the run header, the
report's banner, the terminal, junit.xml's properties, summary.json, ci-summary, findings -- e.g.
``DirectML.dll 1.15.4 on an emulated device (llvmpipe), ONNX Runtime 1.24.4``, and both ONNX
Runtimes, each saying what it ran. ``label(header)`` reads it back (or makes it from a header's
``gpu`` record written before the record existed). It imports nothing but the standard library:
the reports read it.
"""

from __future__ import annotations

from typing import Any, Mapping

#: What every emulated result is, said once after the label.
NOT_HARDWARE = ("results are DirectML's and the DirectML EP's own algorithms on a Direct3D 12 device emulated on the "
                "CPU (vkd3d on Mesa's lavapipe, under Wine), never a hardware result: float16, hardware numerics, "
                "shader model 6 kernels and drivers are not tested")
#: The ``--ep`` value that selects DirectML under Wine (``harness.eps.dml_wine``).
EP_FLAG = "dml-wine"


def emulated_device(gpu: Any, ort_flavour: Any = None, ort_version: Any = None) -> dict[str, Any] | None:
    """The ``emulated_device`` record of a run whose device record ``gpu`` (the header's ``gpu``)
    says ``emulated``; ``ort_flavour`` / ``ort_version`` are this (Linux) process's ONNX Runtime.
    None for any other run (a hardware device, or no record)."""
    if not isinstance(gpu, Mapping) or gpu.get("emulated") is not True:
        return None
    adapter, directml, host_ort = (_mapping(gpu.get(key)) for key in ("adapter", "directml", "onnxruntime"))
    description = str(adapter.get("description") or "no adapter named")
    version = str(directml.get("version") or "?")
    host_version = str(host_ort.get("version") or "?")
    return {
        "label": f"DirectML.dll {version} on an emulated device ({description.split(' (')[0]}), "
                 f"ONNX Runtime {host_version}",
        "device": description,
        "directml": version,
        "onnxruntime": {
            "wine_host": {"distribution": str(host_ort.get("distribution") or "?"), "version": host_version,
                          "runs": "onnxruntime.dll in the Wine host process: every session on the EP under test"},
            "linux_process": {"distribution": str(ort_flavour or "?"), "version": str(ort_version or "?"),
                              "runs": "this Linux process: the harness, the reference EP of model runs, the re-check "
                                      "of failures on --also-on"},
        },
        "note": NOT_HARDWARE,
    }


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping (a record read from an untrusted file), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def record(header: Any) -> dict[str, Any] | None:
    """The ``emulated_device`` record of a run header (or ``model_result.json``): the one it holds,
    else one made from its ``gpu`` record; None for a run on hardware. A header is read from an
    untrusted file: a record that is not an object with a text label is made again."""
    if not isinstance(header, Mapping):
        return None
    held = header.get("emulated_device")
    if isinstance(held, Mapping) and isinstance(held.get("label"), str):
        return dict(held)
    return emulated_device(header.get("gpu"), header.get("ort_flavour"), header.get("ort_version"))


def label(header: Any) -> str | None:
    """The one-line label of a run on an emulated device (None on hardware)."""
    found = record(header)
    return str(found["label"]) if found else None


def ort_versions(header: Any) -> str | None:
    """Which ONNX Runtime ran what, in one line, for a run on an emulated device (None on hardware)."""
    runtimes = (record(header) or {}).get("onnxruntime")
    if not isinstance(runtimes, Mapping):
        return None
    host, linux = _mapping(runtimes.get("wine_host")), _mapping(runtimes.get("linux_process"))
    return (f"{host.get('distribution', '?')} {host.get('version', '?')} (onnxruntime.dll in the Wine host: every "
            f"session on the EP); {linux.get('distribution', '?')} {linux.get('version', '?')} (this Linux process: "
            "the harness, the reference EP, re-checks)")


__all__ = ["EP_FLAG", "NOT_HARDWARE", "emulated_device", "label", "ort_versions", "record"]
