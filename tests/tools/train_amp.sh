#!/usr/bin/env bash
# Mixed-precision training through otter-train: the same run in fp32, fp16 and bf16; the half
# runs must reach the fp32 run's test accuracy within one point.
#   train_amp.sh OTTER_TRAIN MODEL TRAIN TEST [flags for otter-train train...]
set -euo pipefail
bin=$1 model=$2 train=$3 test=$4
shift 4
accuracy() {
  "$bin" train "$model" --data "$train" --eval-data "$test" --device cpu "$@" |
    sed -n 's/^final:.*eval accuracy \([0-9.]*\)%.*/\1/p'
}
fp32=$(accuracy --precision fp32 "$@")
[ -n "$fp32" ] || { echo "FAIL: no final accuracy from the fp32 run"; exit 1; }
status=0
for p in fp16 bf16; do
  acc=$(accuracy --precision "$p" "$@")
  [ -n "$acc" ] || { echo "FAIL: no final accuracy from the $p run"; exit 1; }
  if awk -v a="$acc" -v b="$fp32" 'BEGIN { d = a - b; exit !(d >= -1 && d <= 1) }'; then
    echo "PASS: $p test accuracy $acc%, fp32 $fp32%"
  else
    echo "FAIL: $p test accuracy $acc% is more than one point from fp32's $fp32%"
    status=1
  fi
done
exit $status
