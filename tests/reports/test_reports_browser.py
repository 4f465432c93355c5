"""report.html in a real browser (headless Chromium over the DevTools protocol).

Checks that the page loads without console errors, that the case table's filter, sort and matrix
links work, that the heatmaps decode, and that hostile strings stay text.  Screenshots go to the
run folder (report-top.png, report-case.png) for a person to look at.
"""

import re
import time
import urllib.parse
from pathlib import Path

import pytest
import synthetic_run
from chromium_cdp import Browser, browser_unavailable_reason, find_chromium
from layout_check import CONTRAST_JS, OVERFLOW_JS, WIDTHS

from ep_testbed.reports import render_run

REASON = browser_unavailable_reason()
#: Rows that failed on the EP's answer or got none (harness.core.results.WRONG and known).
FAILED_ROWS = ("fail", "crash", "timeout", "error", "known")
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))


@pytest.fixture(scope="module")
def browser():
    with Browser(find_chromium()) as b:
        yield b


def rows(b: Browser) -> list[list[str]]:
    return b.evaluate("""Array.from(document.querySelectorAll('#case-table tbody tr')).map(
        tr => Array.from(tr.children).map(td => td.textContent))""")


def until(b: Browser, condition: str, what: str, limit: float = 120.0) -> None:
    """Wait for the page state ``condition`` (a JavaScript expression) the next step reads: the
    search box is debounced and a link's filter arrives with a hashchange event, so how long
    either takes depends on the machine's load. ``limit`` only stops a page that never gets there."""
    deadline = time.monotonic() + limit
    while not b.evaluate(f"!!({condition})"):
        assert time.monotonic() < deadline, f"{what}: not so after {limit:g} s ({condition})"
        time.sleep(0.02)


def test_report_loads_filters_sorts_and_shows_pictures(browser, tmp_path):
    run_dir = synthetic_run.write_run(tmp_path / "run", 120)
    report = render_run(run_dir)
    b = browser
    b.open(report.as_uri())
    assert b.problems() == []
    assert len(rows(b)) == 120

    # pictures: every heatmap decoded to the size of its slice
    pics = b.evaluate("Array.from(document.querySelectorAll('img.heat')).map(i => [i.complete, i.naturalWidth])")
    assert len(pics) >= 9 and all(ok and w > 0 for ok, w in pics)

    # search box
    b.evaluate("""(() => { const q = document.getElementById('f-q'); q.value = 'max_pooling2';
                  q.dispatchEvent(new Event('input')); })()""")
    until(b, "location.hash.includes('q=max_pooling2')", "the search is applied (its debounced handler writes the URL)")
    shown = rows(b)
    assert 0 < len(shown) < 120 and all("max_pooling2" in r[1] for r in shown)
    assert b.evaluate("document.getElementById('f-count').textContent").startswith(f"showing {len(shown)} of")

    # outcome select, combined with the search
    b.evaluate("""(() => { const s = document.getElementById('f-outcome'); s.value = 'fail';
                  s.dispatchEvent(new Event('change')); })()""")
    shown = rows(b)
    assert len(shown) == 1 and shown[0][0] == "fail" and "max_pooling2" in shown[0][1]

    # reset, then sort by max abs error (descending first): every failed row (however it failed:
    # a number, "index", "NaN/inf", "crash"...) above every passing row, numbers descending
    b.evaluate("document.getElementById('f-reset').click()")
    assert len(rows(b)) == 120
    b.evaluate("document.querySelector('th[data-sort=max_abs]').click()")
    shown = rows(b)
    failed = [i for i, r in enumerate(shown) if r[0] in FAILED_ROWS]
    passing = [i for i, r in enumerate(shown) if r[0] in ("pass", "tie-only")]
    assert failed and passing and max(failed) < min(passing)
    assert all(shown[i][5] not in ("0", "—", "") for i in failed)  # a failed row never reads 0 or blank
    numbers = [float(shown[i][5]) for i in passing if shown[i][5] != "—"]
    assert numbers == sorted(numbers, reverse=True)

    # a matrix cell link filters the table to its op and dtype
    b.evaluate("document.querySelector('table.matrix a.cell').click()")
    until(b, "document.getElementById('f-op').value", "the matrix link's filter arrived (hashchange)")
    shown = rows(b)
    op = b.evaluate("document.getElementById('f-op').value")
    dtype = b.evaluate("document.getElementById('f-dtype').value")
    assert op and dtype and shown and all(r[2] == op and r[3] == dtype for r in shown)

    # a field cell link filters by that field's value
    b.evaluate("document.querySelector('#fields a.cell').click()")
    until(b, "!document.getElementById('f-tag').hidden", "the field link's filter arrived (hashchange)")
    assert not b.evaluate("document.getElementById('f-tag').hidden")
    assert 0 < len(rows(b)) < 120

    assert b.problems() == []
    b.evaluate("window.scrollTo(0, 0)")
    b.screenshot(run_dir / "report-top.png")
    b.evaluate("document.querySelector('article.case').scrollIntoView()")
    b.screenshot(run_dir / "report-case.png")
    assert (run_dir / "report-top.png").stat().st_size > 10_000
    assert (run_dir / "report-case.png").stat().st_size > 10_000


def test_hostile_strings_stay_text_in_the_browser(browser, tmp_path):
    report = render_run(synthetic_run.write_evil_run(tmp_path / "evil"))
    b = browser
    b.open(report.as_uri())
    assert b.evaluate("typeof window.__pwned") == "undefined"
    assert b.problems() == []  # no <img src=x> was created, so no failed load either
    ids = [r[1] for r in rows(b)]
    assert ids and all(synthetic_run.EVIL in i for i in ids)
    # the detail link of the first case still works and shows the id as text
    b.evaluate("document.querySelector('#case-table tbody a').click()")
    until(b, "document.querySelector('article.case:target')", "the case the link names is the target")
    assert synthetic_run.EVIL in b.evaluate("document.querySelector('article.case:target code.cid').textContent")
    b.screenshot(Path(report).parent / "report-evil.png")


# Layout, contrast and links, measured in the browser on a real CPU run with failures (zero
# tolerance for float32 makes every RoiAlign case a few ULP off fail) and on the synthetic run.

@pytest.fixture(scope="module")
def failing_cpu_run(tmp_path_factory):
    from ep_testbed.harness.cli import main

    out = tmp_path_factory.mktemp("cpu") / "run"
    assert main(["run", "--ep", "cpu", "--ops", "roi_align1,max_pooling2", "--tol", "fp32:atol=0,rtol=0,ulp=0", "--strict-tolerance",
                 "--no-expectations", "--out", str(out), "--jobs", "0", "--no-progress"]) == 1
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_no_horizontal_overflow_and_the_matrix_is_not_clipped(browser, failing_cpu_run, tmp_path, width):
    synthetic = render_run(synthetic_run.write_run(tmp_path / "syn", 120))
    for report in (failing_cpu_run / "report.html", synthetic):
        browser.resize(width)
        browser.open(report.as_uri())
        found = browser.evaluate(OVERFLOW_JS)
        assert found == {"page": 0, "clipped": []}, (report, width, found)
        matrix = browser.evaluate("(() => { const t = document.querySelector('table.matrix'); "
                                  "return [t.getBoundingClientRect().right, document.documentElement.clientWidth]; })()")
        assert matrix[0] <= matrix[1]
    browser.resize(1400)


def test_every_chip_and_badge_has_aa_contrast(browser, failing_cpu_run, tmp_path):
    """Each outcome chip (zero counts too) and badge: text contrast >= 4.5:1 (WCAG AA)."""
    pages = [failing_cpu_run / "report.html", render_run(synthetic_run.write_run(tmp_path / "syn", 120))]
    seen = {}
    for page in pages:
        browser.open(page.as_uri())
        browser.evaluate("document.getElementById('f-more').click()")  # every row's badge
        for text, ratio in browser.evaluate(f"({CONTRAST_JS})('.chip, .badge, .verdict')"):
            label = re.sub(r"^\d+\s*", "", text)
            seen[label] = min(ratio, seen.get(label, 99.0))
    from ep_testbed.harness.core.results import OUTCOMES
    assert set(OUTCOMES) <= set(seen)
    assert {k: round(v, 2) for k, v in seen.items() if v < 4.5} == {}


def test_filters_are_written_to_the_url_and_read_back(browser, failing_cpu_run):
    b = browser
    b.open((failing_cpu_run / "report.html").as_uri())
    b.evaluate("""(() => { const s = document.getElementById('f-outcome'); s.value = 'fail';
                  s.dispatchEvent(new Event('change')); const q = document.getElementById('f-q');
                  q.value = 'edge'; q.dispatchEvent(new Event('input')); })()""")
    until(b, "location.href.includes('q=edge')", "the search is applied (its debounced handler writes the URL)")
    url = b.evaluate("location.href")
    assert "#cases?" in url and "outcome=fail" in url and "q=edge" in url
    shown = rows(b)
    b.open("about:blank")
    b.open(url)  # the page applies its URL's filters before its load event
    assert rows(b) == shown and b.evaluate("document.getElementById('f-outcome').value") == "fail"
    # a link to one case by id (what diff.html uses) shows that case alone
    case_id = shown[0][1]
    b.open("about:blank")  # a new hash on the same page would be no page load
    b.open((failing_cpu_run / "report.html").as_uri() + "#cases?id=" + urllib.parse.quote(case_id, safe=""))
    assert [r[1] for r in rows(b)] == [case_id]
    assert b.problems() == []


def test_failed_rows_show_how_they_failed(browser, failing_cpu_run):
    b = browser
    b.open((failing_cpu_run / "report.html").as_uri())
    b.evaluate("document.getElementById('f-more').click()")
    failed = [r for r in rows(b) if r[0] in FAILED_ROWS]
    assert len(failed) >= 10
    for r in failed:  # outside tolerance, max abs, max rel, max ULP: never 0, never blank
        assert all(cell.strip() not in ("", "0", "—") for cell in r[4:8]), r
        if "worst" in r[-1]:
            assert re.search(r"expected \S+, got \S+", r[-1]), r[-1]  # the message keeps the worst element
    nan_row = next(r for r in failed if r[1] == "max_pooling2/edge-nan-inf")
    assert "NaN/inf" in nan_row[4] and nan_row[6] == nan_row[7] == "NaN/inf"


def test_heatmap_cells_show_their_values_on_hover(browser, failing_cpu_run):
    b = browser
    b.open((failing_cpu_run / "report.html").as_uri())
    tip = b.evaluate("""(() => { const fig = document.querySelector('figure.slice[data-cells]');
        const img = fig.querySelector('img[data-kind=s]'); const r = img.getBoundingClientRect();
        img.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + 1, clientY: r.top + 1}));
        const t = fig.querySelector('.tip'); return [t.hidden, t.textContent]; })()""")
    assert tip[0] is False and tip[1].startswith("row 0, col 0:") and "expected" in tip[1] and "actual" in tip[1]
    ticks = b.evaluate("document.querySelector('figure.slice .tx').textContent")
    assert ticks.startswith("0")
    assert b.problems() == []


def test_diff_page_filters_groups_and_links_both_reports(browser, tmp_path):
    from ep_testbed.reports import diff_runs

    a = synthetic_run.write_run(tmp_path / "a", 40, pattern=["pass"])
    b_dir = synthetic_run.write_run(tmp_path / "b", 40, pattern=["pass"])
    lines = (b_dir / "results.jsonl").read_text().splitlines()
    edited = [lines[0]] + [line.replace('"outcome": "pass"', '"outcome": "not-on-ep"') if i <= 30 else line
                           for i, line in enumerate(lines[1:], 1)]
    (b_dir / "results.jsonl").write_text("\n".join(edited) + "\n")
    render_run(a)
    render_run(b_dir)
    res = diff_runs(a, b_dir, tmp_path / "d")
    b = browser
    b.open(res.html_path.as_uri())
    assert b.problems() == []
    visible = "Array.from(document.querySelectorAll('tr.drow')).filter(r => !r.hidden && r.offsetParent !== null).length"
    assert b.evaluate(visible) == 30
    b.evaluate("""(() => { const q = document.getElementById('d-q'); q.value = 'roi_align1';
                  q.dispatchEvent(new Event('input')); })()""")
    until(b, "location.hash.includes('q=roi_align1')", "the diff's search is applied (its debounced handler writes the URL)")
    n = b.evaluate(visible)
    assert 0 < n < 30 and "q=roi_align1" in b.evaluate("location.hash")
    link = b.evaluate("document.querySelector('tr.drow a.runlink').href")
    b.open(link)  # the page applies its URL's filters before its load event
    assert len(rows(b)) == 1 and rows(b)[0][1] in link.replace("%2F", "/")


def test_failures_group_by_where_they_occur(browser, tmp_path):
    """Rows sort by the re-check label first ("only on" the EP under test, then "shared with"
    the second EP), and the Where filter keeps one label."""
    import json

    run_dir = synthetic_run.write_run(tmp_path / "run", 40)
    path = run_dir / "results.jsonl"
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    failing = [x for x in lines if x.get("type") == "case" and x["outcome"] in ("fail", "known")]
    for n, line in enumerate(failing):
        line["scope"] = "only on FakeExecutionProvider" if n % 2 else "shared with CPUExecutionProvider"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    b = browser
    b.open(render_run(run_dir).as_uri())
    assert b.problems() == []
    where = [r[9] for r in rows(b)]
    only = sum(1 for n in range(len(failing)) if n % 2)
    assert only and all(w.startswith("only on ") for w in where[:only])
    assert all(w.startswith("shared with ") for w in where[only:len(failing)])
    b.evaluate("""(() => { const s = document.getElementById('f-scope');
                  s.value = 'shared with CPUExecutionProvider'; s.dispatchEvent(new Event('change')); })()""")  # applied at once
    assert {r[9] for r in rows(b)} == {"shared with CPUExecutionProvider"}
    assert "scope=shared" in b.evaluate("location.hash")
