"""DESIGN.md's ownership rules that a test can check."""

import ast
import os
import pathlib
import subprocess
import sys

import pytest


def test_reference_imports_neither_onnx_nor_onnxruntime():
    code = ("import sys, ep_testbed.reference, ep_testbed.reference.execute, ep_testbed.reference.inputs\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnxruntime'))\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_reports_never_import_onnxruntime():
    code = ("import sys, ep_testbed.reports, ep_testbed.reports.model_report\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'onnxruntime')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The rooms of DESIGN.md ("Packages") and what each may import, bottom up. A module's room is its
#: top-level folder, or for harness/ its subfolder; the pytest plugin is a front end like the CLI.
ALLOWED = {
    "reference": set(),
    "graphs": {"reference"},
    "harness.core": {"reference"},
    "reports": {"harness.core", "reference"},
    "harness.eps": {"harness.core", "graphs", "reference"},
    "harness.run": {"harness.eps", "harness.core", "graphs", "reference"},
    "harness.models": {"harness.run", "harness.eps", "harness.core", "reports", "graphs", "reference"},
    "harness.fuzz": {"harness.run", "harness.eps", "harness.core", "reports", "graphs", "reference"},
    "harness.cli": {"harness.models", "harness.fuzz", "harness.run", "harness.eps", "harness.core", "reports",
                    "graphs", "reference"},
    "harness": set(),
}


#: Modules directly in harness/ that are front ends, in the room of the CLI: the pytest plugin and
#: the console script's launcher.
FRONT_END_MODULES = ("pytest_plugin", "launch")


def room(module):
    """``ep_testbed.harness.eps.session`` -> ``harness.eps``; ``ep_testbed.reports.diff`` -> ``reports``."""
    parts = module.split(".")[1:]
    if parts[0] != "harness" or len(parts) == 1:
        return parts[0]
    return "harness.cli" if parts[1] in FRONT_END_MODULES else f"harness.{parts[1]}"


def _module_imports(root):
    """``{module: {ep_testbed modules it imports}}`` for the four packages, counting imports inside
    functions too (an import moved into a function still ties the modules). ``from pkg import sub``
    counts as importing the submodule ``pkg.sub`` when it is one, else as importing ``pkg``."""
    folders = {"reference", "graphs", "harness", "reports"}
    imports = {}
    for path in pathlib.Path(root).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] not in folders:
            continue
        name = "ep_testbed." + ".".join(p for p in parts if p != "__init__")
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        pairs = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                pairs.update((base, f"{base}.{a.name}") for a in node.names if base.startswith("ep_testbed"))
            elif isinstance(node, ast.Import):
                pairs.update((a.name, a.name) for a in node.names if a.name.startswith("ep_testbed."))
        imports[name] = pairs
    graph = {}
    for module, pairs in imports.items():
        targets = {sub if sub in imports else base for base, sub in pairs}
        graph[module] = {t for t in targets if t in imports and t != module}
    return graph


def _cycles(graph):
    """Every cycle a depth-first walk of ``graph`` meets (empty when it is acyclic)."""
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycle_among_modules_even_through_imports_inside_functions():
    graph = _module_imports(ROOT)
    assert len(graph) > 50
    assert _cycles(graph) == []


def test_no_import_cycle_among_subpackages():
    graph = _module_imports(ROOT)
    packages = {}
    for module, targets in graph.items():
        packages.setdefault(room(module), set()).update(room(t) for t in targets if room(t) != room(module))
    assert _cycles(packages) == []


def test_every_module_imports_only_the_rooms_below_its_own():
    graph = _module_imports(ROOT)
    assert set(map(room, graph)) <= set(ALLOWED)
    crossing = sorted((m, t) for m, targets in graph.items() for t in targets
                      if room(t) != room(m) and room(t) not in ALLOWED[room(m)])
    assert crossing == []


def test_design_md_draws_the_rooms_the_test_checks():
    design = pathlib.Path(ROOT, "DESIGN.md").read_text(encoding="utf-8")
    for name in ALLOWED:
        if name.startswith("harness."):
            assert f"harness/{name.split('.')[1]}/" in design, name


@pytest.mark.parametrize("folder", ["harness", "graphs", "reports", "reference"])
def test_a_folder_imported_by_its_bare_name_fails_naming_the_ep_testbed_spelling(folder):
    p = subprocess.run([sys.executable, "-c", f"import {folder}"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode != 0
    assert f"ep_testbed.{folder}" in p.stderr.strip().splitlines()[-1]


#: The judging code a repro bundle ships verbatim (reports/repro.py): it must import nothing but
#: NumPy, the standard library and each other, since the bundle has nothing else.
JUDGING = ("harness/core/compare.py", "harness/core/tolerances.py")


@pytest.mark.parametrize("path", JUDGING)
def test_the_judging_code_a_bundle_ships_imports_only_numpy_and_itself(path):
    siblings = {pathlib.Path(p).stem for p in JUDGING}
    tree = ast.parse(pathlib.Path(ROOT, path).read_text(encoding="utf-8"))
    outside = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            outside += [f".{node.module}"] if node.module not in siblings else []
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            outside += [n for n in names if n.split(".")[0] != "numpy" and n.split(".")[0] not in sys.stdlib_module_names]
    assert outside == []


def test_every_dml_data_type_can_be_given_a_tolerance():
    from ep_testbed.harness.core.tolerances import DEFAULT_TOLERANCES, KNOWN_DTYPES
    from ep_testbed.reference.dtypes import NUMPY_DTYPES

    assert set(NUMPY_DTYPES) | set(DEFAULT_TOLERANCES) <= set(KNOWN_DTYPES)
