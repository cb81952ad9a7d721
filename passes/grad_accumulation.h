// grad-accumulation: gives every parameter gradient an fp32 accumulator and fuses the
// accumulation into the gradient's producer where it can.
//
// `grad-accumulation{steps=K}`. Needs: autodiff (Graph::gradients, the loss seed). Does: the seed
// becomes 1/K (or S/K once loss-scale has made it S); for each parameter p a state accumulator
// `p.grad.acc` (fp32 zeros) written by the micro-step program: the first micro-step of an
// optimizer step writes it, later ones add in place (ai.otter.AccumulateGrad). Where the gradient
// is a 2-D weight GEMM used only here, the GEMM itself accumulates (ai.otter.GemmAccumulate, beta 0
// then 1) and the separate add disappears: counter grads_fused. A half gradient that a Cast
// widens for its fp32 accumulator (mixed precision) is accumulated directly, the kernels widening
// it exactly: its GEMM sums fp16/bf16 products in fp32 straight into the accumulator, or
// AccumulateGrad adds it. The gradient outputs leave the graph outputs; Graph::gradients then
// names the accumulators, which the optimizer reads.
// Does not: zero accumulators (no kernel does; the first micro-step overwrites), nor touch the
// forward graph.
//
//   before: %w.grad: f32[64,10] = Gemm(%h, %y.grad) {transA=1}         output %w.grad
//   after:  state %w.grad.acc: f32[64,10]
//           %w.grad.acc.new: f32[64,10] = ai.otter.GemmAccumulate(%h, %y.grad, %w.grad.acc) {transA=1}
//           update %w.grad.acc <- %w.grad.acc.new
#pragma once

#include "passes/pass.h"

namespace otter {

struct GradAccumulationOptions {
  int64_t steps = 1;  // K
  bool operator==(const GradAccumulationOptions&) const = default;
  static const OptionTable<GradAccumulationOptions>& table();
};

struct GradAccumulationStats {
  int64_t accumulators = 0;
  int64_t grads_fused = 0;
};

GradAccumulationStats grad_accumulation(Graph& g, const GradAccumulationOptions& o);
// "" when the graph has unaccumulated gradients, else what is missing.
std::string grad_accumulation_precondition(const Graph& g);

class GradAccumulationPass : public PassWithOptions<GradAccumulationOptions> {
 public:
  std::string name() const override { return "grad-accumulation"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
