"""Hypothesis strategies for the values the reference tests feed a desc: every value is drawn
(so a failing example shrinks to simple numbers), without drawing each element of a large map.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

#: The side of the tile a large feature map repeats.
TILE = 8


def finite(np_type, magnitude: float) -> st.SearchStrategy[float]:
    """Finite floats of ``np_type`` within ``±magnitude`` (no subnormals: the tests' arithmetic
    on coordinates is exact only for normal numbers)."""
    width = 16 if np.dtype(np_type) == np.float16 else 32
    return st.floats(-magnitude, magnitude, width=width, allow_subnormal=False)


def feature_map(draw, shape, np_type, magnitude: float) -> np.ndarray:
    """An ``(N, C, H, W)`` map of ``np_type`` values within ``±magnitude``: a drawn tile of at most
    ``TILE`` x ``TILE`` per image and channel, every element drawn, repeated over the map (a map
    hundreds wide keeps varied values everywhere for the price of one tile)."""
    n, c, h, w = shape
    tile = draw(arrays(np_type, (n, c, min(h, TILE), min(w, TILE)), elements=finite(np_type, magnitude),
                       fill=st.nothing()), label="feature map tile")
    reps = (1, 1, -(-h // tile.shape[2]), -(-w // tile.shape[3]))
    return np.ascontiguousarray(np.tile(tile, reps)[:, :, :h, :w])


def uniform(draw, low: float, high: float, count: int, label: str) -> np.ndarray:
    """``count`` floats in ``[low, high]`` (float64), drawn one by one."""
    return np.array(draw(st.lists(st.floats(low, high, allow_subnormal=False), min_size=count, max_size=count),
                         label=label), dtype=np.float64)
