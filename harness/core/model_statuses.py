"""The statuses of a per-node attribution row (``model_result.json``: ``attribution.nodes[].status``),
each named once with what it means, and which of them fail a model run's verdict; and the
verdicts of a whole model run, with which of them fail it.

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

#: The verdict of a whole model run (``model_result.json``: ``verdict``), each with what it means;
#: the outcomes of ``ep-testbed run`` whose names they share mean the same there.
MODEL_VERDICTS = {
    "pass": "the operators under test agree with the DirectML reference, no baseline regression, drift within "
            "the --drift-tol policy",
    "fail": "a node diverges unexplained, a baseline regression, drift beyond --drift-tol fail or a budget, or the "
            "EP failed, crashed or timed out on the model",
    "emulation-gap": "the emulated device (DirectML under Wine) could not run one of the EP's kernels for the whole "
                     "model: not a result of the EP; its attributed nodes were judged alone, and none diverges",
    "not-on-ep": "the EP declines nodes of the model and --no-cpu-fallback keeps them off the CPU EP: nothing of the "
                 "whole model was tested on the EP; its attributed nodes were judged alone, and none diverges. It "
                 "fails the run: --no-cpu-fallback asks for the whole model on the EP",
}
#: The verdicts that fail a model run (exit code 1). ``emulation-gap`` exits 0, as ``run``'s outcome
#: of that name does; ``not-on-ep`` fails, because it arises only under ``--no-cpu-fallback``, the
#: flag by which a user asks that the EP take every node (a CI gate on full placement).
FAILING_VERDICTS = ("fail", "not-on-ep")

__all__ = ["AGREES", "DIVERGING", "FAILING_VERDICTS", "MODEL_VERDICTS", "NODE_STATUSES", "NOT_JUDGED", "PREDICTED"]
