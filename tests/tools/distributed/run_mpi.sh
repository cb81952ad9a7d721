#!/usr/bin/env bash
# run_mpi.sh N CMD...: CMD on N ranks of this machine with Open MPI's TCP transport (the one that
# crosses machines); as root with --allow-run-as-root. One OpenMP thread per rank.
n=$1
shift
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
OMP_NUM_THREADS=1 exec mpirun -np "$n" --oversubscribe --mca pml ob1 --mca btl self,tcp "${extra[@]}" "$@"
