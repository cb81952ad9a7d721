// fuse-attention: replaces scaled-dot-product attention subgraphs with ai.otter.Attention
// (graph/ops/attention.cc), whose kernels keep only each row's logsumexp for the backward pass
// instead of the [..., S, T] probabilities (kernels/cpu/attention.cc).
//
// Needs: a forward graph (before autodiff), types and shapes inferred. Does: finds, ending at a
// MatMul whose left operand is the attention weights, the chain PyTorch and Hugging Face exports
// produce:
//   S = MatMul(Q, Kt)                      (Kt: K transposed, as the export has it)
//   X = Mul(S, c) | Mul(c, S) | Div(S, c)  (optional; c a scalar constant: the scale)
//   Z = Where(m, fill, X) | Where(m, X, fill) | Add(X, mask) | Add(mask, X)   (optional mask;
//       fill a scalar constant, m bool; an additive mask may be trained, as T5's relative position
//       bias is: AttentionGrad's dScores output gives its gradient)
//   or Z = Reshape(Add(Reshape(X, [B, H, S, T]), mask), [B*H, S, T])   (BART's layout: scores of
//       [B*H, S, T] masked as [B, H, S, T]; Q, Kt and V are then read as [B, H, ...] through
//       Reshapes and Y reshaped back; H, S, T, D, Dv static)
//   P = Softmax(Z) on the last axis
//   P = Dropout(P) (optional): the identity (no training_mode, or constant ratio 0 / training
//       false) goes; one that drops in training with a constant ratio and training_mode, its mask
//       output unread, becomes Attention's `dropout` (counter dropout; the node gets a Seed output
//       for the backward pass); any other is not fused (counter skipped_dropout)
//   Y = MatMul(P, V)
// every intermediate used once. With `gqa`, K and V expanded from fewer heads
// (Reshape(Expand(Unsqueeze(kv, axis 2))), Hugging Face's repeat_kv) are read unexpanded: the
// Attention node takes H/Hk query heads per K/V head. Counters: fused, gqa, dropout, skipped_dropout.
// `fuse-attention{enabled=false}` does nothing (otter-train --fuse-attention off leaves the pass out).
// Does not: fuse attention whose scale is applied to Q or K before the product, a mask applied
// before the scale, or a Softmax on another axis.
//
//   before: %s = MatMul(%q, %kt)  %x = Mul(%s, 0.25)  %z = Where(%causal, -inf, %x)
//           %p = Softmax(%z) {axis=-1}  %y = MatMul(%p, %v)
//   after:  %y, %y.lse = ai.otter.Attention(%q, %kt, %v, %causal)
//                        {fill=-inf, mask_mode="fill_true", scale=0.25}
#pragma once

#include "passes/pass.h"

namespace otter {

struct FuseAttentionOptions {
  bool enabled = true;  // false: the pass changes nothing (the training pipeline leaves it out)
  bool gqa = true;      // look through K/V head expansion (grouped-query attention)
  bool operator==(const FuseAttentionOptions&) const = default;
  static const OptionTable<FuseAttentionOptions>& table();
};

struct FuseAttentionStats {
  int64_t fused = 0;
  int64_t gqa = 0;              // of which read K/V unexpanded
  int64_t dropout = 0;          // of which with Attention's own dropout
  int64_t skipped_dropout = 0;  // patterns left alone because of a Dropout it cannot take over
};

FuseAttentionStats fuse_attention(Graph& g, const FuseAttentionOptions& o = {});

class FuseAttentionPass : public PassWithOptions<FuseAttentionOptions> {
 public:
  std::string name() const override { return "fuse-attention"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
