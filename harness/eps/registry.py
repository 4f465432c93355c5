"""The EP registry: one record per execution provider, beside the operator registry's one per operator.

What the testbed knows of an EP sits in its ``EpRecord``: the ``--ep`` aliases that name it, ONNX
Runtime's provider name, the packages that bring it (the onnxruntime wheel it is built into, the
plugin packages that bring it beside any wheel), the adapter class that holds it
(``harness.eps.holders``), its measured default workers and cases a session, the classes of EPs
whose expectations it shares, the predictor of what it does with a case's model, the errors that
say its device is lost, how its device is read for the run header (``identity``) and checked
before a run (``preflight``), and what ``doctor`` and ``devices`` tell about it. Everything asks
the registry: ``providers.resolve_ep`` its aliases and install hints, ``adapters.resolve`` the
EPs held their own way, ``packing`` the defaults, ``device_loss`` the loss patterns, ``gpu`` and
``preflight`` an EP's adapter (which reads its record), ``ep-testbed devices`` the device
listings, and the front ends hand expectations the predictors and classes
(``harness.core.expectations`` knows no EP). Nothing else in the code branches on an EP's name.

An EP registered by other code (``register``) joins every command; a spec of an EP held by an
adapter class outside this package carries that class's module (``EpSpec.adapter_module``), which
a worker process imports to find the record. ``check_record`` holds a record to the contract
(``EpContractError`` naming the EP and the field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import device_record, dxgi, nvidia
from .dml_ep import predict_case as dml_predictions
from .dml_wine.adapter import WineDmlAdapter
from .holders import BuiltInAdapter, EpAdapter, PluginAdapter
from .spec import EpSpec
from .webgpu_ep import predict_case as webgpu_predictions

#: A predictor: what an EP will do with a case's operator nodes (a list of prediction dicts,
#: ``harness.core.expectations``), read from the EP's public source.
Predictor = Callable[[Any], list]


class EpContractError(ValueError):
    """An EP record breaks the contract; the message names the EP, the field and what is allowed."""


@dataclass(frozen=True)
class LossPattern:
    """One way an EP says its device is gone: a regular expression, what it means, and where the
    string is defined (``harness.eps.device_loss``)."""

    regex: str
    means: str
    source: str


@dataclass(frozen=True)
class DeviceListing:
    """Where an EP's devices are listed when ONNX Runtime's device list names none (``ep-testbed
    devices``): ``key`` of the ``--json`` document, the ``tool`` the listing names, ``read()`` (a
    list of devices, or ``error`` raised with why not) and each device's ``line``."""

    key: str
    tool: str
    read: Callable[[], list[dict[str, str]]]
    error: type[Exception]
    line: Callable[[dict[str, str]], str]


@dataclass(frozen=True)
class EpRecord:
    """One execution provider, everything the testbed knows of it (module docstring).

    ``name``: the record's name (a lower-case word; an EP held its own way is selected by it, as
    ``--ep dml-wine``); ``provider``: ONNX Runtime's name; ``aliases``: the ``--ep`` words of the
    built-in EP (the first names its files: ``harness/expectations/<alias>.json``); ``adapter``:
    the class that holds it (``harness.eps.holders``; ``BuiltInAdapter``: built into the wheel).
    ``wheels`` / ``plugin_packages``: what brings it; ``install_hint`` is what ``--ep``'s refusal
    adds (``{wheel}``: the first wheel), ``install_where`` what ``doctor``'s fix starts with, and
    off ``platform`` the EP's users are told ``elsewhere``. ``default_jobs`` / ``default_batch``:
    measured workers and cases a session (None / 1: never measured). ``classes``: the classes of
    EPs (``harness.core.expectations.EP_CLASSES``) it belongs to, on evidence. ``predictor``: its
    predictions for a case (expectations with ``predicted``). ``device_loss``: how it says its
    device is gone. ``identity(spec, ort)``: its device record where ONNX Runtime's device list
    cannot tell; ``preflight(result, spec, read)``: its own checks before a run;
    ``error_meanings``: what the codes in its errors mean (``doctor``). ``device_id_index``: its
    ``device_id`` option is a device index; ``device_id_key``: the device metadata that option
    matches in ONNX Runtime's list. ``unlisted_devices``: where its devices are listed when ONNX
    Runtime lists none. ``label``: what a command's first line says of it after the provider.
    """

    name: str
    provider: str
    aliases: tuple[str, ...] = ()
    adapter: type[EpAdapter] = BuiltInAdapter
    wheels: tuple[str, ...] = ()
    plugin_packages: tuple[str, ...] = ()
    install_hint: str = ""
    install_where: str = ""
    platform: str | None = None
    elsewhere: str = ""
    default_jobs: int | None = None
    default_batch: int = 1
    classes: tuple[str, ...] = ()
    predictor: Predictor | None = None
    device_loss: tuple[LossPattern, ...] = ()
    identity: Callable[[EpSpec, dict[str, str]], dict[str, Any]] | None = None
    preflight: Callable[[Any, EpSpec, Callable[[], dict[str, Any]]], bool] | None = None
    error_meanings: Mapping[str, str] = field(default_factory=dict)
    device_id_index: bool = False
    device_id_key: str | None = None
    unlisted_devices: DeviceListing | None = None
    label: str = ""

    @property
    def holder(self) -> str:
        """How the EP is held: its adapter class's ``holder`` (``EpSpec.holder``)."""
        return str(self.adapter.holder)

    @property
    def alias(self) -> str:
        """The alias its files and run folders use (``alias_of`` its provider)."""
        return alias_of(self.provider)

    @property
    def held_its_own_way(self) -> bool:
        """Whether its adapter is not one every EP may be held by (built into the wheel, a plugin)."""
        return self.adapter not in (BuiltInAdapter, PluginAdapter)


_RECORDS: dict[str, EpRecord] = {}
_NAME = re.compile(r"[a-z][a-z0-9_-]*")


#: What every refusal of ``check_record`` ends with: what to do next.
_NOTE = ("\nNote: an EP record is harness.eps.registry.EpRecord(name, provider, ...); its fields and what each "
         "may be are in EpRecord's docstring and DESIGN.md, \"One EP, one place\"")


def check_record(record: EpRecord) -> None:
    """``EpContractError`` naming the EP and field when ``record`` breaks the contract: a name
    and aliases of lower-case words that no other record uses, a provider name, an adapter class
    with a ``holder`` no other EP held its own way has, defaults of at least one."""
    problem = _problem(record)
    if problem:
        raise EpContractError(f"EP record {record.name!r}: {problem}{_NOTE}")


def _problem(record: EpRecord) -> str | None:
    """What breaks the contract in ``record`` (``check_record``), or None."""
    if not isinstance(record.name, str) or not _NAME.fullmatch(record.name):
        return "name must be a lower-case word (letters, digits, - and _)"
    if not isinstance(record.provider, str) or not record.provider:
        return "provider must be ONNX Runtime's provider name, e.g. CPUExecutionProvider"
    if not all(isinstance(a, str) and _NAME.fullmatch(a) for a in record.aliases):
        return "aliases must be lower-case words, e.g. ('cpu',)"
    if not (isinstance(record.adapter, type) and issubclass(record.adapter, EpAdapter) and record.adapter.holder):
        return "adapter must be a subclass of harness.eps.holders.EpAdapter with a holder"
    if record.default_batch < 1 or (record.default_jobs is not None and record.default_jobs < 1):
        return "default_jobs and default_batch must be at least 1 (None: one worker a core)"
    for other in _RECORDS.values():
        taken = {other.name, *other.aliases} & {record.name, *record.aliases}
        if other.name != record.name and taken:
            return f"{sorted(taken)[0]!r} already names EP record {other.name!r}"
        if other.name != record.name and record.held_its_own_way and other.adapter is record.adapter:
            return f"adapter {record.adapter.__name__} already holds EP record {other.name!r}"
    return None


def register(record: EpRecord) -> EpRecord:
    """Add ``record`` once it keeps the contract (``check_record``), in place of the record of its
    name if there is one (a machine's own measured defaults, a test's toy registered again); returns it."""
    check_record(record)
    _RECORDS[record.name] = record
    return record


def unregister(name: str) -> None:
    """Forget the record ``name`` (tests register toys and take them away again)."""
    _RECORDS.pop(name, None)


def records() -> tuple[EpRecord, ...]:
    """Every record, in the order registered."""
    return tuple(_RECORDS.values())


def named(word: str) -> EpRecord | None:
    """The record an ``--ep`` word names (its name or an alias, in any case), or None."""
    key = word.strip().lower()
    return next((r for r in _RECORDS.values() if key == r.name or key in r.aliases), None)


def aliases() -> dict[str, str]:
    """Every ``--ep`` alias -> its provider name, in the order registered."""
    return {alias: r.provider for r in _RECORDS.values() for alias in r.aliases}


def alias_of(provider: str) -> str:
    """The short alias of a provider name (``DmlExecutionProvider`` -> ``dml``): its record's first
    alias, else the name without ``ExecutionProvider``, in lower case."""
    for alias, name in aliases().items():
        if name == provider:
            return alias
    return provider.removesuffix("ExecutionProvider").lower() or provider


def of_provider(provider: str) -> EpRecord | None:
    """The record of ONNX Runtime's ``provider`` (the built-in EP's first, where an EP is also
    held its own way), or None."""
    mine = [r for r in _RECORDS.values() if r.provider == provider]
    return next((r for r in mine if not r.held_its_own_way), mine[0] if mine else None)


def held_by(holder: str) -> EpRecord | None:
    """The record of the EP held its own way by ``holder`` (an ``EpSpec.holder``), or None."""
    return next((r for r in _RECORDS.values() if r.held_its_own_way and r.holder == holder), None)


def of_spec(spec: EpSpec) -> EpRecord:
    """The record of the EP ``spec`` names: the one its holder holds its own way, else its
    provider's, else a record of that provider with every default (an EP the registry does not know)."""
    return held_by(spec.holder) or of_provider(spec.provider) or EpRecord(alias_of(spec.provider) or "ep",
                                                                          spec.provider)


def adapter_class(holder: str) -> type[EpAdapter] | None:
    """The adapter class of ``holder`` (built into the wheel, a plugin, or a record's own), or None."""
    classes: list[type[EpAdapter]] = [BuiltInAdapter, PluginAdapter, *(r.adapter for r in _RECORDS.values())]
    return next((c for c in classes if c.holder == holder), None)


def predictors() -> dict[str, Predictor]:
    """Provider name -> its predictor, for every record that has one (the built-in EP's first)."""
    found: dict[str, Predictor] = {}
    for record in _RECORDS.values():
        if record.predictor is not None and record.provider not in found:
            found[record.provider] = record.predictor
    return found


def classes_of(provider: str) -> tuple[str, ...]:
    """The classes of EPs ``provider`` belongs to (its record's ``classes``; none without a record)."""
    record = of_provider(provider)
    return record.classes if record is not None else ()


def loss_patterns() -> tuple[LossPattern, ...]:
    """Every record's device-loss patterns, in the order registered, each once."""
    return tuple(dict.fromkeys(p for r in _RECORDS.values() for p in r.device_loss))


def error_meanings() -> dict[str, str]:
    """Every record's error codes and what they mean."""
    return {code: meaning for r in _RECORDS.values() for code, meaning in r.error_meanings.items()}


# --- the EPs the testbed knows --------------------------------------------------------------

_DXGI = "https://learn.microsoft.com/en-us/windows/win32/direct3ddxgi/dxgi-error"
_CUDA = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
_VULKAN = "https://registry.khronos.org/vulkan/specs/latest/man/html/VkResult.html"
_WEBGPU = "https://www.w3.org/TR/webgpu/#device-loss"
#: What ONNX Runtime's DirectML EP raises after a device removal (the HRESULT and its text), as
#: reported in https://github.com/microsoft/onnxruntime/issues/22700
_ORT_DML = "https://github.com/microsoft/onnxruntime/issues/22700"

DXGI_LOSS = (
    LossPattern(r"DXGI_ERROR_DEVICE_REMOVED|\b(?:0x)?887A0005\b", "the GPU device was removed (DXGI_ERROR_DEVICE_REMOVED, "
                "0x887A0005: a TDR, a driver update or reset, or the GPU unplugged)", _DXGI),
    LossPattern(r"GPU device instance has been suspended", "the GPU device was removed (DXGI_ERROR_DEVICE_REMOVED as "
                "ONNX Runtime's DirectML EP words it)", _ORT_DML),
    LossPattern(r"DXGI_ERROR_DEVICE_HUNG|\b(?:0x)?887A0006\b", "the GPU device hung (DXGI_ERROR_DEVICE_HUNG, 0x887A0006)",
                _DXGI),
    LossPattern(r"DXGI_ERROR_DEVICE_RESET|\b(?:0x)?887A0007\b", "the GPU device was reset (DXGI_ERROR_DEVICE_RESET, "
                "0x887A0007)", _DXGI),
)
CUDA_LOSS = (
    LossPattern(r"cudaErrorDevicesUnavailable|CUDA-capable device\(s\) is/are busy or unavailable",
                "the CUDA device is unavailable (cudaErrorDevicesUnavailable)", _CUDA),
    LossPattern(r"cudaErrorLaunchFailure|unspecified launch failure", "a CUDA kernel faulted and the context is lost "
                "(cudaErrorLaunchFailure: unspecified launch failure)", _CUDA),
    LossPattern(r"cudaErrorDeviceUnavailable", "the CUDA device is unavailable (cudaErrorDeviceUnavailable)", _CUDA),
)
VULKAN_LOSS = (
    LossPattern(r"VK_ERROR_DEVICE_LOST", "the Vulkan device was lost (VK_ERROR_DEVICE_LOST)", _VULKAN),
    LossPattern(r"\bdevice (?:was |is |has been )?lost\b|DeviceLost", "the device was lost (WebGPU's GPUDevice.lost; "
                "other EPs word it the same way)", _WEBGPU),
)

#: What a DirectML request off Windows is told (``resolve_ep``, the preflight of ``run``, ``doctor``).
DML_WINE_HINT = ("; on Linux, --ep dml-wine runs ONNX Runtime's real DirectML EP (DirectML.dll and onnxruntime.dll "
                 "of onnxruntime-directml) under Wine on an emulated device: set it up with `bash tools/dml-wine.sh`, "
                 "then `ep-testbed doctor --ep dml-wine` (DirectML's own algorithms, never a hardware result)")
#: ``install_hint`` of an EP whose wheel replaces the plain onnxruntime one.
_REPLACES = " (install {wheel}, instead of onnxruntime)"
#: The EPs ``nvidia-smi`` lists the devices of (``harness.eps.nvidia``).
NVIDIA_SMI = DeviceListing("nvidia_smi", "nvidia-smi", nvidia.unlisted_gpus, nvidia.NvidiaSmiError, nvidia.listing_line)
#: ONNX Runtime's own kernels (``EP_CLASSES``): the CPU EP's and their counterparts in the same tree.
_KERNELS = ("onnxruntime-kernels",)

# Measured defaults (numbers in DESIGN.md, "Throughput"; ``python benchmarks/bench_throughput.py`` and
# ``run --jobs J --batch K`` sweeps). CUDA (H100, onnxruntime-gpu 1.31.1): 32 cases a session ran the
# catalog 1.3x to 2x faster than 1 at every worker count, same outcomes; with the workers' start
# overlapping the run's, 4 workers ran ``run`` at 206.0 / 204.1 cases/s against 191.4 / 192.3 with 2
# and ``fuzz`` at 312.6 / 218.5 against 166.9 / 149.2. WebGPU (Dawn on Vulkan, the onnxruntime-webgpu
# 1.27.0 wheel; the onnxruntime-ep-webgpu plugin is the same provider): 32 cases a session ran it
# 1.4x to 2.2x faster than 1 with 2 and 4 workers, same outcomes; on the H200 machine 88.5 cases/s
# with 2 workers, 87.9 with 4, 61.9 with 8, 4 running the steady part fastest (135 cases/s).
for _record in (
    EpRecord("cpu", "CPUExecutionProvider", ("cpu",), classes=_KERNELS, device_id_index=True),
    EpRecord("dml", "DmlExecutionProvider", ("dml",), wheels=("onnxruntime-directml",),
             install_hint=" (install the {wheel} wheel on Windows, instead of onnxruntime)",
             install_where="on a Windows machine with a GPU, ", platform="win32", elsewhere=DML_WINE_HINT,
             predictor=dml_predictions, device_loss=DXGI_LOSS, identity=dxgi.dxgi_record, preflight=dxgi.preflight,
             error_meanings=dxgi.KNOWN_HRESULTS, device_id_key="DxgiAdapterNumber"),
    EpRecord("openvino", "OpenVINOExecutionProvider", ("openvino",), wheels=("onnxruntime-openvino",),
             plugin_packages=("onnxruntime-ep-openvino",), install_hint=_REPLACES,
             identity=device_record.openvino_record),
    EpRecord("cuda", "CUDAExecutionProvider", ("cuda",), wheels=("onnxruntime-gpu",), install_hint=_REPLACES,
             default_jobs=4, default_batch=32, classes=_KERNELS, device_loss=CUDA_LOSS, identity=nvidia.cuda_record,
             device_id_index=True, unlisted_devices=NVIDIA_SMI),
    EpRecord("tensorrt", "TensorrtExecutionProvider", ("tensorrt",), wheels=("onnxruntime-gpu",),
             identity=nvidia.cuda_record, device_id_index=True, unlisted_devices=NVIDIA_SMI),
    EpRecord("rocm", "ROCMExecutionProvider", ("rocm",), classes=_KERNELS, device_id_index=True),
    EpRecord("coreml", "CoreMLExecutionProvider", ("coreml",)),
    EpRecord("qnn", "QNNExecutionProvider", ("qnn",), wheels=("onnxruntime-qnn",)),
    EpRecord("webgpu", "WebGpuExecutionProvider", ("webgpu",), wheels=("onnxruntime-webgpu",),
             plugin_packages=("onnxruntime-ep-webgpu",), default_jobs=4, default_batch=32, classes=_KERNELS,
             predictor=webgpu_predictions, device_loss=VULKAN_LOSS),
    EpRecord("nvtensorrtrtx", "NvTensorRTRTXExecutionProvider", identity=nvidia.cuda_record, device_id_index=True,
             unlisted_devices=NVIDIA_SMI),
    EpRecord("migraphx", "MIGraphXExecutionProvider", device_id_index=True),
    EpRecord("dml-wine", "DmlExecutionProvider", adapter=WineDmlAdapter, predictor=dml_predictions,
             label="DirectML under Wine, on an emulated device: not a hardware result"),
):
    register(_record)
#: The records this module registers (the testbed's own EPs).
BUILT_IN = tuple(_RECORDS)
#: The EP a command runs on unless told (``--ep``), and the one failures are re-checked on and a
#: model run's outputs are compared with: ONNX Runtime's CPU EP, which every build has.
DEFAULT_EP = "cpu"


__all__ = ["BUILT_IN", "DEFAULT_EP", "DML_WINE_HINT", "DeviceListing", "EpContractError", "EpRecord", "LossPattern", "Predictor",
           "adapter_class", "alias_of", "aliases", "check_record", "classes_of", "error_meanings", "held_by",
           "loss_patterns", "named", "of_provider", "of_spec", "predictors", "records", "register", "unregister"]
