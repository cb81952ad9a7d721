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
// Mixed precision: each update op takes an optional half copy of the weight as its last input and
// output, which hoist-weight-casts (passes/hoist_weight_casts.h) wires after this pass.
// Does not: accumulate or scale gradients (earlier passes do), update the loss scale, or hoist the
// weights' half copies (hoist-weight-casts does).
#pragma once

#include "passes/pass.h"

namespace otter {

enum class OptimizerType : uint8_t { kSgd, kMomentum, kAdam, kAdamW };
const EnumNames<OptimizerType>& enum_names(OptimizerType);  // sgd, momentum, adam, adamw
enum class LrSchedule : uint8_t { kConstant, kLinearWarmup, kCosine };
const EnumNames<LrSchedule>& enum_names(LrSchedule);  // constant, linear-warmup, cosine

// The optimizer's options: the one place they are declared (the CLI and the training pipeline
// fill this struct; the pass parses it from `optimizer{...}`).
struct OptimizerOptions {
  OptimizerType type = OptimizerType::kAdamW;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::optional<double> weight_decay;  // unset: the optimizer's default (0.01 for adamw, else 0)
  std::optional<double> momentum;      // unset: 0.9 for type=momentum, else 0
  bool nesterov = false;
  double clip_norm = 0;  // 0: no clipping
  LrSchedule schedule = LrSchedule::kConstant;
  int64_t warmup = 0, total = 0;
  double min_lr = 0;
  bool operator==(const OptimizerOptions&) const = default;
  static const OptionTable<OptimizerOptions>& table();
};

struct OptimizerStats {
  int64_t params_updated = 0;
  int64_t state_tensors = 0;
};

OptimizerStats add_optimizer(Graph& g, const OptimizerOptions& o);
// "" when the graph has accumulated gradients and no optimizer yet, else what is missing.
std::string optimizer_precondition(const Graph& g);

class OptimizerPass : public PassWithOptions<OptimizerOptions> {
 public:
  std::string name() const override { return "optimizer"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
