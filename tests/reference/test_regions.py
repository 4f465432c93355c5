"""``select_regions``: the rows of an ROI operator's outputs are independent, so a desc and inputs
cut down to some regions compute exactly those rows of the whole (outputs, rounding bounds,
knife-edge alternatives), bit for bit, under the primary reading and every other. The oracle is
the whole computation itself: a region that read a neighbour's ROI, batch index or count would
differ here."""

from __future__ import annotations

import numpy as np
import pytest

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import execute_reading, readings_of, select_regions, spec_named, specs
from ep_testbed.reference.registry import OperatorContractError, check_record

ROI_OPS = [spec.name for spec in specs() if spec.regions is not None]


def _alternatives(expected, name):
    """``(low, high)`` of output ``name``, the output itself where no alternative is recorded."""
    low, high = expected.alternatives.get(name, (expected.outputs[name], expected.outputs[name]))
    return np.asarray(low, np.float64), np.asarray(high, np.float64)


def _assert_rows(whole, part, rows, what):
    """``part`` is ``rows`` of ``whole``: outputs byte for byte, bounds, alternatives, NaN alternatives."""
    for name, output in whole.outputs.items():
        assert part.outputs[name].dtype == output.dtype, what
        assert part.outputs[name].tobytes() == np.ascontiguousarray(output[rows]).tobytes(), (what, name)
        bound = whole.bounds.get(name)
        assert (part.bounds.get(name) is None) == (bound is None), (what, name)
        if bound is not None:
            assert np.array_equal(part.bounds[name], bound[rows]), (what, name)
        for mine, theirs in zip(_alternatives(part, name), _alternatives(whole, name)):
            assert np.array_equal(mine, theirs[rows], equal_nan=True), (what, name)
        nan = whole.nan_alternatives.get(name, np.zeros(output.shape, bool))
        assert np.array_equal(part.nan_alternatives.get(name, np.zeros(part.outputs[name].shape, bool)), nan[rows]), \
            (what, name)


def test_the_roi_operators_and_only_they_have_independent_rows():
    assert ROI_OPS == ["roi_pooling", "roi_align", "roi_align1"]
    case = build_catalog(["max_pooling2"])[0]
    assert select_regions(case.desc, case.inputs(), np.array([0])) is None


@pytest.mark.parametrize("op", ROI_OPS)
def test_some_regions_compute_their_rows_of_the_whole_under_every_reading(op):
    """Every catalog case of the operator with two regions or more, under the fp32 model (bounds
    and alternatives), the primary reading and one other (each reading in turn, so that every
    reading is checked on several cases): the odd rows, then the last row alone."""
    checked = 0
    for number, case in enumerate(build_catalog([op])):
        inputs = case.inputs()
        others = [r.name for r in readings_of(case.desc)]
        for reading in ([], [others[number % len(others)]]):
            with np.errstate(all="ignore"):
                try:
                    whole = execute_reading(case.desc, inputs, reading, "fp32")
                except Exception:  # noqa: BLE001 - a desc the reference refuses has no rows to cut
                    break
                count = whole.outputs["OutputTensor"].shape[0]
                if count < 2:
                    break
                for rows in (np.arange(1, count, 2), np.array([count - 1])):
                    desc, part_inputs = select_regions(case.desc, inputs, rows)
                    assert desc.output_tensor.sizes[0] == len(rows)
                    _assert_rows(whole, execute_reading(desc, part_inputs, reading, "fp32"), rows, (case.id, reading))
                    checked += 1
    assert checked >= 80, f"only {checked} cuts of {op} checked: the catalog lost its multi-region cases"


def test_a_regions_hook_that_is_not_a_function_of_three_arguments_is_refused():
    import dataclasses

    spec = spec_named("roi_align1")
    with pytest.raises(OperatorContractError, match="OpSpec.regions"):
        check_record(dataclasses.replace(spec, regions=lambda desc, arrays: None))
