"""ONNX's own backend node test cases of the op types the registry reads back, through ``from_onnx``.

ONNX's node-case modules (``onnx.backend.test.case.node``, shipped in the onnx wheel) build each
case's one-node model with its input and expected output arrays; only those of the attributed
op types are imported (``case_modules``). ``onnx_backend_cases()``
imports every case of those op types (``attributed_op_types()``) in ``spec`` mode, so that the
tests can run the DML desc through ``reference.execute`` and compare with ONNX's expected
outputs. Where the desc cannot mean the same as ONNX, the case says so in ``known_difference``
(each mapper module's ``ONNX_BACKEND_DIFFERENCES`` documents its reasons: ``known_differences``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx

from ..reference.registry import specs
from .from_onnx import Imported, attributed_op_types, import_node
from .ops import mapper_of


def known_differences() -> dict[str, str]:
    """Backend case name -> why ONNX's meaning and the nearest DML desc differ, from every
    registered operator's mapper module (``ONNX_BACKEND_DIFFERENCES``, an optional hook)."""
    found: dict[str, str] = {}
    for spec in specs():
        found.update(getattr(mapper_of(spec), "ONNX_BACKEND_DIFFERENCES", {}))
    return found


@dataclass
class BackendCase:
    name: str
    node: onnx.NodeProto
    opset: int
    inputs: list[np.ndarray]          # in node input order
    expected: list[np.ndarray]        # in node output order
    imported: Optional[Imported]      # None if the node has no DML desc (import_error says why)
    import_error: Optional[str]
    atol: float
    rtol: float
    known_difference: Optional[str]


def case_modules(package: Any, op_types: tuple[str, ...]) -> list[str]:
    """The modules of ONNX's node-case ``package`` whose source names one of ``op_types`` as a
    string literal: only they can build a node of those types (every case is made with
    ``onnx.helper.make_node("<OpType>", ...)``), so importing them alone collects every such case."""
    folder = Path(package.__file__).parent
    found = []
    for path in sorted(folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.stem != "__init__" and any(f'"{op}"' in text or f"'{op}'" in text for op in op_types):
            found.append(path.stem)
    return found


@functools.lru_cache(maxsize=1)
def _collect() -> tuple:
    from onnx.backend.test.case import (
        node as node_cases,  # the package only; each op's module builds its cases when imported
    )

    # Each case module builds (and computes the outputs of) its cases at import: importing only
    # the modules of the attributed op types skips the hundreds of others, which
    # collect_testcases(None) would build (https://github.com/onnx/onnx/blob/main/onnx/backend/test/case/base.py,
    # _Exporter runs every export at class creation; node/__init__.py: expect() appends to _NodeTestCases).
    op_types = attributed_op_types()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for name in case_modules(node_cases, op_types):
            importlib.import_module(f"{node_cases.__name__}.{name}")
        built = getattr(node_cases, "_NodeTestCases", None)
        if not isinstance(built, list):  # a future onnx keeps them elsewhere: build them all, as documented
            built = node_cases.collect_testcases(None)
    return tuple(c for c in built if c.model is not None and c.model.graph.node[0].op_type in op_types)


def raw_cases() -> dict[str, Any]:
    """ONNX's backend node cases of the attributed op types by name, as ``collect_testcases``
    built them (``.model``, ``.data_sets``): the one collection a process makes, which the
    reference's golden tests read too (collecting costs seconds: it builds every op's cases)."""
    found: dict[str, Any] = {}
    for case in _collect():
        found.setdefault(case.name, case)
    return found


def onnx_backend_cases() -> list[BackendCase]:
    """Every ONNX backend node case of an attributed op type, imported in ``spec`` mode."""
    out, seen, known = [], set(), known_differences()
    for case in _collect():
        if case.name in seen:
            continue
        seen.add(case.name)
        model = case.model
        node = model.graph.node[0]
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        inputs, expected = case.data_sets[0]
        inputs = [np.asarray(a) for a in inputs]
        expected = [np.asarray(a) for a in expected]
        try:
            imported = import_node(node, [a.shape for a in inputs], [a.dtype for a in inputs], "spec", opset)
            error = None
        except ValueError as e:
            imported, error = None, str(e)
        out.append(BackendCase(case.name, node, opset, inputs, expected, imported, error, case.atol, case.rtol,
                               known.get(case.name)))
    return out
