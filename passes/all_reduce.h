// all-reduce: averages the accumulated gradients across the N ranks of a data-parallel job, in
// buckets, at the start of the apply program, so that everything the apply program does (the finite
// check, unscale, global-norm clipping, the update, the loss-scale update) sees the same reduced
// gradients on every rank: every rank skips, clips and updates together.
//
// `all-reduce{world=N,bucket=BYTES}`. Needs: optimizer (the apply program reads the accumulators
// Graph::gradients names). Does: groups the accumulators, in parameter order, into buckets of at
// least BYTES (the last one smaller; at most 256 tensors each) and puts one
//   %a.grad.acc.reduced, ... = ai.otter.AllReduce(%a.grad.acc, ...) {op=sum, world=N}
// per bucket before the first node of the apply program; every apply-program use of an accumulator
// then reads its reduced value. The backward seed becomes S/(N*K) (passes/backward_seed.h), so
// the sum over ranks is the mean over the N*K micro-batches of the global batch, and each rank's
// half-precision backward runs at the scale of one process with --accum N*K (the same overflows).
// The reduction is in place (each output is its input's buffer), so the accumulators themselves
// hold the reduced gradients after the step. Records N in the
// graph (data_parallel_ranks()); counters: buckets, tensors, bytes_per_step (what each rank
// sends into the all-reduce per optimizer step).
// Does not: shard the data (the runtime gives each rank its micro-batches), touch the micro-step
// program (gradients accumulate locally over K micro-batches, one reduction per step), or pick the
// engine (the kernels use the communicator of kernels/collective.h: MPI on the host, NCCL on CUDA).
//
//   before: %found.finite = ai.otter.AllFinite(%w.grad.acc, %b.grad.acc)
//   after:  %w.grad.acc.reduced, %b.grad.acc.reduced = ai.otter.AllReduce(%w.grad.acc, %b.grad.acc) {op=sum,world=2}
//           %found.finite = ai.otter.AllFinite(%w.grad.acc.reduced, %b.grad.acc.reduced)
#pragma once

#include "passes/options.h"
#include "passes/pass.h"

namespace otter {

struct AllReduceOptions {
  int64_t world = 1;                          // N: ranks of the job
  ByteSize bucket{int64_t{25} << 20};         // bytes per bucket (PyTorch DDP's default 25 MiB)
  bool operator==(const AllReduceOptions&) const = default;
  static const OptionTable<AllReduceOptions>& table();
};

struct AllReduceStats {
  int64_t buckets = 0, tensors = 0, bytes_per_step = 0;
};

AllReduceStats all_reduce_gradients(Graph& g, const AllReduceOptions& o);
// N as the graph records it (graph metadata otter.training.data_parallel_ranks, next to the other
// training facts, so an ONNX export keeps it): 1 without the pass.
int64_t data_parallel_ranks(const Graph& g);

// "" when the graph has an apply program reading accumulators and no AllReduce yet.
std::string all_reduce_precondition(const Graph& g);

class AllReducePass : public PassWithOptions<AllReduceOptions> {
 public:
  std::string name() const override { return "all-reduce"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
