#!/usr/bin/env bash
# otter-bench --vs-ort on a zoo transformer (zoo:bert): one short round of otter and ONNX Runtime
# Training on the same batches, the table row without PyTorch, the per-round line and the note that
# PyTorch is not run. Skipped (exit 77, with the reason) where ONNX Runtime Training's environment
# (scripts/ort-venv.sh, which needs PyPI) is absent: tests do not install it.
# usage: bench_ort.sh OTTER_BENCH SOURCE_DIR
set -uo pipefail
bench=$1 src=$2
venv=${OTTER_ORT_VENV:-$src/.venv-ort}
if ! "$venv/bin/python" -c "import onnxruntime.training" 2>/dev/null; then
  echo "SKIP: no ONNX Runtime Training environment at $venv (make it with scripts/ort-venv.sh, which needs PyPI, or point OTTER_ORT_VENV at one)"
  exit 77
fi
export OTTER_ORT_VENV=$venv
out=$("$bench" zoo:bert --vs-ort --threads 1 --steps 2 --warmup 1 --rounds 1 --peak-size 0 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: otter-bench exited with $rc"; exit 1; }
num='[0-9][0-9.e+-]*'
grep -Eq "^\| zoo:bert \| 2 \| $num \| - \| $num \| - \| $num \| $num MiB \| $num MiB \|$" <<<"$out" ||
  { echo "FAIL: no zoo:bert row with otter and ONNX Runtime figures and none for PyTorch"; exit 1; }
grep -Eq "^  zoo:bert: otter ms $num; ORT ms $num; otter / ORT $num$" <<<"$out" ||
  { echo "FAIL: no per-round line for zoo:bert"; exit 1; }
grep -q "^PyTorch is not run for zoo:bert: " <<<"$out" || { echo "FAIL: no note that PyTorch is not run"; exit 1; }
echo "PASS"
