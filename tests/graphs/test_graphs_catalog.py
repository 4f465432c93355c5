"""The case catalog: size, ids, coverage of every field value, determinism, and - the main
claim - agreement of ORT's CPU EP with the reference on every exact/composed case."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import UINT32_MAX
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference.registry import names

OPS = names()
from graphs_testkit import agrees, is_selection, max_abs_error, run_cpu

from ep_testbed.reference import execute, execute_reading, validate

CATALOG = build_catalog()


def test_catalog_is_modest_and_ids_unique_and_readable():
    counts = collections.Counter(c.id.split("/")[0] for c in CATALOG)
    assert set(counts) == set(OPS)
    assert 150 <= len(CATALOG) <= 400, counts
    assert len({c.id for c in CATALOG}) == len(CATALOG)
    for c in CATALOG:
        assert c.id.split("/")[0] in OPS and " " not in c.id and len(c.id) < 160
        assert {"dtype", "family"} <= set(c.tags)
        validate(c.desc)
        for t in (c.desc.input_tensor, c.desc.output_tensor):
            assert t.element_count < 50_000, c.id


def test_ids_are_stable_across_builds_and_seeds_change_only_random_cases():
    again = build_catalog(seed=0)
    assert [c.id for c in again] == [c.id for c in CATALOG]
    other = build_catalog(seed=1)
    fixed = {c.id for c in CATALOG if not c.id.split("/")[1].startswith("random")}
    assert fixed == {c.id for c in other if not c.id.split("/")[1].startswith("random")}
    assert build_catalog(["roi_pooling"])[0].op == "DML_OPERATOR_ROI_POOLING"
    with pytest.raises(ValueError, match="roi_pooling"):
        build_catalog(["roi_pool"])


def test_inputs_are_deterministic_in_id_and_seed():
    for c in CATALOG[::7]:
        a, b = c.inputs(), c.inputs()
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    c = next(c for c in CATALOG if c.op == "DML_OPERATOR_ROI_ALIGN1")
    moved = type(c)(id=c.id, op=c.op, desc=c.desc, seed=c.seed + 1, tags=c.tags, recipe=c.recipe)
    assert not np.array_equal(c.inputs()["InputTensor"], moved.inputs()["InputTensor"])


def _values(op, getter):
    return {getter(c.desc) for c in CATALOG if c.id.startswith(op + "/grid-")}


def test_grid_covers_every_field_value():
    for op, v1 in (("roi_align1", True), ("roi_align", False)):
        assert _values(op, lambda d: d.input_tensor.data_type) == {"FLOAT32", "FLOAT16"}
        assert _values(op, lambda d: d.reduction_function) == {"AVERAGE", "MAX"}
        assert _values(op, lambda d: d.interpolation_mode) == {"LINEAR", "NEAREST_NEIGHBOR"}
        assert _values(op, lambda d: d.spatial_scale_x) == {0.25, 0.5, 1.0}
        assert _values(op, lambda d: d.out_of_bounds_input_value) == {0.0, 1.5}
        assert _values(op, lambda d: (d.minimum_samples_per_output, d.maximum_samples_per_output)) == {
            (1, 1), (2, 2), (3, 3), (1, UINT32_MAX), (1, 4), (2, 5)}
        assert _values(op, lambda d: d.roi_tensor.dimension_count) == {2, 3, 4}
        assert _values(op, lambda d: d.batch_indices_tensor.dimension_count) == {1, 2, 3, 4}
        if v1:
            assert _values(op, lambda d: d.input_pixel_offset) == {0.5, 0.0, 0.25}
            assert _values(op, lambda d: d.output_pixel_offset) == {-0.5, 0.0, -0.25}
            assert _values(op, lambda d: d.align_regions_to_corners) == {False, True}
            assert _values(op, lambda d: d.batch_indices_tensor.data_type) == {"UINT32", "UINT64"}
    mp = "max_pooling2"
    assert len(_values(mp, lambda d: d.input_tensor.data_type)) == 10
    assert _values(mp, lambda d: d.dimension_count) == {2, 3}
    assert _values(mp, lambda d: None if d.output_indices_tensor is None else d.output_indices_tensor.data_type) == {
        None, "UINT32", "UINT64"}
    assert {1, 2} <= {v for s in _values(mp, lambda d: d.dilations) for v in s}
    assert {1, 2, 3} <= {v for s in _values(mp, lambda d: d.strides) for v in s}
    assert {0, 1, 2} <= {v for s in _values(mp, lambda d: d.end_padding) for v in s}
    # pairwise: every data type with every indices type and both dimension counts
    pairs = _values(mp, lambda d: (d.input_tensor.data_type, d.dimension_count,
                                   None if d.output_indices_tensor is None else d.output_indices_tensor.data_type))
    assert {(t, i) for t, _, i in pairs} == set(itertools.product({t for t, _, _ in pairs}, {None, "UINT32", "UINT64"}))
    assert {(t, n) for t, n, _ in pairs} == set(itertools.product({t for t, _, _ in pairs}, {2, 3}))
    rp = "roi_pooling"
    assert _values(rp, lambda d: d.input_tensor.data_type) == {"FLOAT32", "FLOAT16"}
    assert _values(rp, lambda d: d.spatial_scale) == {1.0, 0.5, 0.25, 2.0, 0.0}
    assert {(1, 1), (2, 3), (3, 2), (11, 1)} <= _values(rp, lambda d: (d.pooled_size.height, d.pooled_size.width))


def test_edge_families_present():
    families = {c.tags["family"] for c in CATALOG}
    for family in ("edge-outside-partly", "edge-outside-wholly", "edge-one-pixel", "edge-whole-image", "edge-empty",
                   "edge-inverted", "edge-ties", "edge-nan-inf", "edge-rounding-ties", "edge-float32-bins"):
        assert family in families, family
    assert any(c.desc.roi_tensor.sizes[-2] >= 300 for c in CATALOG if hasattr(c.desc, "roi_tensor"))


SWEEP = collections.defaultdict(list)
#: The readings that make the reference ONNX Runtime's CPU kernels where the primary reading
#: (DirectML's, where the page is silent) differs from them (tests/reference/test_readings.py).
ORT_READINGS = {"roi_pooling": ["half-away-rounding", "float32-bins", "std-max-fold"],
                "roi_align": ["closed-edge", "weighted-interpolation", "zero-times-corner", "float32-accumulation"],
                "roi_align1": ["closed-edge", "weighted-interpolation", "zero-times-corner", "float32-accumulation"],
                "max_pooling2": []}


@pytest.mark.parametrize("op", OPS)
def test_catalog_agrees_with_ort_cpu_on_exact_and_composed_cases(op):
    """Exact/composed cases agree within tolerance with the reference under ONNX Runtime's own
    readings (the mapping is exact: what differs is only where ORT reads the page otherwise); cases
    tagged expect=diverges do differ."""
    agreed, inexpressible, diverged = 0, 0, []
    errors = collections.defaultdict(float)
    for case in (c for c in CATALOG if c.id.startswith(op + "/")):
        mapping = to_onnx(case.desc, case.opset)
        if not mapping.expressible:
            inexpressible += 1
            continue
        tensors = case.inputs()
        if any(f.kind == "inexpressible" for f in mapping.input_flags(tensors)):
            assert case.tags.get("expect") == "inexpressible", case.id
            inexpressible += 1
            continue
        with np.errstate(invalid="ignore"):
            primary = execute(case.desc, tensors)
            expected = execute_reading(case.desc, tensors, ORT_READINGS[op]).outputs
        if case.tags.get("expect") == "diverges" and not mapping.input_flags(tensors) == []:
            try:
                actual = run_cpu(mapping, tensors)
            except Exception as e:  # noqa: BLE001 - ORT refusing the model is the divergence
                diverged.append((case.id, f"refused: {str(e)[:60]}"))
                continue
            err = max(max_abs_error(primary[k], actual[k]) for k in primary)
            assert err > 0, case.id
            diverged.append((case.id, err))
            continue
        if case.tags.get("expect") == "diverges":  # pads >= kernel: no input flag, ORT refuses
            with pytest.raises(Exception, match="Pad should be smaller than kernel"):
                run_cpu(mapping, tensors)
            diverged.append((case.id, "refused"))
            continue
        actual = run_cpu(mapping, tensors)
        if mapping.kind == "diverges" or mapping.input_flags(tensors):
            continue  # measured in test_graphs_diverges
        for k in expected:
            assert agrees(expected[k], actual[k], is_selection(case.desc)), (case.id, k, max_abs_error(expected[k], actual[k]))
            key = f"{case.tags['dtype']}/{k}"
            errors[key] = max(errors[key], max_abs_error(expected[k], actual[k]))
        agreed += 1
    print(f"\n{op}: agreed {agreed}, inexpressible {inexpressible}, diverged {diverged}, max abs error {dict(errors)}")
    assert agreed > 20


def test_the_probe_case_is_the_catalogs_and_is_built_without_it():
    """``doctor``, ``run`` and ``fuzz`` check an EP's session with the probe case: the catalog's
    own (same id, desc, seed and tags), built without drawing the catalog (MAX_POOLING2's covering
    array takes most of a second; a fuzz runs no catalog)."""
    from ep_testbed.graphs.cases import common

    for seed in (0, 12345):
        before = common._built.cache_info()
        probe = common.probe_case(seed)
        assert common._built.cache_info().misses == before.misses  # no catalog drawn for it
        op = probe.id.split("/")[0]
        pattern = common.cases_module(probe.op).PROBE
        matching = [c for c in common.catalog_cases(op, seed) if c.id == f"{op}/{pattern}"]
        assert matching == [probe]
