"""The operator registry: every operator is one record, and a new one is added through it alone.

A toy operator (``toy_op.py``: desc, validation, kernel, mapper and cases in one test module)
is registered with one ``register(OpSpec(...))`` call and then appears in the catalog, runs on
the CPU EP in worker processes with placement proven, and shows in the HTML report, with no
other file of the testbed touched.
"""

import ast
import os
import pathlib

import numpy as np
import pytest

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.reference import desc_from_dml, desc_to_dml, execute, registry

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = pathlib.Path(HERE).parents[1]


@pytest.fixture
def toy():
    import toy_op

    registry.register(toy_op.SPEC)  # again, in case an earlier test unregistered it
    yield toy_op
    registry.unregister(toy_op.NAME)


def test_the_four_dml_operators_are_registered_once_each():
    names = [spec.name for spec in registry.specs()]
    assert names[:4] == ["roi_pooling", "max_pooling2", "roi_align", "roi_align1"]
    assert len({spec.desc for spec in registry.specs()}) == len(names)


def test_a_toy_operator_joins_the_catalog_reference_and_mapper(toy):
    cases = build_catalog([toy.NAME])
    assert [c.id for c in cases] == ["toy_scale/small", "toy_scale/4d", "toy_scale/vector"]
    case = cases[1]
    x = case.inputs()["InputTensor"]
    np.testing.assert_array_equal(execute(case.desc, {"InputTensor": x})["OutputTensor"], x * np.float32(-3.0))
    assert desc_from_dml(desc_to_dml(case.desc)) == case.desc  # the DML spelling round-trips too
    assert to_onnx(case.desc).model.graph.node[0].op_type == "Mul"
    assert toy.NAME in [c.id.split("/")[0] for c in build_catalog()]  # the whole catalog lists it


def test_a_toy_operator_runs_on_the_cpu_ep_and_shows_in_the_report(toy, tmp_path):
    from ep_testbed.harness.eps.providers import resolve_ep
    from ep_testbed.harness.run.case_run import CaseConfig
    from ep_testbed.harness.run.runner import RunOptions, run_cases
    from ep_testbed.reports import render_all

    out = tmp_path / "run"
    result = run_cases(build_catalog([toy.NAME]), CaseConfig(ep=resolve_ep("cpu")),
                       RunOptions(out_dir=str(out), jobs=2, extra_paths=(HERE,)))
    assert [line["outcome"] for line in result.lines] == ["pass"] * 3
    assert all(line["placement"] == {"ToyScale": "CPUExecutionProvider"} for line in result.lines)
    html = render_all(out)["html"].read_text(encoding="utf-8")
    assert 'href="#cases?op=TOY_SCALE"' in html  # its row in the summary matrix
    assert all(case_id in html.replace("\\/", "/") for case_id in ("toy_scale/small", "toy_scale/4d"))


def test_unregistered_descs_are_refused_by_name(toy):
    desc = build_catalog([toy.NAME])[0].desc
    registry.unregister(toy.NAME)
    with pytest.raises(Exception, match="ToyScaleDesc"):
        execute(desc, {"InputTensor": np.zeros((2, 3), np.float32)})


def _isinstance_on_descs(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            text = ast.unparse(node.args[1])
            if "Desc" in text and "TensorDesc" not in text:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_isinstance_dispatch_on_desc_classes():
    hits = [h for folder in ("reference", "graphs", "harness", "reports")
            for p in sorted((ROOT / folder).rglob("*.py")) for h in _isinstance_on_descs(p)]
    assert hits == []


def test_no_other_module_lists_the_operators():
    """The short names and DML type names of the operators appear in the registry only (and in
    each operator's own modules): a second list would drift."""
    names = [s.name for s in registry.specs()[:4]]
    offenders = []
    for folder in ("reference", "graphs", "harness", "reports"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            text = p.read_text(encoding="utf-8")
            if p.name != "registry.py" and all(f'"{n}"' in text for n in names):
                offenders.append(str(p.relative_to(ROOT)))
    assert offenders == []
