"""An EP that declines an operator node only when it is the one node of a model (the OpenVINO
EP and RoiAlign) gets the same model with an exact carrier node after the operator
(``graphs.Mapping.with_carrier``: Mul by 1); the verdict is still the operator's alone."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import Case
from ep_testbed.graphs.cases.max_pooling2 import max_pooling2_desc
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.harness.eps import session as session_mod
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.run.case_run import CaseConfig, run_case

DESC = roi_align_desc(True, samples=(2, 2))
CASE = Case(id="roi_align1/carrier", op=DESC.TYPE, desc=DESC, seed=0, recipe="specials")
REFUSAL = ("This session contains graph nodes that are assigned to the default CPU EP, but fallback to CPU EP has "
           "been explicitly disabled by the user.")


@pytest.mark.parametrize("desc", [DESC, max_pooling2_desc(dtype="INT32", indices="UINT32", window=2)])
def test_the_carrier_changes_no_value(desc):
    case = Case(id="x/carrier", op=desc.TYPE, desc=desc, seed=1, recipe="specials" if desc is DESC else "extremes")
    plain = to_onnx(desc)
    carried = plain.with_carrier()
    assert [n.op_type for n in carried.model.graph.node][-len(plain.onnx_output_names):] == \
        ["Mul"] * len(plain.onnx_output_names)
    assert carried.onnx_output_names == plain.onnx_output_names and carried.op_nodes == plain.op_nodes
    feeds = plain.feeds(case.inputs())

    def run(mapping):
        session = ort.InferenceSession(mapping.model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)

    for a, b in zip(run(plain), run(carried)):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def test_no_carrier_where_a_helper_writes_the_outputs():
    assert to_onnx(roi_align_desc(True, oob=1.5)).with_carrier() is None  # the OutOfBoundsInputValue Add does


def test_a_lone_operator_refused_runs_with_a_carrier(monkeypatch):
    real = session_mod.run_on_ep

    def lone_refused(model, *args, **kwargs):
        """An EP that refuses a model whose only node is an operator node (as OpenVINO does RoiAlign)."""
        if len(model.graph.node) == 1:
            raise session_mod.SessionError("build", "CPUExecutionProvider", RuntimeError(REFUSAL))
        return real(model, *args, **kwargs)

    monkeypatch.setattr(session_mod, "run_on_ep", lone_refused)
    line = run_case(CASE, CaseConfig(ep=resolve_ep("cpu")), mapper=to_onnx)
    assert line["outcome"] == "pass", line["message"]
    assert set(line["placement"]) == {"RoiAlign", "Carrier_OutputTensor"}
    assert line["message"].startswith("0 of ")
    assert line["message"].endswith("; Note: CPUExecutionProvider refused the operator node(s) as the only node(s) "
                                    "of a model; they ran with an exact carrier node after them (Mul by 1)")
