// fuse-bias-gelu: replaces the element-wise GELU chain of PyTorch exports (and the bias Add before
// it) with ai.otter.BiasGelu (graph/ops/elementwise.cc), one kernel pass instead of six, whose
// gradient ai.otter.BiasGeluGrad recomputes the pre-activation instead of keeping the chain's
// intermediates (kernels/cpu/bias_gelu.cc).
//
// Needs: a forward graph (before autodiff), types and shapes inferred, constants folded into
// initializers (canonicalize). Does: finds, from each Erf, the exact-GELU chain
//   u = Div(p, c) with c = sqrt(2) | Mul(p, c) | Mul(c, p) with c = 1/sqrt(2)
//   e = Erf(u);  a = Add(e, 1) | Add(1, e)
//   y = Mul(Mul(p, a), 0.5) | Mul(Mul(a, p), 0.5) (either operand order of each Mul), or
//   y = Mul(Mul(p, 0.5), a) (the half applied to p first; either operand order)
// (c, 1 and 0.5 scalar constants, equal to their values to float precision; every intermediate
// used only in the chain and of p's shape), and, when `bias` is set and p = Add(h, b) | Add(b, h)
// with b 1-D of p's last-axis length and h of p's shape, p used only by the chain, absorbs the Add:
//   y = ai.otter.BiasGelu(h, b), else y = ai.otter.BiasGelu(p) (no bias input).
// Counters: fused (chains replaced), biased (of which absorbed their bias Add).
// `fuse-bias-gelu{enabled=false}` does nothing (otter-train --fuse-bias-gelu off leaves the pass out).
// Trade-off: two activations per block fewer kept for the backward pass, one erf per element more
// in it (the CPU step is not faster: libm's erff dominates; docs/performance.md, "Bias + GELU fusion").
// Does not: fuse the tanh approximation, ONNX Gelu nodes (already one op), a bias broadcast along
// another axis than the last, or chains with identity Casts between the steps.
//
//   before: %p = Add(%fc.bias, %h)  %u = Div(%p, 1.41421354)  %e = Erf(%u)  %a = Add(%e, 1.0)
//           %m = Mul(%p, %a)  %y = Mul(%m, 0.5)
//   after:  %y = ai.otter.BiasGelu(%h, %fc.bias)
#pragma once

#include "passes/pass.h"

namespace otter {

struct FuseBiasGeluOptions {
  bool enabled = true;  // false: the pass changes nothing (the training pipeline leaves it out)
  bool bias = true;     // absorb the bias Add before the chain
  bool operator==(const FuseBiasGeluOptions&) const = default;
  static const OptionTable<FuseBiasGeluOptions>& table();
};

struct FuseBiasGeluStats {
  int64_t fused = 0;
  int64_t biased = 0;  // of which absorbed the bias Add
};

FuseBiasGeluStats fuse_bias_gelu(Graph& g, const FuseBiasGeluOptions& o = {});

class FuseBiasGeluPass : public PassWithOptions<FuseBiasGeluOptions> {
 public:
  std::string name() const override { return "fuse-bias-gelu"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
