#!/usr/bin/env bash
# Data parallelism against gradient accumulation: `mpirun -np 2 otter-train train ... --accum K`
# must give the weights of one process with `--accum 2K` (same --seed, same samples in the same
# order), within RTOL relative, and the same per-step losses, skips and loss scales.
#   dp_equivalence.sh OTTER_TRAIN MODEL DATA K RTOL [--expect-skip STEP] -- [flags for otter-train train...]
# Exit 77 (a visible skip) only where mpirun is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 model=$2 data=$3 k=$4 rtol=$5
shift 5
check_flags=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do check_flags+=("$1"); shift; done
[ "$#" -gt 0 ] && shift
source "$here/mpirun.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" train "$model" --data "$data" --device cpu --accum $((2 * k)) --export "$dir/one.onnx" \
  --log-json "$dir/one.jsonl" "$@" > "$dir/one.txt"
run_mpi 2 "$bin" train "$model" --data "$data" --device cpu --accum "$k" --export "$dir/two.onnx" \
  --log-json "$dir/two.jsonl" "$@" > "$dir/two.txt" || { cat "$dir/two.txt"; exit 1; }
grep -q "N=2 ranks" "$dir/two.txt" || { echo "FAIL: the mpirun run did not train on 2 ranks:"; cat "$dir/two.txt"; exit 1; }
lines=$(grep -c "^training .* on " "$dir/two.txt" || true)
[ "$lines" = 1 ] || { echo "FAIL: $lines ranks printed (rank 0 alone should)"; cat "$dir/two.txt"; exit 1; }
/usr/bin/python3 "$here/compare_runs.py" "$dir/two.onnx" "$dir/one.onnx" --rtol "$rtol" \
  --logs "$dir/two.jsonl" "$dir/one.jsonl" "${check_flags[@]}"
