"""The bounds computed over every region at once equal the slow per-region ones bit for bit.

``bounds_oracle_roi_align`` and ``bounds_oracle_roi_pooling`` are frozen copies of the precision
models as they were computed region by region in Python loops; ``reference/roi_align_bounds.py``
and ``roi_pooling_bounds.py`` now compute them vectorized over regions and channels. Everything an
``Expected`` holds must be the same: the outputs, the bounds, the knife-edge ranges (their
presence too), the notes and their count, bit for bit (NaN payloads and signed zeros included), on
every catalog case under every reading and precision model, on drawn descs, and on the stress
shapes that fit this machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import bounds_oracle_roi_align
import bounds_oracle_roi_pooling
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from test_bounds import roi_align_case, roi_pooling_case, tensors

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import MODELS, DescError, execute_reading, native, precision_model, readings_of, workers
from ep_testbed.reference import roi_align as ra
from ep_testbed.reference import roi_align_bounds as rab
from ep_testbed.reference.checks import element_cap
from ep_testbed.reference.execute import prepare
from ep_testbed.reference.precision import Expected
from ep_testbed.reference.readings import combine, named
from ep_testbed.reference.roi_align import as_roi_align1

ORACLES = {"roi_align": bounds_oracle_roi_align, "roi_align1": bounds_oracle_roi_align,
           "roi_pooling": bounds_oracle_roi_pooling}
OPS = tuple(ORACLES)


@pytest.fixture(autouse=True)
def _numpy_values(monkeypatch):
    """The reference's values in NumPy, as the frozen kernel computes them: the compiled values
    loop agrees with them within float64 rounding, not bit for bit (``test_native_kernels.py``
    checks that), and this module checks everything else bit for bit."""
    monkeypatch.setattr(native, "separable_average", lambda: None)


@pytest.fixture(autouse=True)
def _oracle_slopes_once_per_plane(monkeypatch):
    """The oracle scans the whole input plane for its slope type once per region (what made it
    slow on detection shapes); the answer depends on the plane alone, so it is kept per plane
    here. The oracle's code is otherwise run as it was."""
    original = bounds_oracle_roi_align._slope_type
    seen: dict = {}

    def once(dtype, plane):
        key = (dtype, plane.__array_interface__["data"][0], plane.shape, plane.strides)
        if key not in seen:
            seen[key] = original(dtype, plane)
        return seen[key]

    monkeypatch.setattr(bounds_oracle_roi_align, "_slope_type", once)


def oracle(desc, arrays, reading_names, model):
    """The oracle's ``Expected`` for what ``execute_reading(desc, arrays, reading_names, model)``
    computes: the same preparation and rules, the per-region precision model."""
    spec, checked = prepare(desc, arrays)
    rules = combine(spec.rules, [named(spec.readings, n, spec.name) for n in reading_names])
    return ORACLES[spec.name].execute_bounded(desc, checked, precision_model(model), rules)


def _bits(a: np.ndarray) -> bytes:
    return a.dtype.str.encode() + repr(a.shape).encode() + np.ascontiguousarray(a).tobytes()


def _same_array(new: np.ndarray, old: np.ndarray, what: str) -> None:
    if _bits(new) != _bits(old):
        np.testing.assert_array_equal(new, old, err_msg=what, strict=True)
        differs = np.flatnonzero(np.ascontiguousarray(new).view(np.uint8) != np.ascontiguousarray(old).view(np.uint8))
        raise AssertionError(f"{what}: equal as numbers but not bit for bit (signed zeros or NaN payloads); "
                             f"first differing byte {int(differs[0])} of {new.nbytes}")


def assert_same_expected(new, old, where: str) -> None:
    """Every field of two ``Expected`` equal, arrays bit for bit."""
    assert new.model == old.model, where
    assert sorted(new.outputs) == sorted(old.outputs), where
    for name in old.outputs:
        _same_array(new.outputs[name], old.outputs[name], f"{where}: outputs[{name}]")
    assert sorted(new.bounds) == sorted(old.bounds), where
    for name in old.bounds:
        _same_array(new.bounds[name], old.bounds[name], f"{where}: bounds[{name}]")
    assert sorted(new.alternatives) == sorted(old.alternatives), f"{where}: alternatives present"
    for name, (low, high) in old.alternatives.items():
        _same_array(new.alternatives[name][0], low, f"{where}: alternatives[{name}] low")
        _same_array(new.alternatives[name][1], high, f"{where}: alternatives[{name}] high")
    assert sorted(new.nan_alternatives) == sorted(old.nan_alternatives), f"{where}: nan_alternatives present"
    for name, flags in old.nan_alternatives.items():
        _same_array(new.nan_alternatives[name], flags, f"{where}: nan_alternatives[{name}]")
    assert new.knife_edges == old.knife_edges, where
    assert new.knife_edge_count == old.knife_edge_count, where


def check_case(desc, arrays, reading_names, model, where: str, old=None) -> None:
    """The new and the oracle's ``Expected`` agree, or both refuse the inputs alike. ``old``: the
    oracle's ``Expected`` (or ``DescError``) when already known (``same_model_oracle``)."""
    if old is None:
        old = oracle_or_refusal(desc, arrays, reading_names, model)
    if isinstance(old, DescError):
        with pytest.raises(DescError) as raised:
            execute_reading(desc, arrays, reading_names, model)
        assert str(raised.value) == str(old), where
        return
    assert_same_expected(execute_reading(desc, arrays, reading_names, model), old, where)


def oracle_or_refusal(desc, arrays, reading_names, model):
    """``oracle(...)``, or the ``DescError`` it raised."""
    try:
        return oracle(desc, arrays, reading_names, model)
    except DescError as exc:
        return exc


def same_model_oracle(model: str, fp32, input_dtype: np.dtype):
    """The oracle's ``Expected`` under ``model`` taken from its fp32 one where the two models are
    one by their definition, else None (the oracle is asked): ``tensor-type`` on a FLOAT32 tensor
    computes in float32 as fp32 does; ``exact`` keeps fp32's outputs (every model's outputs are
    ``execute``'s) and allows nothing beyond them. A refusal is asked again, model by model."""
    if isinstance(fp32, DescError):
        return None
    if model == "tensor-type" and input_dtype == np.float32:
        return dataclasses.replace(fp32, model=precision_model(model))
    if model == "exact":
        return Expected(dict(fp32.outputs), precision_model(model))
    return None


@functools.lru_cache(maxsize=1)
def _catalog():
    return tuple(build_catalog(list(OPS)))


@pytest.mark.parametrize("case_id", [c.id for c in build_catalog(list(OPS))])
def test_catalog_case_bounds_equal_the_per_region_oracle(case_id):
    """Every catalog case of the ROI operators, under the primary reading and each of its
    readings, under every precision model."""
    case = next(c for c in _catalog() if c.id == case_id)
    arrays = case.inputs()
    for reading in [None, *readings_of(case.desc)]:
        names = [] if reading is None else [reading.name]
        fp32 = oracle_or_refusal(case.desc, arrays, names, "fp32")
        for model in MODELS:
            old = fp32 if model == "fp32" else same_model_oracle(model, fp32, arrays["InputTensor"].dtype)
            check_case(case.desc, arrays, names, model, f"{case_id} {names or 'primary'} {model}", old)


def test_the_models_that_are_one_by_definition_are_one_in_the_oracle_too():
    """What ``same_model_oracle`` takes from the fp32 oracle is what the oracle itself gives under
    that model, on a FLOAT32 and a FLOAT16 case of each operator under each of their readings (the
    catalog test above asks the oracle only for what differs)."""
    chosen = [next(c for c in _catalog() if c.id.split("/")[0] == op and c.tags.get("dtype") == dtype
                   and readings_of(c.desc))
              for op in OPS for dtype in ("float32", "float16")]
    taken = 0
    for case in chosen:
        arrays = case.inputs()
        for reading in [None, *readings_of(case.desc)]:
            names = [] if reading is None else [reading.name]
            fp32 = oracle_or_refusal(case.desc, arrays, names, "fp32")
            for model in ("tensor-type", "exact"):
                same = same_model_oracle(model, fp32, arrays["InputTensor"].dtype)
                if same is not None:
                    assert_same_expected(same, oracle(case.desc, arrays, names, model), f"{case.id} {names} {model}")
                    taken += 1
    assert taken >= 2 * len(chosen)


def _drawn_reading(draw, desc):
    options = [None, *readings_of(desc)]
    reading = draw(st.sampled_from(options), label="reading")
    return [] if reading is None else [reading.name]


@settings(max_examples=examples(150), deadline=None)
@given(case=roi_align_case(), data=st.data(), model=st.sampled_from(["fp32", "tensor-type"]))
def test_drawn_roi_align_bounds_equal_the_per_region_oracle(case, data, model):
    """Drawn ROI_ALIGN1 descs (wide maps, arbitrary and exact regions, both interpolations and
    reductions, adaptive counts), any reading, both rounding models."""
    desc, x, rois, batch = case
    names = _drawn_reading(data.draw, desc)
    check_case(desc, tensors(x, rois, batch), names, model, f"drawn {names or 'primary'} {model}")


@st.composite
def non_finite_roi_align_case(draw):
    """``roi_align_case`` with a fifth of the map NaN, inf or -inf and, half the time, regions on
    whole pixels, so that sample coordinates land on cell edges beside non-finite taps (the
    cell-edge knife edge, FP-3)."""
    desc, x, rois, batch = draw(roi_align_case())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    x = x.copy()
    flat = x.reshape(-1)
    picks = np.flatnonzero(rng.random(flat.size) < 0.2)
    flat[picks] = np.array([np.nan, np.inf, -np.inf], dtype=x.dtype)[rng.integers(0, 3, picks.size)]
    if draw(st.booleans(), label="whole pixels"):
        d = as_roi_align1(desc)
        scale = np.array([d.spatial_scale_x, d.spatial_scale_y] * 2, dtype=np.float64)
        rois = (np.round(rois.astype(np.float64) * scale) / scale).astype(rois.dtype)
    return desc, x, rois, batch


@settings(max_examples=examples(150), deadline=None)
@given(case=non_finite_roi_align_case(), data=st.data(), model=st.sampled_from(["fp32", "tensor-type"]))
def test_drawn_non_finite_roi_align_bounds_equal_the_per_region_oracle(case, data, model):
    """Drawn ROI_ALIGN1 descs on maps with infinities and NaNs: the regions with a cell-edge knife
    edge are found in bulk and taken region by region, with the oracle's alternatives and flags."""
    desc, x, rois, batch = case
    names = _drawn_reading(data.draw, desc)
    check_case(desc, tensors(x, rois, batch), names, model, f"drawn non-finite {names or 'primary'} {model}")


@contextlib.contextmanager
def _chunks_and_threads(size: int, threads: int):
    """Every chunk of the kernel, of the bounds (and their tasks) and of the channels-last copy at
    most ``size`` bytes (1: one region, one image row), run on ``threads`` worker threads whatever
    the machine has."""
    saved = (ra.SEPARABLE_CHUNK_BYTES, ra.CHANNELS_LAST_CHUNK_BYTES, rab.CHUNK_BYTES, rab.TASK_BYTES,
             workers.thread_count)
    ra.SEPARABLE_CHUNK_BYTES = ra.CHANNELS_LAST_CHUNK_BYTES = rab.CHUNK_BYTES = rab.TASK_BYTES = size
    workers.thread_count = lambda: threads
    try:
        yield
    finally:
        (ra.SEPARABLE_CHUNK_BYTES, ra.CHANNELS_LAST_CHUNK_BYTES, rab.CHUNK_BYTES, rab.TASK_BYTES,
         workers.thread_count) = saved


@settings(max_examples=examples(100), deadline=None)
@given(case=st.one_of(roi_align_case(), non_finite_roi_align_case()), data=st.data(),
       model=st.sampled_from(["exact", "fp32", "tensor-type"]))
def test_roi_align_in_one_region_chunks_on_three_threads_equals_one_chunk_on_one_thread(case, data, model):
    """The kernel's chunks of regions, and the bounds computed beside them in worker threads, give
    the same outputs, bounds, ranges and notes whatever the chunks and threads: drawn descs (finite
    and non-finite maps, two images, several sample counts), each region its own chunk on three
    threads against every region in one chunk on one thread."""
    desc, x, rois, batch = case
    names = _drawn_reading(data.draw, desc)
    arrays = tensors(x, rois, batch)
    try:
        with _chunks_and_threads(2**40, 1):
            whole = execute_reading(desc, arrays, names, model)
    except DescError:
        return
    with _chunks_and_threads(1, 3):
        chunked = execute_reading(desc, arrays, names, model)
    assert_same_expected(chunked, whole, f"chunked {names or 'primary'} {model}")


def test_cell_edge_beside_minus_inf_equals_the_per_region_oracle():
    """The cell-edge knife edge of ``test_cell_edge_knife_edge.py`` (x = 4 beside a column of
    -inf), under every reading and precision model."""
    from test_cell_edge_knife_edge import ROIS, _case

    desc, x, expected = _case(-np.inf)
    assert expected.nan_alternatives  # the knife edge is there to compare
    for reading in [None, *readings_of(desc)]:
        names = [] if reading is None else [reading.name]
        for model in MODELS:
            check_case(desc, tensors(x, ROIS), names, model, f"cell edge {names or 'primary'} {model}")


def test_count_knife_edge_beside_minus_inf_equals_the_per_region_oracle():
    """The count knife edge of ``test_count_knife_edge_readings.py`` (3 or 2 samples beside a run of
    -inf, a MAX whose ranges ``corner-term-max`` reads as corner terms), under every reading and
    precision model."""
    from test_count_knife_edge_readings import ROIS, _desc

    desc, x = _desc()
    for reading in [None, *readings_of(desc)]:
        names = [] if reading is None else [reading.name]
        for model in MODELS:
            check_case(desc, tensors(x, ROIS), names, model, f"count edge {names or 'primary'} {model}")


@settings(max_examples=examples(100), deadline=None)
@given(case=roi_pooling_case(), data=st.data(), model=st.sampled_from(["fp32", "tensor-type"]))
def test_drawn_roi_pooling_bounds_equal_the_per_region_oracle(case, data, model):
    """Drawn ROI_POOLING descs, regions near halves included, any reading, both rounding models."""
    desc, x, rois = case
    names = _drawn_reading(data.draw, desc)
    check_case(desc, {"InputTensor": x, "ROITensor": rois}, names, model, f"drawn {names or 'primary'} {model}")


#: Stress cases whose stated memory is larger than this are left to a machine with the memory
#: (the oracle's arrays come on top of the case's own). The 10,000-region cases state 3145 MiB
#: and peak at 2369-2921 MiB (benchmarks/bench_stress_memory.py): they run here.
STRESS_MB = 3200


def _stress_ids():
    with element_cap(2**33):
        return [c.id for c in build_catalog(list(OPS), tier="stress") if int(c.tags["memory_mb"]) <= STRESS_MB]


@pytest.mark.slow
@pytest.mark.parametrize("case_id", _stress_ids())
def test_stress_case_bounds_equal_the_per_region_oracle(case_id):
    """The stress tier's ROI shapes (detection sizes, 10,000 regions, whole-image adaptive
    counts) under the primary reading and the default model."""
    op = case_id.split("/")[0]
    with element_cap(2**33):
        case = next(c for c in build_catalog([op], tier="stress") if c.id == case_id)
        check_case(case.desc, case.inputs(), [], "fp32", case_id)


@pytest.mark.slow
def test_float16_detection_bounds_in_float16_arithmetic_equal_the_per_region_oracle():
    """The float16 detection shape under the tensor-type model: float16 coordinates move by up to
    a pixel, so nearly every region's slopes are widened (near a cell edge, or a pixel off); its
    first 64 regions (the oracle takes seconds per region there)."""
    from ep_testbed.graphs.cases.roi_align import STRESS, roi_align_desc

    name, row, _, _ = next(entry for entry in STRESS if entry[0].endswith("-fp16"))
    with element_cap(2**33):
        case = next(c for c in build_catalog(["roi_align1"], tier="stress") if c.id == f"roi_align1/stress-{name}")
        arrays = case.inputs()
    count = 64
    desc = roi_align_desc(True, **{**row, "rois": count})
    cut = {"InputTensor": arrays["InputTensor"], "ROITensor": arrays["ROITensor"][..., :count, :],
           "BatchIndicesTensor": arrays["BatchIndicesTensor"][..., :count]}
    check_case(desc, cut, [], "tensor-type", f"{case.id} (first {count} regions) tensor-type")
