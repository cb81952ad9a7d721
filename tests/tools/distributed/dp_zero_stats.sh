#!/usr/bin/env bash
# ZeRO-1 keeps 1/N of the optimizer state per rank: `otter-opt --stats` of the training pipeline
# with all-reduce{world=N,zero=1} reports optimizer_state_bytes (the pass's counter) and the graph's
# optimizer state (graph statistics, from the state tensors' shapes), and both must equal what the
# model's float parameters (read from the ONNX file by Python's onnx) need: AdamW's two fp32 moments
# of ceil(n/N) elements per parameter of n elements, plus the 8-byte step counter; the
# unsharded counter the same with n elements. N = 2 and 3 (shards padded). In bf16 the same for the
# fp32 master weights (master_weight_bytes) of the weights with half copies.
#   dp_zero_stats.sh OTTER_OPT MODEL...
set -euo pipefail
bin=$1
shift
status=0
for model in "$@"; do
  for n in 2 3; do
    p="canonicalize,add-loss{type=ce},autodiff,grad-accumulation{steps=2},optimizer{type=adamw},all-reduce{world=$n,zero=1}"
    out=$("$bin" "$model" --passes "$p" --stats --batch 4 -o /dev/null 2>&1)
    counter=$(sed -n 's/^ *optimizer_state_bytes = \([0-9]*\)$/\1/p' <<< "$out")
    unsharded=$(sed -n 's/^ *optimizer_state_bytes_unsharded = \([0-9]*\)$/\1/p' <<< "$out")
    graph=$(sed -n 's/^ *optimizer state: .* elements, \([0-9]*\) B .*/\1/p' <<< "$out")
    read -r want want_full < <(/usr/bin/python3 - "$model" "$n" <<'EOS'
import math, sys
import onnx
from onnx import numpy_helper
n = int(sys.argv[2])
sizes = [numpy_helper.to_array(t).size for t in onnx.load(sys.argv[1]).graph.initializer]
sizes = [s for t, s in zip(onnx.load(sys.argv[1]).graph.initializer, sizes) if t.data_type == onnx.TensorProto.FLOAT]
print(2 * 4 * sum(math.ceil(s / n) for s in sizes) + 8, 2 * 4 * sum(sizes) + 8)
EOS
)
    if [ "$counter" = "$want" ] && [ "$graph" = "$want" ] && [ "$unsharded" = "$want_full" ]; then
      echo "PASS: $(basename "$model") N=$n: optimizer state per rank $counter B of $want_full B unsharded"
    else
      echo "FAIL: $(basename "$model") N=$n: counter '$counter', graph '$graph', unsharded '$unsharded';" \
        "expected $want per rank of $want_full"
      status=1
    fi
  done
  # bf16: the masters of the weights with half copies (the graph's `state %W.bf16` lines name them)
  # are sharded: ceil(n/N) fp32 elements per rank; the other parameters' masters stay whole. Both
  # the pass's counter and the graph's "master weight shards" against the ONNX file's sizes.
  for n in 2 3; do
    p="canonicalize,add-loss{type=ce},mixed-precision{dtype=bf16},autodiff,grad-accumulation{steps=2},optimizer{type=adamw},hoist-weight-casts,all-reduce{world=$n,zero=1}"
    out=$("$bin" "$model" --passes "$p" --stats --batch 4 2>&1)
    counter=$(sed -n 's/^ *master_weight_bytes = \([0-9]*\)$/\1/p' <<< "$out")
    unsharded=$(sed -n 's/^ *master_weight_bytes_unsharded = \([0-9]*\)$/\1/p' <<< "$out")
    graph=$(sed -n 's/^ *master weight shards: .* elements, \([0-9]*\) B .*(of parameters.*/\1/p' <<< "$out")
    halves=$(sed -n 's/^  state %\(.*\)\.bf16: bf16.*/\1/p' <<< "$out" | tr '\n' ' ')
    read -r want want_full want_shards < <(/usr/bin/python3 - "$model" "$n" "$halves" <<'EOS'
import math, sys
import onnx
from onnx import numpy_helper
n, halves = int(sys.argv[2]), set(sys.argv[3].split())
sizes = {t.name: numpy_helper.to_array(t).size for t in onnx.load(sys.argv[1]).graph.initializer
         if t.data_type == onnx.TensorProto.FLOAT}
assert halves and halves <= set(sizes), (halves, sorted(sizes))
shards = sum(4 * math.ceil(s / n) for k, s in sizes.items() if k in halves)
print(shards + sum(4 * s for k, s in sizes.items() if k not in halves), 4 * sum(sizes.values()), shards)
EOS
)
    if [ "$counter" = "$want" ] && [ "$unsharded" = "$want_full" ] && [ "$graph" = "$want_shards" ]; then
      echo "PASS: $(basename "$model") bf16 N=$n: fp32 masters per rank $counter B of $want_full B unsharded" \
        "($(wc -w <<< "$halves") sharded: $graph B)"
    else
      echo "FAIL: $(basename "$model") bf16 N=$n: counter '$counter', unsharded '$unsharded', graph shards '$graph';" \
        "expected $want per rank of $want_full, shards $want_shards"
      status=1
    fi
  done
done
exit $status
