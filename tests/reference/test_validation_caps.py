"""The reference's own limits, checked before anything is allocated (reference/checks.py), and
the MaxPool rule "every window sees an input element", decided by arithmetic rather than a scan
over the outputs."""

from __future__ import annotations

import numpy as np
import pytest
from descs_for_tests import max_pooling2, roi_align1, roi_pooling
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from ep_testbed.reference import DescError, execute, validate
from ep_testbed.reference.checks import DEFAULT_MAX_ELEMENTS, element_cap, max_elements, max_loop, max_work
from ep_testbed.reference.max_pooling2 import first_window_without_input


def _scanned(size, out, window, stride, start, dilation):
    """The rule as the page states it, one output at a time: the oracle of the arithmetic form."""
    for o in range(out):
        first = o * stride - start
        if not any(0 <= first + j * dilation < size for j in range(window)):
            return o
    return None


@settings(max_examples=examples(3000))
@given(st.integers(1, 12), st.integers(1, 40), st.integers(1, 8), st.integers(1, 9), st.integers(0, 40),
       st.integers(1, 30))
def test_the_padding_only_window_is_found_by_arithmetic_exactly_as_by_a_scan(size, out, window, stride, start,
                                                                               dilation):
    assert first_window_without_input(size, out, window, stride, start, dilation) == \
        _scanned(size, out, window, stride, start, dilation)


def test_the_arithmetic_takes_sizes_no_scan_could():
    big = 2**32 - 1
    assert first_window_without_input(big, big, 1, 1, 0, 1) is None
    # With 2**32 - 1 outputs the answer is the scan's over the first few, where it lies.
    for size, window, stride, start, dilation in ((5, 3, 1, 0, big), (1, 2, 1, 1, 2), (2, 2, 3, 1, 4),
                                                  (3, 4, 2, 5, 7), (big, 2, 1, 3, big)):
        assert first_window_without_input(size, big, window, stride, start, dilation) == \
            _scanned(size, 64, window, stride, start, dilation)


def test_caps_follow_the_element_cap():
    assert max_elements() == DEFAULT_MAX_ELEMENTS == 2**28 and max_loop() == 2**20 and max_work() == 2**32
    with element_cap(2**10):
        assert max_elements() == 2**10 and max_loop() == 4 and max_work() == 2**14
    assert max_elements() == DEFAULT_MAX_ELEMENTS


def test_a_tensor_over_the_cap_is_refused_naming_its_sizes():
    desc = roi_pooling((1, 3, 4, 4), 2, (4, 4))  # input 48, regions 10, output 96 elements
    with element_cap(95):
        with pytest.raises(DescError, match=r"OutputTensor.Sizes = \[2, 3, 4, 4\]: needs 96 elements.*at most 95"):
            validate(desc)
    validate(desc)


@pytest.mark.parametrize("kwargs, field, what", [
    (dict(x_shape=(1, 1, 1, 2), window=(1, 2), dilations=(1, 2**29), end=(0, 2**29)), "WindowSize/Dilations/Strides",
     "padded input"),
    (dict(x_shape=(1, 1, 2, 2), window=(2048, 1024), start=(2047, 1023)), "WindowSize", "one per window offset"),
    (dict(x_shape=(1, 1, 2, 2), window=(1, 1), strides=(4096, 1024)), "Strides", "one per stride phase"),
])
def test_maxpool_layouts_loops_and_work_past_the_caps_are_refused(kwargs, field, what):
    desc = max_pooling2(**kwargs)
    with pytest.raises(DescError, match=f"{field}.*{what}"):
        validate(desc)


def test_maxpool_work_past_the_cap_is_refused():
    desc = max_pooling2((1, 1, 64, 64), (8, 8), start=(7, 7), end=(7, 7))
    with element_cap(2**14):  # 71 x 71 outputs x 64 offsets > 16 x 2**14, every array and loop within the caps
        with pytest.raises(DescError, match="element-steps"):
            validate(desc)
    validate(desc)


def test_a_region_needing_too_many_samples_times_channels_is_refused_before_the_kernel():
    desc = roi_align1((1, 64, 8, 8), (1, 4), (2, 2), samples=(1, 2**32 - 1))
    x = np.zeros((1, 64, 8, 8), np.float32)
    rois = np.array([[0, 0, 4000, 4000]], np.float32)
    with element_cap(2**20):  # 2000 x 2000 samples x 2 x 2 outputs x 64 channels, far past 2**17
        with pytest.raises(DescError, match=r"ROITensor row 0.*sample values.*64 channels.*MaximumSamplesPerOutput"):
            execute(desc, {"InputTensor": x, "ROITensor": rois, "BatchIndicesTensor": np.zeros(1, np.uint32)})
    small = np.array([[0, 0, 4, 4]], np.float32)
    assert execute(desc, {"InputTensor": x, "ROITensor": small,
                          "BatchIndicesTensor": np.zeros(1, np.uint32)})["OutputTensor"].shape == (1, 64, 2, 2)


def test_a_float_field_that_overflows_float32_is_refused_but_an_explicit_infinity_is_kept():
    with pytest.raises(DescError, match="OutOfBoundsInputValue = 1e\\+39: a number float32 holds"):
        validate(roi_align1((1, 1, 4, 4), (1, 4), (2, 2), oob=1e39))
    validate(roi_align1((1, 1, 4, 4), (1, 4), (2, 2), oob=-float("inf")))
