#!/usr/bin/env bash
# otter-train train --save/--resume: two epochs in one run equal one epoch, a checkpoint, and a
# resumed second epoch, byte for byte (the exported models are compared).
#   train_resume.sh OTTER_TRAIN MODEL TRAIN
set -euo pipefail
bin=$1 model=$2 train=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(--data "$train" --device cpu --batch-size 16 --accum 2 --optimizer adam --lr 0.01 --seed 3)
"$bin" train "$model" "${flags[@]}" --epochs 2 --export "$out/straight.onnx" >/dev/null
"$bin" train "$model" "${flags[@]}" --epochs 1 --save "$out/ckpt" >/dev/null
"$bin" train "$model" "${flags[@]}" --epochs 2 --resume "$out/ckpt" --export "$out/resumed.onnx" | tee "$out/stdout"
grep -q "^epoch 2/2" "$out/stdout" || { echo "FAIL: the resumed run did not report epoch 2"; exit 1; }
if grep -q "^epoch 1/2" "$out/stdout"; then echo "FAIL: the resumed run trained epoch 1 again"; exit 1; fi
cmp "$out/straight.onnx" "$out/resumed.onnx" || { echo "FAIL: resumed training differs"; exit 1; }
echo "PASS: resumed training is byte-identical"
