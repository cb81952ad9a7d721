// Parameter selection for training as PyTorch does it, whatever an ONNX export recorded (ONNX has
// no requires_grad): two passes at the head of the training and gradient pipelines
// (passes/pipelines.h), shown by --print-pipeline like every other step.
//
// `batchnorm-mode{mode=train|frozen}`, batchnorm_mode(g, train): BatchNormalization's running statistics (inputs 3 and 4) are never
//   trainable. train=true (a training session's default) runs every BatchNorm in training mode,
//   as model.train(): batch statistics, and the running statistics as state updated each step
//   with the momentum, running_var blending the unbiased batch variance as PyTorch does (the ONNX
//   op blends the biased one; a Mul/Sub pair corrects it). It needs static input shapes (the
//   session pins the batch). train=false (--batchnorm frozen) runs BatchNorm on the exported
//   statistics, which stay constants. It runs before canonicalize, which must not fold statistics
//   that become state. Statistics an eval-mode export shares between BatchNorms (equal
//   initializers deduplicated, the others read through Identity nodes named after their buffers)
//   become one initializer per BatchNorm first, under the Identity's name. Counter: batchnorms.
//
//   before (an eval-mode export): %y = BatchNormalization(%x, %s, %b, %mean, %var)
//   after:  %y, %mean.new, %var.onnx = BatchNormalization(...) {training_mode=1}
//           %var.new = Sub(Mul(%var.onnx, n/(n-1)), Mul(%var, momentum/(n-1)))
//   with %mean, %var state updated to %mean.new, %var.new.
//
// `freeze-unreachable`, freeze_unreachable(g, loss): float initializers from which no differentiable path reaches the
//   loss (or, without such a value, any graph output) are not trainable: they would only get zero
//   gradients, which weight decay would still act on. It runs after lora, which connects the
//   adapters (also those given initial values by --init) and freezes every base weight. Counter:
//   frozen.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"
#include "passes/pass.h"

namespace otter {

enum class BatchNormMode : uint8_t { kTrain, kFrozen };
const EnumNames<BatchNormMode>& enum_names(BatchNormMode);  // train, frozen

struct BatchNormModeOptions {
  BatchNormMode mode = BatchNormMode::kTrain;
  bool operator==(const BatchNormModeOptions&) const = default;
  static const OptionTable<BatchNormModeOptions>& table();
};

// Returns the number of BatchNormalization nodes changed.
int64_t batchnorm_mode(Graph& g, bool train);
// Returns the names of the initializers made non-trainable.
std::vector<std::string> freeze_unreachable(Graph& g, const std::string& loss);

class BatchNormModePass : public PassWithOptions<BatchNormModeOptions> {
 public:
  std::string name() const override { return "batchnorm-mode"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

class FreezeUnreachablePass : public PassWithOptions<NoOptions> {
 public:
  std::string name() const override { return "freeze-unreachable"; }
  std::string summary() const override;
  void run(Graph& g, PassContext& ctx) override;
};

}  // namespace otter
