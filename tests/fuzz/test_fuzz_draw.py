"""Fuzzed cases: every draw is a valid case over the whole field space, and a seed and a case id
regenerate the same case anywhere (here: in a fresh interpreter)."""

import collections
import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("hypothesis")

from ep_testbed.graphs.cases.common import REGION_KINDS, VALUE_KINDS, desc_elements  # noqa: E402
from ep_testbed.harness.fuzz import draw  # noqa: E402
from ep_testbed.reference import desc_to_dml, validate  # noqa: E402
from ep_testbed.reference.descs import member_value  # noqa: E402
from ep_testbed.reference.dtypes import numpy_dtype  # noqa: E402
from ep_testbed.reference.registry import names  # noqa: E402

OPS = list(names())


def _fingerprint(case) -> str:
    """The desc, recipe, opset and input bytes of a case, hashed."""
    digest = hashlib.sha256(json.dumps([desc_to_dml(case.desc), case.recipe, case.opset], sort_keys=True,
                                       default=str).encode())
    for name, array in sorted(case.inputs().items()):
        digest.update(name.encode() + str(array.dtype).encode() + np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def batches():
    return {op: draw.draw_batch(op, 3, 1) + draw.draw_batch(op, 3, 2) for op in OPS}


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_every_draw_is_a_valid_case_whose_inputs_match_its_desc(batches, op):
    for case in batches[op]:
        validate(case.desc)
        inputs = case.inputs()
        assert set(inputs) == set(case.desc.INPUTS), case.id
        for member, array in inputs.items():
            tensor = member_value(case.desc, member)
            assert array.shape == tuple(tensor.sizes) and array.dtype == numpy_dtype(tensor.data_type), case.id
        assert draw.parse_id(case.id).op == op and case.tags["family"] == "fuzz"


def test_the_default_sizes_stay_small_with_a_median_of_hundreds_of_elements(batches):
    sizes = [desc_elements(c.desc) for cases in batches.values() for c in cases]
    assert 100 <= float(np.median(sizes)) <= 4096 and max(sizes) <= 4 * 4096 + 4096


def test_max_pooling_draws_cover_every_type_both_ranks_and_pads_past_the_window(batches):
    cases = batches["max_pooling2"]
    assert {c.desc.input_tensor.data_type for c in cases} == {
        "FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64"}
    assert {c.desc.dimension_count for c in cases} == {2, 3}
    assert any(p >= w for c in cases for p, w in zip(c.desc.start_padding + c.desc.end_padding,
                                                       c.desc.window_size * 2))
    assert any(c.desc.window_size == tuple(c.desc.input_tensor.sizes[2:]) for c in cases)
    assert {c.recipe.split(":")[1] for c in cases} == set(VALUE_KINDS)


@pytest.mark.slow
def test_roi_align_draws_cover_regions_scales_and_sample_settings(batches):
    cases = batches["roi_align1"]
    assert {c.recipe.split(":")[2] for c in cases} == set(REGION_KINDS)
    assert {c.desc.reduction_function for c in cases} == {"AVERAGE", "MAX"}
    assert {c.desc.spatial_scale_x for c in cases} >= {0.0, -1.0, 64.0, 1.0}
    assert any(c.desc.maximum_samples_per_output == 2**32 - 1 for c in cases)
    assert any(not np.isfinite(c.desc.out_of_bounds_input_value) for c in cases)
    assert {c.opset for c in cases} == {None, 10}


def test_a_batch_is_drawn_the_same_twice_and_other_batches_differ():
    first, again = draw.draw_batch("roi_pooling", 5, 0), draw.draw_batch("roi_pooling", 5, 0)
    assert [_fingerprint(c) for c in first] == [_fingerprint(c) for c in again]
    other = draw.draw_batch("roi_pooling", 6, 0)
    assert [_fingerprint(c) for c in first] != [_fingerprint(c) for c in other]


def test_strategies_made_once_draw_what_fresh_ones_draw_and_tell_apart_equal_looking_values(monkeypatch):
    """The fuzzing module reuses one strategy object per arguments: the draws are those of fresh
    strategies, and arguments that compare equal but are different values (True and 1, -0.0 and
    0.0) get different strategies."""
    from ep_testbed.graphs.cases import fuzzing

    assert fuzzing.bounded(1, 7) is fuzzing.bounded(1, 7)
    assert fuzzing.choice(["A", "B"]) is fuzzing.choice(["A", "B"]) is not fuzzing.choice(["B", "A"])
    assert fuzzing.weighted([(False, 1), (True, 1)]) is not fuzzing.weighted([(0, 1), (1, 1)])
    assert fuzzing.choice([0.0]) is not fuzzing.choice([-0.0])
    reused = {op: [_fingerprint(c) for c in draw.draw_batch(op, 11, 0)] for op in OPS}
    for name in ("choice", "weighted", "bounded", "value_seed"):
        monkeypatch.setattr(fuzzing, name, getattr(fuzzing, name).__wrapped__)
    assert reused == {op: [_fingerprint(c) for c in draw.draw_batch(op, 11, 0)] for op in OPS}


@pytest.mark.slow
def test_a_case_id_regenerates_its_case_in_a_fresh_interpreter_whatever_it_imported(batches):
    chosen = [batches[op][i] for op, i in (("max_pooling2", 37), ("roi_align", 141), ("roi_pooling", 5))]
    # The child imports other local modules first: Hypothesis would mix their literals into its
    # draws, which draw.run_batch turns off.
    code = ("import sys, json\nsys.path.insert(0, sys.argv[1])\nimport ep_testbed.harness.run.pool, ep_testbed.harness.cli\n"
            "from test_fuzz_draw import _fingerprint\nfrom ep_testbed.harness.fuzz.draw import draw_batch, replay\n"
            "print(json.dumps([[_fingerprint(replay(i)) for i in sys.argv[2:]],\n"
            "                  [_fingerprint(c) for op in ('max_pooling2', 'roi_align1') for c in draw_batch(op, 3, 1)]]))")
    out = subprocess.run([sys.executable, "-c", code, str(__import__("pathlib").Path(__file__).parent),
                          *[c.id for c in chosen]], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONHASHSEED": "123"})
    replayed, whole = json.loads(out.stdout)
    assert replayed == [_fingerprint(c) for c in chosen]
    assert whole == [_fingerprint(c) for op in ("max_pooling2", "roi_align1") for c in batches[op][:100]]


@pytest.mark.parametrize("bad", ["max_pooling2/random-s0-001", "nope/fuzz-s0-b1-002", "roi_align/fuzz-s0-b1"])
def test_an_id_that_is_not_a_fuzzed_one_is_refused_with_the_form(bad):
    with pytest.raises(ValueError, match="<op>/fuzz"):
        draw.parse_id(bad)


def test_ids_name_operator_size_seed_batch_and_position():
    fid = draw.FuzzId("roi_align1", 7, 12, 34, "large")
    assert fid.text() == "roi_align1/fuzz-large-s7-b12-034" and draw.parse_id(fid.text()) == fid
    assert draw.FuzzId("max_pooling2", 0, 3, 17).text() == "max_pooling2/fuzz-s0-b3-017"


def test_the_value_kinds_are_what_their_names_say():
    from ep_testbed.graphs.cases.common import fuzz_values

    rng = np.random.default_rng(0)
    specials = fuzz_values((4000,), "FLOAT16", "specials", rng)
    assert np.isnan(specials).any() and np.isposinf(specials).any() and np.isneginf(specials).any()
    assert (specials[np.isfinite(specials)] != 0).any() and (np.abs(specials[specials != 0]) < 1e-6).any()
    distinct = fuzz_values((2, 3, 50), "INT32", "distinct", rng)
    assert len(np.unique(distinct)) == distinct.size
    neighbours = fuzz_values((500,), "FLOAT32", "ulp-neighbours", rng)
    assert len(np.unique(neighbours)) <= 7 and np.ptp(neighbours) < 1e-3 * max(1.0, float(np.abs(neighbours).max()))
    extremes = fuzz_values((300,), "UINT8", "extremes", rng)
    assert {0, 255} <= set(extremes.tolist())
    assert collections.Counter(fuzz_values((100,), "INT8", "small", rng).tolist()).keys() <= set(range(-3, 4))


def test_a_drawing_process_that_dies_is_an_error_not_a_hang():
    """Killed before it drew anything, the drawing process reports nothing itself: the wait
    for its next batch notices that it ended instead of blocking forever."""
    from ep_testbed.harness.fuzz.engine import Drawer

    drawer = Drawer(["max_pooling2"], seed=0, size="default")
    try:
        drawer._process.kill()
        drawer._process.join()
        with pytest.raises(RuntimeError, match=r"the drawing process ended \(exit code -9\) without a batch"):
            drawer.next_batch()
    finally:
        drawer.close()


def test_the_first_draws_of_a_batch_are_the_whole_batchs_first_and_a_round_can_stop_early(monkeypatch):
    """A batch stopped at its k-th draw (``first``) drew what the whole batch begins with, so a
    run that needs only the start of its last round draws no more of it; an operator whose
    batch runs out first makes the round draw every batch whole (the others' later draws count)."""
    from ep_testbed.harness.fuzz.draw import draw_batch, draw_round

    def seen(cases: list) -> list:
        return [(c.id, repr(c.desc), c.recipe, c.value_seed) for c in cases]

    for op, seed, batch in (("roi_align1", 3, 2), ("max_pooling2", 0, 1)):
        whole = draw_batch(op, seed, batch)
        for first in (1, 17, len(whole) - 1):
            assert seen(draw_batch(op, seed, batch, first=first)) == seen(whole[:first])
    ops = ["roi_pooling", "max_pooling2"]
    assert seen(draw_round(ops, 5, 1, limit=41)) == seen(draw_round(ops, 5, 1)[:41])
    assert seen(draw_round(ops, 5, 1, limit=10**6)) == seen(draw_round(ops, 5, 1))
    real = draw.draw_batch

    def runs_out(op, *args, **kwargs):  # roi_pooling's batch holds 3 draws, as one Hypothesis ran out of
        return real(op, *args, **kwargs)[:3] if op == "roi_pooling" else real(op, *args, **kwargs)

    monkeypatch.setattr(draw, "draw_batch", runs_out)
    assert len(draw_round(ops, 5, 1)) == 3 + len(real("max_pooling2", 5, 1))
    assert seen(draw_round(ops, 5, 1, limit=41)) == seen(draw_round(ops, 5, 1)[:41])  # max_pooling2 fills in
