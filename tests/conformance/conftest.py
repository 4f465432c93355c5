"""Loads the conformance plugin (options --ep, --ep-option, --case-timeout, ...; op/dtype markers)."""

from ep_testbed.harness.pytest_plugin import (  # noqa: F401  (pytest finds hooks by name)
    catalog_params,
    pytest_addoption,
    pytest_collection_finish,
    pytest_configure,
    pytest_unconfigure,
)


def pytest_generate_tests(metafunc):
    if "conformance_case" in metafunc.fixturenames:
        metafunc.parametrize("conformance_case", catalog_params(metafunc.config))
