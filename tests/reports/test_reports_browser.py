"""report.html in a real browser (headless Chromium over the DevTools protocol).

Checks that the page loads without console errors, that the case table's filter, sort and matrix
links work, that the heatmaps decode, and that hostile strings stay text.  Screenshots go to the
run folder (report-top.png, report-case.png) for a person to look at.
"""

import time
from pathlib import Path

import pytest

import synthetic_run
from chromium_cdp import Browser, browser_unavailable_reason, find_chromium
from ep_testbed.reports import render_run

REASON = browser_unavailable_reason()
#: Rows that failed on the EP's answer or got none (harness.results.WRONG and known).
FAILED_ROWS = ("fail", "crash", "timeout", "error", "known")
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))


@pytest.fixture(scope="module")
def browser():
    with Browser(find_chromium()) as b:
        yield b


def rows(b: Browser) -> list[list[str]]:
    return b.evaluate("""Array.from(document.querySelectorAll('#case-table tbody tr')).map(
        tr => Array.from(tr.children).map(td => td.textContent))""")


def settle(b: Browser, seconds: float = 0.3) -> None:
    time.sleep(seconds)  # the search box is debounced by 120 ms


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
    settle(b)
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
    settle(b, 0.2)
    shown = rows(b)
    op = b.evaluate("document.getElementById('f-op').value")
    dtype = b.evaluate("document.getElementById('f-dtype').value")
    assert op and dtype and shown and all(r[2] == op and r[3] == dtype for r in shown)

    # a field cell link filters by that field's value
    b.evaluate("document.querySelector('#fields a.cell').click()")
    settle(b, 0.2)
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
    settle(b, 0.2)
    assert synthetic_run.EVIL in b.evaluate("document.querySelector('article.case:target code.cid').textContent")
    b.screenshot(Path(report).parent / "report-evil.png")
