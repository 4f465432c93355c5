#!/usr/bin/env bash
# Create a venv with this project on an older onnxruntime (default 1.24.4, the release that
# onnxruntime-directml 1.24.x matches), so the CPU catalog can be checked against the
# expectations' "onnxruntime" ranges on that version too (tests/test_older_ort_venv.py).
#   bash tools/ort-venv.sh [VERSION [VENV]]     (default: 1.24.4 .venv-ort124)
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-1.24.4}"
venv="${2:-.venv-ort$(echo "$version" | cut -d. -f1,2 | tr -d .)}"
[ -x "$venv/bin/python" ] || python -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q "onnxruntime==$version" "numpy>=1.23" "onnx>=1.14" "Jinja2>=3.0" \
    "pytest>=7" "hypothesis>=6" "pytest-xdist>=3"
"$venv/bin/python" -m pip install -q --no-deps -e .
"$venv/bin/python" -c "import onnxruntime as o; assert o.__version__ == '$version', o.__version__; print('onnxruntime', o.__version__, 'ready in $venv')"
