#!/usr/bin/env bash
# The main job: builds otter, shows the digits MLP before and after canonicalize, then trains the
# digits MLP and CNN with otter-train and prints their test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
build_dir=${OTTER_BUILD_DIR:-build}
# The digits models are too small for CPU threads to pay off (a CNN step takes 2 ms on one thread).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== otter-opt: the digits MLP as imported, then canonicalized =="
"$build_dir/tools/otter-opt" models/digits/mlp.onnx --passes canonicalize
echo
echo "== otter-train train: the digits MLP (AdamW, lr 0.01 with cosine decay, 20 epochs of batches of 32) =="
"$build_dir/tools/otter-train" train models/digits/mlp.onnx --data models/digits/train.npz \
  --eval-data models/digits/test.npz --optimizer adamw --lr 0.01 --schedule cosine --batch-size 32 --epochs 20 \
  --log-every 210 --export "$out/mlp_trained.onnx"
echo
echo "== otter-train train: the digits CNN (AdamW, lr 0.005 with cosine decay, 40 epochs of batches of 16) =="
"$build_dir/tools/otter-train" train models/digits/cnn.onnx --data models/digits/train_img.npz \
  --eval-data models/digits/test_img.npz --optimizer adamw --lr 0.005 --schedule cosine --batch-size 16 --epochs 40 \
  --log-every 840 --save "$out/cnn_checkpoint"
echo
echo "== otter-train eval: the exported MLP =="
"$build_dir/tools/otter-train" eval "$out/mlp_trained.onnx" --data models/digits/test.npz
