// fuse-softmax-ce: replaces the log-softmax + negative-log-likelihood pair of a model that carries
// its own loss with one SoftmaxCrossEntropyLoss (ONNX op), whose gradient
// ai.otter.SoftmaxCrossEntropyLossGrad recomputes the softmax from the scores in one pass instead of
// keeping the [N,C] log-probabilities for the backward pass (graph/ops/nn.cc, kernels/cpu/nn_grad.cc).
//
// Needs: a forward graph (before autodiff), types and shapes inferred. Does: for each
// NegativeLogLikelihoodLoss(lp, labels, weights?) {reduction, ignore_index} whose log-probabilities
// lp are
//   lp = LogSoftmax(x) {axis}            (F.nll_loss(F.log_softmax(x, dim), y) as exported), or
//   lp = Log(Softmax(x) {axis})          (torch.log(torch.softmax(x, dim)): the TorchScript exporter
//                                        leaves this pair as it is)
// with axis the class axis 1 of x (x [N,C] with axis 1 or -1; x [N,C,d1..] with axis 1 or 1-rank),
// x float, ops of opset >= 13, and every intermediate read by the chain alone (not a graph output),
// writes loss = SoftmaxCrossEntropyLoss(x, labels, weights?) {the NLL's reduction and ignore_index}
// under the NLL output's name. The same loss to rounding: NLL(LogSoftmax(x)) is SCE's definition;
// Log(Softmax(x)) equals LogSoftmax(x) where the softmax does not underflow (where it does, the
// unfused loss is inf and the fused one the finite true value).
// Counters: fused (losses replaced), log_of_softmax (of which from Log(Softmax)).
// `fuse-softmax-ce{enabled=false}` does nothing (otter-train --fuse-softmax-ce off leaves it out).
// Does not: fuse a LogSoftmax that another node or a graph output also reads (SCE's log_prob output
// could stand in; not done), a softmax over another axis, or a chain with a Cast or Transpose between
// the steps. PyTorch's TorchScript exporter (1.13) already writes F.nll_loss(F.log_softmax(x, -1), y)
// and F.cross_entropy as SoftmaxCrossEntropyLoss; the LogSoftmax pair comes from exporters without
// that peephole (models/sce/make_nll_model.py).
//
//   before: %lp = LogSoftmax(%logits) {axis=-1}  %loss = NegativeLogLikelihoodLoss(%lp, %y) {reduction="sum"}
//   after:  %loss = SoftmaxCrossEntropyLoss(%logits, %y) {reduction="sum"}
#pragma once

#include "passes/pass.h"

namespace otter {

struct FuseSoftmaxCeOptions {
  bool enabled = true;  // false: the pass changes nothing (the training pipeline leaves it out)
  bool operator==(const FuseSoftmaxCeOptions&) const = default;
  static const OptionTable<FuseSoftmaxCeOptions>& table();
};

struct FuseSoftmaxCeStats {
  int64_t fused = 0;
  int64_t log_of_softmax = 0;  // of which matched Log(Softmax(x))
};

FuseSoftmaxCeStats fuse_softmax_ce(Graph& g, const FuseSoftmaxCeOptions& o = {});

class FuseSoftmaxCePass : public PassWithOptions<FuseSoftmaxCeOptions> {
 public:
  std::string name() const override { return "fuse-softmax-ce"; }
  std::string summary() const override;
  std::string unmet_precondition(const Graph& g) const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
