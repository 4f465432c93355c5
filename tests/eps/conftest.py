"""The DirectML host fixture (one host per test module; see dml_wine_kit)."""

from __future__ import annotations

import pytest
from dml_wine_kit import needs_host

from ep_testbed.harness.eps.dml_wine.host import DmlWineHost


@pytest.fixture(scope="module")
def host():
    needs_host()
    with DmlWineHost() as h:
        yield h
