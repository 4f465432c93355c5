"""The statuses of a per-node attribution row (``model_result.json``: ``attribution.nodes[].status``),
each named once with what it means, and which of them fail a model run's verdict.

It imports nothing: the model report reads it for its help texts, and reports never load
onnxruntime.
"""

from __future__ import annotations

#: Every status, and what it means (the model report's help text).
NODE_STATUSES = {
    "match": "the EP's output for this node equals the DirectML reference run on the node's own EP inputs",
    "tie-only": "matches; some indices (of an index output) differ only where the window holds equal maxima",
    "explained": "differs from the DirectML reference only in rows (ROIs) where the ONNX node means something "
                 "else than the page for these inputs (a flag says what), and there equals what the node means",
    "flagged": "differs from the DirectML reference where the node's flags say its ONNX meaning differs from "
               "the page; the reference computes only the page's meaning, so this is predicted, not verified "
               "(--reading dml-ep judges the node as ORT's DirectML EP builds it)",
    "diverges": "the EP's output for this node differs from the DirectML reference beyond tolerance, and no flag "
                "explains it",
    "not-attributable": "the node has no DML desc in this reading (the message says why)",
    "not-attributed": "the node sits inside a Loop/If/Scan body: its tensors cannot be captured, so it is not "
                      "judged on its own (its effect shows only in the model's outputs)",
    "error": "the reference raised, or an input of the node could not be captured",
}
#: Judged, and the EP computes the node as the page says (or, where a flag says the node means
#: something else for these inputs, as the node means).
AGREES = ("match", "tie-only", "explained")
#: Judged, and the difference is predicted by a flag but not verified: reported, does not fail.
PREDICTED = ("flagged",)
#: Judged, and the EP is wrong on this node: fails the model run's verdict.
DIVERGING = ("diverges",)
#: Not judged; the message says why.
NOT_JUDGED = ("not-attributable", "not-attributed", "error")

__all__ = ["AGREES", "DIVERGING", "NODE_STATUSES", "NOT_JUDGED", "PREDICTED"]
