// canonicalize: folds constants by evaluating nodes whose inputs are all constant (through the
// context's ConstantEvaluator), turns Shape of static-shaped values into constants, removes
// Identity, moves Constant nodes into initializers, and removes dead nodes.
#pragma once

#include "passes/pass.h"

namespace otter {

class CanonicalizePass : public Pass {
 public:
  std::string name() const override { return "canonicalize"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
