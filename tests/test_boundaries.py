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
