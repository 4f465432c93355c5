"""The NaN rule of the reference's maxima (DECISIONS.md, NAN-1), for ROI_ALIGN's MAX reduction.

Direct3D's float rules make ``max(x, NaN) = x``: a NaN loses to any number, so a max over a
set of samples ignores NaN elements and is NaN only when every element is NaN. ROI_POOLING
applies the same rule with ``np.fmax`` inside its separable bin maxima, and MAX_POOLING2
settles windows holding a NaN in its exact second pass (each kernel's docstring says so).
"""

from __future__ import annotations

import numpy as np


def nan_ignoring_max(values: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """Max over ``axis`` that ignores NaN (all-NaN -> NaN). Integers: a plain max."""
    if np.issubdtype(values.dtype, np.floating):
        return np.fmax.reduce(values, axis=axis)
    return np.max(values, axis=axis)
