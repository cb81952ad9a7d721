// A ConstantEvaluator backed by the CPU kernels, for constant folding in passes.
#pragma once

#include "passes/pass.h"

namespace otter {

class CpuConstantEvaluator : public ConstantEvaluator {
 public:
  std::optional<std::vector<Tensor>> evaluate(const Node& n,
                                              const std::vector<const Tensor*>& inputs) override;
};

}  // namespace otter
