# Sourced by the distributed tests: run_mpi N CMD... runs CMD on N ranks of this machine with Open
# MPI's TCP transport (the one that crosses machines), or exits 77 (ctest: skipped, with the reason)
# where mpirun is missing.
if ! command -v mpirun > /dev/null; then
  echo "SKIP: mpirun not found (scripts/setup.sh installs openmpi-bin and libopenmpi-dev)"
  exit 77
fi
run_mpi() {
  local n=$1
  shift
  local extra=()
  [ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
  OMP_NUM_THREADS=1 mpirun -np "$n" --oversubscribe --mca pml ob1 --mca btl self,tcp "${extra[@]}" "$@"
}
