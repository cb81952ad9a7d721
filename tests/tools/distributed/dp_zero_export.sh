#!/usr/bin/env bash
# ZeRO-1 with sharded fp32 masters (--zero 1 in bf16/fp16: each rank keeps ceil(n/N) elements of
# every master that has a half copy) against the same 2-rank job without --zero: the exported
# models (--export gathers the masters whole) must be equal bit for bit, and so must the final
# evaluation (the eval program reads the whole fp32 weights, gathered first). Without clipping the
# update is element-wise, and the reduce-scatter sums the same two values as the all-reduce, so
# sharding changes no bit. The trained weights must also differ from the model's initial ones (an
# export of the initial values would not pass for the trained weights).
#   dp_zero_export.sh OTTER_TRAIN MODEL DATA EVAL_DATA [flags for otter-train train...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 model=$2 data=$3 eval_data=$4
shift 4
source "$here/mpirun.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(train "$model" --data "$data" --eval-data "$eval_data" --device cpu --accum 1 "$@")
run_mpi 2 "$bin" "${common[@]}" --zero 1 --export "$dir/zero.onnx" > "$dir/zero.txt" || { cat "$dir/zero.txt"; exit 1; }
grep -q "N=2 ranks (ZeRO-1)" "$dir/zero.txt" || { echo "FAIL: --zero 1 was not in effect:"; cat "$dir/zero.txt"; exit 1; }
run_mpi 2 "$bin" "${common[@]}" --export "$dir/plain.onnx" > "$dir/plain.txt" || { cat "$dir/plain.txt"; exit 1; }
/usr/bin/python3 "$here/compare_runs.py" "$dir/zero.onnx" "$dir/plain.onnx" --bitwise
a=$(grep "^final: eval" "$dir/zero.txt") b=$(grep "^final: eval" "$dir/plain.txt")
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: final evaluation '$a' with --zero 1, '$b' without"; exit 1; }
echo "PASS: the same $a"
/usr/bin/python3 - "$dir/zero.onnx" "$model" <<'EOS'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
init = {t.name: numpy_helper.to_array(t) for t in onnx.load(sys.argv[2]).graph.initializer}
same = [t.name for t in onnx.load(sys.argv[1]).graph.initializer
        if t.data_type == onnx.TensorProto.FLOAT and np.array_equal(numpy_helper.to_array(t), init[t.name])]
if same:
    sys.exit(f"FAIL: exported weights equal to the initial ones: {same}")
print("PASS: every exported float weight was trained")
EOS
