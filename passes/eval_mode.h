// eval-mode: turns a training-mode export into its inference form, as PyTorch's module.eval():
// BatchNormalization uses its running statistics (training_mode=0; the running-statistics outputs
// and their state updates go away, the statistics become constants) and Dropout is the identity
// (its training_mode input is dropped). Needs nothing before it; other ops are untouched.
//
//   before: %y, %bn.mean.out, %bn.var.out = BatchNormalization(...) {training_mode=1}
//   after:  %y = BatchNormalization(...)
#pragma once

#include "passes/pass.h"

namespace otter {

int64_t eval_mode(Graph& g);  // returns the number of nodes changed

class EvalModePass : public PassWithOptions<NoOptions> {
 public:
  std::string name() const override { return "eval-mode"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
