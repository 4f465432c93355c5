"""Windows ML's EP catalog, read through the ``windowsml`` package in a child process.

Windows ML ships ONNX Runtime with the CPU and DirectML EPs built in, and delivers the vendor EPs
(TensorRT-RTX, OpenVINO, QNN, MIGraphX, VitisAI) as plugin EP libraries it downloads and keeps up
to date. From Python its catalog is the ``windowsml`` package on PyPI
(https://pypi.org/project/windowsml/, "Python bindings for the Windows AI Machine Learning EP
Catalog API", a ctypes wrapper over ``Microsoft.Windows.AI.MachineLearning.dll``; its README's API
reference): ``EpCatalog()`` (a context manager), ``find_all_providers()`` -> ``ExecutionProvider``
objects with ``name``, ``version``, ``package_family_name``, ``library_path``, ``ready_state``
(``EpReadyState``: Ready, NotReady, NotPresent), ``certification`` and ``ensure_ready()``
(downloads and installs the EP). The library path is what ONNX Runtime's
``register_execution_provider_library(name, path)`` takes, so a catalog EP runs here as
``--ep NAME --ep-library PATH`` (Microsoft's page "Register execution providers",
https://learn.microsoft.com/windows/ai/new-windows-ml/register-execution-providers, registers
catalog EPs into Python's ONNX Runtime exactly so). ``windowsml[with-ort]`` pins the matching
``onnxruntime-windowsml`` wheel, which provides the ``onnxruntime`` module.

Why a child process: the package loads a native DLL at import (and refuses to import off
Windows), and releasing a catalog has crashed the process with an access violation on some NPU
drivers (microsoft/winml-cli, https://github.com/microsoft/winml-cli/pull/729,
src/winml/modelkit/session/ep_registry.py works around it). ``doctor`` must report, not die or
hang, so the catalog is read by this file run in a child interpreter (``CHILD_CODE``: run with
``runpy`` and the current folder dropped from ``sys.path``, so neither this folder's modules nor
the user's files shadow a module ``windowsml`` imports; the file imports nothing of the testbed),
which prints one JSON line and leaves with ``os._exit`` before any release; ``read_catalog`` runs
it under a timeout and reads its answer as untrusted data.
This never calls ``ensure_ready()``: reading the catalog downloads nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

#: The PyPI distribution and module of Windows ML's Python catalog.
WINDOWSML = "windowsml"
#: The onnxruntime flavour Windows ML's catalog EPs are built for (``windowsml[with-ort]`` pins it).
WINDOWSML_ORT = "onnxruntime-windowsml"
#: Seconds the child may take (importing the DLL and enumerating the catalog is well under one).
TIMEOUT_S = 60.0
#: The most stdout read from the child, and the most EPs and characters per field kept.
MAX_OUTPUT_BYTES = 1 << 20
MAX_PROVIDERS = 64
MAX_FIELD_CHARS = 1024
#: The fields read from each ``ExecutionProvider`` (enums are read by their ``name``).
FIELDS = ("name", "version", "ready_state", "certification", "library_path", "package_family_name")
#: The child's ``-c`` program: this file as ``__main__``, with no current folder on ``sys.path``.
CHILD_CODE = ("import runpy, sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
              "runpy.run_path(sys.argv[1], run_name='__main__')")


@dataclass(frozen=True)
class CatalogEp:
    """One EP of the catalog, as the child read it (every field text, "" when absent)."""

    name: str
    version: str = ""
    ready_state: str = ""
    certification: str = ""
    library_path: str = ""
    package_family_name: str = ""

    @property
    def ready(self) -> bool:
        """Installed and usable: ``EpReadyState.Ready`` with a library path."""
        return self.ready_state == "Ready" and bool(self.library_path)


@dataclass(frozen=True)
class CatalogReading:
    """What reading the catalog gave: its EPs, or ``error`` (one line) saying why none."""

    providers: tuple[CatalogEp, ...] = field(default_factory=tuple)
    error: str | None = None


def _text(value: object) -> str:
    """An attribute's value as text: an enum by its name, None as ""; cut to ``MAX_FIELD_CHARS``."""
    if value is None:
        return ""
    text = str(getattr(value, "name", value))
    return text[:MAX_FIELD_CHARS]


def _child() -> None:
    """The script's body: print ``{"providers": [...]}`` or ``{"error": "..."}`` as one line, then
    leave without releasing the catalog (see the module docstring)."""
    answer: dict[str, object]
    try:
        import windowsml  # only in the child, where a crash cannot take doctor down

        catalog = windowsml.EpCatalog()
        providers = [{name: _text(getattr(ep, name, None)) for name in FIELDS}
                     for ep in list(catalog.find_all_providers())[:MAX_PROVIDERS]]
        answer = {"providers": providers}
    except BaseException as exc:  # the child reports every failure as data
        answer = {"error": f"{type(exc).__name__}: {str(exc).strip()[:MAX_FIELD_CHARS]}"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    os._exit(0)


def parse_answer(stdout: bytes) -> CatalogReading:
    """The child's last output line read as untrusted JSON: a ``CatalogReading``, or one with
    ``error`` naming what was wrong with the answer."""
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return CatalogReading(error="the catalog reader printed no JSON answer")
    if isinstance(answer.get("error"), str):
        return CatalogReading(error=answer["error"][:MAX_FIELD_CHARS])
    raw = answer.get("providers")
    if not isinstance(raw, list):
        return CatalogReading(error="the catalog reader's answer has no list of providers")
    providers = []
    for item in raw[:MAX_PROVIDERS]:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
            providers.append(CatalogEp(**{k: str(item.get(k) or "")[:MAX_FIELD_CHARS] for k in FIELDS}))
    return CatalogReading(providers=tuple(providers))


def read_catalog(python: str | None = None, *, env: dict[str, str] | None = None,
                 timeout: float = TIMEOUT_S) -> CatalogReading:
    """Windows ML's catalog as ``python`` (default this interpreter) with ``env`` sees it: this
    file run as a script, its one JSON line parsed. A child that crashes, hangs past ``timeout``
    seconds or prints anything but the answer gives a reading with ``error`` set; never raises."""
    command = [python or sys.executable, "-c", CHILD_CODE, os.path.abspath(__file__)]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return CatalogReading(error=f"the catalog reader did not answer within {timeout:g} s")
    except OSError as exc:
        return CatalogReading(error=f"the catalog reader could not start: {exc}")
    if done.returncode != 0:
        code = done.returncode  # Windows: an NTSTATUS such as 0xC0000005; POSIX: -signal
        shown = f"0x{code:08X}" if code > 255 else (f"{code} (signal {-code})" if code < 0 else str(code))
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return CatalogReading(error=f"the catalog reader exited with code {shown}: {tail[0][:200]}".rstrip(": "))
    return parse_answer(done.stdout[-MAX_OUTPUT_BYTES:])


if __name__ == "__main__":
    _child()
