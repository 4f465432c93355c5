"""DML_TENSOR_DATA_TYPE names and the NumPy dtypes that hold them."""

from __future__ import annotations

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


def random_values(sizes: tuple[int, ...], data_type: str, rng: np.random.Generator) -> np.ndarray:
    """Well-conditioned random values of a data type: floats are multiples of 1/8 in [-4, 4]
    (exact in float16), integers in [-100, 100] clipped to the type."""
    dtype = numpy_dtype(data_type)
    if np.issubdtype(dtype, np.floating):
        return (rng.integers(-32, 33, size=sizes) / 8).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=sizes, endpoint=True).astype(dtype)
