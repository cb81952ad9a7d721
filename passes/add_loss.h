// add-loss: appends a training loss to an inference graph.
//
// `add-loss{type=ce|mse, output=NAME, labels=NAME}`: cross-entropy takes class scores on the
// last axis of `output` (default: the first graph output) and integer labels shaped like the
// scores without that axis (a new int64 graph input `labels` unless one exists); the mean is over
// all positions, as PyTorch's cross_entropy on flattened scores. mse is PyTorch's mse_loss (mean
// of squared differences) against float labels of the output's shape. The loss becomes the
// scalar graph output `loss`, placed first; the model's outputs stay (evaluation reads them).
// Does not: run mixed precision (the loss subgraph stays fp32 by policy) or differentiate.
//
//   before: output %logits: f32[N,10]
//   after:  input %labels: i64[N]
//           %loss: f32[] = SoftmaxCrossEntropyLoss(%logits, %labels) {reduction="mean"}
//           output %loss, output %logits
#pragma once

#include "passes/pass.h"

namespace otter {

enum class LossType : uint8_t { kCe, kMse };
const EnumNames<LossType>& enum_names(LossType);  // ce, mse

struct AddLossOptions {
  LossType type = LossType::kCe;
  std::string output;  // empty: the first graph output
  std::string labels = "labels";
  std::string loss = "loss";  // the loss value's name (not a pass option: pipelines read "loss")
  bool operator==(const AddLossOptions&) const = default;
  static const OptionTable<AddLossOptions>& table();
};

// Returns the loss value.
Value* add_loss(Graph& g, const AddLossOptions& opts);

class AddLossPass : public PassWithOptions<AddLossOptions> {
 public:
  std::string name() const override { return "add-loss"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
