// autodiff: builds the backward graph from the loss to every trainable parameter.
//
// Needs: a scalar float loss (option `loss`, default the graph output named "loss"), types and
// shapes inferred (import does that). Does: marks values that depend on a parameter, checks that
// every op between the parameters and the loss has a gradient rule (one error listing all that
// lack one, with their node names), seeds the loss's gradient with the constant `<loss>.grad` = 1
// (loss-scale and grad-accumulation rewrite it to S/K later), runs the rules in reverse order,
// sums fan-out contributions, and adds one graph output `<param>.grad` per parameter.
// Does not: update parameters (the optimizer pass does), differentiate through integer/bool
// values, state (BatchNorm running statistics) or frozen parameters.
//
//   before: %y: f32[N,4] = MatMul(%x, %w)      %loss: f32[] = ReduceSum(%y)
//   after:  ... %w.grad: f32[3,4] = Gemm(%x, %y.grad) {transA=1}   output %w.grad
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"

namespace otter {

struct AutodiffOptions {
  std::string loss = "loss";
  GlobList freeze;  // name globs of parameters that get no gradient
  GlobList wrt;     // graph inputs to differentiate too (for gradient checks)
  bool operator==(const AutodiffOptions&) const = default;
  static const OptionTable<AutodiffOptions>& table();
};

struct AutodiffResult {
  std::vector<std::string> params;    // parameters that got a gradient output, in graph order
  std::vector<std::string> grads;     // their gradient value names
  int64_t backward_nodes = 0;
  int64_t zero_grads = 0;             // parameters the loss does not depend on (gradient zero)
};

AutodiffResult autodiff(Graph& g, const AutodiffOptions& opts);

// Shell-style glob with * and ?.
bool glob_match(const std::string& pattern, const std::string& s);

class AutodiffPass : public PassWithOptions<AutodiffOptions> {
 public:
  std::string name() const override { return "autodiff"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
