"""Values DirectML.dll itself returned (``--ep dml-wine``: DirectML 1.15.4 on an emulated llvmpipe
device), held once for the reference's tests (the external source of DECISIONS.md RA-5) and for
the DirectML host's tests (``tests/eps/test_dml_wine_observed.py``), which re-check them on the host.
"""

from __future__ import annotations

import numpy as np

#: Single samples on 4x4 images with one infinite pixel, and what DirectML.dll 1.15.4 returned for
#: each (``--ep dml-wine``, 2026-11-29; ``tests/eps/test_dml_wine_observed.py`` re-checks them on
#: the host): (image rows, [(y, x), ...], DirectML's values). The external source of RA-5's lerp.
DML_SINGLE_SAMPLES = (
    ([[1, np.inf, 3, 4], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]],
     [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, -0.5), (-0.5, 0.0), (-0.5, 0.5), (-0.5, -0.5), (0.0, -0.5), (0.5, 1.0)],
     [np.nan, np.nan, np.nan, 1.0, np.nan, np.nan, 1.0, 1.0, np.nan]),
    ([[1, 2, 3, 4], [np.inf, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]],
     [(0.0, 0.0), (0.0, 0.5), (0.5, 0.0), (-0.5, 0.5), (0.5, -0.5), (1.0, -0.5), (1.0, 0.0)],
     [np.nan, np.nan, np.nan, 1.5, np.nan, np.nan, np.nan]),
    ([[1, 2, 3, np.inf], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]],
     [(0.0, 3.0), (0.0, 3.5), (0.0, 2.5), (0.0, 2.0), (0.5, 3.5), (-0.5, 3.5), (0.0, 3.999)],
     [np.nan] * 7),
    ([[1, 2, np.nan, 5], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 7]],
     [(0.0, 3.0), (0.0, 3.5), (3.0, 3.0), (3.5, 3.5), (3.5, 3.0), (3.0, 3.5), (-0.5, 3.5)],
     [5.0, 5.0, 7.0, 7.0, 7.0, 7.0, 5.0]),
)
