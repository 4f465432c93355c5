"""DML_TENSOR_DATA_TYPE names and the NumPy dtypes that hold them."""

from __future__ import annotations

from typing import Callable

import numpy as np

PREFIX = "DML_TENSOR_DATA_TYPE_"

#: Short DML data type name -> NumPy dtype. Only the types the four pages mention.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "FLOAT32": np.dtype(np.float32),
    "FLOAT16": np.dtype(np.float16),
    "INT64": np.dtype(np.int64),
    "INT32": np.dtype(np.int32),
    "INT16": np.dtype(np.int16),
    "INT8": np.dtype(np.int8),
    "UINT64": np.dtype(np.uint64),
    "UINT32": np.dtype(np.uint32),
    "UINT16": np.dtype(np.uint16),
    "UINT8": np.dtype(np.uint8),
}

FLOAT_TYPES = ("FLOAT32", "FLOAT16")


def numpy_dtype(data_type: str) -> np.dtype:
    """The NumPy dtype of a short DML data type name (``"FLOAT16"`` -> ``float16``)."""
    return NUMPY_DTYPES[data_type]


def dml_data_type(dtype: np.dtype | type) -> str:
    """The short DML data type name of a NumPy dtype; KeyError if DML has none."""
    dtype = np.dtype(dtype)
    for name, candidate in NUMPY_DTYPES.items():
        if candidate == dtype:
            return name
    raise KeyError(str(dtype))


#: Elements drawn per step by ``filled``: the int64 draws and float64 quotients NumPy makes on
#: the way exist for one chunk at a time (16 MiB each), never for a whole input (8x its size).
CHUNK = 2**21


def filled(sizes: tuple[int, ...], dtype: np.dtype | type, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """A new array of ``sizes`` and ``dtype`` filled in row-major order from ``draw(n)`` (``n``
    values at a time, at most ``CHUNK``), each chunk cast into place: the memory of the output
    plus one chunk. A generator's stream does not depend on how its draws are split, so this
    gives the values one ``draw(total)`` would (``tests/reference/test_dtypes_memory.py``)."""
    out = np.empty(tuple(sizes), dtype=dtype)
    flat = out.reshape(-1)  # a view: the array is freshly allocated, C-contiguous
    for start in range(0, flat.size, CHUNK):
        flat[start:start + CHUNK] = draw(min(CHUNK, flat.size - start))
    return out


def random_values(sizes: tuple[int, ...], data_type: str, rng: np.random.Generator) -> np.ndarray:
    """Well-conditioned random values of a data type: floats are multiples of 1/8 in [-4, 4]
    (exact in float16), integers in [-100, 100] clipped to the type. Allocates the output's
    dtype directly (``filled``)."""
    dtype = numpy_dtype(data_type)
    if np.issubdtype(dtype, np.floating):
        return filled(sizes, dtype, lambda n: rng.integers(-32, 33, size=n) / 8)
    info = np.iinfo(dtype)
    low, high = max(int(info.min), -100), min(int(info.max), 100)
    return filled(sizes, dtype, lambda n: rng.integers(low, high, size=n, endpoint=True))
