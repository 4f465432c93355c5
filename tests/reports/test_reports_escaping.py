"""Every string from a results line, desc, model or EP message reaches the page inert."""

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
import synthetic_run
from synthetic_run import EVIL

from ep_testbed.reports import diff_runs, render_junit, render_run, render_summary_json


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def assert_inert(html: str, own_scripts: int) -> Collect:
    p = Collect()
    p.feed(html)
    scripts = [a for t, a in p.tags if t == "script"]
    assert len(scripts) == own_scripts, "a <script> from the data became an element"
    for tag, attrs in p.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)  # no event handler attribute from data
            if name in ("href", "src") and value:
                assert not value.strip().lower().startswith("javascript:"), (tag, name, value)
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,")
    return p


@pytest.fixture
def evil_run(tmp_path):
    return synthetic_run.write_evil_run(tmp_path / "evil")


def test_report_html_escapes_every_field(evil_run):
    html = render_run(evil_run).read_text()
    p = assert_inert(html, own_scripts=4)  # case data JSON, outcome order JSON, report.js, heat.js
    visible = "".join(p.text)
    assert visible.count(EVIL) >= 10  # shown as text: header, ids, desc, node, flags, placement, worst ...
    # the case table data: JSON inside <script type="application/json"> must not contain "<" at all
    data = re.search(r'id="case-data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in data and EVIL in json.loads(data)[0][0]
    # the expectation link is not a javascript: href (shown as text instead)
    assert "javascript:window.__pwned=3" in visible


def test_outside_artifact_paths_are_not_read(evil_run):
    html = render_run(evil_run).read_text()
    assert "../../outside" not in re.findall(r'href="([^"]*)"', html)


def test_diff_html_escapes(evil_run, tmp_path):
    b = synthetic_run.write_run(tmp_path / "b", 4)
    res = diff_runs(evil_run, b, tmp_path / "d")
    assert_inert(res.html_path.read_text(), own_scripts=1)  # diff.js, the filter
    res = diff_runs(b, evil_run, tmp_path / "d2")
    p = assert_inert(res.html_path.read_text(), own_scripts=1)
    assert EVIL in "".join(p.text)


def test_junit_and_summary_keep_the_strings_exactly(evil_run):
    tree = ET.parse(render_junit(evil_run))
    names = [tc.get("name") for tc in tree.iter("testcase")]
    assert all(EVIL in n for n in names)
    failure = next(tree.iter("failure"))
    assert EVIL in failure.get("message")
    summary = json.loads(render_summary_json(evil_run).read_text())
    assert summary["run"]["ep"].endswith(EVIL)
    assert all(EVIL in f["id"] for f in summary["failing"])


def test_malformed_failure_figures_render(tmp_path):
    """error_stats of the wrong shape inside a well-typed line (a results line is data) render as
    far as they make sense; a line whose counts have the wrong JSON kind is skipped and named
    (the schema of harness.core.results); the page is written either way."""
    run = synthetic_run.write_run(tmp_path / "r", 4, pattern=["fail"])
    lines = (run / "results.jsonl").read_text().splitlines()
    odd = [{"OutputTensor": "x"}, {"OutputTensor": {"elements": "many", "outside": 1}},
           {"OutputTensor": {"elements": 4, "outside": 1, "nonfinite": 0, "abs": [1], "ulp": {"mean": "a"},
                             "min_tolerance": {"atol": EVIL, "rtol": None, "ulp": 3}}}]
    out, cases = [lines[0]], 0
    for line in lines[1:]:
        obj = json.loads(line)
        if obj.get("type") == "case":
            obj.update(error_stats=odd[cases % len(odd)], index_mismatches=None)
            if cases == len(odd):  # the last: counts of the wrong kind
                obj.update(nonfinite_mismatches=EVIL, mismatches="3", tolerance_used=EVIL)
            cases += 1
        out.append(json.dumps(obj))
    (run / "results.jsonl").write_text("\n".join(out) + "\n")
    html = render_run(run).read_text()
    assert_inert(html, own_scripts=4)
    assert "--tol FLOAT32:ulp=3" not in html and "ulp 3</b>" in html  # the one well-formed part is shown
    assert "atol " + EVIL not in html
    assert f"1 unreadable line(s) in results.jsonl were skipped (line {2 + len(odd)})" in html
