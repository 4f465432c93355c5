"""The reference's optional compiled loops (``reference/native_kernels.c``, built by ``pip install``
where a C compiler is) keep their contracts with the NumPy code, are used where they apply, and
are never needed.

- The bounds loop gives NumPy's numbers bit for bit. ``test_bounds_oracle.py`` checks whatever
  path this machine takes against the frozen per-region oracle; here the two paths are checked
  against each other on every ROI_ALIGN catalog case and on drawn ones, with a count of the
  regions the compiled loop took (so that equality is not vacuous), and a planted fault in the C
  source shows that the comparison sees a change of one operation.
- The values loop of the separable AVERAGE agrees with NumPy's BLAS products within float64
  rounding: checked element by element against the rounding error bound of both sums, on drawn
  planes and regions (cancelling sums among them), and on the catalog, where the float32 outputs
  may differ by one unit in the last place at most. Its planted faults are seen too.

The bit-for-bit comparisons run the values in NumPy on both sides (``numpy_values``): they are
about the bounds loop.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis_profiles import examples
from test_bounds import roi_align_case, tensors
from test_bounds_oracle import assert_same_expected

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.core.compare import ulp_distance
from ep_testbed.reference import MODELS, execute, execute_reading, native
from ep_testbed.reference import roi_align as ra
from ep_testbed.reference import roi_align_bounds as rab

OPS = ["roi_align", "roi_align1"]
BUILT = native.kernels() is not None
needs_build = pytest.mark.skipif(not BUILT, reason=f"the compiled loops are not used here ({native.status().detail})")
needs_compiler = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) to build a planted fault")


@pytest.fixture
def counted(monkeypatch):
    """Counts the regions the compiled loop computed the bounds of."""
    taken = {"regions": 0, "float64": 0}
    original = rab._native_bounds

    def counting(b, batch, regions, *rest):
        done = original(b, batch, regions, *rest)
        taken["regions"] += int(regions.size) if done is not False else 0
        taken["float64"] += int(regions.size) if done is not False and b.slope_type(batch) is np.float64 else 0
        return done

    monkeypatch.setattr(rab, "_native_bounds", counting)
    return taken


@pytest.fixture
def numpy_values(monkeypatch):
    """The separable AVERAGE's values computed in NumPy whether or not the compiled loops are on
    (their bounds loop still runs where they are)."""
    monkeypatch.setattr(native, "separable_average", lambda: None)


def both_ways(monkeypatch, compute):
    """``compute()`` with the compiled loops, then in NumPy alone."""
    monkeypatch.setenv("EP_TESTBED_NATIVE", "1")
    compiled = compute()
    monkeypatch.setenv("EP_TESTBED_NATIVE", "0")
    plain = compute()
    monkeypatch.delenv("EP_TESTBED_NATIVE")
    return compiled, plain


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc): pip leaves the extension out")
def test_an_installation_made_where_a_compiler_is_uses_them():
    state = native.status()
    assert state.used, state.detail


@needs_build
def test_every_roi_align_catalog_case_is_the_same_bit_for_bit_in_numpy_alone(monkeypatch, counted, numpy_values):
    """Every ROI_ALIGN and ROI_ALIGN1 case of the catalog, under every precision model: outputs,
    bounds, knife-edge ranges and notes, the compiled loops on and off."""
    for case in build_catalog(OPS):
        arrays = case.inputs()
        for model in MODELS:
            compiled, plain = both_ways(monkeypatch, lambda: execute_reading(case.desc, arrays, [], model))
            assert_same_expected(compiled, plain, f"{case.id} {model}")
    # the compiled loop took the catalog's AVERAGE regions, FLOAT16 ones (float64 slopes) among them
    assert counted["regions"] >= 100 and counted["float64"] >= 10, counted


@needs_build
@settings(max_examples=examples(100), deadline=None)
@given(case=roi_align_case(), model=st.sampled_from(["fp32", "tensor-type"]))
def test_drawn_roi_align_cases_are_the_same_bit_for_bit_in_numpy_alone(case, model):
    desc, x, rois, batch = case
    arrays = tensors(x, rois, batch)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "separable_average", lambda: None)
        compiled, plain = both_ways(mp, lambda: execute_reading(desc, arrays, [], model))
    assert_same_expected(compiled, plain, f"drawn {model}")


def float64_rounding(ys: np.ndarray, xs: np.ndarray, magnitudes: np.ndarray) -> np.ndarray:
    """How far two evaluations of ``average_linear``'s sums, in any order, may lie apart: an
    element is ``(sum_i wy_i sum_j wx_j P_ij + added) / m`` over at most ``2 * Sy`` Y taps and
    ``2 * Sx`` X taps; each way's error is at most ``gamma_n`` times the sum of the terms'
    magnitudes, n counting every rounding (Higham, Accuracy and Stability of Numerical Algorithms,
    2nd ed., 2002, section 3.1: ``|fl(x.y) - x.y| <= gamma_n |x|.|y|``, nested sums alike). Bilinear
    weights are never negative, so those magnitudes are ``average_linear`` of ``|P|`` with
    ``|OutOfBoundsInputValue|`` (``magnitudes``, computed in float64: a hair of slack added)."""
    n = 2 * (ys.shape[-1] + xs.shape[-1]) + 3
    u = 2.0 ** -53
    return 2 * (n * u / (1 - n * u)) * magnitudes * (1 + 1e-9)


def counting_values_loop(monkeypatch) -> list:
    """Makes ``native.separable_average`` count its calls in the list returned."""
    loop, calls = native.separable_average(), []
    monkeypatch.setattr(native, "separable_average",
                        lambda: None if loop is None else (lambda *args: calls.append(1) or loop(*args)))
    return calls


def values_both_ways(plane, ys, xs, n_y, n_x, oob):
    """``average_linear``'s float64 elements with the compiled values loop (which must have run),
    in NumPy alone, and the magnitudes of their terms (``float64_rounding``)."""
    with pytest.MonkeyPatch.context() as mp:
        calls = counting_values_loop(mp)
        compiled = ra.average_linear(plane, ys, xs, n_y, n_x, oob)
        mp.setattr(native, "separable_average", lambda: None)
        plain = ra.average_linear(plane, ys, xs, n_y, n_x, oob)
        magnitudes = ra.average_linear(np.abs(plane), ys, xs, n_y, n_x, abs(oob))
    assert calls, "the compiled values loop was not used"
    return compiled, plain, magnitudes


@st.composite
def separable_regions(draw):
    """A float32 plane (H, W, C), values to 1e6 with many of one magnitude and both signs (sums
    that cancel), and 1-4 regions' sample coordinates, some outside the plane."""
    h, w, c = draw(st.integers(1, 12)), draw(st.integers(1, 12)), draw(st.integers(1, 4))
    big = st.sampled_from([1e6, -1e6, 3.0, -3.0, 0.0])
    plane = draw(arrays(np.float32, (h, w, c), elements=st.one_of(big, st.floats(-1e6, 1e6, width=32))))
    regions, n_y, n_x = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    out_h, out_w = draw(st.integers(1, 4)), draw(st.integers(1, 4))

    def coords(size, count):
        return draw(arrays(np.float64, (regions, count), elements=st.floats(-1.5, size + 0.5)))

    oob = draw(st.sampled_from([0.0, 1.5, -7.0, 1e6]))
    return plane, coords(h, out_h * n_y), coords(w, out_w * n_x), n_y, n_x, oob


@needs_build
@settings(max_examples=examples(200), deadline=None)
@given(drawn=separable_regions())
def test_the_compiled_values_loop_is_within_float64_rounding_of_numpys(drawn):
    plane, ys, xs, n_y, n_x, oob = drawn
    compiled, plain, magnitudes = values_both_ways(plane, ys, xs, n_y, n_x, oob)
    allowed = float64_rounding(ys, xs, magnitudes)
    apart = np.abs(compiled - plain)
    worst = np.unravel_index(int(np.argmax(apart - allowed)), apart.shape)
    assert np.all(apart <= allowed), (f"element {worst}: compiled {compiled[worst]!r}, NumPy {plain[worst]!r}, "
                                      f"{apart[worst]:.3g} apart where float64 rounding allows {allowed[worst]:.3g}")


def one_ulp_apart_at_most(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elements of two float arrays of one type that are the same bits (NaN included) or finite
    and adjacent numbers of it (the comparison's own ``ulp_distance``)."""
    same = np.ascontiguousarray(a).view(np.uint8).reshape(a.size, -1) == np.ascontiguousarray(b).view(
        np.uint8).reshape(b.size, -1)
    finite = np.isfinite(a) & np.isfinite(b)
    return same.all(axis=1).reshape(a.shape) | (finite & (ulp_distance(a, b) <= 1))


@needs_build
def test_every_roi_align_catalog_case_with_the_compiled_values_is_numpys_within_one_ulp(monkeypatch, counted):
    """Every ROI_ALIGN and ROI_ALIGN1 case of the catalog, fp32 model, everything compiled against
    NumPy alone: every output element equal or one unit in the last place apart (a float64
    rounding across a rounding boundary), and where the outputs are all equal, the bounds,
    knife-edge ranges and notes are equal bit for bit too."""
    calls = counting_values_loop(monkeypatch)
    apart = []
    for case in build_catalog(OPS):
        arrays = case.inputs()
        compiled, plain = both_ways(monkeypatch, lambda: execute_reading(case.desc, arrays, [], "fp32"))
        new, old = compiled.outputs["OutputTensor"], plain.outputs["OutputTensor"]
        if new.tobytes() == old.tobytes():
            assert_same_expected(compiled, plain, case.id)
            continue
        close = one_ulp_apart_at_most(new, old)
        assert close.all(), f"{case.id}: {int((~close).sum())} elements more than one ulp apart"
        apart.append(case.id)
    assert len(calls) >= 100, len(calls)  # the values loop computed the catalog's separable regions
    assert len(apart) <= 2, f"outputs one ulp apart in {apart}: more than float64 rounding makes likely"


#: One operation changed each, in the values loop: the catalog's outputs must show it.
PLANTED_VALUES = {
    "the first column tap of every row left out": (
        "for (int64_t j = 0; j < width_r; j++) {", "for (int64_t j = 1; j < width_r; j++) {"),
    "OutOfBoundsInputValue's samples left out": (
        "for (int64_t c = 0; c < channels; c++) element[c] += extra;",
        "for (int64_t c = 0; c < channels; c++) element[c] += 0.0;"),
}


#: One operand left out each. (Changes that leave every catalog result equal are no test of the
#: test: the sum's terms swapped (addition commutes), the mean divided in float32 instead of
#: float64 and rounded (a quotient rounded twice through float64 is float32's own), and, on the
#: catalog, the last two of the three terms added first.)
PLANTED = {
    "Gx without the cell's second row": (
        "gx = ABS(t01 - t00) >= ABS(t11 - t10) ? ABS(t01 - t00) : ABS(t11 - t10);",
        "gx = ABS(t01 - t00);                                                   "),
    "Gy without the cell's second column": (
        "gy = ABS(t10 - t00) >= ABS(t11 - t01) ? ABS(t10 - t00) : ABS(t11 - t01);",
        "gy = ABS(t10 - t00);                                                   "),
}


def build(source: Path, folder: Path) -> Path:
    """``source`` compiled as pip compiles the extension (pyproject.toml's flags)."""
    target = folder / "planted.so"
    flags = ["-O3", "-std=c99", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared"]
    subprocess.run(["cc", *flags, f"-I{sysconfig.get_paths()['include']}", "-o",
                    str(target), str(source)], check=True, capture_output=True)
    return target


def build_planted(change: tuple[str, str], folder: Path) -> Path:
    """The C source with ``change`` (its text before, after) made, built as pip builds it."""
    before, after = change
    source = native.SOURCE.read_text()
    assert before in source, f"the planted fault no longer matches the source: update it ({before!r})"
    planted = folder / "native_kernels.c"
    planted.write_text(source.replace(before, after))
    return build(planted, folder)


@pytest.fixture
def loaded_from(monkeypatch):
    """Makes ``native`` load the library a test names (None: none), for that test alone."""
    def use(path, why=""):
        monkeypatch.setattr(native, "library_file", lambda: (path, why))
        native._load.cache_clear()
    yield use
    native._load.cache_clear()


@needs_compiler
@pytest.mark.parametrize("fault", list(PLANTED))
def test_a_fault_planted_in_the_c_source_is_seen(fault, monkeypatch, tmp_path, loaded_from, numpy_values):
    """The comparison above has teeth: the C source with one operand left out, built as pip
    builds it, gives bounds that differ from NumPy's on the catalog."""
    loaded_from(build_planted(PLANTED[fault], tmp_path))
    assert native.status().used
    differing = []
    for case in build_catalog(OPS):
        arrays = case.inputs()
        compiled, plain = both_ways(monkeypatch, lambda: execute_reading(case.desc, arrays, [], "fp32"))
        if "OutputTensor" in plain.bounds and not np.array_equal(compiled.bounds["OutputTensor"],
                                                                  plain.bounds["OutputTensor"]):
            differing.append(case.id)
    assert differing, f"{fault}: no catalog case's bounds changed"


@needs_compiler
@pytest.mark.parametrize("fault", list(PLANTED_VALUES))
def test_a_fault_planted_in_the_values_loop_is_seen(fault, monkeypatch, tmp_path, loaded_from):
    """The values' comparison has teeth: the values loop with one operation changed, built as pip
    builds it, gives catalog outputs more than one ulp from NumPy's."""
    loaded_from(build_planted(PLANTED_VALUES[fault], tmp_path))
    for case in build_catalog(OPS):
        arrays = case.inputs()
        compiled, plain = both_ways(monkeypatch, lambda: execute(case.desc, arrays))
        new, old = compiled["OutputTensor"], plain["OutputTensor"]
        if not one_ulp_apart_at_most(new, old).all():
            return
    raise AssertionError(f"{fault}: no catalog case's outputs changed")


def test_an_installation_without_them_runs_in_numpy_and_says_why(monkeypatch):
    monkeypatch.setattr(native, "MODULE", "ep_testbed.reference._no_such_module")
    native._load.cache_clear()
    try:
        state = native.status()
        assert not state.used and "without a C compiler" in state.detail and "NumPy" in state.detail, state.detail
        case = next(c for c in build_catalog(OPS) if c.desc.reduction_function == "AVERAGE")
        expected = execute_reading(case.desc, case.inputs(), [], "fp32")
        assert expected.bounds["OutputTensor"].size  # it still computes, in NumPy
    finally:
        monkeypatch.undo()
        native._load.cache_clear()


def test_a_library_older_than_its_source_in_a_checkout_is_not_used(monkeypatch, tmp_path):
    """An editable checkout whose C source changed after ``pip install -e .``: the old build could
    compute other numbers, so NumPy runs, and the status says how to rebuild. An installed package
    (no checkout around it) is not judged by its files' times, which installers set as they go."""
    built = native.built_file()
    if built is None:
        pytest.skip(f"nothing built here to copy ({native.status().detail})")
    folder = tmp_path / "checkout" / "reference"
    folder.mkdir(parents=True)
    copy = folder / built.name
    shutil.copy2(built, copy)
    source = folder / "native_kernels.c"
    source.write_text(native.SOURCE.read_text())
    future = time.time() + 3600
    os.utime(source, (future, future))
    monkeypatch.setattr(native, "SOURCE", source)
    monkeypatch.setattr(native, "built_file", lambda: copy)
    try:
        native._load.cache_clear()
        assert native.library_file()[0] is copy  # no checkout around it: used
        (tmp_path / "checkout" / ".git").mkdir()
        native._load.cache_clear()
        state = native.status()
        assert not state.used and "pip install -e ." in state.detail, state.detail
        assert native.kernels() is None
    finally:
        monkeypatch.undo()
        native._load.cache_clear()


@needs_compiler
def test_a_library_of_another_interface_is_not_loaded(tmp_path, loaded_from):
    """A build whose functions take other arguments than this version passes is never called:
    its ``native_kernels_abi`` differs, and the reference runs in NumPy, saying why."""
    source = native.SOURCE.read_text()
    before = "native_kernels_abi(void) { return %d; }" % native.ABI
    assert before in source
    other = tmp_path / "native_kernels.c"
    other.write_text(source.replace(before, "native_kernels_abi(void) { return %d; }" % (native.ABI + 1)))
    loaded_from(build(other, tmp_path))
    state = native.status()
    assert not state.used and f"interface {native.ABI + 1}" in state.detail, state.detail
    assert native.kernels() is None


def test_switched_off_they_are_not_used(monkeypatch):
    monkeypatch.setenv("EP_TESTBED_NATIVE", "0")
    assert native.kernels() is None
    assert "switched off" in native.status().detail


@needs_build
def test_taps_outside_the_plane_are_never_handed_to_the_c_loop(monkeypatch):
    """The C loop reads wherever a tap points; a tap outside the plane (which no valid desc
    gives, and NumPy's clipping gather would survive) leaves the regions to NumPy instead."""
    case = next(c for c in build_catalog(OPS) if c.desc.reduction_function == "AVERAGE"
                and c.desc.interpolation_mode == "LINEAR")
    arrays = case.inputs()
    original = rab._take
    calls = {"refused": 0}

    def corrupt(a, index):
        taken = original(a, index)
        taken.pairs = taken.pairs.copy()
        if taken.pairs.size:
            taken.pairs.flat[0] = 10**9
        return taken

    native_bounds = rab._native_bounds

    def watching(*args):
        done = native_bounds(*args)
        calls["refused"] += done is False
        return done

    monkeypatch.setattr(rab, "_take", corrupt)
    monkeypatch.setattr(rab, "_native_bounds", watching)
    execute_reading(case.desc, arrays, [], "fp32")  # no crash, no read past the plane
    assert calls["refused"] > 0
