"""Hostile ONNX models fed to ``ep-testbed model run``: the bundled models (and one-node models of
each attributed op) with their bytes damaged, names carrying terminal escapes and forged lines,
attributes and dims set to nasty numbers, opsets and IR versions changed, ops renamed, and
external data pointing outside the model's folder (``..``, absolute paths, links) or past the
end of its file. Besides the sandbox's contract: nothing outside the model's folder is read
(a secret file next to it is never opened), and no name can forge a line of the summary.
"""

from __future__ import annotations

import os

import onnx
import pytest
from hostile_kit import IN_PROCESS, NASTY_FLOATS, NASTY_INTS, NASTY_TEXT, SMALL_CAP, corrupt_bytes, hostile
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

from ep_testbed.graphs.models import detection_head, resnet_stem
from ep_testbed.graphs.runtime import DEFAULT_OPSET

pytestmark = pytest.mark.slow  # every test here runs commands in the sandbox: -m "not slow" skips them


def _max_roi_pool() -> onnx.ModelProto:
    """image [1, 4, 16, 16] -> MaxRoiPool(rois [3, 5], pooled 3x3)."""
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 4, 16, 16])
    rois = helper.make_tensor_value_info("rois", TensorProto.FLOAT, [3, 5])
    out = helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [3, 4, 3, 3])
    node = helper.make_node("MaxRoiPool", ["image", "rois"], ["pooled"], name="roi_pool", pooled_shape=[3, 3],
                            spatial_scale=0.5)
    graph = helper.make_graph([node], "roi_pool", [image, rois], [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", DEFAULT_OPSET)], ir_version=8)


#: The models mutations start from, with the --shape items they need.
MODELS = {"stem": (resnet_stem, []), "head": (detection_head, ["--shape", "batch=1", "--shape", "num_rois=3"]),
          "roi_pool": (_max_roi_pool, [])}


def _mutate(data, model: onnx.ModelProto) -> None:
    """One to three structural edits of ``model`` (module docstring), in place."""
    graph = model.graph
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        how = data.draw(st.sampled_from(["name", "output-name", "attribute", "attribute", "dim", "opset", "ir",
                                         "op", "initializer-dims"]), label="edit")
        node = data.draw(st.sampled_from(list(graph.node)), label="node")
        if how == "name":
            node.name = data.draw(st.sampled_from(NASTY_TEXT), label="node name")
        elif how == "output-name" and graph.output:
            graph.output[0].name = data.draw(st.sampled_from(["\x1b[31mred", "o\n  verdict: pass", "\u202e"]))
        elif how == "attribute" and node.attribute:
            attr = data.draw(st.sampled_from(list(node.attribute)), label="attribute")
            if attr.type == onnx.AttributeProto.INTS:
                del attr.ints[:]
                attr.ints.extend(data.draw(st.lists(st.sampled_from([v for v in NASTY_INTS if -2**63 <= v < 2**63]),
                                                    max_size=5), label="ints"))
            elif attr.type == onnx.AttributeProto.INT:
                attr.i = data.draw(st.sampled_from([v for v in NASTY_INTS if -2**63 <= v < 2**63]), label="int")
            elif attr.type == onnx.AttributeProto.FLOAT:
                attr.f = data.draw(st.sampled_from(NASTY_FLOATS + [float("nan"), float("inf")]), label="float")
            elif attr.type == onnx.AttributeProto.STRING:
                attr.s = data.draw(st.sampled_from(NASTY_TEXT[:8]), label="string").encode("utf-8", "replace")
        elif how == "dim" and graph.input:
            dims = graph.input[0].type.tensor_type.shape.dim
            if dims:
                dim = dims[data.draw(st.integers(0, len(dims) - 1), label="axis")]
                if data.draw(st.booleans(), label="symbolic"):
                    dim.dim_param = data.draw(st.sampled_from(["batch", "\x1b[2J", "", "n"]), label="dim_param")
                else:
                    dim.dim_value = data.draw(st.sampled_from([0, 1, 100000, 2**31, 2**62]), label="dim_value")
        elif how == "opset":
            model.opset_import[0].version = data.draw(st.sampled_from([1, 7, 9, 10, 22, 99999]), label="opset")
        elif how == "ir":
            model.ir_version = data.draw(st.sampled_from([0, 1, 3, 99]), label="ir")
        elif how == "op":
            node.op_type = data.draw(st.sampled_from(["MaxPool", "RoiAlign", "MaxRoiPool", "NoSuchOp", "Loop"]))
        elif how == "initializer-dims" and graph.initializer:
            tensor = data.draw(st.sampled_from(list(graph.initializer)), label="initializer")
            del tensor.dims[:]
            tensor.dims.extend(data.draw(st.lists(st.sampled_from([1, 3, 100000, 2**40]), max_size=4), label="dims"))


@hostile(60)
@given(data=st.data())
def test_model_run_takes_hostile_models(sandbox, tmp_path_factory, data):
    name = data.draw(st.sampled_from(sorted(MODELS)), label="model")
    build, shapes = MODELS[name]
    model = build()
    if data.draw(st.integers(0, 4), label="structural") > 0:
        _mutate(data, model)
    raw = corrupt_bytes(data, model.SerializeToString(deterministic=True), "model-bytes")
    top = tmp_path_factory.mktemp("model")
    secret = top / "secret.bin"
    secret.write_bytes(b"TOP SECRET" * 100)
    (top / "m").mkdir()
    path = top / "m" / f"{name}.onnx"
    path.write_bytes(raw)
    if data.draw(st.booleans(), label="hostile --shape"):
        shapes = ["--shape", data.draw(st.sampled_from(["batch=99999999", "image=1x3x100000x100000", "num_rois=0",
                                                        "x=abc", "batch=2", "rois=3x5", "n=1x1"]), label="shape")]
    out = top / "out"
    result = sandbox.call(["model", "run", path, *shapes, "--out", out, *SMALL_CAP, *IN_PROCESS], kind="model run")
    result.check((0, 1, 2), reads=[top / "m"], writes=[out], secrets=[secret], temp=sandbox.temp)
    assert sum(line.strip().startswith("verdict:") for line in result.stdout.splitlines()) <= 1


@pytest.fixture(scope="module")
def external_model(tmp_path_factory):
    """The stem with its weights in ``weights.bin`` next to it."""
    folder = tmp_path_factory.mktemp("external") / "m"
    folder.mkdir()
    onnx.save_model(resnet_stem(), str(folder / "stem.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    return folder


@hostile(40)
@given(data=st.data())
def test_external_data_never_reads_outside_the_models_folder(sandbox, external_model, tmp_path_factory, data):
    top = tmp_path_factory.mktemp("ext")
    folder = top / "m"
    folder.mkdir()
    secret = top / "secret.bin"
    secret.write_bytes((external_model / "weights.bin").read_bytes())  # valid weights: a careless reader succeeds
    (folder / "weights.bin").write_bytes((external_model / "weights.bin").read_bytes())
    model = onnx.load(str(external_model / "stem.onnx"), load_external_data=False)
    tensor = data.draw(st.sampled_from(list(model.graph.initializer)), label="initializer")
    entries = {e.key: e for e in tensor.external_data}
    key = data.draw(st.sampled_from(["location", "location", "offset", "length"]), label="key")
    if key == "location":
        if data.draw(st.booleans(), label="link"):
            os.symlink(secret, folder / "link.bin")
        entries["location"].value = data.draw(st.sampled_from(
            ["../secret.bin", str(secret), "sub/../../secret.bin", "link.bin", "./weights.bin", "", "/dev/zero",
             "..\\secret.bin", "C:\\secret.bin", "weights.bin\x00.txt", "missing.bin", "."]), label="location")
    else:
        entries[key].value = data.draw(st.sampled_from(["-1", "0", "99999999999", "abc", "1e3", "", "9" * 50]),
                                       label=key)
    (folder / "stem.onnx").write_bytes(model.SerializeToString())
    out = top / "out"
    result = sandbox.call(["model", "run", folder / "stem.onnx", "--out", out, *SMALL_CAP, *IN_PROCESS], kind="model run (external)")
    result.check((0, 1, 2), reads=[folder], writes=[out], secrets=[secret], temp=sandbox.temp)


#: Where a name that is not UTF-8 can sit (the placeholder each is given before its bytes are spoiled).
BAD_TEXT_PLACES = ["node name", "node output", "graph output", "graph name", "initializer", "opset domain"]


def _with_bad_text(place: str) -> bytes:
    """The stem with one name made invalid UTF-8 (and a terminal escape) in its serialized bytes:
    protobuf hands such a string over as ``bytes``, which readers of names used to meet as text."""
    model = resnet_stem()
    graph, marker = model.graph, "PLACEHOLDER"
    if place == "node name":
        graph.node[0].name = marker
    elif place in ("node output", "graph output"):
        old = graph.output[0].name if place == "graph output" else graph.node[0].output[0]
        for node in graph.node:
            node.input[:] = [marker if name == old else name for name in node.input]
            node.output[:] = [marker if name == old else name for name in node.output]
        for value in graph.output:
            value.name = marker if value.name == old else value.name
    elif place == "graph name":
        graph.name = marker
    elif place == "opset domain":
        model.opset_import.append(helper.make_opsetid(marker, 1))
    elif place == "initializer":
        old = graph.initializer[0].name
        graph.initializer[0].name = marker
        for node in graph.node:
            node.input[:] = [marker if name == old else name for name in node.input]
    raw = model.SerializeToString()
    assert raw.count(marker.encode()) >= 1
    spoiled = b"PL\xff\xfe\x1b[2J\nvv"
    assert len(spoiled) == len(marker)  # the same length: every length prefix of the message still holds
    return raw.replace(marker.encode(), spoiled)


@pytest.mark.parametrize("place", BAD_TEXT_PLACES)
def test_a_name_that_is_not_utf8_is_refused_naming_where(sandbox, tmp_path, place):
    """Such a name gave exit 70 in ``model run`` (placement read back) before."""
    folder = tmp_path / "m"
    folder.mkdir()
    path = folder / "stem.onnx"
    path.write_bytes(_with_bad_text(place))
    out = tmp_path / "out"
    result = sandbox.call(["model", "run", path, "--out", out, *SMALL_CAP, *IN_PROCESS], kind="model run (text)")
    result.check((2,), reads=[folder], writes=[out], temp=sandbox.temp)
    assert "is not UTF-8 text" in result.stderr


def test_a_name_that_is_not_utf8_is_refused_by_the_directml_host_too(tmp_path):
    """``--ep dml-wine`` (the Windows host, when it is set up here) refuses it the same way."""
    import subprocess
    import sys

    from ep_testbed.harness.eps.dml_wine import host as dml_host

    try:
        dml_host.read_host_json()
    except dml_host.HostError as exc:
        pytest.skip(f"the DirectML host is not set up here (bash tools/dml-wine.sh): {exc}")
    path = tmp_path / "stem.onnx"
    path.write_bytes(_with_bad_text("node name"))
    done = subprocess.run([sys.executable, "-m", "ep_testbed.harness.cli", "model", "run", str(path), "--ep", "dml-wine",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "is not UTF-8 text" in done.stderr and "Traceback" not in done.stderr, done.stderr
