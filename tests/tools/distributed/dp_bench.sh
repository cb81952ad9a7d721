#!/usr/bin/env bash
# otter-bench --ranks 2: the bench runs itself under mpirun and as one process with the same global
# batch, and prints both step times, the communication time and share, the optimizer state per rank
# (half of one process's with --zero 1: the GPT's byte counts, which dp_zero_stats.sh derives from
# the ONNX file), the fp32 weights per rank (in bf16 the sharded masters: about half) and the
# ratios; --ranks under mpirun is refused.
#   dp_bench.sh OTTER_BENCH
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
source "$here/mpirun.sh"
out=$("$bin" gpt --ranks 2 --zero 1 --batch 4 --steps 2 --warmup 1 --threads 1 2>&1) || { echo "$out"; exit 1; }
echo "$out"
fail() { echo "FAIL: $1"; exit 1; }
grep -q "^gpt (batch 4, global batch 8, fp32, adamw, 1 threads per process)$" <<< "$out" || fail "no header line"
grep -qE "^  1 process, accum 2: +[0-9.]+ ms/step .*, optimizer state 0\.2 MiB \(240648 B\), fp32 weights 0\.1 MiB \(120320 B\)$" <<< "$out" || fail "no 1-process line"
# In fp32 every master stays whole on every rank (the forward reads it).
grep -qE "^  2 ranks, accum 1, zero 1: +[0-9.]+ ms/step .*, communication [0-9.]+ ms/step \([0-9.]+%\), optimizer state per rank 0\.1 MiB \(120328 B\), fp32 weights per rank 0\.1 MiB \(120320 B\)$" <<< "$out" ||
  fail "no 2-rank line with communication and half the optimizer state"
grep -qE "^  step time 2 ranks / 1 process: [0-9.]+; compute share [0-9.]+, communication share [0-9.]+$" <<< "$out" ||
  fail "no ratio line"
# In bf16 the 13 weights with half copies keep half of their fp32 masters per rank: 26624 of the
# 30080 parameter elements, so 4 * (30080 - 26624 / 2) = 67072 B (dp_zero_stats.sh derives it from
# the ONNX file).
out=$("$bin" gpt --ranks 2 --zero 1 --precision bf16 --batch 4 --steps 2 --warmup 1 --threads 1 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grep -qE "^  1 process, accum 2: +[0-9.]+ ms/step .*, optimizer state 0\.2 MiB \(240648 B\), fp32 weights 0\.1 MiB \(120320 B\)$" <<< "$out" || fail "no bf16 1-process line"
grep -qE "^  2 ranks, accum 1, zero 1: +[0-9.]+ ms/step .*, optimizer state per rank 0\.1 MiB \(120328 B\), fp32 weights per rank 0\.1 MiB \(67072 B\)$" <<< "$out" ||
  fail "no bf16 2-rank line with the masters sharded"
err=$(bash "$here/run_mpi.sh" 2 "$bin" gpt --ranks 2 --steps 1 2>&1) && fail "--ranks under mpirun succeeded"
grep -q "is not itself run under mpirun" <<< "$err" || fail "no clear error for --ranks under mpirun: $err"
echo "PASS: otter-bench --ranks 2"
