// Parameter selection for training as PyTorch does it (graph transformations the training
// session applies before its pipeline), whatever an ONNX export recorded (ONNX has no
// requires_grad):
//
// batchnorm_mode(g, train): BatchNormalization's running statistics (inputs 3 and 4) are never
//   trainable. train=true (a training session's default) runs every BatchNorm in training mode,
//   as model.train(): batch statistics, and the running statistics as state updated each step
//   with the momentum, running_var blending the unbiased batch variance as PyTorch does (the ONNX
//   op blends the biased one; a Mul/Sub pair corrects it). It needs static input shapes (the
//   session pins the batch). train=false (--batchnorm frozen) runs BatchNorm on the exported
//   statistics, which stay constants. TrainingSession runs both functions on the imported graph
//   before its pipeline (canonicalize must not fold statistics that become state). Statistics an
//   eval-mode export shares between BatchNorms (equal initializers deduplicated, the others read
//   through Identity nodes named after their buffers) become one initializer per BatchNorm first,
//   under the Identity's name.
//
//   before (an eval-mode export): %y = BatchNormalization(%x, %s, %b, %mean, %var)
//   after:  %y, %mean.new, %var.onnx = BatchNormalization(...) {training_mode=1}
//           %var.new = Sub(Mul(%var.onnx, n/(n-1)), Mul(%var, momentum/(n-1)))
//   with %mean, %var state updated to %mean.new, %var.new.
//
// freeze_unreachable(g, loss): float initializers from which no differentiable path reaches the
//   loss (or, without such a value, any graph output) are not trainable: they would only get zero
//   gradients, which weight decay would still act on.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace otter {

// Returns the number of BatchNormalization nodes changed.
int64_t batchnorm_mode(Graph& g, bool train);
// Returns the names of the initializers made non-trainable.
std::vector<std::string> freeze_unreachable(Graph& g, const std::string& loss);

}  // namespace otter
