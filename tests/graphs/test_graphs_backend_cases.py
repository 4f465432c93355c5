"""ONNX's backend node cases for RoiAlign and MaxPool, through ``from_onnx`` into the reference:
each agrees with ONNX's expected output or is listed with a documented reason (and differs)."""

from __future__ import annotations

import numpy as np
import pytest
from graphs_testkit import max_abs_error

from ep_testbed.graphs.backend_cases import known_differences, onnx_backend_cases
from ep_testbed.reference import execute


@pytest.mark.slow
def test_every_backend_case_agrees_or_is_a_documented_difference():
    cases = onnx_backend_cases()
    names = {c.name for c in cases}
    assert len(cases) >= 20 and sum(c.node.op_type == "RoiAlign" for c in cases) == 3
    known = known_differences()
    assert set(known) <= names and "test_roialign_mode_max" in known
    agree, differ = [], []
    for case in cases:
        assert case.imported is not None, (case.name, case.import_error)
        actual = case.imported.outputs(execute(case.imported.desc, case.imported.inputs(case.inputs)))
        ok = True
        errors = []
        for got, want in zip(actual, case.expected):
            assert got.shape == want.shape, case.name
            errors.append(max_abs_error(want, got))
            # ONNX's own comparison for these cases (rtol 1e-3, atol 1e-7); RoiAlign expected values
            # are printed with 4 decimals, within rtol of values >= 0.1
            ok &= bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=case.rtol, atol=case.atol))
        if case.known_difference:
            assert not ok, f"{case.name} now agrees: drop it from its mapper's ONNX_BACKEND_DIFFERENCES"
            differ.append((case.name, max(errors)))
        else:
            assert ok, (case.name, errors)
            agree.append(case.name)
    print(f"\nONNX backend cases: {len(agree)} agree, {len(differ)} differ {differ}")
    assert len(agree) == len(cases) - len(known)


def test_only_the_case_modules_that_name_an_attributed_op_type_are_imported(tmp_path):
    """A case module can build a node of a type only by naming it (``make_node("MaxPool", ...)``):
    the modules that name none are not imported (their exports cost seconds), the others are."""
    from types import SimpleNamespace

    from ep_testbed.graphs.backend_cases import case_modules

    (tmp_path / "__init__.py").write_text('def expect(): "MaxPool"')
    (tmp_path / "maxpool.py").write_text('node = make_node(\n    "MaxPool", inputs=["x"])')
    (tmp_path / "roialign.py").write_text("node = make_node('RoiAlign', inputs=['x'])")
    (tmp_path / "maxunpool.py").write_text('node = make_node("MaxUnpool", inputs=["xT"])  # MaxPool in prose')
    package = SimpleNamespace(__file__=str(tmp_path / "__init__.py"))
    assert case_modules(package, ("MaxPool", "RoiAlign")) == ["maxpool", "roialign"]
    from onnx.backend.test.case import node

    assert {"maxpool", "roialign"} <= set(case_modules(node, ("MaxPool", "RoiAlign", "MaxRoiPool")))
