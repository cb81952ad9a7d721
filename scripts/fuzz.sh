#!/usr/bin/env bash
# Builds otter's libFuzzer targets (fuzz/, clang 14, -fsanitize=fuzzer,address,undefined) into
# build-fuzz/ and runs each for a while, one after the other, then prints executions, coverage and
# crashes per target. Usage:
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [TARGET...]     (default: 20 s, every target)
#
# Targets: onnx_model onnx_text npz pipeline checkpoint (fuzz/entry_points.h). The working corpus
# lives in build-fuzz/corpus/<target>/, seeded from tests/data/fuzz/<target>/ (the regression corpus
# the normal test suite replays), models/, tests/data/ and ONNX's test models; dictionaries are in
# fuzz/*.dict. Crashing inputs land in build-fuzz/crashes/<target>/: fix the bug, then copy the
# input into tests/data/fuzz/<target>/. Environment: OTTER_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
jobs=$(nproc)
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(onnx_model onnx_text npz pipeline checkpoint)
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (targets: ${all[*]})" >&2; exit 2; }
done

scripts/setup.sh --fuzz-deps
build=${OTTER_FUZZ_BUILD_DIR:-build-fuzz}
mkdir -p "$build"
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache} CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [ ! -f "$build/build.ninja" ]; then
  # -O1 with line tables: stack traces name lines, and the build is twice as fast as at -O2 -g.
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DOTTER_CUDA=OFF -DOTTER_FUZZ=ON -DPython3_EXECUTABLE=/usr/bin/python3 >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
fi
ninja -C "$build" -j"$jobs" "${targets[@]/#/fuzz_}"

# Seeds: the regression corpus plus files of each format found in the tree.
seed() {  # seed TARGET FILE...: copies the files (up to 1 MB each) into the working corpus
  local dir=$build/corpus/$1
  shift
  for f in "$@"; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 1048576 ] && cp -n "$f" "$dir/$(echo "$f" | tr / _)" || true
  done
}
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  cp -n tests/data/fuzz/"$t"/* "$build/corpus/$t/" 2>/dev/null || true
done
seed onnx_model models/digits/*.onnx $(ls /usr/share/libonnx-testdata/data/node/*/model.onnx 2>/dev/null | head -300)
seed onnx_text $(find tests -name '*.onnxtxt')
seed npz tests/data/*.npz tests/data/*.npy models/digits/test.npz models/digits/mlp_forward_ref.npz
if [[ " ${targets[*]} " == *" pipeline "* ]]; then
  grep -rhoE -- "--passes '[^']+'" tests docs 2>/dev/null | sed "s/--passes '//; s/'$//" | sort -u | head -200 |
    while IFS= read -r p; do printf '%s' "$p" >"$build/corpus/pipeline/seed-$(printf '%s' "$p" | md5sum | cut -c1-12)"; done
fi
if [[ " ${targets[*]} " == *" checkpoint "* ]]; then
  OTTER_FUZZ_WRITE_SEED="$build/corpus/checkpoint/seed-valid" "$build/fuzz/fuzz_checkpoint" 2>/dev/null || true
fi

summary=()
for t in "${targets[@]}"; do
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  log=$build/fuzz-$t.log
  echo "fuzz.sh: $t for ${seconds} s (log: $log)"
  before=$(ls "$build/crashes/$t" | wc -l)
  # One process, lowest priority; OTTER_MAX_* limits are set by the target (fuzz/entry_points.cc).
  nice -n 19 "$build/fuzz/fuzz_$t" "$build/corpus/$t" "${dict[@]}" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=2560 -max_len=1048576 -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" >"$log" 2>&1 || true
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  crashes=$(($(ls "$build/crashes/$t" | wc -l) - before))
  summary+=("$(printf '%-11s %6s s  %10s execs  %-22s %s new crash(es)' "$t" "$seconds" "${execs:-0}" "${cov:-cov: ?}" "$crashes")")
done
echo
echo "fuzz.sh summary (corpus: $build/corpus, crashes: $build/crashes)"
printf '%s\n' "${summary[@]}"
! grep -q " [1-9][0-9]* new crash" <<<"$(printf '%s\n' "${summary[@]}")"
