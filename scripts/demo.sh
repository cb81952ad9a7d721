#!/usr/bin/env bash
# The main job: builds otter, then loads a shipped model and shows it (training arrives with the
# training issue; until then the demo prints the graph and runs a prediction).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
build_dir=${OTTER_BUILD_DIR:-build}
echo "== otter-opt: the digits MLP as imported, then canonicalized =="
"$build_dir/tools/otter-opt" models/digits/mlp.onnx --passes canonicalize
echo
echo "== otter-train predict on the digits test set =="
out=$(mktemp -d)/pred.npz
"$build_dir/tools/otter-train" predict models/digits/mlp.onnx --data models/digits/test.npz --out "$out" --batch-size 64
