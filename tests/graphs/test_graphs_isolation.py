"""Operator-isolated models: the operator's nodes read graph inputs the host prepared, and no
helper node that an EP could run in reduced precision, or might not implement, sits between
a graph input and an operator node (DESIGN.md, "Operator-isolated cases")."""

from __future__ import annotations

import numpy as np
import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.cases.common import UINT32_MAX
from ep_testbed.graphs.cases.max_pooling2 import max_pooling2_desc
from ep_testbed.graphs.cases.roi_align import roi_align_desc
from ep_testbed.graphs.cases.roi_pooling import roi_pooling_desc
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.graphs.ops.roi_align import host_roi_rewrite

#: The only helper nodes left: OutOfBoundsInputValue's float32 correction after the RoiAlign
#: nodes (IEEE-754 arithmetic every EP rounds correctly; Round, or Floor before opset 11, and Sub
#: count the inside samples).
ELEMENTWISE = {"Mul", "Add", "Round", "Floor", "Sub"}

EXTRA = [roi_align_desc(True, sx=0.25, sy=0.5, ipo=0.25, opo=-0.25, oob=1.5, samples=(2, 2), corners=True,
                        roi_rank=4, bi_type="UINT32", bi_rank=2, reduction="MAX"),
         roi_align_desc(True, dtype="FLOAT16", ipo=0.0, opo=0.0, oob=-1.0, samples=(3, 3), corners=True),
         roi_align_desc(True, sx=1.0, sy=0.5, samples=(1, UINT32_MAX)),
         max_pooling2_desc(dtype="INT32", indices="UINT32", window=3, stride=2),
         roi_pooling_desc(scale=0.0, pooled=(2, 3))]


def _mappings():
    for case in build_catalog():
        mapping = to_onnx(case.desc, case.opset)
        if mapping.model is not None:
            yield case.id, mapping
    for n, desc in enumerate(EXTRA):
        yield f"extra-{n}", to_onnx(desc)


@pytest.mark.parametrize("name, mapping", list(_mappings()), ids=lambda v: v if isinstance(v, str) else "")
def test_operator_nodes_read_what_the_host_prepared(name, mapping):
    graph = mapping.model.graph
    inputs = {i.name for i in graph.input}
    made_by = {out: node for node in graph.node for out in node.output}
    for node in graph.node:
        if node.name in mapping.op_nodes:
            for tensor in node.input:
                producer = made_by.get(tensor)
                # a graph input, or (MAX) the samples of the RoiAlign node, corrected for
                # OutOfBoundsInputValue or not
                assert tensor in inputs or (node.op_type == "MaxPool" and (
                    producer.name in mapping.op_nodes or producer.op_type in ELEMENTWISE)), (name, node.name, tensor)
        else:
            assert node.op_type in ELEMENTWISE, (name, node.name, node.op_type)
            assert node.name.startswith(("Mul_OutOfBounds", "Add_OutOfBounds", "Round_OutOfBounds",
                                         "Floor_OutOfBounds", "Sub_OutOfBounds")), (name, node.name)


def test_host_roi_rewrite_keeps_an_infinite_coordinate_in_its_own_columns():
    w = np.diag([2.0, 3.0, 2.0, 3.0])
    w[0, 2] = 0.5  # x2' reads x1
    table = np.array([[1.0, np.inf, 4.0, 2.0]], np.float32)
    out = host_roi_rewrite(table, (w, np.array([0.5, 0.5, 0.5, 0.5])), np.dtype(np.float32))
    assert out.dtype == np.float32 and out.shape == (1, 4)
    assert out[0, 1] == np.inf and np.isfinite(out[0, [0, 2, 3]]).all()  # no 0 * inf = NaN spread
    assert out[0, 2] == np.float32(0.5 + 1.0 * 0.5 + 4.0 * 2.0)


def test_host_roi_rewrite_rounds_once_from_float64():
    w = np.diag([1 / 3, 1 / 3, 1 / 3, 1 / 3])
    table = np.array([[7.0, 11.0, 13.0, 17.0]], np.float32)
    out = host_roi_rewrite(table, (w, np.zeros(4)), np.dtype(np.float32))
    assert np.array_equal(out, (table.astype(np.float64) / 3).astype(np.float32))
