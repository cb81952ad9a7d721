// loss-scale: loss scaling for float16 training: the backward pass is seeded with S (over K), so
// small gradients do not flush to zero, and the apply program unscales by 1/S, skips steps whose
// gradients overflowed and adapts S (PyTorch's GradScaler; docs/mixed-precision.md).
//
// `loss-scale{mode=dynamic|static|off, init=65536, growth=2, backoff=0.5, interval=2000}`.
// Needs: autodiff (Graph::loss_seed, a float32 constant). Runs before or after grad-accumulation
// and before or after the optimizer pass (every order gives the same graph). Does, for mode
// dynamic or static:
//   - state `%loss_scale`: f32 scalar S, `init` clamped to [1, 2^24] (Graph::loss_scale);
//   - the seed becomes `ai.otter.ScaleSeed(%loss_scale) {k=K}` = S/K under the seed's name, with K
//     as grad-accumulation recorded it (1 until it runs): passes/backward_seed.h;
//   - the optimizer's unscale reads `ai.otter.LossScaleInverse(%loss_scale)` (GradScale's 1/S: the
//     optimizer pass makes it when it runs later; an earlier optimizer's constant 1 is replaced);
//   - dynamic only: state `%loss_scale.good_steps` (i64) and, in the apply program,
//     `ai.otter.LossScaleUpdate(%loss_scale, %loss_scale.good_steps, %found.finite)`: on a
//     non-finite gradient S *= backoff and the count resets (the optimizer skips the step: no
//     weight, moment or step counter changes); after `interval` good steps S *= growth; S stays in
//     [1, 2^24]. The finite check is the optimizer's AllFinite; when the optimizer has not run yet
//     the input is left for it to fill in.
// mode=off changes nothing (bf16 trains without scaling: fp32's exponent range). Counters:
// scale_state (state tensors added), seed_scaled.
// Does not: check gradients or update weights (the optimizer pass does), nor cast anything.
//
//   before: const %loss.grad: f32[] = [0.25]                 (after grad-accumulation{steps=4})
//   after:  state %loss_scale: f32[] (65536)    state %loss_scale.good_steps: i64[] (0)
//           %loss.grad: f32[] = ai.otter.ScaleSeed(%loss_scale) {k=4}
//           // apply program
//           %loss_scale.new: f32[], %loss_scale.good_steps.new: i64[] = ai.otter.LossScaleUpdate(
//               %loss_scale, %loss_scale.good_steps, %found.finite) {backoff=0.5, growth=2.0, interval=2000, ...}
#pragma once

#include "passes/pass.h"

namespace otter {

enum class LossScaleMode : uint8_t { kDynamic, kStatic, kOff };
const EnumNames<LossScaleMode>& enum_names(LossScaleMode);  // dynamic, static, off

struct LossScaleOptions {
  LossScaleMode mode = LossScaleMode::kDynamic;
  double init = 65536;
  double growth = 2;
  double backoff = 0.5;
  int64_t interval = 2000;
  bool operator==(const LossScaleOptions&) const = default;
  static const OptionTable<LossScaleOptions>& table();
};

// The bounds otter keeps S in.
constexpr float kMinLossScale = 1.f;
constexpr float kMaxLossScale = 16777216.f;  // 2^24

struct LossScaleStats {
  int64_t scale_state = 0;
  int64_t seed_scaled = 0;
};

LossScaleStats loss_scale(Graph& g, const LossScaleOptions& o);

class LossScalePass : public PassWithOptions<LossScaleOptions> {
 public:
  std::string name() const override { return "loss-scale"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
