#!/usr/bin/env bash
# Data-parallel runs that cannot work end with one clear message and a non-zero exit, and no rank
# hangs: ranks given different flags, a data set smaller than one global batch of N*K*b, and a rank
# that stops answering (SIGSTOP) while the other waits in a collective (--comm-timeout).
#   dp_errors.sh OTTER_TRAIN MODEL DATA
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 model=$2 data=$3
source "$here/mpirun.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
# expect NAME PATTERN CMD...: CMD must fail within 120 s with PATTERN in its output.
expect() {
  local name=$1 pattern=$2
  shift 2
  local start=$SECONDS rc=0
  timeout -s KILL 120 "$@" > "$dir/out.txt" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "FAIL: $name: succeeded"; status=1
  elif [ "$rc" = 137 ]; then
    echo "FAIL: $name: still running after 120 s (a rank hangs)"; status=1
  elif ! grep -q -- "$pattern" "$dir/out.txt"; then
    echo "FAIL: $name: no '$pattern' in:"; cat "$dir/out.txt"; status=1
  else
    echo "PASS: $name ($((SECONDS - start)) s): $(grep -m1 -- "$pattern" "$dir/out.txt")"
  fi
}
common=(train "$model" --data "$data" --device cpu --batch-size 8 --accum 2 --seed 0)
# Rank 1 gets another learning rate: the fingerprints differ.
cat > "$dir/mismatch.sh" <<EOS
#!/usr/bin/env bash
lr=0.01; [ "\$OMPI_COMM_WORLD_RANK" = 1 ] && lr=0.02
exec "$bin" ${common[*]} --steps 5 --lr \$lr
EOS
expect "ranks with different flags" "differ across ranks" bash "$here/run_mpi.sh" 2 bash "$dir/mismatch.sh"
expect "data smaller than N*K*b" "fewer than one global batch of N\*K\*b = 2\*2\*1000" \
  bash "$here/run_mpi.sh" 2 "$bin" train "$model" --data "$data" --device cpu --batch-size 1000 --accum 2 --steps 1
# Rank 1 stops (SIGSTOP) a second after it started; rank 0 waits for it in a collective until the
# deadline, then the job ends.
cat > "$dir/stall.sh" <<EOS
#!/usr/bin/env bash
"$bin" ${common[*]} --steps 1000000 --comm-timeout 3 &
pid=\$!
echo \$pid >> "$dir/pids"
trap 'kill -KILL \$pid 2>/dev/null; exit 1' TERM INT HUP
if [ "\$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 1; kill -STOP \$pid; fi
wait \$pid
EOS
expect "a rank that stops answering" "timed out after 3 s" bash "$here/run_mpi.sh" 2 bash "$dir/stall.sh"
# The stopped rank, should the launcher have left it behind.
[ -f "$dir/pids" ] && while read -r p; do kill -KILL "$p" 2> /dev/null; done < "$dir/pids"
exit $status
