// fold-transpose: multiplies by a 2-D value's transpose without materialising it. PyTorch exports
// a Linear layer on a batch of sequences as MatMul(x, Transpose(W)); every step then transposes W
// forward, and autodiff adds a second Transpose to bring W's gradient back. This pass writes the
// product as Gemm(x, W) {transB=1} on a [-1, K] view of x, whose gradients (graph/ops/matmul_conv.cc)
// are Gemms on W and x as they are: no Transpose in either direction.
//
// Needs: a forward graph (before autodiff), types and shapes inferred. Does: for
//   Wt = Transpose(W) {perm=[1,0]}  (W of rank 2, K = W's second dim static)
//   Y  = MatMul(X, Wt)              (X of rank >= 2, Y's dims static but for at most one)
// makes Y = Gemm(X, W) {transB=1} when X has rank 2, else
//   X2 = Reshape(X, [-1, K]),  Y2 = Gemm(X2, W) {transB=1},  Y = Reshape(Y2, Y's dims, -1 for the
//   dynamic one);
// Y keeps its name; the Transpose goes when nothing else reads it. Counters: folded.
// `fold-transpose{enabled=false}` does nothing (otter-train --fold-transpose off leaves it out).
// Does not: fold a Transpose on the left operand, of a rank above 2, or into a batched MatMul
// (rank-3 right operands), or where Y has two dynamic dims.
//
//   before: %wt: f32[3,4] = Transpose(%w) {perm=[1,0]}   (w: f32[4,3])
//           %y: f32[N,5,3] = MatMul(%x, %wt)              (x: f32[N,5,4])
//   after:  %y.rows: f32[5N,4] = Reshape(%x, [-1,4])  %y.gemm = Gemm(%y.rows, %w) {transB=1}
//           %y: f32[N,5,3] = Reshape(%y.gemm, [-1,5,3])
#pragma once

#include "passes/pass.h"

namespace otter {

struct FoldTransposeOptions {
  bool enabled = true;  // false: the pass changes nothing (the training pipeline leaves it out)
  bool operator==(const FoldTransposeOptions&) const = default;
  static const OptionTable<FoldTransposeOptions>& table();
};

struct FoldTransposeStats {
  int64_t folded = 0;
};

FoldTransposeStats fold_transpose(Graph& g, const FoldTransposeOptions& o = {});

class FoldTransposePass : public PassWithOptions<FoldTransposeOptions> {
 public:
  std::string name() const override { return "fold-transpose"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
