#!/usr/bin/env bash
# A checkpoint folder that cannot be written: otter-train train --save fails with one message naming
# the file and a non-zero exit, and the previous checkpoint there stays loadable (--resume takes up
# at its step). Three ways: an injected write failure (OTTER_FAULT_INJECT=checkpoint-write), a full
# disk and a read-only folder (small tmpfs mounts, in a private mount namespace where unprivileged).
# Usage: checkpoint_faults.sh OTTER_TRAIN MODEL DATA
set -uo pipefail
train=$1 model=$2 data=$3
work=$(mktemp -d)
trap 'umount "$work/fs" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
check() {  # check NAME CONDITION...: records a failure when the condition is false
  local name=$1
  shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name"; failures=$((failures + 1)); fi
}
run() { "$train" train "$model" --data "$data" --batch-size 32 --no-shuffle --device cpu "$@"; }

# The previous checkpoint: 2 steps.
run --steps 2 --save "$work/ck" >"$work/first.log" 2>&1
check "first save" test -f "$work/ck/checkpoint.json"

# 1. Injected write failure during the next save (after 4 steps).
OTTER_FAULT_INJECT=checkpoint-write run --steps 4 --resume "$work/ck" --save "$work/ck" >"$work/inject.log" 2>&1
status=$?
check "injected failure exits non-zero" test "$status" -ne 0
check "injected failure names the file" grep -q "error: checkpoint: saving '.*ck' failed: cannot write '.*ck.tmp/checkpoint.json': No space left on device" "$work/inject.log"
check "injected failure says the previous checkpoint is unchanged" grep -q "previous checkpoint there is unchanged" "$work/inject.log"
run --steps 3 --resume "$work/ck" >"$work/resume.log" 2>&1
check "previous checkpoint loads after the injected failure" test $? -eq 0
check "it resumes at step 2" grep -q "^train  step 3 " "$work/resume.log"

# 2 and 3 need a tmpfs: mount one directly (root) or in a private user and mount namespace.
mounted_run() {  # mounted_run SCRIPT: runs SCRIPT with $fs a fresh tmpfs of 200 KiB
  local script=$1
  mkdir -p "$work/fs"
  if [ "$(id -u)" -eq 0 ]; then
    mount -t tmpfs -o size=200k tmpfs "$work/fs" && fs="$work/fs" bash -c "$script"
    local r=$?
    umount "$work/fs"
    return $r
  fi
  unshare -rm bash -c "mount -t tmpfs -o size=200k tmpfs '$work/fs' && fs='$work/fs' bash -c '$script'"
}
if ! mounted_run "true" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs here (neither root nor unprivileged namespaces); 2 of 3 faults untested"
  [ "$failures" -eq 0 ] && exit 77
  exit 1
fi
export train model data work

# 2. A full disk: the tmpfs holds one checkpoint (~70 KiB) and a filler, not the next state file.
mounted_run '
  "$train" train "$model" --data "$data" --batch-size 32 --no-shuffle --device cpu --steps 2 --save "$fs/ck" >/dev/null 2>&1 || exit 10
  dd if=/dev/zero of="$fs/filler" bs=1k count=100 2>/dev/null
  "$train" train "$model" --data "$data" --batch-size 32 --no-shuffle --device cpu --steps 4 --resume "$fs/ck" --save "$fs/ck" >"$work/full.log" 2>&1 && exit 11
  "$train" train "$model" --data "$data" --batch-size 32 --no-shuffle --device cpu --steps 3 --resume "$fs/ck" >"$work/full-resume.log" 2>&1 || exit 12
  exit 0'
check "full disk: fails, previous checkpoint loads" test $? -eq 0
check "full disk: the message names the file" grep -q "error: checkpoint: saving '.*ck' failed: cannot write '.*ck.tmp/state.npz.tmp': No space left on device" "$work/full.log"
check "full disk: resumes at step 2" grep -q "^train  step 3 " "$work/full-resume.log"

# 3. A read-only folder: the tmpfs is remounted read-only after the first save.
mounted_run '
  "$train" train "$model" --data "$data" --batch-size 32 --no-shuffle --device cpu --steps 2 --save "$fs/ck" >/dev/null 2>&1 || exit 10
  mount -o remount,ro "$fs" || exit 13
  "$train" train "$model" --data "$data" --batch-size 32 --no-shuffle --device cpu --steps 4 --resume "$fs/ck" --save "$fs/ck" >"$work/ro.log" 2>&1 && exit 11
  "$train" train "$model" --data "$data" --batch-size 32 --no-shuffle --device cpu --steps 3 --resume "$fs/ck" >"$work/ro-resume.log" 2>&1 || exit 12
  exit 0'
check "read-only folder: fails, previous checkpoint loads" test $? -eq 0
check "read-only folder: the message names the folder and the reason" grep -q "error: checkpoint: .*ck.tmp.*Read-only file system" "$work/ro.log"
check "read-only folder: resumes at step 2" grep -q "^train  step 3 " "$work/ro-resume.log"

for f in "$work"/*.log; do echo "--- $(basename "$f")"; cat "$f"; done
exit $((failures > 0))
