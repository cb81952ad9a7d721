// Export checks (see export_check.h).
#include "graph/export_check.h"

#include <vector>

#include "graph/error.h"

namespace otter {

namespace {

// An initializer named by the exporter for a folded constant rather than after a module parameter.
bool exporter_named(const Value* v) {
  return v && v->kind() == ValueKind::kInitializer && v->name().rfind("onnx::Conv_", 0) == 0;
}

}  // namespace

std::string folded_batchnorm_warning(const Graph& g) {
  std::vector<std::string> folded;
  bool has_batchnorm = false;
  for (const Node* n : g.node_list()) {
    if (n->op_type() == "BatchNormalization") has_batchnorm = true;
    if (n->op_type() == "Conv" && exporter_named(n->input(1)))
      folded.push_back(
          str_cat("'", n->name().empty() ? n->output(0)->name() : n->name(), "' (weight '", n->input(1)->name(), "')"));
  }
  if (folded.empty()) return "";
  std::string names;
  for (size_t i = 0; i < folded.size() && i < 4; ++i) names += (i ? ", " : "") + folded[i];
  if (folded.size() > 4) names += str_cat(", ... (", folded.size() - 4, " more)");
  return str_cat(folded.size(), " Conv node", folded.size() == 1 ? "" : "s", " ", names,
                 folded.size() == 1 ? " has a weight" : " have weights", " named by the exporter",
                 has_batchnorm ? "" : " and the model has no BatchNormalization",
                 ": this looks like an eval-mode export with each Conv+BatchNorm folded into one Conv, so training "
                 "follows a model without those BatchNorms. Export for training with model.train(), "
                 "training=torch.onnx.TrainingMode.TRAINING and do_constant_folding=False (docs/exporting.md)");
}

}  // namespace otter
