"""The attack suite's fixtures: one sandbox server per test process, Hypothesis profiles, and the
count of hostile inputs tried, printed at the end of the run.

The Hypothesis settings of the property tests are ``hostile_kit.hostile(n)``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from sandbox import ROOT, Sandbox

sys.path.insert(0, str(ROOT / "tests" / "harness"))  # local_cases: the small test catalog and its mappers

_COUNTS_ENV = "EP_TESTBED_HOSTILE_COUNTS"


def pytest_configure(config):
    """Make one folder for the call counts of every test process of this run (xdist workers
    inherit the variable from the controller)."""
    if _COUNTS_ENV not in os.environ:
        os.environ[_COUNTS_ENV] = tempfile.mkdtemp(prefix="hostile-counts-")


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory):
    """The sandbox of this test process; its call counts are saved when the session ends."""
    box = Sandbox(tmp_path_factory.mktemp("sandbox"))
    yield box
    box.close()
    folder = Path(os.environ[_COUNTS_ENV])
    if folder.is_dir():
        (folder / f"{os.getpid()}.json").write_text(json.dumps(box.calls))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print how many hostile inputs every command was given (summed over test processes)."""
    folder = Path(os.environ.get(_COUNTS_ENV, ""))
    if not folder.is_dir() or hasattr(config, "workerinput"):
        return
    totals: dict[str, int] = {}
    for path in folder.glob("*.json"):
        for kind, n in json.loads(path.read_text()).items():
            totals[kind] = totals.get(kind, 0) + n
        path.unlink()
    if totals:
        parts = ", ".join(f"{kind} {n}" for kind, n in sorted(totals.items()))
        terminalreporter.write_line(f"hostile inputs tried: {sum(totals.values())} ({parts})")
