"""A deliberately wrong reference, to make a run with real failures on the CPU EP (test data).

Workers import this module by name as the run's mapper (``perturbed_reference:to_onnx``, the
real ``graphs.to_onnx``); importing it re-registers every operator with an ``execute`` that
moves one element of ``OutputTensor`` outside its tolerance (integers: one step) for about half of the descs
(chosen by a CRC of the desc, so the same cases fail in every process). The EP's outputs are
untouched: a repro bundle of a perturbed case carries the wrong expected outputs and must fail.

The perturbation acts only while ``PERTURB_ENV`` is set (the test sets it around its run, and
the workers inherit it): ``ep-testbed run`` also imports the mapper in its own process, and a
test session must not keep a wrong reference for the tests after it.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import replace

import numpy as np

from ep_testbed.graphs import to_onnx  # noqa: F401  (the mapper the run names)
from ep_testbed.reference import registry

PERTURB_ENV = "EP_TESTBED_TEST_PERTURB_REFERENCE"


def perturbed(desc) -> bool:
    """Whether this desc's reference output is made wrong (only while ``PERTURB_ENV`` is set)."""
    return bool(os.environ.get(PERTURB_ENV)) and zlib.crc32(repr(desc).encode()) % 2 == 0


def _moved(value: np.ndarray) -> np.ndarray:
    """``value`` with its first element made wrong."""
    value = value.copy()
    flat = value.reshape(-1)
    if value.dtype.kind == "f":
        flat[0] = np.asarray(np.nan_to_num(flat[0].astype(np.float64)) * 1.5 + 1.0, dtype=value.dtype)
    else:  # integers are compared exactly: one step off, away from the type's end
        flat[0] = flat[0] - 1 if flat[0] > np.iinfo(value.dtype).min else flat[0] + 1
    return value


def _wrong(execute):
    def execute_wrongly(desc, arrays, *rules):
        out = dict(execute(desc, arrays, *rules))
        value = out.get("OutputTensor")
        if perturbed(desc) and value is not None and value.size:
            out["OutputTensor"] = _moved(value)
        return out
    return execute_wrongly


def _wrong_bounded(bounded):
    """The same for an operator's bounded execution: the output and its knife-edge range move
    together (a range still holding the true value would accept it)."""
    def bounded_wrongly(desc, arrays, model, *rules):
        expected = bounded(desc, arrays, model, *rules)
        value = expected.outputs.get("OutputTensor")
        if perturbed(desc) and value is not None and value.size:
            moved = _moved(value)
            expected = replace(expected, outputs={**expected.outputs, "OutputTensor": moved})
            if "OutputTensor" in expected.alternatives:
                low, high = (v.copy() for v in expected.alternatives["OutputTensor"])
                low.reshape(-1)[0] = high.reshape(-1)[0] = moved.reshape(-1)[0]
                expected = replace(expected, alternatives={**expected.alternatives, "OutputTensor": (low, high)})
        return expected
    return bounded_wrongly


for _spec in registry.specs():
    if not getattr(_spec.execute, "_perturbed", False):
        _wrapped = _wrong(_spec.execute)
        _wrapped._perturbed = True
        _bounded = _wrong_bounded(_spec.bounded) if _spec.bounded else None
        registry.register(replace(_spec, execute=_wrapped, bounded=_bounded))
