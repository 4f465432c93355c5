"""The reference's optional compiled loops (``native_kernels.c``), loaded with ctypes.

They compute what the NumPy code they stand in for computes, only faster:

- the bounds of ROI_ALIGN's LINEAR samples reduced by AVERAGE take one pass over their four taps,
  with the comparison's rounding allowance, instead of a dozen NumPy passes; equal bit for bit;
- the values of that AVERAGE (``roi_align.average_linear``: two weight products per region) read
  the float32 plane where NumPy gathers, widens and multiplies dense blocks with BLAS. Their
  float64 elements agree with NumPy's within float64 rounding, not bit for bit (BLAS adds in an
  order of its own), so an output element rounded from them can differ by one unit in the last
  place where it lies within that rounding of a rounding boundary of the output type; the
  comparison's rounding allowance is far wider.

``tests/reference/test_native_kernels.py`` checks both contracts.

``pip install`` builds them as the extension module ``ep_testbed.reference._native_kernels`` when
the machine has a C compiler, and leaves them out when it has none (pyproject.toml: an optional
extension); then, or with ``EP_TESTBED_NATIVE=0``, everything runs in NumPy. Nothing requires
them, and nothing is built or written while the tool runs. ``status()`` says which it is.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

SOURCE = Path(__file__).with_name("native_kernels.c")
MODULE = f"{__package__}._native_kernels"
#: The C interface this module calls (``native_kernels_abi`` in the source): a library of another
#: version is not loaded.
ABI = 4

_f32p = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
_f64p = np.ctypeslib.ndpointer(np.float64, flags="C_CONTIGUOUS")
_i64p = np.ctypeslib.ndpointer(np.int64, flags="C_CONTIGUOUS")
_u8p = np.ctypeslib.ndpointer(np.uint8, flags="C_CONTIGUOUS")
_i64 = ctypes.c_int64


def enabled() -> bool:
    """Whether the compiled loops may be used: ``EP_TESTBED_NATIVE`` is not ``0`` (read at each
    call, so a test or a user can switch them off for one computation)."""
    return os.environ.get("EP_TESTBED_NATIVE", "1").strip() != "0"


def built_file() -> Optional[Path]:
    """Where the installation holds the built extension, None where it holds none."""
    try:
        spec = importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):
        spec = None
    return Path(spec.origin) if spec is not None and spec.origin else None


def library_file() -> tuple[Optional[Path], str]:
    """The built library and "", or None and why there is none usable."""
    built = built_file()
    if built is None:
        return None, ("not built: this installation was made without a C compiler (install one, then "
                      "`pip install` ep-testbed again)")
    in_checkout = built.parent == SOURCE.parent and (SOURCE.parent.parent / ".git").exists()
    if in_checkout and SOURCE.exists() and SOURCE.stat().st_mtime > built.stat().st_mtime:
        # an editable checkout whose C source changed since the build: its numbers may differ
        return None, f"{built.name} is older than {SOURCE.name}: run `pip install -e .` again to rebuild it"
    return built, ""


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.native_kernels_abi.argtypes, lib.native_kernels_abi.restype = [], ctypes.c_int
    found = lib.native_kernels_abi()
    if found != ABI:
        raise AttributeError(f"it implements interface {found}, this version calls {ABI}: run `pip install` "
                             "ep-testbed again to rebuild it")
    for name, weights, scalar in (("linear_average_bounds", _f32p, ctypes.c_float),
                                  ("linear_average_bounds_f64", _f64p, ctypes.c_double)):
        function = getattr(lib, name)
        function.argtypes = [_f32p, _i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64p, _i64p, weights, weights, scalar,
                             _u8p, _u8p, ctypes.c_float, _i64p, _f32p, ctypes.c_void_p, ctypes.c_float,
                             ctypes.c_float, ctypes.c_float]
        function.restype = ctypes.c_int
    lib.separable_average.argtypes = [_f32p, _i64, _i64, _i64, _i64, _i64, _f64p, _i64p, _i64p, _f64p, _i64p, _i64p,
                                      _i64p, _i64p, ctypes.c_void_p, ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_void_p]
    lib.separable_average.restype = ctypes.c_int
    return lib


@functools.lru_cache(maxsize=None)
def _load() -> tuple[Optional[ctypes.CDLL], Optional[Path], str]:
    """The library loaded (or None), its file and why it is not used: once per process."""
    path, why = library_file()
    lib = None
    if path is not None:
        try:
            lib = _declare(ctypes.CDLL(str(path)))
        except (OSError, AttributeError) as e:
            why = f"loading {path} failed: {e}"
    return lib, path, why


def kernels() -> Optional[ctypes.CDLL]:
    """The loaded library; None when switched off, not built or not loadable here (``status``
    says why)."""
    return _load()[0] if enabled() else None


def separable_average() -> Optional[Callable[..., int]]:
    """The compiled values loop of the separable AVERAGE (``native_kernels.c: separable_average``),
    None where ``kernels()`` is None."""
    lib = kernels()
    return None if lib is None else lib.separable_average


@dataclass(frozen=True)
class Status:
    """Whether the compiled loops run in this process, and why not where they do not."""

    used: bool
    detail: str


def status() -> Status:
    """``Status`` of the compiled loops."""
    if not enabled():
        return Status(False, "switched off (EP_TESTBED_NATIVE=0): the reference runs in NumPy")
    lib, path, why = _load()
    if lib is not None:
        return Status(True, f"compiled ({path})")
    return Status(False, f"{why}; the reference runs in NumPy: the same numbers, slower on large ROI_ALIGN cases")
