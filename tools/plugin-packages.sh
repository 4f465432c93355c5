#!/usr/bin/env bash
# Install plugin EP packages beside the onnxruntime an interpreter already has. They are libraries
# only (no onnxruntime of their own: --no-deps adds none), loaded with `--ep plugin:PACKAGE`.
#   bash tools/plugin-packages.sh [PYTHON [PACKAGE...]]
#     (default: python, onnxruntime-ep-webgpu onnxruntime-ep-openvino)
# tests/harness/test_harness_plugins.py uses them from the main environment, and
# tests/test_plugin_old_ort_venv.py the WebGPU one in the onnxruntime 1.23.2 venv (tools/ort-venv.sh 1.23.2).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-python}"
shift || true
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(onnxruntime-ep-webgpu onnxruntime-ep-openvino)
"$python" -m pip install -q --no-deps "${packages[@]}"
for package in "${packages[@]}"; do
  "$python" -c "import importlib, os; m = importlib.import_module('${package//-/_}'); \
assert os.path.isfile(m.get_library_path()); print('$package ready:', m.get_library_path())"
done
