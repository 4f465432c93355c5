"""``render_model_report``: one self-contained ``report.html`` for a ``model run`` folder.

Reads ``OUT/model_result.json`` (written by ``ep-testbed model run``) and, for diverging nodes,
the ``nodes/*.npz`` files it points at (loaded with ``allow_pickle=False``); runs nothing.
Shows: a verdict and the first divergent node, the model and runtime facts, the outputs
compared with the reference EP (and the baseline, if any), placement counts by op type and
provider, and the per-node attribution table (every RoiAlign / MaxRoiPool / MaxPool node, its
provider, the DML desc it was read as, its flags and errors), with |EP - reference| heatmaps of
diverging nodes. Styling reuses ``report.css``; escaping is Jinja2's autoescape
(``reports.rendering.environment``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ep_testbed.harness.untrusted_files import FileRefused, inside, read_arrays, read_json, write_output

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
}
STATUS_HELP = {
    "match": "the EP's output for this node equals the DirectML reference run on the node's own EP inputs",
    "tie-only": "matches; some MaxPool indices differ only where the window holds equal maxima",
    "diverges": "the EP's output for this node differs from the DirectML reference beyond tolerance",
    "not-attributable": "the node has no DML desc in this reading (the message says why)",
    "error": "the reference raised, or an input of the node could not be captured",
    "pass": "matches the reference EP within tolerance",
    "fail": "differs from the reference EP beyond tolerance",
    "regression": "differs from the stored baseline beyond tolerance",
}


def load_result(out_dir: str | Path) -> dict[str, Any]:
    """The ``model_result.json`` of a model run folder."""
    return read_json(Path(out_dir) / RESULT_FILE, "model result", nonfinite=True)


def _pictures(out_dir: Path, row: dict[str, Any]) -> list[images.SlicePictures]:
    """Heatmaps of a diverging node's arrays (a regular file inside the run folder), or none."""
    relative = row.get("arrays")
    if not relative:
        return []
    try:  # only regular files inside the run folder
        data = read_arrays(inside(out_dir, relative, "node arrays"), "node arrays")
        expected, actual = data["expected"], data["actual"]
    except (FileRefused, KeyError):
        return []
    return images.worst_slices(row.get("desc_type") or row["op_type"], expected, actual, SLICES_PER_NODE)


def render_model_report(out_dir: str | Path, *, out: str | Path | None = None) -> Path:
    """Write ``report.html`` for the model run in ``out_dir``; return its path."""
    folder = Path(out_dir)
    result = load_result(folder)
    rows = result["attribution"]["nodes"]
    pictures = {}
    for row in [r for r in rows if r.get("status") == "diverges"][:NODES_WITH_PICTURES]:
        pictures[row["node"]] = _pictures(folder, row)
    providers = sorted({p for by in result["placement"]["by_op"].values() for p in by})
    html = environment().get_template("model_report.html.j2").render(
        r=result, rows=rows, pictures=pictures, providers=providers, first=result["attribution"]["first_divergent"],
        status_colours=STATUS_COLOURS, status_help=STATUS_HELP, error_legend=images.legend_uri(images.ERROR_MAP),
        value_legend=images.legend_uri(images.VALUE_MAP))
    path = Path(out) if out else folder / REPORT_FILE
    write_output(path, html)
    return path
