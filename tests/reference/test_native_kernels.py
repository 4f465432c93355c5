"""The reference's optional compiled loops (``reference/native_kernels.c``, built by ``pip install``
where a C compiler is) give the NumPy code's numbers bit for bit, are used where they apply, and
are never needed.

``test_bounds_oracle.py`` checks whatever path this machine takes against the frozen per-region
oracle; here the two paths are checked against each other on every ROI_ALIGN catalog case and on
drawn ones, with a count of the regions the compiled loop took (so that equality is not vacuous),
and a planted fault in the C source shows that the comparison sees a change of one operation.
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
from hypothesis_profiles import examples
from test_bounds import roi_align_case, tensors
from test_bounds_oracle import assert_same_expected

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import MODELS, execute_reading, native
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
def test_every_roi_align_catalog_case_is_the_same_bit_for_bit_in_numpy_alone(monkeypatch, counted):
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
        compiled, plain = both_ways(mp, lambda: execute_reading(desc, arrays, [], model))
    assert_same_expected(compiled, plain, f"drawn {model}")


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
def test_a_fault_planted_in_the_c_source_is_seen(fault, monkeypatch, tmp_path, loaded_from):
    """The comparison above has teeth: the C source with one operand left out, built as pip
    builds it, gives bounds that differ from NumPy's on the catalog."""
    before, after = PLANTED[fault]
    source = native.SOURCE.read_text()
    assert before in source, "the planted fault no longer matches the source: update PLANTED"
    planted = tmp_path / "native_kernels.c"
    planted.write_text(source.replace(before, after))
    loaded_from(build(planted, tmp_path))
    assert native.status().used
    differing = []
    for case in build_catalog(OPS):
        arrays = case.inputs()
        compiled, plain = both_ways(monkeypatch, lambda: execute_reading(case.desc, arrays, [], "fp32"))
        if "OutputTensor" in plain.bounds and not np.array_equal(compiled.bounds["OutputTensor"],
                                                                  plain.bounds["OutputTensor"]):
            differing.append(case.id)
    assert differing, f"{fault}: no catalog case's bounds changed"


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
