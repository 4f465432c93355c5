"""``render_summary_json``: ``summary.json``, the machine-readable digest of a run.

Keys: ``run`` (the header line as written), ``emulated_device`` (the label of a run on an emulated
device, ``harness.core.emulation``; null on hardware), ``end`` (the end line or null), ``interrupted``,
``total``, ``counts`` (every outcome, zeros included, in ``harness.core.results.REPORT_ORDER``), ``bad``
(the number of cases whose outcome fails a run: ``harness.core.results.FAILING``, fail, crash,
timeout, error and fixed, the same set as the exit code and junit.xml), ``by_op_dtype``
({op: {dtype: {outcome: n}}}), ``failing`` (those cases, most severe first, with outcome,
max_abs, ``outside``: how they failed, as the report's "outside tolerance" column says it,
``scope``: where they fail when re-checked on a second EP, and ``cause``: the attributed one),
``by_scope`` ({re-check label: {outcome: n}}, labels "only on" first), ``unreadable_lines``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..harness.core import emulation
from ..harness.core.results import FAILING, REPORT_ORDER
from ..harness.core.untrusted_files import write_output
from . import figures
from .results import Run, load_run_summary

SUMMARY_FILE = "summary.json"


def _finite(v: Any) -> Any:
    """The value with NaN/Inf floats (which JSON cannot hold) replaced by None, recursively."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v


def _by_scope(cases: list) -> dict[str, dict[str, int]]:
    """``{scope label: {outcome: n}}`` of the re-checked cases (``figures.scope_rank`` order)."""
    by: dict[str, dict[str, int]] = {}
    for c in sorted((c for c in cases if c.scope), key=lambda c: (figures.scope_rank(c), c.scope)):
        cell = by.setdefault(c.scope, {})
        cell[c.outcome] = cell.get(c.outcome, 0) + 1
    return by


def render_summary_json(run_dir: str | Path, *, out: str | Path | None = None, run: Run | None = None) -> Path:
    """Write ``summary.json`` for ``run_dir`` (default into ``run_dir``) and return its path;
    ``run``: the folder already read (by default its summary view: every key read here is in it)."""
    run = run if run is not None else load_run_summary(run_dir)
    counts = run.counts
    by: dict[str, dict[str, dict[str, int]]] = {}
    for c in run.cases:
        cell = by.setdefault(c.op, {}).setdefault(c.dtype, {})
        cell[c.outcome] = cell.get(c.outcome, 0) + 1
    bad = [c for c in run.cases if c.outcome in FAILING]
    bad.sort(key=lambda c: (REPORT_ORDER.index(c.outcome), -(c.max_abs or 0.0), c.id))
    summary = {
        "run": run.header,
        "emulated_device": emulation.label(run.header),  # None on hardware (harness.core.emulation)
        "end": run.end,
        "interrupted": run.interrupted,
        "total": len(run.cases),
        "counts": {**{o: counts.get(o, 0) for o in REPORT_ORDER},
                   **{o: n for o, n in counts.items() if o not in REPORT_ORDER}},
        "bad": len(bad),
        "by_op_dtype": by,
        "failing": [{"id": c.id, "op": c.op, "dtype": c.dtype, "outcome": c.outcome,
                     "max_abs": _finite(c.max_abs), "outside": figures.failure_figure(c), "scope": c.scope or None,
                     "cause": (c.attribution or {}).get("cause")} for c in bad],
        "by_scope": _by_scope(run.cases),
        "unreadable_lines": run.unreadable_lines,
    }
    out_path = Path(out) if out is not None else Path(run_dir) / SUMMARY_FILE
    write_output(out_path, json.dumps(_finite(summary), indent=1, default=str, allow_nan=False) + "\n")
    return out_path
