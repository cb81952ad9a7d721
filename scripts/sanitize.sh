#!/usr/bin/env bash
# Builds otter with AddressSanitizer and UndefinedBehaviorSanitizer (CPU backend, -O1, build-asan/)
# and runs every test there; any sanitizer report or leak fails its test. Not part of CI: a cold
# build takes about 25 minutes on 2 cores. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
OTTER_BUILD_DIR=build-asan OTTER_CUDA=OFF OTTER_BUILD_TYPE=Debug OTTER_SANITIZE=ON \
  OTTER_CMAKE_ARGS=-DCMAKE_CXX_FLAGS=-O1 scripts/setup.sh
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" --timeout 900 "$@"
