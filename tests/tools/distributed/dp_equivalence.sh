#!/usr/bin/env bash
# Data parallelism against gradient accumulation: `mpirun -np N otter-train train ... --accum K`
# must give the weights of one process with `--accum N*K` (same --seed, same samples in the same
# order), within RTOL relative, and the same per-step losses, skips and loss scales. N is 2 unless
# --ranks N says otherwise; the other options before -- go to compare_runs.py.
#   dp_equivalence.sh OTTER_TRAIN MODEL DATA K RTOL [--ranks N] [--expect-skip STEP] -- [flags for otter-train train...]
# Exit 77 (a visible skip) only where mpirun is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 model=$2 data=$3 k=$4 rtol=$5
shift 5
check_flags=()
n=2
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  if [ "$1" = --ranks ]; then n=$2; shift 2; continue; fi
  check_flags+=("$1"); shift
done
[ "$#" -gt 0 ] && shift
source "$here/mpirun.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" train "$model" --data "$data" --device cpu --accum $((n * k)) --export "$dir/one.onnx" \
  --log-json "$dir/one.jsonl" "$@" > "$dir/one.txt"
run_mpi "$n" "$bin" train "$model" --data "$data" --device cpu --accum "$k" --export "$dir/two.onnx" \
  --log-json "$dir/two.jsonl" "$@" > "$dir/two.txt" || { cat "$dir/two.txt"; exit 1; }
grep -q "N=$n ranks" "$dir/two.txt" || { echo "FAIL: the mpirun run did not train on $n ranks:"; cat "$dir/two.txt"; exit 1; }
if [[ " $* " == *" --zero 1 "* ]] && ! grep -q "N=$n ranks (ZeRO-1)" "$dir/two.txt"; then
  echo "FAIL: --zero 1 was not in effect:"; cat "$dir/two.txt"; exit 1
fi
lines=$(grep -c "^training .* on " "$dir/two.txt" || true)
[ "$lines" = 1 ] || { echo "FAIL: $lines ranks printed (rank 0 alone should)"; cat "$dir/two.txt"; exit 1; }
/usr/bin/python3 "$here/compare_runs.py" "$dir/two.onnx" "$dir/one.onnx" --rtol "$rtol" \
  --logs "$dir/two.jsonl" "$dir/one.jsonl" "${check_flags[@]}"
