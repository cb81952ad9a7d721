// A ConstantEvaluator backed by the CPU kernels, for constant folding in passes, and run_pipeline:
// the way the runtime, the tools and the tests run a pass pipeline.
#pragma once

#include <string>

#include "passes/pass.h"

namespace otter {

class CpuConstantEvaluator : public ConstantEvaluator {
 public:
  std::optional<std::vector<Tensor>> evaluate(const Node& n,
                                              const std::vector<const Tensor*>& inputs) override;
};

// Runs pipeline `text` (passes/pass_manager.h syntax) on `g`, folding constants with the CPU kernels.
void run_pipeline(Graph& g, const std::string& text);

}  // namespace otter
