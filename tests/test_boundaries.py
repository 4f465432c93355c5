"""DESIGN.md's ownership rules that a test can check."""

import subprocess
import sys


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


def _module_imports(root):
    """``{module: {ep_testbed modules it imports at module level}}`` for the four packages.
    ``from pkg import sub`` counts as importing the submodule ``pkg.sub`` when it is one, else
    as importing ``pkg`` (where the name is defined)."""
    import ast
    import pathlib

    folders = {"reference", "graphs", "harness", "reports"}
    imports = {}
    for path in pathlib.Path(root).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] not in folders:
            continue
        name = "ep_testbed." + ".".join(p for p in parts if p != "__init__")
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        pairs = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module level only
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


def test_no_import_cycles_among_the_packages_modules():
    import os

    graph = _module_imports(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert len(graph) > 50
    state, cycles = {}, []

    def visit(module, stack):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []
