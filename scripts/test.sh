#!/usr/bin/env bash
# Builds otter (scripts/setup.sh) and runs every test: the GoogleTest suites, the tool tests and
# the lit/FileCheck text tests, all registered with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${OTTER_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" "$@"
