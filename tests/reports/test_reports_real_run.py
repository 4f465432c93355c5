"""Render the output of a real `ep-testbed run --ep cpu` (a small slice of the catalog).

This is the reports' end-to-end check against the harness as it is, not against synthetic lines:
the CPU EP really runs the MaxPool edge cases, and whatever they produce must render.
"""

import json
import xml.etree.ElementTree as ET

import pytest

from ep_testbed.reports import render_junit, render_run, render_summary_json
from ep_testbed.reports.results import load_run


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    cli = pytest.importorskip("ep_testbed.harness.cli")
    out = tmp_path_factory.mktemp("cpu") / "run"
    code = cli.main(["run", "--ep", "cpu", "--ops", "max_pooling2", "-k", "edge", "--out", str(out),
                     "--jobs", "0", "--no-progress"])
    assert code in (0, 1)  # 1: some case failed on the CPU EP, which the report must show
    return out


def test_real_cpu_run_renders(cpu_run):
    run = load_run(cpu_run)
    assert run.header["ep"] == "CPUExecutionProvider" and run.cases
    html = render_run(cpu_run).read_text()
    assert html.count('<article class="case') == sum(
        1 for c in run.cases if c.outcome not in ("pass", "tie-only", "not-on-ep", "inexpressible") or c.artifacts)
    for c in run.cases:
        assert json.dumps(c.id)[1:-1] in html
    suite = ET.parse(render_junit(cpu_run)).getroot().find("testsuite")
    assert int(suite.get("tests")) == len(run.cases)
    summary = json.loads(render_summary_json(cpu_run).read_text())
    assert summary["total"] == len(run.cases)
    if any(c.artifacts for c in run.cases):
        assert 'class="heat"' in html
