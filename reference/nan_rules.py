"""The one NaN rule of every max in the reference (DECISIONS.md, NAN-1).

Direct3D's float rules make ``max(x, NaN) = x``: a NaN loses to any number. A max over a
window (MAX_POOLING2, ROI_POOLING bins, ROI_ALIGN's MAX reduction) therefore ignores NaN
elements, and is NaN only when every element is NaN.
"""

from __future__ import annotations

import numpy as np


def nan_ignoring_max(values: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """Max over ``axis`` that ignores NaN (all-NaN -> NaN). Integers: a plain max."""
    if np.issubdtype(values.dtype, np.floating):
        return np.fmax.reduce(values, axis=axis)
    return np.max(values, axis=axis)
