// recompute: trades compute for memory in the backward graph. A forward activation that a backward
// node reads is normally kept alive from its producer until that read; instead, the backward graph
// recomputes it from values that are kept anyway, right before its first backward use, so the
// forward value dies at its last forward use.
//
// `recompute{policy=none|cheap|layers|auto, budget=BYTES}`, between autodiff (and loss-scale) and
// grad-accumulation (passes/pipelines.cc). What is recomputed:
//   cheap   forward values produced by cheap ops (everything but MatMul, Gemm, Conv, ai.otter.Attention
//           and the other contractions: element-wise ops, Cast, normalisations, Softmax, data movement), from
//           values the backward graph keeps anyway, through chains of up to four cheap ops.
//   layers  only layer boundaries are kept: the residual stream (an Add of two activations, or the
//           sum output of an ai.otter.AddLayerNorm, that is a cut of the forward graph: every later
//           forward node depends on the inputs only through it), or, without residual sums, every
//           ~sqrt(n)-th cut; everything inside a layer is
//           recomputed from its boundary during that layer's backward.
//   auto    a greedy ladder none -> cheap -> layers: the first whose planned micro-step arena
//           (passes/memory_plan.h, the plan the executor runs on) fits `budget`; layers when none
//           does (counter fits = 0). Needs static shapes.
// Dropout is never drawn again: its output is recomputed from the kept mask as
// ai.otter.DropoutGrad(x, mask, ratio, training_mode), which is the forward's x * mask / (1 - ratio)
// in the same arithmetic (kernels/common/elementwise_grad.h), so results are bitwise unchanged.
// Other random ops (RandomNormalLike, ...) are never recomputed.
// Recomputed nodes are the forward node's clone named `<node>.recompute`, outputs `<value>.recompute`.
// Counters: recomputed_nodes, recomputed_values, saved_bytes_before/after (activations the
// backward reads that stay alive), and with static shapes arena_bytes_before/after (the planned
// micro-step arena), peak_bytes_before/after (free-after-last-use peak) and extra_flops.
// Does not: move forward nodes, recompute graph outputs or state updates (alive anyway).
//
//   before: %h = Gemm(%x, %w1)  %a = Relu(%h)  %y = Gemm(%a, %w2) ... %w2.grad = Gemm(%y.grad, %a)
//   after (cheap): ... %a.recompute = Relu(%h)  %w2.grad = Gemm(%y.grad, %a.recompute)
#pragma once

#include "passes/pass.h"

namespace otter {

enum class RecomputePolicy : uint8_t { kNone, kCheap, kLayers, kAuto };
const EnumNames<RecomputePolicy>& enum_names(RecomputePolicy);

struct RecomputeOptions {
  RecomputePolicy policy = RecomputePolicy::kNone;
  ByteSize budget;  // auto: the planned micro-step arena must fit (0: as little as the ladder gets)
  bool operator==(const RecomputeOptions&) const = default;
  static const OptionTable<RecomputeOptions>& table();
};

struct RecomputeStats {
  RecomputePolicy applied = RecomputePolicy::kNone;  // auto: the rung of the ladder it chose
  int64_t recomputed_nodes = 0, recomputed_values = 0;
  int64_t saved_bytes_before = 0, saved_bytes_after = 0;    // activations kept for the backward graph
  int64_t arena_bytes_before = -1, arena_bytes_after = -1;  // -1: shapes not static
  int64_t peak_bytes_before = -1, peak_bytes_after = -1;
  int64_t extra_flops = -1;
  bool fits = true;  // auto: the chosen rung's arena fits the budget
};

// Applies `o.policy` (kNone changes nothing); fails on a graph without a backward graph.
RecomputeStats recompute(Graph& g, const RecomputeOptions& o);

// The planned arena of the micro-step program as the graph stands (memory-plan's placement on a
// scratch copy of the plans; the graph's own plans are left as they were). -1 unless shapes are static.
int64_t planned_micro_step_arena(Graph& g);

class RecomputePass : public PassWithOptions<RecomputeOptions> {
 public:
  std::string name() const override { return "recompute"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
