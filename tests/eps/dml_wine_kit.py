"""What the DirectML host's tests share: they need `bash tools/dml-wine.sh` (Linux) and FAIL naming
that command without it, unless EP_TESTBED_NO_DML_WINE=1 says this machine runs without the
DirectML host on purpose."""

from __future__ import annotations

import os

import pytest

from ep_testbed.harness.eps.dml_wine import host as dml_host
from ep_testbed.harness.eps.dml_wine.host import HostSetupError

OPT_OUT = "EP_TESTBED_NO_DML_WINE"


def needs_host() -> None:
    """Fail (not skip) when the host is not set up, naming the command; skip only on opt-out."""
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: DirectML under Wine not used on this machine")
    try:
        dml_host.read_host_json()
        return
    except HostSetupError as exc:
        problem = str(exc)
    pytest.fail(f"{problem}\n(set {OPT_OUT}=1 to run the suite without it)", pytrace=False)
