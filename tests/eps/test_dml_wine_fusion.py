"""DirectML as a Windows application runs it: ORT's graph optimizations on and the DML EP's graph
fusion kept on (``--graph-opt --dml-graph-fusion``), against the default conformance sessions
(both off), on the real DirectML EP in its Wine host.

What was found (harness/eps/dml_wine/README.md, "Graph fusion"): the two ways give the same
outcome for every catalog case except those whose model fuses into a partition of five or more
nodes (the RoiAlign compositions of OutOfBoundsInputValue). For such a partition ORT's DML EP
records a command list once and binds its inputs and outputs after recording (descriptors
volatile), which vkd3d on lavapipe cannot honour: the outputs are never written. An artefact of
the emulated device, so those cases are ``emulation-gap`` with fusion on, and pass with it off.
The second route here needs no operator under test: a chain of Mul nodes, four fused (right) and
five fused (never written), and vkd3d's own trace of the order of descriptor writes and dispatches.

Needs `bash tools/dml-wine.sh` (Linux) for all but the first test; without it they FAIL naming it.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from dml_wine_kit import needs_host
from onnx import TensorProto, helper

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.cli import main
from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.eps.dml_wine.adapter import REUSED_COMMAND_LIST_NODES, stale_partition
from ep_testbed.harness.eps.dml_wine.host import DmlWineHost

on_linux = pytest.mark.skipif(sys.platform != "linux", reason="the DirectML host runs under Wine on Linux")

DML, CPU = "DmlExecutionProvider", "CPUExecutionProvider"
#: A session with the DML EP's graph fusion kept on: the conformance entries less the one that
#: turns fusion off (``providers.config_entries`` with ``dml_graph_fusion``).
FUSED = {"session.disable_cpu_ep_fallback": "1", "session.record_ep_graph_assignment_info": "1"}
#: What ``--ep dml-wine`` runs, and what a Windows application runs.
CONFORMANCE, WINDOWS_APP = [], ["--graph-opt", "--dml-graph-fusion"]


def mul_chain(count: int, *, chained: bool = True) -> bytes:
    """``count`` Mul-by-2 nodes over a [3, 7] float32 tensor (21 elements: no size vkd3d refuses),
    one after the other (``chained``) or each on its own graph input and output."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    if chained:
        names = ["X"] + [f"t{i}" for i in range(1, count)] + ["Y"]
        nodes = [helper.make_node("Mul", [names[i], "two"], [names[i + 1]], f"mul{i}") for i in range(count)]
        inputs, outputs = ["X"], ["Y"]
    else:
        nodes = [helper.make_node("Mul", [f"X{i}", "two"], [f"Y{i}"], f"mul{i}") for i in range(count)]
        inputs, outputs = [f"X{i}" for i in range(count)], [f"Y{i}" for i in range(count)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 7]) for n in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 7]) for n in outputs],
                              initializer=[two])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def fused_partition_cases() -> dict[str, int]:
    """Catalog case id -> size of its model's largest fused partition, for the cases whose model
    has one of at least ``REUSED_COMMAND_LIST_NODES`` nodes."""
    found = {}
    for case in build_catalog():
        mapping = to_onnx(case.desc, opset=case.opset)
        if mapping.model is not None and (size := stale_partition(mapping.model, None)):
            found[case.id] = size
    return found


def test_the_fused_partition_is_the_group_of_nodes_joined_by_their_edges():
    """stale_partition counts what the DML EP's partitioner fuses: nodes joined producer ->
    consumer, not nodes that only share graph inputs, and only nodes on DirectML."""
    import onnx

    def model(data: bytes) -> onnx.ModelProto:
        return onnx.load_from_string(data)

    assert REUSED_COMMAND_LIST_NODES == 5
    assert stale_partition(model(mul_chain(4)), None) == 0
    assert stale_partition(model(mul_chain(5)), None) == 5
    assert stale_partition(model(mul_chain(6, chained=False)), None) == 0
    five = model(mul_chain(5))
    assert stale_partition(five, {"mul0": CPU}) == 0  # four left on DirectML
    assert stale_partition(five, {"mul0": DML}) == 5  # a node the assignment does not name counts
    sizes = fused_partition_cases()
    # the RoiAlign compositions of OutOfBoundsInputValue: two RoiAlign, Mul, Add, Add (an adaptive
    # count), or two RoiAlign, Round, Sub, Mul, Add and the Mul of a count above one (a fixed one);
    # a MaxPool of samples where MAX is composed too. Nothing else in the catalog fuses so large
    assert sizes and set(sizes.values()) <= {5, 6, 7}
    assert all(i.startswith(("roi_align/", "roi_align1/")) for i in sizes)


@on_linux
def test_a_reused_command_list_never_sees_its_inputs_and_outputs_here(monkeypatch):
    """The second route, with no operator under test: four chained Mul nodes fused compute right;
    five (ORT's threshold for reusing a command list) never write their output, while the same
    five unfused do. vkd3d's trace says why: for five, DirectML's dispatches are recorded first and
    the inputs' and outputs' descriptors written afterwards, before the list is executed (legal
    with volatile descriptors), and this device has no descriptor update-after-bind, so vkd3d
    copies the descriptor tables at record time. A fresh host, so no buffer holds an old answer."""
    needs_host()
    monkeypatch.setenv("VKD3D_DEBUG", "trace")
    x = np.random.default_rng(25).uniform(1, 2, (3, 7)).astype(np.float32)
    with DmlWineHost(stderr_limit=64 * 1024 * 1024) as host:
        runs = {}
        for count in (4, 5):
            runs[count] = run = host.run(mul_chain(count), {"X": x}, shared_device=True, config_entries=FUSED)
            assert run.ok, run.error_message
            assert set(run.placement([f"mul{i}" for i in range(count)]).values()) == {DML}
        unfused = host.run(mul_chain(5), {"X": x}, shared_device=True).raise_for_error()
        device_log = host.stderr_tail(64 * 1024 * 1024)
    np.testing.assert_array_equal(runs[4].outputs[0], x * 16)
    np.testing.assert_array_equal(unfused.outputs[0], x * 32)
    assert not np.any(runs[5].outputs[0] == x * 32), runs[5].outputs[0]
    assert re.search(r"descriptorBindingStorageTexelBufferUpdateAfterBind: 0", device_log)
    for count, late in ((4, False), (5, True)):
        calls = re.findall(r"trace:d3d12_(?:command_list_Dispatch|device_CreateUnorderedAccessView|"
                           r"command_queue_ExecuteCommandLists)\b", runs[count].stderr)
        last_run = len(calls) - 1 - calls[::-1].index("trace:d3d12_command_queue_ExecuteCommandLists")
        last_dispatch = max(i for i, c in enumerate(calls) if c.endswith("Dispatch"))
        written_after = [c for c in calls[last_dispatch:last_run] if c.endswith("CreateUnorderedAccessView")]
        assert bool(written_after) is late, (count, calls)


@on_linux
@pytest.mark.slow  # two runs of the CLI on the DirectML host
def test_graph_fusion_changes_only_the_large_partitions_to_emulation_gaps(tmp_path):
    """The catalog cases whose model fuses into a partition of five or more nodes pass in the
    conformance sessions and are emulation-gap (the reused command list named) as a Windows
    application runs them (those whose session is not built either way, a float16 node or a shader
    vkd3d refuses, are emulation-gap both ways); representative other cases (one node, the two-node MAX composition, a
    known, a refusal, a float16 gap) have the same outcome both ways. The whole catalog both ways
    (README) differs in exactly these cases."""
    needs_host()
    large = fused_partition_cases()
    others = ["roi_align/edge-whole-image-max", "roi_align/opset10-max-fp32-n2", "max_pooling2/edge-minus-inf-window",
              "roi_pooling/grid-fp32-scale0.5-pool2x2-rois3", "roi_pooling/random-s0-000", "max_pooling2/random-s0-000",
              "roi_pooling/grid-fp16-scale1-pool2x2-rois8"]
    outcomes = {}
    for name, flags in (("conformance", CONFORMANCE), ("windows-app", WINDOWS_APP)):
        out = tmp_path / name
        code = main(["run", "--ep", "dml-wine", *flags, "-k", ",".join([*large, *others]), "--out", str(out),
                     "--no-progress"])
        assert code == 0, name
        outcomes[name] = {line["id"]: line for line in read_run(str(out))[1] if line.get("type") == "case"}
    conformance, windows = outcomes["conformance"], outcomes["windows-app"]
    assert sorted(conformance) == sorted(windows) == sorted([*large, *others])
    changed = [i for i in large if conformance[i]["outcome"] == "pass"]
    assert changed
    for case_id in large:
        line = windows[case_id]
        assert line["outcome"] == "emulation-gap", line
        if case_id in changed:
            assert f"fused partition of {large[case_id]} nodes" in line["message"] and "command list" in line["message"]
        else:  # the session is not built either way: a float16 node, or a shader vkd3d refuses
            assert conformance[case_id]["outcome"] == "emulation-gap", conformance[case_id]
            assert "command list" not in line["message"]
    assert {i: conformance[i]["outcome"] for i in others} == {i: windows[i]["outcome"] for i in others}
    assert {conformance[i]["outcome"] for i in others} == {"pass", "known", "not-on-ep", "emulation-gap"}
