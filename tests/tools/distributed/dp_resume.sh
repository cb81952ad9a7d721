#!/usr/bin/env bash
# A checkpoint written by a 2-rank run (rank 0 writes it) resumes bitwise in a 2-rank run: 10 steps,
# save, resume to 20 steps, against 20 steps in one go: every tensor of the exported models equal
# bit for bit. With --zero 1 the ranks' optimizer-state shards are gathered into the checkpoint,
# whole: every state tensor has its parameter's shape. Resuming it in one process fails, naming N.
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
# Every moment in the checkpoint has the shape of its parameter (the shards gathered whole); so has
# every fp32 master ZeRO-1 sharded (<W>.master, present with --zero 1 in fp16/bf16, where it stands
# for <W>: the checkpoint holds no stale whole copy of the weight beside it).
half=0
if [[ " $* " == *" --zero 1 "* ]] && [[ " $* " == *" --precision fp16 "* || " $* " == *" --precision bf16 "* ]]; then
  half=1
fi
/usr/bin/python3 - "$dir/ckpt/state.npz" "$model" "$half" <<'EOS'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
state = np.load(sys.argv[1])
params = {t.name: numpy_helper.to_array(t).shape for t in onnx.load(sys.argv[2]).graph.initializer}
moments = [k for k in state.files if k.endswith((".exp_avg", ".exp_avg_sq"))]
bad = [k for k in moments if state[k].shape != params[k.rsplit(".", 1)[0]]]
if not moments or bad:
    sys.exit(f"FAIL: moments {moments} / not in their parameter's shape: {bad}")
print(f"PASS: {len(moments)} moments in the checkpoint, each in its parameter's shape")
masters = [k for k in state.files if k.endswith(".master")]
bad = [k for k in masters if state[k].shape != params[k[:-len(".master")]] or k[:-len(".master")] in state.files]
if (sys.argv[3] == "1") != bool(masters) or bad:
    sys.exit(f"FAIL: sharded masters {masters} (expected {'some' if sys.argv[3] == '1' else 'none'}) / not in their "
             f"parameter's shape or beside a whole copy: {bad}")
if masters:
    print(f"PASS: {len(masters)} sharded fp32 masters in the checkpoint, each whole in its parameter's shape")
EOS
rc=0
"$bin" "${common[@]}" --steps 20 --resume "$dir/ckpt" > "$dir/d.txt" 2>&1 || rc=$?
if [ "$rc" = 0 ] || ! grep -q "written by a data-parallel job of 2 ranks, and this job has 1" "$dir/d.txt"; then
  echo "FAIL: resuming the 2-rank checkpoint in one process (exit $rc):"; cat "$dir/d.txt"; exit 1
fi
echo "PASS: $(grep -m1 "written by" "$dir/d.txt")"
