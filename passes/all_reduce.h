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
// `zero=1` (ZeRO stage 1, passes/all_reduce_zero.cc) instead reduce-scatters each accumulator
// (ai.otter.ReduceScatter, one per tensor): each rank gets the reduced gradient of its shard of
// ceil(n/N) elements of every parameter, keeps the optimizer moments of that shard only (state of
// ceil(n/N) elements: 1/N of the optimizer state per rank), updates its shard of the weight (and of
// the half copy hoist-weight-casts made) and all-gathers the new weights in place
// (ai.otter.AllGather). Where a weight has a half copy and nothing but its update reads the fp32
// master (fp16/bf16 training: the forward and backward read the half copy), the master is sharded
// too: state %w.master of ceil(n/N) elements, which the update reads and writes in place, and only
// the half copy is all-gathered; the parameter %w keeps its initial value (the runtime cuts each
// rank's shard of it into %w.master) and is no longer updated. A master anything else reads (fp32
// training, or a weight mixed precision keeps in fp32) stays whole on every rank and is gathered
// after its update. The finite check and the clipping norm read the shards, and their partial
// results are summed across the ranks (ai.otter.AllReduce of the flags and of the squared norms),
// so every rank still skips and clips on the whole reduced gradient. Runs after hoist-weight-casts
// (the half copies are sharded with their masters); records the sharded states (zero_shards()) and
// among them the sharded masters (zero_masters()) for checkpoints, evaluation and export, which
// gather them whole. Counters: tensors, bytes_per_step (reduce-scatter and all-gather inputs),
// optimizer_state_bytes (per rank) and optimizer_state_bytes_unsharded, master_weight_bytes (the
// fp32 masters per rank: sharded ones at ceil(n/N) elements) and master_weight_bytes_unsharded.
//
//   before: %found.finite = ai.otter.AllFinite(%w.grad.acc, %b.grad.acc)
//   after:  %w.grad.acc.reduced, %b.grad.acc.reduced = ai.otter.AllReduce(%w.grad.acc, %b.grad.acc) {op=sum,world=2}
//           %found.finite = ai.otter.AllFinite(%w.grad.acc.reduced, %b.grad.acc.reduced)
#pragma once

#include <map>
#include <string>

#include "passes/options.h"
#include "passes/pass.h"

namespace otter {

struct AllReduceOptions {
  int64_t world = 1;                          // N: ranks of the job
  ByteSize bucket{int64_t{25} << 20};         // bytes per bucket (PyTorch DDP's default 25 MiB)
  int64_t zero = 0;                           // ZeRO stage: 0 all-reduce, 1 sharded optimizer state
  bool operator==(const AllReduceOptions&) const = default;
  static const OptionTable<AllReduceOptions>& table();
};

struct AllReduceStats {
  int64_t buckets = 0, tensors = 0, bytes_per_step = 0;
};

struct ZeroStats {
  int64_t tensors = 0, scatter_bytes = 0, gather_bytes = 0;
  int64_t state_bytes = 0, full_state_bytes = 0;  // optimizer state per rank, and unsharded
  int64_t master_bytes = 0, full_master_bytes = 0;  // fp32 master weights per rank, and unsharded
};

AllReduceStats all_reduce_gradients(Graph& g, const AllReduceOptions& o);
// The first node of the apply program; fails naming `what` when there is none.
Node* first_apply_node(const Graph& g, const std::string& what);
// Both modes: records N in the graph and makes the backward seed S/(N*K).
void finish_all_reduce(Graph& g, int64_t world);
// zero=1: the rewrite described above, for a job of `world` ranks (passes/all_reduce_zero.cc).
ZeroStats shard_optimizer_state(Graph& g, int64_t world);
// The states zero=1 sharded (moments and masters), each with the parameter whose shard it holds
// (empty without).
std::map<std::string, std::string> zero_shards(const Graph& g);
// Of those, the sharded fp32 masters (%w.master -> %w): the parameter itself is no longer updated.
std::map<std::string, std::string> zero_masters(const Graph& g);
// Elements of each shard of a tensor of `numel` elements over `world` ranks: ceil(numel/world).
inline int64_t zero_shard_size(int64_t numel, int64_t world) { return (numel + world - 1) / world; }
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
