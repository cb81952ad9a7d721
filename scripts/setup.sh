#!/usr/bin/env bash
# Installs the Debian packages otter needs (when missing) and builds it into build/.
# Environment: OTTER_BUILD_DIR (default build), OTTER_CUDA (AUTO|ON|OFF, default AUTO),
# OTTER_BUILD_TYPE (default Release), OTTER_SANITIZE (ON: ASan + UBSan, default OFF), OTTER_CMAKE_ARGS.
# With --fuzz-deps it only installs what fuzzing needs (clang 14, its libFuzzer and sanitizer
# runtimes, its OpenMP) when missing, and builds nothing (scripts/fuzz.sh calls it so).
set -euo pipefail
cd "$(dirname "$0")/.."

# Installs the Debian packages named as arguments that are not installed yet.
install_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

if [ "${1:-}" = "--fuzz-deps" ]; then
  install_missing clang-14 libclang-rt-14-dev libomp-14-dev llvm-14
  exit 0
fi

packages=(
  cmake ninja-build g++ ccache pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libopenblas-dev libopenblas0-openmp zlib1g-dev
  llvm-14-tools libonnx-testdata graphviz
  openmpi-bin libopenmpi-dev
  python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-sklearn
  pybind11-dev python3-dev python3-matplotlib python3-tqdm python3-pytest
)
install_missing "${packages[@]}"

# Model files too large to commit (ResNet-18 and its references), made from the committed scripts.
if [ ! -f models/resnet18/resnet18.onnx ] || [ ! -f models/resnet18/resnet18_forward_ref.npz ]; then
  echo "setup: exporting ResNet-18 (models/export_models.py --only resnet18)"
  /usr/bin/python3 models/export_models.py --only resnet18 >/dev/null
  /usr/bin/python3 models/make_forward_refs.py --only resnet18 >/dev/null
fi
if [ ! -f models/bench/gpt_large.onnx ]; then  # FusedAttention.GptLargeTrainsToTheSameLosses, otter-bench all
  echo "setup: exporting gpt_large (models/export_models.py --only gpt_large)"
  /usr/bin/python3 models/export_models.py --only gpt_large >/dev/null
fi
if [ ! -f models/resnet18/resnet18_grad_ref.npz ]; then
  echo "setup: recording ResNet-18's PyTorch gradients (models/make_grad_refs.py --only resnet18)"
  /usr/bin/python3 models/make_grad_refs.py --only resnet18 >/dev/null
fi

build_dir=${OTTER_BUILD_DIR:-build}
mkdir -p "$build_dir"
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths below the checkout are hashed relative to it, so worktrees and fresh clones share hits.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
jobs=$(nproc)
# shellcheck disable=SC2086  # OTTER_CMAKE_ARGS: extra CMake arguments, split on spaces
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE="${OTTER_BUILD_TYPE:-Release}" \
  -DOTTER_CUDA="${OTTER_CUDA:-AUTO}" \
  -DOTTER_SANITIZE="${OTTER_SANITIZE:-OFF}" ${OTTER_CMAKE_ARGS:-} \
  -DPython3_EXECUTABLE=/usr/bin/python3 >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
grep -A12 "otter configuration" "$build_dir/configure.log" | sed 's/^-- //'
ninja -C "$build_dir" -j"$jobs"
