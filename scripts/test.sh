#!/usr/bin/env bash
# Builds otter (scripts/setup.sh) and runs every test: the GoogleTest suites, the tool tests and
# the lit/FileCheck text tests, all registered with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${OTTER_BUILD_DIR:-build}
# ctest runs two test binaries at once on small machines; OpenMP threads that spin while idle would
# then steal each other's cores, so idle threads sleep instead.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" "$@"
