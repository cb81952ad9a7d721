// hoist-weight-casts: moves the rounding of each weight to its half copy out of the micro-step
// program, into the optimizer's update, so that it runs once per optimizer step instead of once per
// micro-batch (mixed precision, docs/architecture.md).
//
// `hoist-weight-casts` (no options). Needs: the optimizer (the apply program updates each trained
// parameter) and, to have work, mixed-precision's Casts of parameters to f16/bf16 in the micro-step
// program. For each trainable parameter %w with such Casts (one per half type):
//   - trained: the Casts become state `%w.f16` (the first Cast's name), initialised with the rounded
//     initial weight; the parameter's update (ai.otter.AdamUpdate or SGDUpdate) takes it as its last
//     input and writes the rounded new weight into it as its last output `%w.f16.new`, in the same
//     kernel as the fp32 master weight;
//   - frozen (no update): the Casts become the constant `%w.f16`, rounded once at compile time.
// Counter half_copies. Does not: cast anything else, or touch Casts of activations.
//
//   before: %fc1.weight.f16: f16[64,64] = Cast(%fc1.weight) {to=10}          (micro-step program)
//           %fc1.weight.new, ... = ai.otter.AdamUpdate(%fc1.weight, ..., %found.finite)
//   after:  state %fc1.weight.f16: f16[64,64]
//           %fc1.weight.new, ..., %fc1.weight.f16.new = ai.otter.AdamUpdate(%fc1.weight, ..., %found.finite,
//                                                                           %fc1.weight.f16)
#pragma once

#include "passes/pass.h"

namespace otter {

// Returns the number of half copies made (state or constant).
int64_t hoist_weight_casts(Graph& g);
// "" when every trained parameter has its optimizer update, else what is missing.
std::string hoist_weight_casts_precondition(const Graph& g);

class HoistWeightCastsPass : public PassWithOptions<NoOptions> {
 public:
  std::string name() const override { return "hoist-weight-casts"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
