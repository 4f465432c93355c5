"""Reports: results.jsonl -> report.html, junit.xml, summary.json, and run-to-run diffs.

Reads a run folder (``results.jsonl`` and the case artifact folders it points at) and nothing
else; never runs a model.  Public API (the CLI calls these):

    render_run(run_dir, *, out=None, max_pictures=60, max_details=500) -> Path   # report.html
    render_junit(run_dir, *, out=None) -> Path                                   # junit.xml
    render_summary_json(run_dir, *, out=None) -> Path                            # summary.json
    render_all(run_dir) -> dict[str, Path]                                       # all three

Each reads results.jsonl keeping a small view of every case line (``load_run_summary``) and
reads a whole line again only where it shows one (``Run.whole``): a case section, a row of
the case table, a JUnit test case, one at a time; so a results file far larger than memory
still renders. ``run=`` passes a folder already read.
    diff_runs(run_a, run_b, out_dir, growth_factor=2.0, abs_floor=1e-6) -> DiffResult

and, for CI, ``reports.github``: ``job_summary(run_dir)`` (Markdown) and ``annotations(run_dir)``
(GitHub workflow commands), which return text and write nothing.
"""

from __future__ import annotations

if __name__ == "reports":  # imported by its folder name from the repository root, not as installed
    raise ImportError("ep-testbed's modules are imported as ep_testbed.reports (e.g. `from ep_testbed.reports import render_all`): "
                      "`import reports` would load a second copy whose classes differ from the installed ones. "
                      "Install the project (`python -m pip install -e .`) and import ep_testbed.reports.")

from pathlib import Path

from .diff import DiffResult, diff_runs
from .html_report import render_run
from .junit import render_junit
from .results import ResultsChanged, ResultsError, load_run, load_run_summary, read_stable
from .summary_json import render_summary_json


def render_all(run_dir: str | Path) -> dict[str, Path]:
    """Write report.html, junit.xml and summary.json into ``run_dir``; return their paths. The
    results file is read once, keeping each case's summary view (``load_run_summary``), and read
    again where a second pass finds it changed (``read_stable``)."""
    def read_and_render() -> dict[str, Path]:
        run = load_run_summary(run_dir)
        return {
            "html": render_run(run_dir, run=run),
            "junit": render_junit(run_dir, run=run),
            "summary": render_summary_json(run_dir, run=run),
        }

    # a results.jsonl that changes between the two passes is read again (all three files from
    # one read of it), or refused: never a report.html that disagrees with summary.json
    return read_stable(read_and_render)


__all__ = ["DiffResult", "ResultsChanged", "ResultsError", "diff_runs", "load_run", "load_run_summary", "render_all", "render_junit", "render_run",
           "render_summary_json"]
