#!/usr/bin/env bash
# CPU runs load no CUDA library (docs/performance.md, "Start-up"): cuBLASLt, cuDNN and NCCL are opened
# on first use by kernels/cuda/lazy_libs.cc, never linked. Fails when an executable lists one of
# them, libcublas, the CUDA runtime or the driver as NEEDED (readelf -d), or when a CPU run of it
# (otter-*: --help; otter-train also one training step on --device cpu) loads cuBLAS(Lt), cuDNN or NCCL
# (LD_DEBUG=files, which also reports dlopen()). With the CUDA backend, LAZY_SONAMES are the
# libraries lazy_libs.cc opens (kernels/cuda/CMakeLists.txt), and each executable that has the
# backend must name them (the check is not vacuous: the backend is in the binary, only not linked);
# a CPU-only build passes "" and says so. Exit 77 (skip, with the reason) without readelf.
# Usage: lazy_cuda_libs.sh SOURCE_DIR "LAZY_SONAMES" EXECUTABLE...
set -uo pipefail
src=$1 lazy=$2
shift 2
if ! command -v readelf >/dev/null; then
  echo "SKIP: readelf not found (apt-get install binutils): cannot read the executables' NEEDED lists"
  exit 77
fi
needed_pattern='lib(nccl|cublas|cublasLt|cudnn[a-z_]*|cudart|cuda)\.so'
loaded_pattern='file=[^ ]*lib(nccl|cublas|cublasLt|cudnn[a-z_]*)\.so[.0-9]*'
if [ -z "$lazy" ]; then
  echo "CPU-only build (no CUDA backend): checking that nothing CUDA is linked or loaded"
else
  echo "CUDA backend: checking that $lazy are opened on first use, not linked nor loaded by CPU runs"
fi
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for exe in "$@"; do
  name=$(basename "$exe")
  if ! readelf -d "$exe" >"$work/dyn" 2>&1; then
    fail "$name: readelf -d failed: $(head -1 "$work/dyn")"
    continue
  fi
  linked=$(grep NEEDED "$work/dyn" | grep -oE "${needed_pattern}[.0-9]*" | xargs)
  if [ -n "$linked" ]; then
    fail "$name lists $linked as needed (readelf -d); open it in kernels/cuda/lazy_libs.cc instead"
  else
    echo "ok: $name needs no CUDA library ($(grep -c NEEDED "$work/dyn") NEEDED entries)"
  fi
  for soname in $lazy; do
    if grep -qaF "$soname" "$exe"; then
      echo "ok: $name names $soname"
    else
      fail "$name does not name $soname: the library is neither opened lazily nor linked"
    fi
  done
  runs=()
  [[ $name == otter-* ]] && runs+=("--help")  # train_example takes no --help: readelf alone
  if [[ $name == otter-train* ]]; then
    digits=$src/models/digits
    runs+=("train $digits/mlp.onnx --data $digits/train.npz --steps 1 --batch-size 8 --device cpu")
  fi
  for args in ${runs[@]+"${runs[@]}"}; do
    # shellcheck disable=SC2086  # the arguments are words
    LD_DEBUG=files "$exe" $args >"$work/out" 2>"$work/ld"
    status=$?
    loaded=$(grep -oE "$loaded_pattern" "$work/ld" | sed 's/^file=//' | sort -u | xargs)
    if [ "$status" -ne 0 ]; then
      fail "$name ${args%% *} exited with $status: $(grep -v '^ *[0-9]*:' "$work/ld" | tail -3)"
    elif [ -n "$loaded" ]; then
      fail "$name ${args%% *} loaded $loaded (LD_DEBUG=files)"
    else
      echo "ok: $name ${args%% *} loads no CUDA library"
    fi
  done
done
if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
