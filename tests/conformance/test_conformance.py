"""One test per catalog case on the EP chosen with --ep (default cpu); see harness/pytest_plugin.py."""

from ep_testbed.harness.pytest_plugin import check_case


def test_case(conformance_case, request):
    check_case(request.config, conformance_case)
