"""One test per catalog case on the EP chosen with --ep (default cpu); see harness/pytest_plugin.py."""

import pytest

from ep_testbed.harness.pytest_plugin import check_case

pytestmark = pytest.mark.slow  # the whole catalog on the EP, case by case: -m "not slow" skips it


def test_case(conformance_case, request):
    check_case(request.config, conformance_case)
