// optimizer: appends the apply program (run once per optimizer step) that updates the parameters.
//
// `optimizer{type=sgd|momentum|adam|adamw, lr, beta1, beta2, eps, weight_decay, momentum,
// nesterov, clip_norm, schedule=constant|linear-warmup|cosine, warmup, total, min_lr}` with
// torch.optim's defaults (Adam/AdamW betas 0.9/0.999, eps 1e-8, AdamW weight decay 0.01, SGD
// momentum 0 (0.9 for type=momentum)). Needs: grad-accumulation (Graph::gradients are fp32
// accumulators). Builds, in the apply program:
//   %found.finite = ai.otter.AllFinite(every accumulator)           the multi-tensor finite check
//   %grad.scale   = ai.otter.GradScale(1/S [, GlobalNormSq(...)])    unscale and clip, one scalar
//   %lr           = ai.otter.LearningRate(%optimizer.step)
//   %w.new, ...   = ai.otter.AdamUpdate(%w, %w.grad.acc, %w.exp_avg, %w.exp_avg_sq, %optimizer.step,
//                                       %lr, %grad.scale, %found.finite)   (in place)
//   %optimizer.step.new = ai.otter.StepCount(%optimizer.step, %found.finite)
// so the unscale by S and the skip on non-finite gradients are inputs of every update; a skipped
// step changes no parameter, moment or step counter. S is 1 until loss-scale makes it state; a
// LossScaleUpdate that loss-scale placed in the apply program before this pass ran gets the finite
// check as its input, so the two passes compose in either order.
// Mixed precision: the micro-step program's Cast of a parameter to f16/bf16 (mixed-precision puts
// one per weight) would run once per micro-batch although the weight only changes here. It becomes
// state `%w.f16` (hoist_weight_cast, passes/mixed_precision.h), initialised with the rounded initial
// weight, and the update takes it as an extra input and writes the rounded new weight into it in
// the same kernel (output `%w.f16.new`): one half copy per weight per optimizer step, no Cast left
// in the micro-step program. A frozen parameter's half copy becomes a constant. Counter half_copies.
// Does not: accumulate or scale gradients (earlier passes do), nor update the loss scale.
#pragma once

#include "passes/pass.h"

namespace otter {

struct OptimizerConfig {
  std::string type = "adamw";
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = -1;  // -1: the optimizer's default (0.01 for adamw, else 0)
  double momentum = -1;      // -1: default (0.9 for type=momentum, else 0)
  bool nesterov = false;
  double clip_norm = 0;
  std::string schedule = "constant";
  int64_t warmup = 0, total = 0;
  double min_lr = 0;
};

struct OptimizerStats {
  int64_t params_updated = 0;
  int64_t state_tensors = 0;
  int64_t half_copies = 0;  // weights whose half copy the update writes (mixed precision)
};

OptimizerStats add_optimizer(Graph& g, const OptimizerConfig& c);
// "" when the graph has accumulated gradients and no optimizer yet, else what is missing.
std::string optimizer_precondition(const Graph& g);

class OptimizerPass : public Pass {
 public:
  std::string name() const override { return "optimizer"; }
  std::string summary() const override;
  std::vector<PassOption> options() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
