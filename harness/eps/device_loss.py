"""Errors that say the GPU device itself was removed or lost: one list, for every EP.

After a GPU timeout (TDR), a driver reset or a hot unplug, every later call on the device fails
the same way, so such an error belongs to no case. ``device_lost(text)`` says whether an EP's
error text (ONNX Runtime's exception message, or what the EP's own process left) is one of them;
the run machinery (``harness.run``) then ends that case as ``crash`` with ``reason``
``device-lost``, restarts the worker with a fresh device, and stops the run after a few losses in
a row instead of failing every case that is left.

Each pattern is matched case-insensitively against the whole text; where the EP spells an
HRESULT as bare hex (ONNX Runtime's DirectML EP prints WIL's ``Exception(3) tid(5a68) 887A0005
The GPU device instance has been suspended...``), the hex alone is a pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The ``reason`` a case line carries when the device was lost while it ran.
REASON = "device-lost"


@dataclass(frozen=True)
class LossPattern:
    """One way an EP says its device is gone: a regular expression, what it means, and where the
    string is defined."""

    regex: str
    means: str
    source: str


_DXGI = "https://learn.microsoft.com/en-us/windows/win32/direct3ddxgi/dxgi-error"
_CUDA = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
_VULKAN = "https://registry.khronos.org/vulkan/specs/latest/man/html/VkResult.html"
_WEBGPU = "https://www.w3.org/TR/webgpu/#device-loss"
#: What ONNX Runtime's DirectML EP raises after a device removal (the HRESULT and its text), as
#: reported in https://github.com/microsoft/onnxruntime/issues/22700
_ORT_DML = "https://github.com/microsoft/onnxruntime/issues/22700"

#: Every device-loss string the harness knows, in the order they are tried.
PATTERNS: tuple[LossPattern, ...] = (
    LossPattern(r"DXGI_ERROR_DEVICE_REMOVED|\b(?:0x)?887A0005\b", "the GPU device was removed (DXGI_ERROR_DEVICE_REMOVED, "
                "0x887A0005: a TDR, a driver update or reset, or the GPU unplugged)", _DXGI),
    LossPattern(r"GPU device instance has been suspended", "the GPU device was removed (DXGI_ERROR_DEVICE_REMOVED as "
                "ONNX Runtime's DirectML EP words it)", _ORT_DML),
    LossPattern(r"DXGI_ERROR_DEVICE_HUNG|\b(?:0x)?887A0006\b", "the GPU device hung (DXGI_ERROR_DEVICE_HUNG, 0x887A0006)",
                _DXGI),
    LossPattern(r"DXGI_ERROR_DEVICE_RESET|\b(?:0x)?887A0007\b", "the GPU device was reset (DXGI_ERROR_DEVICE_RESET, "
                "0x887A0007)", _DXGI),
    LossPattern(r"cudaErrorDevicesUnavailable|CUDA-capable device\(s\) is/are busy or unavailable",
                "the CUDA device is unavailable (cudaErrorDevicesUnavailable)", _CUDA),
    LossPattern(r"cudaErrorLaunchFailure|unspecified launch failure", "a CUDA kernel faulted and the context is lost "
                "(cudaErrorLaunchFailure: unspecified launch failure)", _CUDA),
    LossPattern(r"cudaErrorDeviceUnavailable", "the CUDA device is unavailable (cudaErrorDeviceUnavailable)", _CUDA),
    LossPattern(r"VK_ERROR_DEVICE_LOST", "the Vulkan device was lost (VK_ERROR_DEVICE_LOST)", _VULKAN),
    LossPattern(r"\bdevice (?:was |is |has been )?lost\b|DeviceLost", "the device was lost (WebGPU's GPUDevice.lost; "
                "other EPs word it the same way)", _WEBGPU),
)
_COMPILED = tuple((re.compile(p.regex, re.IGNORECASE), p) for p in PATTERNS)


def device_lost(text: str) -> LossPattern | None:
    """The first pattern of ``PATTERNS`` that ``text`` matches, or None when it says nothing of a
    lost device."""
    for regex, pattern in _COMPILED:
        if regex.search(text):
            return pattern
    return None


class DeviceLost(Exception):
    """The device was lost while ``case_ids`` (the cases of one session) ran; ``pattern`` says
    how the EP said so and ``detail`` is the EP's own text (its first line, shortened)."""

    def __init__(self, case_ids: list[str], pattern: LossPattern, detail: str):
        """``case_ids``: the session's cases (one, or a pack's); ``pattern``/``detail`` as above."""
        self.case_ids, self.pattern, self.detail = list(case_ids), pattern, detail
        super().__init__(f"{pattern.means}: {detail}")


def loss_of(exc: BaseException, case_ids: list[str]) -> DeviceLost | None:
    """``exc`` as a ``DeviceLost`` of ``case_ids`` when its text (or its cause's) says the device
    is lost; ``exc`` itself when it already is one; None otherwise."""
    if isinstance(exc, DeviceLost):
        return exc
    texts = [str(exc), str(getattr(exc, "cause", "") or "")]
    for text in texts:
        pattern = device_lost(text)
        if pattern is not None:
            return DeviceLost(case_ids, pattern, first_line(text))
    return None


def first_line(text: str, limit: int = 400) -> str:
    """The first non-empty line of ``text``, at most ``limit`` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[:limit] + "..."


__all__ = ["PATTERNS", "REASON", "DeviceLost", "LossPattern", "device_lost", "first_line", "loss_of"]
