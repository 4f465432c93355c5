import base64
import io
import json
import re
import subprocess
import sys
import zipfile
from html.parser import HTMLParser

import numpy as np
import synthetic_run

from ep_testbed.reports import render_run
from ep_testbed.reports.artifacts import index_mismatches, load_artifacts


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of <script> elements."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(html: str) -> list[tuple[str, dict]]:
    p = Tags()
    p.feed(html)
    return p.tags


def test_report_has_header_matrix_table_data_and_a_section_per_failing_case(small_run):
    html = render_run(small_run).read_text()
    for text in ("CPUExecutionProvider", "onnxruntime 1.32.0", "ci-box", "ep-testbed run --ep cpu --out runs/x",
                 "atol=1e-05", "ROI_ALIGN1", "FLOAT16"):
        assert text in html
    rows = json.loads(re.search(r'<script type="application/json" id="case-data">(.*?)</script>', html, re.S)
                      .group(1))
    assert len(rows) == 120
    sections = re.findall(r'<article class="case o-([a-z-]+)" id="(c\d+)"', html)
    outcomes = [o for o, _ in sections]
    for bad in ("fail", "crash", "timeout", "error", "known", "fixed"):
        assert outcomes.count(bad) == 3, bad
    assert outcomes.index("fail") < outcomes.index("pass" if "pass" in outcomes else "tie-only")
    # each detailed case row in the table links to its section
    anchors = {r[8] for r in rows if r[8]}
    assert anchors == {a for _, a in sections}


def test_failing_case_shows_desc_model_flags_errors_pictures_and_rerun(small_run):
    html = render_run(small_run).read_text()
    first = html[html.index('<article class="case o-fail"'):]
    first = first[:first.index("</article>")]
    assert "SpatialScaleX" in first or "WindowSize" in first            # desc in DML field names
    assert "output_height" in first or "kernel_shape" in first          # ONNX node attributes
    assert "ep-testbed run --ep cpu --seed 0 --tol FLOAT16:atol=0.001,rtol=0.001,ulp=2 -k" in first
    assert first.count('class="heat"') >= 3                               # expected, actual, |diff|
    assert "Worst elements" in first
    assert re.search(r'href="data:application/zip;base64,', first)


def test_a_case_whose_arrays_cannot_fit_inline_gets_no_bundle_built(small_run, monkeypatch):
    """Past ``RAW_BUNDLE_CAP`` bytes of arrays the bundle is not compressed at all (seconds per
    stress case, for a bundle too big to inline); the section says why and keeps its pictures."""
    import ep_testbed.reports.html_report as html_report

    def must_not_build(*args, **kwargs):
        raise AssertionError("the bundle was built")

    monkeypatch.setattr(html_report, "RAW_BUNDLE_CAP", 1)
    monkeypatch.setattr(html_report, "build_bundle", must_not_build)
    html = render_run(small_run).read_text()
    first = html[html.index('<article class="case o-fail"'):]
    first = first[:first.index("</article>")]
    assert "data:application/zip" not in first and first.count('class="heat"') >= 3
    assert re.search(r"Repro bundle: its arrays hold \d+ MiB, too big to inline; the files are in", first)


def test_report_is_self_contained(small_run):
    html = render_run(small_run).read_text()
    for tag, attrs in parse(html):
        assert tag not in ("link", "iframe", "object", "embed")
        if tag in ("img", "script"):
            assert attrs.get("src", "data:").startswith("data:"), (tag, attrs)
    assert "@import" not in html and "url(http" not in html


def test_pictures_limited_to_max_pictures(small_run):
    html = render_run(small_run, max_pictures=1).read_text()
    assert len(re.findall(r'<article class="case', html)) > 1
    # the page says how many sections got pictures, of how many, and how to draw them all
    with_artifacts = int(re.search(r"Pictures and repro bundles: 1 of the (\d+) case section", html).group(1))
    assert with_artifacts > 1 and f"--max-pictures {with_artifacts}</code>" in html
    everything = render_run(small_run, max_pictures=with_artifacts).read_text()
    assert everything.count('href="data:application/zip;base64,') == with_artifacts  # a bundle in each
    assert f"Pictures and repro bundles: {with_artifacts} of the {with_artifacts} case section" in everything
    assert html.count('class="heat"') == sum(1 for _ in re.finditer(r'class="heat"', html))
    sections = html.split('<article class="case')[1:]
    assert sum('class="heat"' in s for s in sections) == 1


def test_only_sections_with_pictures_read_their_arrays(small_run, monkeypatch):
    """A section drawn without pictures shows the desc and model alone: its ``.npz`` files, most of
    a large report's reading, stay unread; the pictured one reads its own."""
    from ep_testbed.reports import artifacts

    read = []
    real = artifacts.read_arrays
    monkeypatch.setattr(artifacts, "read_arrays", lambda path, *a, **k: read.append(path.parent) or real(path, *a, **k))
    html = render_run(small_run, max_pictures=1).read_text()
    assert html.count('class="heat"') >= 1 and len(re.findall(r'<article class="case', html)) > 1
    assert len(set(read)) == 1 and read


def test_maxpool_index_differences_split_into_ties_and_mismatches(tmp_path):
    folder = tmp_path / "case"
    synthetic_run.write_artifacts(folder, "DML_OPERATOR_MAX_POOLING2", "FLOAT32", np.random.default_rng(3),
                                  broken=True)
    mismatches, ties, total = index_mismatches(load_artifacts(folder))
    assert total == 4
    # the top-left window of every channel holds two 9s; the EP's index picks the second one
    assert [t.position for t in ties] == [(0, 0, 0, 0), (0, 1, 0, 0), (0, 2, 0, 0)]
    assert all(t.value_at_actual == t.expected_value == 9.0 for t in ties)
    assert [m.position for m in mismatches] == [(0, 2, 3, 3)]
    assert mismatches[0].actual_coords == (0, 0, 0, 0)


def test_interrupted_run_is_flagged(tmp_path):
    run_dir = synthetic_run.write_run(tmp_path / "r", 20, end=False)
    html = render_run(run_dir).read_text()
    assert "This run did not finish" in html and "20 of 20" in html


def test_repro_bundle_runs_with_numpy_and_onnxruntime_only(small_run, tmp_path):
    """The bundle of a MaxPool case reproduces on ONNX Runtime's CPU EP: its expected outputs
    (2x2 max pooling with flat indices, computed in synthetic_run) match what CPU returns, so
    its repro.py says pass and exits 0 (the synthetic run's "fail" came from a faked EP)."""
    html = render_run(small_run).read_text()
    uris = re.findall(r'<article class="case o-fail".*?href="data:application/zip;base64,([^"]+)"', html, re.S)
    found = False
    for uri in uris:
        z = zipfile.ZipFile(io.BytesIO(base64.b64decode(uri)))
        if "MAX_POOLING2" not in z.read("desc.json").decode():
            continue
        found = True
        top = sorted({n.split("/")[0] for n in z.namelist()})
        assert top == ["actual.npz", "check.json", "desc.json", "expected.npz", "inputs.npz", "lib", "model.onnx",
                       "repro.py"]
        assert "lib/ep_testbed_judging/compare.py" in z.namelist()
        assert "lib/ep_testbed_judging/reference/max_pooling2.py" in z.namelist()  # its window rule judges index ties
        usage = z.read("repro.py").decode().split('"""')[1]  # what a reader of the script learns first
        assert all(f"  {code}  " in usage for code in (0, 1, 2)) and "numpy and onnxruntime" in usage
        z.extractall(tmp_path / "bundle")
        out = subprocess.run([sys.executable, "repro.py", "CPUExecutionProvider"], cwd=tmp_path / "bundle",
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.startswith("pass: 0 of 96 elements outside tolerance")
        assert "the run said fail on CPUExecutionProvider" in out.stdout
        break
    assert found, "the synthetic run has a failing MaxPool case with a bundle"


def test_index_picture_codes_match_the_tie_split(tmp_path):
    from ep_testbed.reports.artifacts import INDEX_MISMATCH, INDEX_TIE, index_categories
    from ep_testbed.reports.images import INDEX_PALETTE, index_slices

    folder = tmp_path / "case"
    synthetic_run.write_artifacts(folder, "DML_OPERATOR_MAX_POOLING2", "FLOAT32", np.random.default_rng(3),
                                  broken=True)
    codes = index_categories(load_artifacts(folder))
    assert sorted(map(tuple, np.argwhere(codes == INDEX_TIE))) == [(0, 0, 0, 0), (0, 1, 0, 0), (0, 2, 0, 0)]
    assert list(map(tuple, np.argwhere(codes == INDEX_MISMATCH))) == [(0, 2, 3, 3)]
    pics = index_slices("DML_OPERATOR_MAX_POOLING2", codes)
    assert [(p.label, p.mismatches, p.ties) for p in pics] == [
        ("batch 0, channel 2", 1, 1), ("batch 0, channel 0", 0, 1), ("batch 0, channel 1", 0, 1)]
    assert INDEX_PALETTE.shape == (3, 3)


def test_minimal_and_empty_runs_render(tmp_path):
    """Only the fields the harness contract requires: the renderers must not need the optional ones."""
    from ep_testbed.reports import render_junit, render_summary_json

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "results.jsonl").write_text(json.dumps({"type": "run", "ep": "X"}) + "\n")
    assert "no failures in 0 cases" in render_run(empty).read_text()
    minimal = tmp_path / "minimal"
    minimal.mkdir()
    lines = [{"type": "run"}, {"type": "case", "id": "a", "outcome": "fail"},
             {"type": "case", "id": "b", "outcome": "something-new", "op": "DML_OPERATOR_X"}]
    (minimal / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    html = render_run(minimal).read_text()
    assert html.count('<article class="case') == 2 and "something-new" in html
    render_junit(minimal)
    assert json.loads(render_summary_json(minimal).read_text())["total"] == 2


class Visible(HTMLParser):
    """The text a reader sees: element text outside <script>, <style> and <title> (attributes,
    such as hover tooltips, are not text)."""

    def __init__(self):
        super().__init__()
        self.text, self._hidden = [], 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in ("script", "style", "title")

    def handle_endtag(self, tag):
        self._hidden -= tag in ("script", "style", "title")

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)


def visible_text(html: str) -> str:
    parser = Visible()
    parser.feed(html)
    return re.sub(r"\s+", " ", " ".join(parser.text))


def test_every_outcome_of_a_run_is_explained_in_visible_text(tmp_path):
    from ep_testbed.reports.rendering import OUTCOME_HELP

    pattern = ["pass", "known", "inexpressible", "not-on-ep", "emulation-gap", "fail"]
    html = render_run(synthetic_run.write_run(tmp_path / "r", 24, pattern=pattern)).read_text()
    text = visible_text(html)
    for outcome in pattern:
        assert OUTCOME_HELP[outcome] in text, outcome
    assert OUTCOME_HELP["crash"] not in text  # only the outcomes the run has: the header stays short


def test_a_run_with_no_failures_shows_no_failures_by_where_they_occur(tmp_path):
    """Known divergences re-checked on a second EP carry a scope label; with nothing failing the
    run there is no failure to place (a DirectML run with 72 known cases and no failure showed
    the section anyway)."""
    def labelled(outcomes):
        run = synthetic_run.write_run(tmp_path / "-".join(outcomes), 12, pattern=outcomes)
        path = run / "results.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for line in lines:
            if line.get("outcome") in ("known", "fail"):
                line["scope"] = "shared with CPUExecutionProvider"
        lines[0]["also_on"] = "CPUExecutionProvider"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return visible_text(render_run(run).read_text())

    assert "Failures by where they occur" not in labelled(["pass", "known"])
    assert "Failures by where they occur" in labelled(["pass", "known", "fail"])
