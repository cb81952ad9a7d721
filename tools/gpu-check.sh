#!/usr/bin/env bash
# Runs on the lent GPU machine (see docs/cuda.md) in a copy of the working tree carrying .gpu/ from
# tools/gpu-pack.sh: unpacks the binaries, finds cuBLAS/cuBLASLt/cuDNN on the machine, records
# nvidia-smi, runs every CUDA test (the differential suite included) and then the benchmarks where
# the pack has them. Every log goes under $OUT; a summary is printed at the end.
#
#   run{carry: [".gpu"], command: "bash tools/gpu-check.sh", timeout_s: ...}
#
# Environment: OUT (default ./gpu-out), OTTER_GPU_TEST_TIMEOUT (seconds, default 420),
# OTTER_GPU_BENCH_TIMEOUT (seconds per benchmark run, default 120).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
test_timeout=${OTTER_GPU_TEST_TIMEOUT:-420}
bench_timeout=${OTTER_GPU_BENCH_TIMEOUT:-120}
summary=()
note() { summary+=("$*"); echo "gpu-check: $*"; }

[ -f .gpu/otter-gpu.tar.xz ] || { echo "gpu-check: .gpu/otter-gpu.tar.xz is missing (run tools/gpu-pack.sh, carry .gpu)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf .gpu/otter-gpu.tar.xz
cp "$work/MANIFEST" "$OUT/MANIFEST"
note "pack: $(head -1 "$work/MANIFEST")"

# cuBLAS, cuBLASLt and cuDNN: known places first, then one search of the file system.
want=(libcublasLt.so.13 libcublas.so.13 libcudnn.so.9)
dirs=()
find_dir() {
  local name=$1 d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/lib/x86_64-linux-gnu /usr/lib64 ${dirs[@]+"${dirs[@]}"}; do
    [ -e "$d/$name" ] && { echo "$d"; return; }
  done
  python3 - "$name" 2>/dev/null <<'EOF' && return
import glob, os, site, sys
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for hit in glob.glob(os.path.join(base, "nvidia", "*", "lib", sys.argv[1])):
        print(os.path.dirname(hit)); sys.exit(0)
sys.exit(1)
EOF
  find / -xdev -name "$name" -not -path '/proc/*' 2>/dev/null | head -1 | xargs -r dirname
}
for lib in "${want[@]}"; do
  d=$(find_dir "$lib")
  if [ -z "$d" ]; then note "MISSING $lib on this machine"; continue; fi
  dirs+=("$d")
  note "$lib in $d"
done
libpath=$(printf '%s:' ${dirs[@]+"${dirs[@]}"} | awk -v RS=: '!seen[$0]++ && length' | paste -sd:)
export LD_LIBRARY_PATH="$work/lib${libpath:+:$libpath}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OTTER_SOURCE_DIR=$root  # tests that read models/ find them in this copy of the tree

if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
  head -15 "$OUT/nvidia-smi.txt"
else
  note "no nvidia-smi on this machine"
fi
ldd "$work"/bin/* >"$OUT/ldd.txt" 2>&1
if grep -q 'not found' "$OUT/ldd.txt"; then note "unresolved libraries: $(grep 'not found' "$OUT/ldd.txt" | awk '{print $1}' | sort -u | paste -sd' ')"; fi

"$work/bin/otter-train" kernels --format tsv >"$OUT/kernels.tsv" 2>&1
note "registered CUDA kernels: $(awk -F'\t' '$2 == "cuda"' "$OUT/kernels.tsv" | wc -l)"

# Every CUDA test: gtest's XML carries the per-test outcome, the log the failures' output.
timeout "$test_timeout" "$work/bin/cuda_tests" --gtest_output="xml:$OUT/cuda_tests.xml" >"$OUT/cuda_tests.log" 2>&1
rc=$?
passed=$(grep -c '^\[       OK \]' "$OUT/cuda_tests.log")
failed=$(grep -c '^\[  FAILED  \] .*(' "$OUT/cuda_tests.log")
skipped=$(grep -c '^\[  SKIPPED \] .*(' "$OUT/cuda_tests.log")
note "cuda_tests: exit $rc, $passed passed, $failed failed, $skipped skipped (log: cuda_tests.log)"
[ "$rc" -eq 124 ] && note "cuda_tests timed out after ${test_timeout}s"
[ "$skipped" -gt 0 ] && note "first skip reason: $(grep -m1 -A1 ': Skipped$' "$OUT/cuda_tests.log" | tail -1)"
mapfile -t failures < <(grep '^\[  FAILED  \] .*(' "$OUT/cuda_tests.log" | head -40)
for f in ${failures[@]+"${failures[@]}"}; do note "  $f"; done

# NCCL (issue 18): one rank still makes a communicator and runs the all-reduce kernels. Under mpirun
# where this machine has it; else as an MPI singleton (Open MPI starts one without mpirun where its
# runtime is present). The digits MLP trains 5 steps on CUDA with --distributed mpi.
nccl_run() {
  "$@" "$work/bin/otter-train" train "$root/models/digits/mlp.onnx" --data "$root/models/digits/train.npz" \
    --device cuda --distributed mpi --steps 5 --batch-size 32 >"$OUT/nccl.log" 2>&1
}
if command -v mpirun >/dev/null; then
  nccl_run timeout "$bench_timeout" mpirun -np 1 --allow-run-as-root
else
  nccl_run timeout "$bench_timeout"
fi
nccl_rc=$?
note "NCCL all-reduce, 1 rank ($(command -v mpirun >/dev/null && echo mpirun || echo singleton)): exit $nccl_rc: $(grep -m1 -E 'N=1 rank|error' "$OUT/nccl.log" || tail -1 "$OUT/nccl.log")"

# Benchmarks, where the pack has the driver: train-step time and peak memory on CUDA, side by side
# with PyTorch eager (--vs-torch, where this machine's /usr/bin/python3 has torch). otter-bench
# reads models/ from the source path compiled into it: point that path at this copy of the tree.
if [ -x "$work/bin/otter-bench" ]; then
  src=$(sed -n 's/^source //p' "$work/MANIFEST")
  if [ -n "$src" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; fi
  vs=--vs-torch
  /usr/bin/python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1 || {
    vs=""
    note "no CUDA PyTorch at /usr/bin/python3: benchmarks without --vs-torch"
  }
  bench() {  # model precision accum
    timeout "$bench_timeout" "$work/bin/otter-bench" "$1" --device cuda --precision "$2" --accum "$3" --json $vs \
      >>"$OUT/bench.jsonl" 2>>"$OUT/bench.log" || note "otter-bench $1 $2 accum $3: exit $? (bench.log)"
  }
  for m in mlp cnn gpt; do bench "$m" fp32 1; done
  bench gpt fp32 4
  bench gpt bf16 1
  bench gpt fp16 1
  # The larger benchmark models are not in the tree (45 MB and 13 MB): made here where this
  # machine's Python has torch (and torchvision for ResNet-18), then timed in fp32 and bf16.
  for m in resnet18 gpt_large; do
    f=$root/models/resnet18/resnet18.onnx
    [ "$m" = gpt_large ] && f=$root/models/bench/gpt_large.onnx
    if [ ! -f "$f" ]; then
      timeout "$bench_timeout" /usr/bin/python3 "$root/models/export_models.py" --only "$m" >>"$OUT/bench.log" 2>&1 ||
        { note "$m: not exported (no torch/torchvision here?), not benchmarked"; continue; }
    fi
    bench "$m" fp32 1
    bench "$m" bf16 1
  done
  note "benchmarks: $(wc -l <"$OUT/bench.jsonl" 2>/dev/null || echo 0) results in bench.jsonl"
else
  note "no otter-bench in the pack: benchmarks not run"
fi

echo
echo "==== gpu-check summary ===="
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
[ "$rc" -eq 0 ]
