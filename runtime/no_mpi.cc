// Joining a job on a build without MPI (see distributed.h): one rank; `--distributed mpi`, or a
// launch by mpirun with several ranks, fails rather than train N unrelated copies.
#include <cstdio>
#include <cstdlib>

#include "graph/error.h"
#include "runtime/distributed.h"

namespace otter {

bool mpi_built() { return false; }

DistributedInfo init_distributed(DistributedMode mode, double) {
  const char* how = " (install libopenmpi-dev, which scripts/setup.sh does, and configure otter again)";
  OTTER_CHECK(mode != DistributedMode::kMpi, "--distributed mpi: this build of otter has no MPI support", how);
  OTTER_CHECK(mode == DistributedMode::kOff || !launched_by_mpi(),
              "launched by mpirun with several ranks, but this build of otter has no MPI support", how,
              "; pass --distributed off to run each rank alone");
  return DistributedInfo();
}

void finalize_distributed() {}

void abort_distributed(int code) {
  std::fflush(stdout);
  std::exit(code);
}

}  // namespace otter
