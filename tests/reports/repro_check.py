"""Download every repro bundle of a report.html and run it, as a user would (test helper and tool).

``python tests/reports/repro_check.py RUN_DIR [--python PY]`` extracts each case section's inline
bundle into a temporary folder, runs ``PY repro.py`` there (default: this interpreter; give one
with only numpy and onnxruntime to prove the bundles need nothing else) and counts the bundles
in repro.py's three classes: exit 0 pass, exit 1 failure reproduced, exit 2 could not judge
(any other status, or a run past the time limit, counts there too). It prints every bundle that
could not judge, with the line it gave, and every judged bundle that disagrees with the run (a
failing outcome must exit 1, a passing one 0; the summary must be the run's message, or begin it
where the run appended a note the bundle cannot know, such as an expectation whose cause cannot
show or a carrier node the EP needed, unless ``--exit-codes-only``: another onnxruntime may word
an error or compute a case differently while still failing it).

Exit 0 when every bundle was judged and agrees with the run; 1 when a judged bundle disagrees;
2 when none disagrees but some could not judge, or RUN_DIR has no readable report.html; 4 when
the report holds no bundle.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

FAILED = ("fail", "crash", "timeout", "error", "known")
PASSED = ("pass", "tie-only", "fixed")
ARTICLE = re.compile(r'<article class="case o-([a-z-]+)" id="c\d+">.*?<code class="cid">(.*?)</code>(.*?)</article>', re.S)
BUNDLE = re.compile(r'href="data:application/zip;base64,([^"]+)"')
#: repro.py's exit statuses and what each means; anything else (or no status) is no verdict.
CLASSES = {0: "pass", 1: "failure reproduced", 2: "could not judge"}
TIMEOUT_S = 300


@dataclass
class Ran:
    case_id: str
    outcome: str
    code: int | None  # None: repro.py ran past TIMEOUT_S
    verdict: str
    stdout: str
    stderr: str

    @property
    def judged(self) -> bool:
        """repro.py gave a verdict: exit 0 (pass) or 1 (failure reproduced)."""
        return self.code in (0, 1)

    @property
    def category(self) -> str:
        """The class of its exit status (``CLASSES``); anything else could not judge."""
        return CLASSES.get(self.code, CLASSES[2]) if self.code is not None else CLASSES[2]

    @property
    def agrees(self) -> bool:
        """Exit 1 for a failing outcome, 0 for a passing one (a bundle that could not judge never agrees)."""
        return (self.code == 1) if self.outcome in FAILED else (self.code == 0)

    @property
    def reason(self) -> str:
        """What a bundle that could not judge said (its last stderr line), or why it has no status."""
        if self.code is None:
            return f"ran past {TIMEOUT_S} s"
        return (self.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]


def bundles(report: Path) -> list[tuple[str, str, bytes]]:
    """(case id, outcome, zip bytes) of every case section with an inline bundle."""
    out = []
    for outcome, cid, body in ARTICLE.findall(report.read_text(encoding="utf-8")):
        found = BUNDLE.search(body)
        if found:
            out.append((html.unescape(cid), outcome, base64.b64decode(found.group(1))))
    return out


def run_bundle(case_id: str, outcome: str, data: bytes, python: str, folder: Path) -> Ran:
    """Extract one bundle into ``folder`` and run its repro.py with ``python``."""
    zipfile.ZipFile(io.BytesIO(data)).extractall(folder)
    try:
        done = subprocess.run([python, "repro.py"], cwd=folder, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return Ran(case_id, outcome, None, "", _text(exc.stdout), _text(exc.stderr))
    first = done.stdout.splitlines()[0] if done.stdout else ""
    return Ran(case_id, outcome, done.returncode, first, done.stdout, done.stderr)


def _text(output: bytes | str | None) -> str:
    """What a timed-out child printed, as text."""
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def run_all(run_dir: Path, python: str = sys.executable, workers: int = 2) -> list[Ran]:
    """Run every bundle of ``run_dir/report.html`` (``workers`` at a time)."""
    found = bundles(Path(run_dir) / "report.html")
    with tempfile.TemporaryDirectory(prefix="repro-check-") as tmp, ThreadPoolExecutor(workers) as pool:
        jobs = [pool.submit(run_bundle, cid, outcome, data, python, Path(tmp) / f"b{i}")
                for i, (cid, outcome, data) in enumerate(found)]
        return [j.result() for j in jobs]


def messages(run_dir: Path) -> dict[str, str]:
    """Case id -> the run's message (what the report shows as the case's verdict text)."""
    lines = (json.loads(x) for x in (Path(run_dir) / "results.jsonl").read_text(encoding="utf-8").splitlines() if x)
    return {x["id"]: x.get("message") or "" for x in lines if x.get("type") == "case"}


def _same_summary(ran: Ran, said: dict[str, str]) -> bool:
    """The bundle's summary is the run's message, or the run's message is it plus a "; Note: ..."."""
    summary, message = ran.verdict.split(": ", 1)[-1], said.get(ran.case_id) or ""
    return message == summary or message.startswith(summary + "; Note: ")


def main(argv: list[str] | None = None) -> int:
    """Print the three classes, every bundle that could not judge and every disagreement; the
    exit status of the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--python", default=sys.executable, help="interpreter with numpy and onnxruntime")
    p.add_argument("--exit-codes-only", action="store_true", help="compare exit codes, not the summary text")
    args = p.parse_args(argv)
    python = str(Path(args.python).absolute()) if "/" in args.python else args.python
    try:
        ran = run_all(args.run_dir, python)
        said = messages(args.run_dir)
    except (OSError, ValueError) as exc:
        print(f"repro_check: cannot read the run in {args.run_dir}: {exc}", file=sys.stderr)
        return 2
    if not ran:
        print(f"repro_check: {args.run_dir / 'report.html'} holds no repro bundle")
        return 4
    for name in CLASSES.values():
        of = [r for r in ran if r.category == name]
        outcomes = Counter(r.outcome for r in of)
        print(f"{name:20} {len(of):4}" + (f"  (run outcomes: {', '.join(f'{o} {n}' for o, n in sorted(outcomes.items()))})"
                                         if of else ""))
    for r in ran:
        if not r.judged:
            print(f"COULD NOT JUDGE {r.case_id} ({r.outcome}, exit {r.code}): {r.reason}")
    bad = [r for r in ran if r.judged and (not r.agrees or (not args.exit_codes_only and not _same_summary(r, said)))]
    for r in bad:
        print(f"DISAGREES {r.case_id} ({r.outcome}, exit {r.code}): {r.verdict}\n{r.stderr[-500:]}")
    unjudged = sum(not r.judged for r in ran)
    print(f"{len(ran)} bundles: {len(ran) - unjudged - len(bad)} agree with the run, {len(bad)} disagree, "
          f"{unjudged} could not judge")
    return 1 if bad else 2 if unjudged else 0


if __name__ == "__main__":
    sys.exit(main())
