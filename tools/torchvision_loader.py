"""Import torchvision beside a CPU-only torch, with the CUDA-library stubs a CUDA wheel of
torchvision needs there: ``import_torchvision() -> (torchvision, note)``.

The torchvision 0.28.0 wheel on PyPI is the CUDA 13.0 build; its torchvision/_C.so names
libc10_cuda.so, libtorch_cuda.so and libcudart.so.13, which the CPU torch wheel does not have, so
a plain ``import torchvision`` fails ("operator torchvision::nms does not exist"). Then this
preloads (RTLD_GLOBAL) the libcudart that the torchvision wheel itself bundles and two stub
libraries compiled here with the system C compiler (``cc``, ``nm`` on PATH), whose functions abort
if they are ever called; only torchvision's CPU kernels run. With a CPU build of torchvision, or a
CUDA torch, nothing is preloaded.

Used by ``tools/export_torchvision_models.py`` and by the tests that compare the reference with
torchvision's own operators (they skip when this raises ``ImportError``). torch and torchvision
are optional tooling, never dependencies of the project.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import subprocess
import tempfile
from pathlib import Path

_KEEP_ALIVE: list = []  # loaded stub handles and their temporary folder live as long as the process
_DATA_SYMBOLS = {"_ZN3c104cuda20CUDACachingAllocator9allocatorE"}  # read, never called, on CPU paths
_CUDA_SYMBOL = re.compile(r"^_ZNK?(3c104cuda|2at4cuda)")


def _torchvision_package_dir() -> Path:
    """The installed torchvision package's folder (found without importing it)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("torchvision is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations)))


def _preload_cuda_stubs(c_so: Path) -> str:
    """Make torchvision/_C.so of a CUDA wheel loadable beside a CPU torch; returns what was done."""
    libs = sorted((c_so.parent.parent / "torchvision.libs").glob("libcudart*.so*"))
    if not libs:
        raise ImportError(f"{c_so} needs libcudart but the torchvision wheel bundles none; install a CPU torchvision")
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(c_so)], capture_output=True, text=True,
                               check=True).stdout
    symbols = sorted({line.split()[-1] for line in undefined.splitlines() if _CUDA_SYMBOL.match(line.split()[-1])})
    lines = ["#include <stdio.h>", "#include <stdlib.h>",
             "static void no_cuda(const char *f) {",
             '  fprintf(stderr, "torchvision CPU stub: CUDA function %s called\\n", f); abort(); }']
    for sym in symbols:
        lines.append(f"void *{sym} = 0;" if sym in _DATA_SYMBOLS else f'void {sym}(void) {{ no_cuda("{sym}"); }}')
    folder = tempfile.TemporaryDirectory(prefix="tv-cuda-stubs-")
    _KEEP_ALIVE.append(folder)
    work = Path(folder.name)
    (work / "c10_cuda.c").write_text("\n".join(lines) + "\n")
    (work / "empty.c").write_text("/* torchvision's _C.so names libtorch_cuda.so but uses none of its symbols */\n")
    for src, name in (("c10_cuda.c", "libc10_cuda.so"), ("empty.c", "libtorch_cuda.so")):
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", f"-Wl,-soname,{name}", "-o", str(work / name),
                        str(work / src)], check=True)
    for lib in (libs[0], work / "libc10_cuda.so", work / "libtorch_cuda.so"):
        _KEEP_ALIVE.append(ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL))
    return (f"torchvision/_C.so is a CUDA build; preloaded the wheel's bundled {libs[0].name} and stubs for "
            f"libc10_cuda.so ({len(symbols)} symbols, each aborting if called) and an empty libtorch_cuda.so")


def import_torchvision():
    """``(torchvision module, note about the stubs or None)``; raises ``ImportError`` when torch or
    torchvision (with its C++ operators) cannot be loaded."""
    import torch

    note = None
    if torch.version.cuda is None:
        c_so = next(iter(sorted(_torchvision_package_dir().glob("_C*.so"))), None)
        if c_so is not None:
            try:
                ctypes.CDLL(str(c_so))
            except OSError as exc:  # a CUDA wheel beside a CPU torch
                if not re.search(r"lib(c10_cuda|torch_cuda|cudart)", str(exc)):
                    raise ImportError(f"torchvision's {c_so.name} does not load: {exc}") from exc
                try:
                    note = _preload_cuda_stubs(c_so)
                except (OSError, subprocess.CalledProcessError) as stub_error:
                    raise ImportError(f"torchvision's CUDA build cannot load beside a CPU torch: {stub_error}") from exc
    import torchvision

    if not torchvision.extension._has_ops():
        raise ImportError("torchvision's C++ operators did not load (NMS, RoIAlign)")
    return torchvision, note
