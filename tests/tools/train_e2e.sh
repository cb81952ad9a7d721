#!/usr/bin/env bash
# End-to-end training through otter-train: trains, then checks the final test accuracy.
#   train_e2e.sh OTTER_TRAIN MIN_ACCURACY MODEL TRAIN TEST [flags for otter-train train...]
set -euo pipefail
bin=$1 min=$2 model=$3 train=$4 test=$5
shift 5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin" train "$model" --data "$train" --eval-data "$test" --device cpu --log-json "$out/log.jsonl" \
  --export "$out/trained.onnx" "$@" | tee "$out/stdout"
acc=$(sed -n 's/^final:.*eval accuracy \([0-9.]*\)%.*/\1/p' "$out/stdout")
[ -n "$acc" ] || { echo "FAIL: no final accuracy in the output"; exit 1; }
# One JSON object per optimizer step, with the fields README.md ("Training: otter-train") lists.
steps=$(sed -n 's/^trained \([0-9]*\) steps.*/\1/p' "$out/stdout")
lines=$(wc -l <"$out/log.jsonl")
[ "$lines" = "$steps" ] || { echo "FAIL: $lines log lines for $steps steps"; exit 1; }
for key in step loss lr loss_scale skipped samples_per_s; do
  grep -q "\"$key\": " "$out/log.jsonl" || { echo "FAIL: --log-json has no '$key'"; exit 1; }
done
# The exported model evaluates to the same accuracy.
exported=$("$bin" eval "$out/trained.onnx" --data "$test" --device cpu | sed -n 's/.*accuracy \([0-9.]*\)%.*/\1/p')
[ "$exported" = "$acc" ] || { echo "FAIL: the exported model scores $exported%, the session $acc%"; exit 1; }
if awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a >= m) }'; then
  echo "PASS: test accuracy $acc% >= $min%"
else
  echo "FAIL: test accuracy $acc% < $min%"
  exit 1
fi
