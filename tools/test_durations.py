"""Write tests/durations.json (seconds per test module) from a JUnit XML of a whole-suite run.

    python -m pytest -q -n auto --dist loadscope --junitxml=/tmp/suite.xml
    python tools/test_durations.py /tmp/suite.xml          # rewrites tests/durations.json

tests/conftest.py hands the longest modules to the test processes first, so that no long
module starts last while the other process idles (pytest-xdist's ``loadscope`` keeps a module
in one process and, by default, queues the modules with the most tests first, whatever they
cost). The figures only order the work: a stale or missing figure costs wall time, never a
result. Refresh them when a module's cost changes a lot (a module missing from the file, a new
one, starts before all the listed ones). Exit code: 0 written, 2 the XML cannot be read.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / "tests" / "durations.json"


def module_of(classname: str) -> str:
    """``tests/a/test_b.py`` for a JUnit ``classname`` such as ``tests.a.test_b`` or
    ``tests.a.test_b.TestClass`` (the first dotted part that names a test module ends it)."""
    parts = classname.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            return "/".join(parts[: index + 1]) + ".py"
    return "/".join(parts) + ".py"


def module_seconds(junit: Path) -> dict[str, float]:
    """Seconds per test module (setup, call and teardown of each of its tests), longest first."""
    totals: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if not case.get("classname"):  # a collection error's entry names no module
            continue
        module = module_of(case.get("classname", ""))
        totals[module] = totals.get(module, 0.0) + float(case.get("time") or 0.0)
    return {m: round(s, 1) for m, s in sorted(totals.items(), key=lambda item: (-item[1], item[0]))}


def main(argv: list[str]) -> int:
    """Read the JUnit XML named by ``argv[0]``; write tests/durations.json."""
    if len(argv) != 1:
        print("usage: python tools/test_durations.py JUNIT_XML", file=sys.stderr)
        return 2
    try:
        seconds = module_seconds(Path(argv[0]))
    except (OSError, ET.ParseError, ValueError) as exc:
        print(f"error: {argv[0]}: cannot read it as JUnit XML ({exc}); pass the file pytest's "
              "--junitxml wrote for a whole-suite run", file=sys.stderr)
        return 2
    DURATIONS.write_text(json.dumps(seconds, indent=1) + "\n")
    print(f"{len(seconds)} modules, {sum(seconds.values()):.0f} s in all -> {DURATIONS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
