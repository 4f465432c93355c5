"""``render_model_report``: one self-contained ``report.html`` for a ``model run`` folder.

Reads ``OUT/model_result.json`` (written by ``ep-testbed model run``) and, for diverging nodes,
the ``nodes/*.npz`` files it points at (loaded with ``allow_pickle=False``); runs nothing.
Shows: a verdict (the operators under test, then output drift) and the first divergent node, where
output drift against the reference EP starts (node, op type, statistics, how it was searched,
what the outputs became), the model and runtime facts, the outputs
compared with the reference EP (and the baseline, if any), placement counts by op type and
provider, and the per-node attribution table (every node of an attributed op type, its
provider, the DML desc it was read as, its flags and errors), with |EP - reference| heatmaps of
diverging nodes. Styling reuses ``report.css``; escaping is Jinja2's autoescape
(``reports.rendering.environment``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..harness.core import emulation
from ..harness.core.model_statuses import FAILING_VERDICTS, NODE_STATUSES
from ..harness.core.tolerances import Tolerances
from ..harness.core.untrusted_files import FileRefused, inside, read_arrays, read_json, write_output
from . import images
from .rendering import environment

RESULT_FILE = "model_result.json"
REPORT_FILE = "report.html"
#: Heatmap slices drawn per diverging node, and diverging nodes drawn at most.
SLICES_PER_NODE = 4
NODES_WITH_PICTURES = 4

#: Badge colours of the statuses this report adds to the run outcomes' palette.
STATUS_COLOURS = {
    "match": "#2e9d4f", "diverges": "#d62f2f", "not-attributable": "#b8b8b8", "regression": "#d62f2f",
    "explained": "#2e7d6b", "flagged": "#8a6d00", "not-attributed": "#6b6b6b", "drift": "#f0b429",
}
STATUS_HELP = {
    **NODE_STATUSES,
    "pass": "matches the reference EP within tolerance",
    "fail": "differs from the reference EP beyond tolerance",
    "regression": "differs from the stored baseline beyond tolerance",
    "drift": "differs from the reference EP beyond tolerance; --drift-tol decides whether that fails the run "
             "(the 'Output drift' section says where it starts)",
}


#: The arrays ``model run`` saves beside model_result.json, linked from the report.
SAVED_FILES = ("inputs.npz", "outputs.npz", "reference_outputs.npz")


def model_verdict(result: dict[str, Any]) -> tuple[str, str]:
    """(colour, text) of the report's verdict badge, one statement with the first-divergent
    banner, read from the result's facts (statuses, outputs, baseline, drift), operators first:
    red when the run failed (the EP did not run the model, outputs differ and the drift policy
    fails on that, a baseline regression, a node diverges unexplained); amber when it passed while
    the outputs drift from the reference EP's (``--drift-tol report``: the badge says where the
    drift starts) or a node diverges in a result that did not fail on it; green when nothing
    differs."""
    ep = str(result.get("ep", {}).get("provider", "?")).replace("ExecutionProvider", "")
    exit_code = 1 if result.get("verdict") in FAILING_VERDICTS else 0
    outputs_fail = any(o.get("outcome") == "fail" for o in result.get("outputs", []))
    baseline = result.get("baseline") or {}
    diverging = [r for r in result.get("attribution", {}).get("nodes", []) if r.get("status") == "diverges"]
    drift = result.get("drift") or {}
    where = f"; {drift['statement']}" if drift.get("outputs_differ") and drift.get("statement") else ""
    if result.get("ep_failure"):
        if not exit_code:  # the emulated device failed, or the EP declines nodes: not the EP's result
            return "amber", f"{result.get('verdict')}: the model did not run whole on {ep}, not a result of the EP " \
                            f"(exit {exit_code}); its attributed nodes were judged alone"
        return "red", f"the model did not run on {ep} (exit {exit_code})"
    if outputs_fail and exit_code and not (diverging or baseline.get("outcome") == "regression"):
        return "red", f"outputs differ on {ep}{where} (exit {exit_code})"
    if outputs_fail and not exit_code and not diverging:
        return "amber", f"operators pass{where or f'; outputs differ on {ep}'} (exit 0: --drift-tol report)"
    return _operators_verdict(ep, exit_code, outputs_fail, baseline, diverging, where)


def _operators_verdict(ep: str, exit_code: int, outputs_fail: bool, baseline: dict[str, Any],
                       diverging: list[dict[str, Any]], where: str) -> tuple[str, str]:
    """The badge when output drift alone does not decide it (``model_verdict``)."""
    if outputs_fail:
        return "red", f"outputs differ on {ep}{where} (exit {exit_code})"
    if baseline.get("outcome") == "regression":
        return "red", f"regression vs the baseline (exit {exit_code})"
    if diverging and exit_code:
        return "red", f"outputs match on {ep}, but {len(diverging)} node(s) diverge from the DML reference with no " \
                      f"flag to explain it (exit {exit_code})"
    if exit_code:
        return "red", f"failed on {ep} (exit {exit_code})"
    if diverging:
        return "amber", (f"outputs match on {ep}, but {len(diverging)} node(s) diverge from the DML reference "
                         f"(exit {exit_code}: the exit code follows the model's outputs)")
    return "green", f"outputs match on {ep}, every attributed node matches (exit {exit_code})"


def load_result(out_dir: str | Path) -> dict[str, Any]:
    """The ``model_result.json`` of a model run folder."""
    return read_json(Path(out_dir) / RESULT_FILE, "model result", nonfinite=True)


def inside_link(out_dir: Path, relative: Any) -> str | None:
    """``relative`` as a link from the report when it names a regular file inside ``out_dir`` (a
    result file is data: no absolute path, no ``..`` or link out of the folder), else None."""
    try:
        if not inside(out_dir, relative, "link").is_file():
            return None
    except FileRefused:
        return None
    return Path(relative).as_posix()


def _tolerances(result: dict[str, Any]) -> Tolerances:
    """The tolerances the model run judged by (its result's table over the defaults)."""
    try:
        return Tolerances.from_json(result.get("tolerances") or {})
    except (TypeError, ValueError, AttributeError):
        return Tolerances.defaults()


def _pictures(out_dir: Path, row: dict[str, Any], tolerances: Tolerances) -> list[images.SlicePictures]:
    """Heatmaps of a diverging node's saved arrays (EP vs the DML reference), in units of the
    tolerance of its output dtype; none when the file is missing, outside the run folder or
    unreadable (read through ``untrusted_files``: regular files, capped, no pickles)."""
    relative = inside_link(out_dir, row.get("arrays"))
    if relative is None:
        return []
    try:
        data = read_arrays(inside(out_dir, relative, "node arrays"), "node arrays")
        expected, actual = data["expected"], data["actual"]
    except (FileRefused, KeyError):
        return []
    return images.worst_slices(row.get("desc_type") or row["op_type"], expected, actual, SLICES_PER_NODE,
                               tolerance=tolerances.for_dtype(expected.dtype.name.upper()), hover=False)


def render_model_report(out_dir: str | Path, *, out: str | Path | None = None) -> Path:
    """Write ``report.html`` for the model run in ``out_dir``; return its path."""
    folder = Path(out_dir)
    result = load_result(folder)
    rows = result["attribution"]["nodes"]
    pictures = {}
    tolerances = _tolerances(result)
    drawn = sorted((r for r in rows if r.get("arrays")), key=lambda r: r.get("status") != "diverges")
    for row in drawn[:NODES_WITH_PICTURES]:
        pictures[row["node"]] = _pictures(folder, row, tolerances)
    providers = sorted({p for by in result["placement"]["by_op"].values() for p in by})
    share_bar, share_ticks = images.share_legend()
    html = environment().get_template("model_report.html.j2").render(
        r=result, rows=rows, pictures=pictures, providers=providers, first=result["attribution"]["first_divergent"],
        status_colours=STATUS_COLOURS, status_help=STATUS_HELP, share_bar=share_bar, share_ticks=share_ticks,
        value_legend=images.legend_uri(images.VALUE_MAP), verdict=model_verdict(result),
        emulated=emulation.record(result), ort_versions=emulation.ort_versions(result),
        NOT_HARDWARE=emulation.NOT_HARDWARE,
        links={row["node"]: inside_link(folder, row.get("arrays")) for row in rows},
        saved=[(name, inside_link(folder, name)) for name in SAVED_FILES])
    path = Path(out) if out else folder / REPORT_FILE
    write_output(path, html)
    return path
