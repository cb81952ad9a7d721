# Sourced by the distributed tests: exits 77 (ctest: skipped, with the reason) where mpirun is
# missing; run_mpi N CMD... runs CMD on N ranks (run_mpi.sh).
if ! command -v mpirun > /dev/null; then
  echo "SKIP: mpirun not found (scripts/setup.sh installs openmpi-bin and libopenmpi-dev)"
  exit 77
fi
run_mpi() { bash "$(dirname "${BASH_SOURCE[0]}")/run_mpi.sh" "$@"; }
