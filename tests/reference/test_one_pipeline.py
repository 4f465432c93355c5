"""``execute`` and ``execute_with_bounds`` are one pipeline: one preparation (validation, the
array checks, the operator's ``check_values``) refuses the same descs and inputs for both, and
``execute_with_bounds(...).outputs`` is ``execute``'s result bit for bit under every precision
model. Runs, fuzzing and model runs judge an EP by ``execute_with_bounds``; tests and the
``reference`` command read ``execute``: a desc one refuses and the other computes, or an output
one ulp apart, would make the two disagree about the same case."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from descs_for_tests import roi_align1
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ep_testbed.graphs.cases.common import FuzzCase, cases_module
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import MODELS, DescError, execute, execute_with_bounds
from ep_testbed.reference.checks import element_cap
from ep_testbed.reference.registry import names, spec_named

OPS = names()


def _outcome(run):
    """``("refused", message)``, or ``("computed", {output: (dtype, shape, bytes)})``: what the
    call gives, compared bit for bit (NaN payloads and the sign of zero included)."""
    try:
        result = run()
    except DescError as error:
        return "refused", str(error)
    outputs = getattr(result, "outputs", result)
    return "computed", {name: (a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()) for name, a in outputs.items()}


def _describe(plain, bounded) -> str:
    """How a bounded outcome differs from the plain one, briefly (the bytes would be unreadable)."""
    if plain[0] != bounded[0] or plain[0] == "refused":
        def say(outcome):
            return f"refused ({outcome[1][:160]})" if outcome[0] == "refused" else "computed"
        return f"execute: {say(plain)}; execute_with_bounds: {say(bounded)}"
    parts = []
    for name in sorted(set(plain[1]) | set(bounded[1])):
        if name not in plain[1] or name not in bounded[1]:
            parts.append(f"{name} only in {'execute' if name in plain[1] else 'execute_with_bounds'}")
            continue
        (dtype, shape, a), (dtype_b, shape_b, b) = plain[1][name], bounded[1][name]
        if (dtype, shape) != (dtype_b, shape_b):
            parts.append(f"{name}: {dtype}{list(shape)} vs {dtype_b}{list(shape_b)}")
        elif a != b:
            x, y = np.frombuffer(a, dtype), np.frombuffer(b, dtype)
            differ = np.flatnonzero(x.view(f"u{x.itemsize}") != y.view(f"u{y.itemsize}"))
            parts.append(f"{name}: {differ.size} of {x.size} elements differ, first {x[differ[:3]]} vs {y[differ[:3]]}")
    return "; ".join(parts)


def _disagreements(desc, inputs) -> dict[str, str]:
    """Per precision model, how ``execute_with_bounds`` differs from ``execute`` (empty: nowhere)."""
    plain = _outcome(lambda: execute(desc, inputs))
    found = {}
    for model in MODELS:
        bounded = _outcome(lambda: execute_with_bounds(desc, inputs, model))
        if bounded != plain:
            found[model] = _describe(plain, bounded)
    return found


@functools.lru_cache(maxsize=None)
def _catalog(op: str):
    return build_catalog([op])


def _catalog_disagreements(op: str) -> str:
    """The catalog cases of ``op`` where the two differ, a few of them named (empty: none)."""
    cases, found = _catalog(op), {}
    assert cases
    with np.errstate(all="ignore"):  # NaN and infinity cases are part of the catalog
        for case in cases:
            differences = _disagreements(case.desc, case.inputs())
            if differences:
                found[case.id] = differences
    if not found:
        return ""
    return f"{len(found)} of {len(cases)} cases:\n" + "\n".join(f"{k}: {v}" for k, v in list(found.items())[:5])


@pytest.mark.parametrize("op", OPS)
def test_bounded_outputs_are_execute_bit_for_bit_over_the_catalog(op):
    assert _catalog_disagreements(op) == ""


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("cap", [2**16, 2**12])
def test_the_catalog_is_refused_alike_under_a_smaller_element_cap(op, cap):
    with element_cap(cap):
        assert _catalog_disagreements(op) == ""


@functools.lru_cache(maxsize=None)
def _strategy(op: str):
    """The operator's fuzz strategy (``graphs/cases/<op>.py``), built once: building one is costly."""
    return cases_module(spec_named(op).dml_type).fuzz_strategy(op, "default")


def _fuzz_inputs(op: str, draw) -> tuple[object, dict[str, np.ndarray]]:
    """The desc and inputs of a fuzz draw, made as ``ep-testbed fuzz`` makes them."""
    case = FuzzCase(id=f"{op}/hypothesis", op=spec_named(op).dml_type, desc=draw.desc, seed=0, opset=draw.opset,
                    recipe=draw.recipe, value_seed=draw.value_seed)
    return case.desc, case.inputs()


_FUZZ_SETTINGS = settings(max_examples=60, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                 HealthCheck.data_too_large])


@pytest.mark.parametrize("op", OPS)
@_FUZZ_SETTINGS
@given(data=st.data())
def test_bounded_outputs_are_execute_bit_for_bit_on_fuzzed_descs(op, data):
    desc, inputs = _fuzz_inputs(op, data.draw(_strategy(op), label="draw"))
    with np.errstate(all="ignore"):
        assert _disagreements(desc, inputs) == {}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("cap", [2**16, 2**12])
@_FUZZ_SETTINGS
@given(data=st.data())
def test_fuzzed_descs_are_refused_alike_under_a_smaller_element_cap(op, cap, data):
    """The values check (``check_values``: ROI_ALIGN's sample points x channels) is part of the
    shared preparation, so a smaller cap refuses the same draws for both (2**12: most drawn
    regions come near it)."""
    desc, inputs = _fuzz_inputs(op, data.draw(_strategy(op), label="draw"))
    with np.errstate(all="ignore"), element_cap(cap):
        assert _disagreements(desc, inputs) == {}


def test_a_region_past_the_values_check_is_refused_by_both():
    """A ROI_ALIGN1 region of 100x100 samples per output element x 4 outputs x 64 channels
    (2.56M sample values) is within every tensor's cap of 2**16 elements, but past the values
    check's 2**16 / 8: both refuse it, naming the row; a small region is computed by both."""
    desc = roi_align1((1, 64, 8, 8), (1, 4), (2, 2), samples=(1, 2**32 - 1))
    x = np.zeros((1, 64, 8, 8), np.float32)
    large = {"InputTensor": x, "ROITensor": np.array([[0, 0, 200, 200]], np.float32),
             "BatchIndicesTensor": np.zeros(1, np.uint32)}
    small = dict(large, ROITensor=np.array([[0, 0, 4, 4]], np.float32))
    with element_cap(2**16):
        with pytest.raises(DescError, match=r"ROITensor row 0.*sample values") as plain:
            execute(desc, large)
        for model in MODELS:
            with pytest.raises(DescError) as bounded:
                execute_with_bounds(desc, large, model)
            assert str(bounded.value) == str(plain.value)
        assert _disagreements(desc, small) == {}


def test_an_unknown_model_is_refused_before_anything_runs():
    desc = roi_align1((1, 1, 4, 4), (1, 4), (2, 2))
    with pytest.raises(ValueError, match="precision model 'fp64'"):
        execute_with_bounds(desc, {}, "fp64")
