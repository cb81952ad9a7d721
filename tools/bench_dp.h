// otter-bench's data-parallel side (tools/otter-bench.cc): the time spent in collectives, running
// the same bench as a job of N ranks under mpirun (`--ranks N`) and reading rank 0's figures back,
// printing them against one process with the same global batch, and a main() for a process that may
// be one rank of a job.
#pragma once

#include <cstdint>
#include <string>

namespace otter {

// One configuration's step time and what the data-parallel job adds to it.
struct DpFigures {
  double ms = 0, ms_min = 0, ms_max = 0;  // median, min and max step time
  double comm_ms = 0;                     // per step inside collectives (waiting for other ranks included)
  int64_t state_bytes = 0;                // optimizer state (per rank in a job)
  int64_t weight_bytes = 0;               // parameters, ZeRO-1's master shards as shards (graph/graph_stats.h)
};

// Runs `cmd` in a shell and returns its standard output; fails naming `what` and `cmd`, with the
// output, on a non-zero exit (otter-bench's PyTorch, ONNX Runtime and mpirun children).
std::string run_child(const std::string& cmd, const std::string& what);

// Seconds this process has spent inside collectives so far (kernels/collective.h, both engines).
double comm_seconds();

// Runs this executable with its arguments less `--ranks N` as a job of `ranks` ranks under mpirun
// (Open MPI's TCP transport, as the distributed tests) with --json, and returns rank 0's figures.
// Fails with the job's output when it fails.
DpFigures run_under_mpirun(int64_t ranks, int argc, char** argv);

// The --ranks report: `single` (one process, accum `ranks`*`accum`) against the job.
void print_dp_comparison(const std::string& header, int64_t ranks, int64_t accum, bool zero, const DpFigures& single,
                         const DpFigures& job);

// main() of a tool that may be one rank of a job: an error prints "error (rank r of N): ..." and,
// in a job, ends every rank (runtime/distributed.h abort_distributed), so none waits forever.
int rank_guarded_main(int (*run)(int, char**), int argc, char** argv);

}  // namespace otter
