// Statistics of a (training) graph, as otter-opt --stats reports them: nodes by op and dtype,
// parameters, constants and state (by role) with their bytes, estimated FLOPs of the forward, backward and
// apply parts, and the activation memory of one micro-batch.
//
// Symbolic dims (the batch N) are bound by a DimBindings map; a size that depends on an unbound
// symbol makes the figures that need it unknown (-1), and the symbol is listed in `unbound`.
//
// FLOP model (an estimate, as profilers count): a multiply-add is 2 FLOPs, so MatMul, Gemm and
// ai.otter.GemmAccumulate cost 2*M*N*K (plus one per output element for a bias or the accumulated
// operand), Conv 2*out*(Cin/group*kernel) (plus the bias), ConvTranspose 2*in*(Cout/group*kernel),
// ai.otter.ConvGrad one such GEMM per dX and dW it produces (plus dY's size for dB); pools and
// their gradients one per (forward) output element per window element; reductions (including
// losses, SumToShape, GlobalNormSq, AllFinite) one per float input element; data
// movement (Reshape, Transpose, Gather, Concat, Cast, ...) none; every other op one per output
// element. The table of these cost classes lives here: it serves the statistics only.
//
// Activation memory: liveness over the micro-step program in node order (graph/liveness.h). A
// value produced by a micro-step node lives from its producer to its last micro-step use (a view,
// OpDef::views, shares its input's buffer and extends its life); graph outputs and values the
// apply program reads live to the end; new contents of state (accumulators written in place) are
// state, not activations. In-place reuse is not modelled, so the peak of the live bytes is what
// the executor allocates without a plan (free after last use); the memory-plan pass's arenas,
// when it ran, are reported beside it, and so are the micro-batch inputs.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace otter {

class JsonWriter;

using DimBindings = std::map<std::string, int64_t>;

struct TensorTotal {
  int64_t tensors = 0, elements = 0, bytes = 0;  // elements/bytes -1: unknown
};

struct GraphStats {
  struct OpCount {
    std::string op;     // "Gemm", "ai.otter.AdamUpdate"
    std::string dtype;  // of the first output
    int64_t micro_step = 0, apply = 0;
  };
  struct Sized {
    std::string name, type;  // "fc1.weight", "f32[64,64]"
    int64_t bytes = 0;
  };
  DimBindings bindings;
  std::set<std::string> unbound;
  int64_t forward_nodes = 0, backward_nodes = 0, apply_nodes = 0;
  std::vector<OpCount> ops;  // sorted by op, then dtype
  std::vector<Sized> params;
  TensorTotal param_total, constants, inputs;
  // State by role: gradient accumulators; optimizer moments and step counters; half-precision
  // copies of the weights (mixed precision); the loss scale with its good-step count; the rest
  // (model state such as BatchNorm running statistics).
  TensorTotal accumulators, optimizer_state, half_copies, loss_scale, model_state;
  // ZeRO-1 (passes/all_reduce.h, graph metadata otter.training.zero_masters): the fp32 master
  // weights held as one rank's shard (state %w.master), and the parameters whose masters they are
  // (counted in param_total too, whole, but holding only their initial value).
  TensorTotal master_shards, sharded_params;
  // Parameters by role: trainable (those with a gradient; every trainable initializer when no
  // backward graph was built) and frozen (every other float initializer of rank >= 1: weights that
  // are not trained, held in the precision they are stored in, e.g. bf16 copies under LoRA). The
  // gradients (accumulators) and the optimizer state belong to the trainable ones only.
  TensorTotal trainable_params, frozen_params;
  int64_t forward_flops = 0, backward_flops = 0, apply_flops = 0;  // -1: unknown
  int64_t activation_peak_bytes = 0;  // -1: unknown
  std::string activation_peak_at;     // the node at which the peak is reached
  struct Plan {
    std::string program;  // "micro-step", "apply"
    int64_t arena_bytes = 0, unplanned_peak_bytes = 0, buffers = 0;
  };
  std::vector<Plan> memory_plans;  // recorded by the memory-plan pass, if it ran
};

// Bytes of the weights a rank keeps for training: the parameters, with each one ZeRO-1 shards
// counted as its master shard (param_total - sharded_params + master_shards); -1 when unknown.
int64_t resident_param_bytes(const GraphStats& s);

GraphStats compute_graph_stats(const Graph& g, const DimBindings& bindings = {});
void print_graph_stats(const GraphStats& s, std::ostream& os);
void write_graph_stats_json(const GraphStats& s, JsonWriter& w);

}  // namespace otter
