#!/usr/bin/env bash
# Creates the Python virtual environment otter-bench --vs-ort runs ONNX Runtime Training from
# (models/bench/ort_bench.py): /usr/bin/python3's venv with the system packages (numpy, onnx,
# torch) plus PyPI's onnxruntime-training-cpu 1.19.2. Prints the environment's python.
# Environment: OTTER_ORT_VENV (default .venv-ort in the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${OTTER_ORT_VENV:-$PWD/.venv-ort}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import onnxruntime.training" 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check onnxruntime-training-cpu==1.19.2 >&2 ||
    { echo "ort-venv: pip could not install onnxruntime-training-cpu==1.19.2 for $(/usr/bin/python3 --version)" >&2; exit 1; }
fi
echo "$venv/bin/python"
