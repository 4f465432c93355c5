"""The Jinja2 environment shared by report.html and diff.html: autoescaping on, small filters.

Everything that came from a results line, a desc, a model or an EP message reaches HTML only
through Jinja2's autoescape, or through ``script_json`` (JSON with ``<``, ``>``, ``&`` written as
``\\u003c`` etc., so no string can close the ``<script>`` element it sits in); the page's
JavaScript inserts such text with ``textContent`` only.
"""

from __future__ import annotations

import html
import json
import math
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

if TYPE_CHECKING:  # Jinja2 itself loads with the first environment: a command imports it only to render
    import jinja2

from ..harness.core.results import REPORT_ORDER, WRONG
from ..harness.core.terminal import safe

TEMPLATES = Path(__file__).parent / "templates"

#: Background colour per outcome of ``harness.core.results.OUTCOMES`` (also used by report.js through
#: CSS classes ``o-<outcome>``).
OUTCOME_COLOURS = {
    "pass": "#2e9d4f", "tie-only": "#7cc48d", "known": "#8a9bb0", "fixed": "#7b52c9",
    "fail": "#d62f2f", "crash": "#8b1010", "timeout": "#e07b12", "error": "#c2187a",
    "not-on-ep": "#e8b820", "inexpressible": "#b8b8b8", "emulation-gap": "#3f8f8f",
}
#: Text colours for outcome chips and badges: whichever of the two gives the higher WCAG
#: contrast on the outcome's colour (every outcome then reaches 4.5:1, WCAG AA for normal text;
#: tests/reports measure it in the browser).
TEXT_LIGHT, TEXT_DARK = "#ffffff", "#111111"


def relative_luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb`` (https://www.w3.org/TR/WCAG21/#dfn-relative-luminance)."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    hi, lo = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_colour(background: str) -> str:
    """The text colour (``TEXT_LIGHT`` or ``TEXT_DARK``) with the higher contrast on ``background``."""
    return max((TEXT_LIGHT, TEXT_DARK), key=lambda t: contrast_ratio(t, background))


def outcome_css(extra: dict[str, str] | None = None) -> Markup:
    """CSS custom properties per outcome (and ``extra`` statuses): ``.o-<name>`` and ``.w-<name>``
    get ``--oc`` (its colour) and ``--ot`` (its text colour); every page takes its palette here."""
    colours = {**OUTCOME_COLOURS, **(extra or {})}
    return Markup("".join(f".o-{name},.w-{name}{{--oc:{c};--ot:{text_colour(c)}}}" for name, c in colours.items()))


OUTCOME_HELP = {
    "pass": "ran on the EP and matched the reference within tolerance",
    "tie-only": "passed; some indices (of an index output) differ only where the window holds equal maxima",
    "known": "failed as an expectation file says it will (a known divergence, its cause and link in the case's "
             "section): reported, does not fail the run",
    "fixed": "an expectation says it fails, but it passed: update the expectation",
    "fail": "ran on the EP and differs from the reference beyond tolerance",
    "crash": "the worker process died while running the case",
    "timeout": "the case exceeded the per-case time limit",
    "error": "the harness or the reference raised; the message says what",
    "not-on-ep": "the EP under test declined the op node, so it never ran there: not tested (not a pass, not a "
                 "failure)",
    "inexpressible": "ONNX cannot express this DML desc (the mapper's flags say which field), so no EP ran it: not "
                     "tested (not a pass, not a failure)",
    "emulation-gap": "the emulated device (DirectML under Wine) could not run the EP's kernel, e.g. no float16 "
                     "or a shader it refused (its own log says so): not an EP result, not tested",
}


def format_number(value: Any) -> str:
    """Compact numbers for tables: 6 significant digits, em dash for missing."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Inf" if value > 0 else "-Inf"
        return f"{value:.6g}"
    return str(value)


#: Characters that start emphasis, code, a link, a table cell or strikethrough anywhere in a line
#: of Markdown (``<``, ``>`` and ``&`` are HTML-escaped first); ``md_text`` never starts a line.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_text(text: object, limit: int = 200) -> str:
    """``text`` as one line of inert Markdown (the CI job summary, findings): control characters
    made visible (``terminal.safe``, at most ``limit`` characters), HTML escaped, every Markdown
    special character backslash-escaped, so no case id or message can start a link, a table
    cell or a fence."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(safe(text, limit), quote=False))


def md_code(text: object, limit: int = 200) -> str:
    """``text`` as an inline Markdown code span (CommonMark): control characters made visible,
    delimited by one backtick more than its longest run of them (padded with spaces when it
    starts or ends with one), so nothing in it can close the span or be read as Markdown."""
    shown = safe(text, limit)
    longest = max((len(m) for m in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") or longest else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def md_fence(lines: list[str], language: str = "sh") -> list[str]:
    """``lines`` in a Markdown code fence longer than any run of backticks in them (so none can
    close it)."""
    longest = max((len(m) for line in lines for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", *lines, fence]


def script_json(value: Any) -> Markup:
    """JSON safe to place inside ``<script type="application/json">`` (cannot end the element)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    text = (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return Markup(text)


def safe_url(url: Any) -> str | None:
    """Only http(s) links from results lines become hrefs (no ``javascript:`` or ``data:``)."""
    if isinstance(url, str) and url.lower().startswith(("https://", "http://")):
        return url
    return None


def short_op(op: str) -> str:
    """``DML_OPERATOR_ROI_ALIGN1`` -> ``ROI_ALIGN1`` (any other text unchanged)."""
    return op.removeprefix("DML_OPERATOR_")


def read_static(name: str) -> Markup:
    """An inline asset (CSS or JS) shipped in reports/templates; trusted project code."""
    return Markup((TEMPLATES / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The one Jinja2 environment (cached): autoescaping, strict undefined, the filters and the
    outcome globals (colours, help, ``REPORT_ORDER``, ``WRONG``) every template uses."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its file name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = format_number
    env.filters["short_op"] = short_op
    env.filters["safe_url"] = safe_url
    env.globals["OUTCOME_COLOURS"] = OUTCOME_COLOURS
    env.globals["OUTCOME_HELP"] = OUTCOME_HELP
    env.globals["REPORT_ORDER"] = REPORT_ORDER
    env.globals["WRONG"] = WRONG
    env.globals["static"] = read_static
    env.globals["outcome_css"] = outcome_css
    return env


def warm_up(*templates: str) -> threading.Thread:
    """Load Jinja2 and compile ``templates`` in a background thread (started; join it before
    rendering, or not: a template it has not compiled yet is compiled when first rendered), so a
    command pays for them while its cases still run, not after."""
    def compile_all() -> None:
        """Compile each template into the environment's cache; one that fails is left to the
        rendering, which reports it where the command handles errors."""
        try:
            for name in templates:
                environment().get_template(name)
        except Exception:  # never a traceback from this thread: rendering compiles it again and says why
            pass

    thread = threading.Thread(target=compile_all, name="report templates", daemon=True)
    thread.start()
    return thread

