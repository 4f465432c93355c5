"""Shared pieces of the graphs tests: running a Mapping on ORT's CPU EP, and the tolerances.

Tolerances (used only by these tests; the harness owns the run-time tolerance model):

* integers, indices, and every MaxPool / MaxRoiPool value: exact (atol = rtol = 0) - a max
  only selects, and float16 inputs are selected, never rounded;
* float32 RoiAlign: atol 2e-5, rtol 1e-5. The reference computes in float64, ORT in float32;
  ROI coordinates up to ~40 carry ~5e-6 absolute rounding, times bilinear slopes of at most
  8 per pixel (inputs are multiples of 1/8 in [-4, 4]) - measured max 5.3e-6 on the catalog;
* float16 RoiAlign: atol 1e-3, rtol 2**-10, i.e. one float16 ulp: ORT rounds its float32
  result to float16, the reference its float64 one, so a value near a rounding boundary can
  land one ulp apart - measured max 9.8e-4 on the catalog.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from ep_testbed.graphs import Mapping

TOLERANCE = {"float32": (2e-5, 1e-5), "float16": (1e-3, 2**-10)}


def session(mapping: Mapping) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(mapping.model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_cpu(mapping: Mapping, tensors: dict) -> dict:
    """The mapping's model on ORT's CPU EP, outputs under DML names and dtypes."""
    return mapping.outputs(session(mapping).run(None, mapping.feeds(tensors)))


def max_abs_error(expected: np.ndarray, actual: np.ndarray) -> float:
    """Max |expected - actual| in float64, NaN == NaN and equal infinities counting as 0, any
    other NaN as inf."""
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    if e.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        diff = np.abs(e - a)
    diff[(np.isnan(e) & np.isnan(a)) | (np.isinf(e) & (e == a))] = 0.0
    diff[np.isnan(diff)] = np.inf
    return float(diff.max())


def agrees(expected: np.ndarray, actual: np.ndarray, selection: bool = False) -> bool:
    """Within the per-dtype tolerance above (exact for integers and pure selections)."""
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return False
    if selection or not np.issubdtype(expected.dtype, np.floating):
        return max_abs_error(expected, actual) == 0.0
    atol, rtol = TOLERANCE[str(expected.dtype)]
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    finite = np.isfinite(e)
    if not np.array_equal(np.isnan(e), np.isnan(a)) or not np.array_equal(e[np.isinf(e)], a[np.isinf(e)]):
        return False
    return bool(np.all(np.abs(e[finite] - a[finite]) <= atol + rtol * np.abs(e[finite])))


def is_selection(desc) -> bool:
    """Ops whose outputs are selected input values (exact comparison)."""
    return desc.TYPE in ("DML_OPERATOR_MAX_POOLING2", "DML_OPERATOR_ROI_POOLING")
