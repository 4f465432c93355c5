#!/usr/bin/env bash
# Create .venv-openvino: this project with onnxruntime-openvino instead of onnxruntime.
# Both wheels provide the `onnxruntime` module, so the OpenVINO EP gets its own environment;
# the main test suite finds it here and runs the OpenVINO tests in it (tests/harness/test_openvino_venv.py).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv-openvino}"
[ -x "$venv/bin/python" ] || python -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q onnxruntime-openvino "numpy>=1.23" "onnx>=1.14" "Jinja2>=3.0" \
    "pytest>=7" "hypothesis>=6" "pytest-xdist>=3"
"$venv/bin/python" -m pip install -q --no-deps -e .
"$venv/bin/python" -c "import onnxruntime as o; assert 'OpenVINOExecutionProvider' in o.get_available_providers(), o.get_available_providers(); print('OpenVINO EP ready:', o.__version__)"
