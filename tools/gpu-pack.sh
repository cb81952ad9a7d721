#!/usr/bin/env bash
# Builds otter for a lent GPU and packs what tools/gpu-check.sh runs there into .gpu/ (see
# docs/cuda.md): a Release build with the CUDA backend for sm_90, the CUDA runtime static, the test
# and tool binaries stripped, and the shared libraries they need that the GPU machine lacks
# (libonnx, libprotobuf, OpenBLAS and its Fortran runtime, ...; not glibc, not cuBLAS/cuDNN, which
# gpu-check.sh finds there), all in one xz archive that must stay under the 64 MiB a run carries.
#
#   tools/gpu-pack.sh            # then: run{carry: [".gpu"], command: "bash tools/gpu-check.sh"}
#
# Environment: OTTER_GPU_BUILD_DIR (default build-gpu), OTTER_GPU_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${OTTER_GPU_BUILD_DIR:-build-gpu}
jobs=${OTTER_GPU_JOBS:-$(nproc)}
limit=$((64 * 1024 * 1024))

mkdir -p "$build"
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOTTER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPython3_EXECUTABLE=/usr/bin/python3 >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }

# The binaries gpu-check.sh runs: the CUDA tests, the tools, and the benchmark driver where it exists.
targets=(cuda_tests otter-train)
if ninja -C "$build" -t targets all | grep -q '^otter-bench:'; then targets+=(otter-bench); fi
ninja -C "$build" -j"$jobs" "${targets[@]}"

stage=.gpu/stage
rm -rf .gpu
mkdir -p "$stage/bin" "$stage/lib"
for t in "${targets[@]}"; do
  bin=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$bin" ] || { echo "gpu-pack: built target $t not found under $build" >&2; exit 1; }
  cp "$bin" "$stage/bin/"
  strip "$stage/bin/$t"
done

# Shared libraries: everything ldd resolves except glibc's own and the CUDA libraries.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libcuda\.so|libcudart|libcublas|libcudnn)'
for b in "$stage"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if [[ "$soname" =~ $skip ]]; then continue; fi
  cp -L "$path" "$stage/lib/$soname"
  strip --strip-unneeded "$stage/lib/$soname" 2>/dev/null || true
done
if ldd "$stage"/bin/* | grep -q 'not found'; then
  echo "gpu-pack: unresolved libraries here:" >&2
  ldd "$stage"/bin/* | grep 'not found' >&2
  exit 1
fi

{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "cuda $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'), architectures 90"
  echo "source $PWD"  # compiled into the binaries as OTTER_SOURCE_DIR
  (cd "$stage" && find . -type f -printf '%10s %p\n' | sort -k2)
} >"$stage/MANIFEST"

tar -C "$stage" -cJf .gpu/otter-gpu.tar.xz .
unpacked=$(du -sb "$stage" | cut -f1)
rm -rf "$stage"
packed=$(stat -c %s .gpu/otter-gpu.tar.xz)
echo "gpu-pack: .gpu/otter-gpu.tar.xz $((packed / 1024)) KiB ($((unpacked / 1024 / 1024)) MiB unpacked): ${targets[*]}"
if [ "$packed" -ge "$limit" ]; then
  echo "gpu-pack: the archive exceeds the 64 MiB a run may carry" >&2
  exit 1
fi
