"""Measure report pages in headless Chromium: horizontal overflow per window width and the WCAG
contrast of every outcome chip, badge and verdict (test helper and tool).

``python tests/reports/layout_check.py PAGE.html...`` prints, per page and width, how many CSS
pixels the page is wider than the window and which ``.scroll`` boxes clip their content, then the
lowest contrast ratio seen per chip label. tests/reports/test_reports_browser.py asserts the same
figures (0 px, nothing clipped, every ratio >= 4.5).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from chromium_cdp import Browser, find_chromium

WIDTHS = (1024, 1400, 1920)
#: WCAG 2 contrast ratio of an element's text on its own background, from computed colours.
CONTRAST_JS = """(sel) => Array.from(document.querySelectorAll(sel)).map(el => {
  const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const v = c.map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
                     return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const cs = getComputedStyle(el), a = lum(rgb(cs.color)), b = lum(rgb(cs.backgroundColor));
  return [el.textContent.trim(), (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
})"""
#: CSS pixels the page is wider than the window, and the .scroll boxes whose content is clipped.
OVERFLOW_JS = """(() => {
  const de = document.documentElement;
  const clipped = Array.from(document.querySelectorAll('.scroll')).filter(s => s.offsetParent !== null &&
    s.scrollWidth > s.clientWidth + 1).map(s => (s.closest('section') || {}).id + ': ' + s.scrollWidth + ' > ' + s.clientWidth);
  return {page: de.scrollWidth - de.clientWidth, clipped};
})()"""


def main(pages: list[str]) -> int:
    """Print the figures of ``pages``; 1 when any page overflows or any ratio is below 4.5."""
    lowest: dict[str, float] = {}
    bad = False
    with Browser(find_chromium()) as b:
        for page in pages:
            uri = Path(page).resolve().as_uri()
            for width in WIDTHS:
                b.resize(width)
                b.open(uri)
                found = b.evaluate(OVERFLOW_JS)
                bad |= bool(found["page"] or found["clipped"])
                print(f"{page} at {width} px: {found['page']} px wider than the window; clipped: {found['clipped']}")
            b.evaluate("document.getElementById('f-more') && document.getElementById('f-more').click()")
            for text, ratio in b.evaluate(f"({CONTRAST_JS})('.chip, .badge, .verdict')"):
                label = re.sub(r"^\d+\s*", "", text)[:40]
                lowest[label] = min(ratio, lowest.get(label, 99.0))
    for label, ratio in sorted(lowest.items(), key=lambda kv: kv[1]):
        print(f"contrast {ratio:5.2f}:1  {label}")
        bad |= ratio < 4.5
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
