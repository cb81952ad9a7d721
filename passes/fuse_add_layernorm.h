// fuse-add-layernorm: replaces the residual Add of a pre-LN transformer and the
// LayerNormalization that reads the sum with ai.otter.AddLayerNorm (graph/ops/add_layer_norm.cc),
// one kernel pass (read X and R, write S and Y) instead of two (the LayerNormalization reads S
// back); its gradient adds the sum's other gradient inside LayerNormalizationGrad's dX loop
// (input dResidual) instead of a separate Add.
//
// Needs: a forward graph (before autodiff), types and shapes inferred. Does: for each
// LayerNormalization (stash_type 1, Mean and InvStdDev unused, axis the last one, scale and bias
// 1-D of the last axis's length) whose X is S = Add(X, R), X and R two different values of S's
// exact shape and type (no broadcasting), replaces the pair with
//   Y, S = ai.otter.AddLayerNorm(X, R, scale, bias) {axis, epsilon}
// keeping S as an output where anything else reads it (the next residual Add, a graph output),
// else Y = ai.otter.AddLayerNorm(...) alone (the gradient then recomputes S with an Add).
// Counters: fused (pairs replaced), with_sum (of which keep S as an output).
// `fuse-add-layernorm{enabled=false}` does nothing (otter-train --fuse-add-layernorm off leaves the pass out).
// Trade-off: docs/performance.md, "Residual Add + LayerNorm fusion".
// Does not: fuse a broadcasting Add (a bias), a LayerNormalization over several axes or another
// axis than the last, or one whose statistics outputs are read.
//
//   before: %s = Add(%x, %attn)  %h = LayerNormalization(%s, %ln.weight, %ln.bias)  %x2 = Add(%s, %mlp)
//   after:  %h, %s = ai.otter.AddLayerNorm(%x, %attn, %ln.weight, %ln.bias)  %x2 = Add(%s, %mlp)
#pragma once

#include "passes/pass.h"

namespace otter {

struct FuseAddLayerNormOptions {
  bool enabled = true;  // false: the pass changes nothing (the training pipeline leaves it out)
  bool operator==(const FuseAddLayerNormOptions&) const = default;
  static const OptionTable<FuseAddLayerNormOptions>& table();
};

struct FuseAddLayerNormStats {
  int64_t fused = 0;
  int64_t with_sum = 0;  // of which keep the sum S as an output
};

FuseAddLayerNormStats fuse_add_layernorm(Graph& g, const FuseAddLayerNormOptions& o = {});

class FuseAddLayerNormPass : public PassWithOptions<FuseAddLayerNormOptions> {
 public:
  std::string name() const override { return "fuse-add-layernorm"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
