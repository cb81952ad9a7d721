// Joining the job of a data-parallel run: otter-train launched by `mpirun -np N` finds its rank and
// the world size, and sets the communicators of kernels/collective.h (`world()`): MPI for host
// tensors, NCCL for CUDA tensors where the build has it (bootstrapped over MPI: rank 0 makes the
// ncclUniqueId and broadcasts it). Without mpirun (and under `--distributed off`) nothing changes:
// one rank, no communicator.
//
//   DistributedInfo d = init_distributed(DistributedMode::kAuto, /*timeout_s=*/300);
//   ... TrainingOptions::world = d.size ...
//   finalize_distributed();      // at a normal end; abort_distributed(1) after an error
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/tensor.h"

namespace otter {

enum class DistributedMode : uint8_t { kAuto, kMpi, kOff };
// "auto" | "mpi" | "off"; fails with "--distributed must be auto, mpi or off, got '...'".
DistributedMode parse_distributed_mode(const std::string& text);

struct DistributedInfo {
  int rank = 0, size = 1;
  std::string engine = "none";  // "mpi" once joined
};

// True where this build has MPI support (CMake found MPI).
bool mpi_built();
// True when the environment says a launcher (mpirun, srun) started this process in a job of
// several ranks (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE...).
bool launched_by_mpi();
// kAuto joins MPI when launched_by_mpi(); kMpi always (fails without MPI support); kOff never.
// Collectives time out after `timeout_s`. Fails when launched by mpirun on a build without MPI.
DistributedInfo init_distributed(DistributedMode mode, double timeout_s);
DistributedInfo distributed_info();
// MPI_Finalize after a normal end (no-op when not joined).
void finalize_distributed();
// After an error on one rank: stops every rank of the job (MPI_Abort), so none waits forever.
[[noreturn]] void abort_distributed(int code);

// Rows [rank*n/size, (rank+1)*n/size) of every array of a global batch of n samples (n divisible by
// size): this rank's share, K micro-batches of b. Shares storage with `batch`.
std::map<std::string, Tensor> rank_shard(const std::map<std::string, Tensor>& batch, int rank, int size);

// Fails on every rank, naming the first rank that differs, unless every rank passes the same
// `fingerprint` (the model, the pipeline, the data and the flags that must agree).
void check_same_on_all_ranks(const std::string& fingerprint, const std::string& what);

}  // namespace otter
