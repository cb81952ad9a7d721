// Checks of how a model was exported that import cannot refuse but a user should hear about (the
// tools print them as warnings; see docs/exporting.md).
//
// folded_batchnorm_warning(g): torch.onnx.export in eval mode (its default, TrainingMode.EVAL)
//   folds each Conv followed by a BatchNorm into one Conv whose weight and bias the exporter names
//   `onnx::Conv_<n>` (a parameter of the module keeps its own name, such as `conv1.weight`). Training
//   such a model trains another model than the user's, without the BatchNorm. Returns a message naming
//   those Conv nodes and saying how to export for training, or "" when no Conv looks folded.
#pragma once

#include <string>

#include "graph/ir.h"

namespace otter {

std::string folded_batchnorm_warning(const Graph& g);

}  // namespace otter
