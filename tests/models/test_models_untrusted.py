"""Untrusted model files: each refusal is a clear error (exit 2), and nothing outside the model's
folder is ever opened (every Python-level open is recorded with an audit hook; ONNX Runtime only
ever receives bytes, so it opens no file of its own)."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest
from models_testkit import recording_opens, result_of, run_cli
from onnx import TensorProto, helper

from ep_testbed.graphs.models import resnet_stem
from ep_testbed.graphs.runtime import max_ir_version
from ep_testbed.harness.models.untrusted import ModelRefused, load_untrusted

SECRET = b"TOP-SECRET-OUTSIDE-THE-MODEL-FOLDER"


def _external_model(folder: Path) -> Path:
    """The stem with every initializer in ``weights.bin`` next to it (a valid external-data model)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "stem.onnx"
    onnx.save_model(resnet_stem(), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    return path


def _relocate(path: Path, location: str) -> None:
    """Point every external tensor of the model at ``path`` to ``location`` (keeping offsets)."""
    model = onnx.load(str(path), load_external_data=False)
    for t in model.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    path.write_bytes(model.SerializeToString())


def _outside_copy(tmp_path: Path, model_path: Path) -> Path:
    """Valid weights (plus a marker) outside the model's folder, so a careless loader would succeed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "weights.bin"
    target.write_bytes((model_path.parent / "weights.bin").read_bytes() + SECRET)
    return target


def test_external_data_inside_the_folder_loads_and_runs(tmp_path, capsys):
    path = _external_model(tmp_path / "model")
    with recording_opens() as opened:
        code, out, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    assert result_of(tmp_path / "run")["model"]["external_files"] == ["weights.bin"]
    assert any(p.endswith("weights.bin") for p in opened)


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "nested-dotdot"])
def test_external_data_outside_the_folder_is_refused_and_never_opened(tmp_path, capsys, how):
    path = _external_model(tmp_path / "model")
    secret = _outside_copy(tmp_path, path)
    if how == "dotdot":
        location = "../outside/weights.bin"
    elif how == "absolute":
        location = str(secret)
    elif how == "nested-dotdot":
        (path.parent / "sub").mkdir()
        location = "sub/../../outside/weights.bin"
    else:
        os.symlink(secret, path.parent / "link.bin")
        location = "link.bin"
    _relocate(path, location)
    (path.parent / "weights.bin").unlink()
    before = os.stat(secret)
    with recording_opens() as opened:
        code, out, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert "outside the model's folder" in err and repr(location) in err
    resolved = {os.path.realpath(p) for p in opened}
    assert str(secret) not in resolved and not any(p.startswith(str(secret.parent)) for p in resolved | set(opened))
    assert SECRET.decode() not in out + err
    assert os.stat(secret).st_atime_ns == before.st_atime_ns  # not read (where the filesystem records it)
    assert not (tmp_path / "run").exists()


def test_missing_external_data_and_bad_offsets_are_named(tmp_path):
    path = _external_model(tmp_path / "model")
    (path.parent / "weights.bin").write_bytes(b"short")
    with pytest.raises(ModelRefused, match=r"does not fit the file \(5 bytes\)"):
        load_untrusted(path)
    (path.parent / "weights.bin").unlink()
    with pytest.raises(ModelRefused, match="external data file 'weights.bin' does not exist"):
        load_untrusted(path)


@pytest.mark.parametrize("content", ["truncated", "text", "png", "empty"])
def test_truncated_or_non_onnx_files_are_refused(tmp_path, capsys, content):
    whole = resnet_stem().SerializeToString()
    data = {"truncated": whole[: len(whole) // 2], "text": b"hello, I am not a model\n" * 10,
            "png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "empty": b""}[content]
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    code, _, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert "model.onnx" in err
    assert ("not an ONNX model" in err or "not a readable ONNX model" in err), err
    assert "Traceback" not in err


def _one_node_model(op_type: str, domain: str = "") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    graph = helper.make_graph([helper.make_node(op_type, ["x"], ["y"], name="mystery", domain=domain)], "g", [x], [y])
    imports = [helper.make_opsetid("", 16)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = max_ir_version()
    return model


def test_a_standard_domain_op_nobody_defines_is_refused_before_any_session(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    path.write_bytes(_one_node_model("NoSuchOp").SerializeToString())
    code, _, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert "node 'mystery' (op 'NoSuchOp')" in err and "no execution provider implements it" in err


def test_a_custom_domain_op_no_ep_has_is_refused_with_its_name(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    path.write_bytes(_one_node_model("Frobnicate", "com.example").SerializeToString())
    code, _, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert "com.example:Frobnicate" in err and "no execution provider" in err
    assert "CPUExecutionProvider" in err


def test_a_model_newer_than_this_onnxruntime_is_refused_with_the_fix(tmp_path, capsys):
    if max_ir_version() >= onnx.IR_VERSION:
        pytest.skip(f"this onnxruntime loads IR {max_ir_version()}, the newest the installed onnx writes "
                    f"({onnx.IR_VERSION}); the refusal shows only where onnxruntime is older (e.g. /tmp/ovvenv)")
    model = resnet_stem()
    model.ir_version = onnx.IR_VERSION
    path = tmp_path / "new.onnx"
    path.write_bytes(model.SerializeToString())
    code, _, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and f"Unsupported model IR version: {onnx.IR_VERSION}" in err and "re-save" in err


def test_a_model_too_large_to_inline_runs_with_its_initializers_injected(tmp_path, capsys, monkeypatch):
    """A model whose weights exceed what one protobuf message holds keeps them out of the
    message: ONNX Runtime gets the arrays (add_external_initializers), never a file name. The
    2 GiB threshold is lowered here so that a small model takes that path."""
    from ep_testbed.harness.models import untrusted

    path = _external_model(tmp_path / "model")
    inline = tmp_path / "inline"
    assert run_cli(["model", "run", str(path), "--out", str(inline)], capsys)[0] == 0
    monkeypatch.setattr(untrusted, "INLINE_LIMIT", 0)
    loaded = load_untrusted(path)
    assert loaded.initializers and all(t.name in loaded.initializers for t in loaded.model.graph.initializer)
    assert all(e.value == untrusted.INJECTED for t in loaded.model.graph.initializer for e in t.external_data
               if e.key == "location")
    with recording_opens() as opened:
        code, _, err = run_cli(["model", "run", str(path), "--out", str(tmp_path / "injected")], capsys)
    assert code == 0, err
    assert not any(untrusted.INJECTED in p for p in opened)
    a, b = result_of(inline), result_of(tmp_path / "injected")
    assert [o["outcome"] for o in a["outputs"]] == [o["outcome"] for o in b["outputs"]] == ["pass"] * len(a["outputs"])
    import numpy as np

    with np.load(inline / "outputs.npz") as x, np.load(tmp_path / "injected" / "outputs.npz") as y:
        assert x.files == y.files and all(np.array_equal(x[k], y[k]) for k in x.files)


def test_external_data_over_the_cap_is_refused_before_it_is_read(tmp_path, capsys):
    path = _external_model(tmp_path / "model")
    size = (path.parent / "weights.bin").stat().st_size
    with recording_opens() as opened:
        code, _, err = run_cli(["model", "run", str(path), "--limit", f"external-bytes={size - 1}",
                                "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and f"holds {size} bytes, more than the {size - 1} read" in err and "--limit external-bytes" in err
    assert not any(p.endswith("weights.bin") for p in opened)
