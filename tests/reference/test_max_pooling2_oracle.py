"""MAX_POOLING2's reference equals its previous kernel bit for bit.

``max_pooling2_oracle`` is a frozen copy of the kernel as it was before windows along a row were
reduced in place, in blocks on several threads, and before flat indices were computed a block at a
time in the index type (``reference/max_pooling2.py``: ``scan_rows``, ``_flat_indices``). The
values, the indices (their type too) must be the same bytes under every reading, on every catalog
case, on drawn descs of every shape, on drawn row-shaped integer descs (the ones ``scan_rows``
computes: windows of all the type's lowest value, ties, readings that settle windows a second
time, blocks of one row on several threads) and on the stress tier's int8 UINT32 shapes with fewer
rows. The comparison's tie rule reads only these outputs and the input (``window_contains``), so
equal outputs judge alike.
"""

from __future__ import annotations

import contextlib
import tracemalloc
from unittest import mock

import max_pooling2_oracle
import numpy as np
import pytest
from descs_for_tests import max_pooling2
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis_profiles import examples
from test_fast_forms import max_pooling_cases

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import DescError, validate
from ep_testbed.reference import max_pooling2 as kernel
from ep_testbed.reference.dtypes import numpy_dtype
from ep_testbed.reference.readings import combine
from ep_testbed.reference.validation import validate as validate_at

#: The primary reading and each of the operator's readings alone.
RULES = [kernel.PRIMARY, *(combine(kernel.PRIMARY, [r]) for r in kernel.READINGS)]
INTEGERS = ("INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64")


def assert_same(desc, x, rules) -> None:
    """The reference's outputs under ``rules`` are the previous kernel's, byte for byte."""
    new, old = kernel.max_pooling2(desc, x, rules), max_pooling2_oracle.max_pooling2(desc, x, rules)
    assert new.keys() == old.keys()
    for member in old:
        assert new[member].dtype == old[member].dtype, (member, rules)
        assert new[member].shape == old[member].shape, (member, rules)
        assert new[member].tobytes() == old[member].tobytes(), (member, rules, new[member], old[member])


#: The "minus-inf-start" reading on an integer input starts its second pass from -inf cast to the
#: integer type (NumPy warns); both kernels share that pass, and only windows no element beats read it.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")


@contextlib.contextmanager
def small_blocks():
    """Blocks of one row (or one int64 index row), run on threads however little the work."""
    with mock.patch.object(kernel, "ROW_BLOCK_BYTES", 1), mock.patch.object(kernel, "THREAD_MIN_BYTES", 0), \
            mock.patch.object(kernel, "THREADS", 3):
        yield


def test_every_catalog_case_under_every_reading_equals_the_previous_kernel():
    for case in build_catalog(["max_pooling2"]):
        try:
            validate(case.desc)
        except DescError:
            continue
        x = case.inputs()["InputTensor"]
        for rules in RULES:
            assert_same(case.desc, x, rules)


@settings(max_examples=examples(120), deadline=None)
@given(case=max_pooling_cases(), rules=st.sampled_from(RULES))
def test_drawn_descs_equal_the_previous_kernel(case, rules):
    desc, x = case
    assert_same(desc, x, rules)


@st.composite
def row_cases(draw):
    """A desc ``scan_rows`` computes (an integer type; a window of one element on every spatial axis
    but the last, with any stride and end padding there; ``ROW_SCAN_MIN_BYTES`` or more of adjacent
    elements along the last, windows side by side or apart) and an input of few values: mostly the
    type's lowest value (windows no element beats) or the type's extremes and zero (ties everywhere)."""
    dims = draw(st.sampled_from([2, 3]))
    dtype = draw(st.sampled_from(INTEGERS))
    least = -(-kernel.ROW_SCAN_MIN_BYTES // numpy_dtype(dtype).itemsize)
    width = draw(st.integers(least, least + 90))
    stride = draw(st.integers(width, width + 20))
    length = draw(st.integers(width, width + 3 * stride))
    outer = [draw(st.integers(1, 4)) for _ in range(dims - 1)]
    strides = [draw(st.integers(1, 3)) for _ in range(dims - 1)] + [stride]
    end = [draw(st.integers(0, s - 1)) for s in strides[:-1]] + [0]
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)), *outer, length)
    try:
        desc = max_pooling2(shape, [1] * (dims - 1) + [width], strides=strides, end=end, dtype=dtype,
                            indices=draw(st.sampled_from(["UINT32", "UINT64", None])))
        validate(desc)
    except DescError:  # an end padding that a window would see alone
        assume(False)
    np_type = numpy_dtype(dtype)
    info = np.iinfo(np_type)
    if draw(st.booleans()):
        values = st.sampled_from([int(info.min)] * 30 + [int(info.min) + 1, 0])
    else:
        values = st.sampled_from([int(info.min), int(info.min) + 1, 0, 1, int(info.max)])
    return desc, draw(arrays(np_type, shape, elements=values))


@settings(max_examples=examples(150), deadline=None)
@given(case=row_cases(), rules=st.sampled_from(RULES))
def test_row_shaped_integer_descs_equal_the_previous_kernel(case, rules):
    desc, x = case
    assert kernel.along_rows(desc, x.dtype)
    with small_blocks():
        assert_same(desc, x, rules)


@pytest.mark.parametrize("name", ["int8-idxuint32-past-2^31", "int8-idxuint32-2^32-1-elements"])
def test_the_stress_tiers_int8_shapes_with_fewer_rows_equal_the_previous_kernel(name):
    """The stress cases' own desc (window 1x64, stride 1x64, rows of 65537) and input pattern, 3 rows."""
    from ep_testbed.graphs.cases.max_pooling2 import STRESS, _maxpool_input, max_pooling2_desc

    row = dict(next(r for n, r, _ in STRESS if n == name))
    desc = max_pooling2_desc(**{**row, "spatial": (3, *row["spatial"][1:])})
    x = _maxpool_input(desc, "pattern", np.random.default_rng(0))
    assert kernel.along_rows(desc, x.dtype)
    for rules in RULES:
        assert_same(desc, x, rules)


@settings(max_examples=examples(200), deadline=None)
@given(width=st.integers(1, 200).map(lambda w: 8 * -(-w // 8)), data=st.data())
def test_first_true_is_the_position_of_each_rows_first_true(width, data):
    rows = data.draw(arrays(bool, (data.draw(st.integers(0, 30)), width), elements=st.booleans()))
    rows[np.arange(len(rows)), data.draw(arrays(np.int64, len(rows), elements=st.integers(0, width - 1)))] = True
    np.testing.assert_array_equal(kernel._first_true(rows), np.argmax(rows, axis=1))


def test_a_block_that_raises_raises_after_every_block_finished(monkeypatch):
    monkeypatch.setattr(kernel, "THREADS", 3)
    done = []

    def run(task):
        done.append(task)
        if task == 2:
            raise ValueError("block 2")

    with pytest.raises(ValueError, match="block 2"):
        kernel.in_threads(run, range(6), kernel.THREAD_MIN_BYTES)
    assert sorted(done) == list(range(6))


def test_a_row_shaped_input_is_not_copied(monkeypatch):
    """The reference's peak allocation on the stress tier's int8 shape (fewer rows) is its outputs
    (values, UINT32 indices) and a few blocks per thread, not a copy of the input: the previous
    kernel laid the whole input out (and held int64 indices over the whole output)."""
    from ep_testbed.graphs.cases.max_pooling2 import max_pooling2_desc

    monkeypatch.setattr(kernel, "THREADS", 2)
    monkeypatch.setattr(kernel, "THREAD_MIN_BYTES", 0)
    desc = max_pooling2_desc(dtype="INT8", batch=1, channels=1, spatial=(1024, 65537), window=(1, 64), stride=(1, 64),
                             indices="UINT32")
    validate_at(desc)
    x = np.ones(desc.input_tensor.sizes, dtype=np.int8)
    outputs = desc.output_tensor.element_count * (1 + 4)
    bound = outputs + 2 * 3 * kernel.ROW_BLOCK_BYTES  # two threads, each with a block's temporaries

    def peak(compute) -> int:
        tracemalloc.start()
        try:
            compute(desc, x)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert bound < x.nbytes
    assert peak(kernel.max_pooling2) <= bound
    assert peak(max_pooling2_oracle.max_pooling2) >= x.nbytes
