#!/usr/bin/env bash
# A checkpoint written by a 2-rank run (rank 0 writes it) resumes bitwise in a 2-rank run: 10 steps,
# save, resume to 20 steps, against 20 steps in one go: every tensor of the exported models equal
# bit for bit.
#   dp_resume.sh OTTER_TRAIN MODEL DATA [flags for otter-train train...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 model=$2 data=$3
shift 3
source "$here/mpirun.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(train "$model" --data "$data" --device cpu --accum 2 "$@")
run_mpi 2 "$bin" "${common[@]}" --steps 20 --export "$dir/straight.onnx" > "$dir/a.txt" || { cat "$dir/a.txt"; exit 1; }
run_mpi 2 "$bin" "${common[@]}" --steps 10 --save "$dir/ckpt" > "$dir/b.txt" || { cat "$dir/b.txt"; exit 1; }
run_mpi 2 "$bin" "${common[@]}" --steps 20 --resume "$dir/ckpt" --export "$dir/resumed.onnx" > "$dir/c.txt" ||
  { cat "$dir/c.txt"; exit 1; }
/usr/bin/python3 "$here/compare_runs.py" "$dir/resumed.onnx" "$dir/straight.onnx" --bitwise
