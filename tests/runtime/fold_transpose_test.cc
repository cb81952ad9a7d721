// fold-transpose (passes/fold_transpose.h) against the exported MatMul(x, Transpose(W)) on the
// GPT: no Transpose of a weight or of its gradient is left, and the loss, every parameter's
// gradient on one batch and the losses of 5 AdamW steps agree with the unfolded graph's.
#include <gtest/gtest.h>

#include <string>

#include "tests/runtime/pipeline_ab_util.h"

namespace otter {
namespace {

// Transposes whose input is a parameter, or whose output is a parameter's gradient.
int64_t weight_transposes(const Graph& g) {
  int64_t n = 0;
  for (const auto& node : g.nodes()) {
    if (node->op_type() != "Transpose") continue;
    const Value* in = node->input(0);
    const std::string& out = node->output(0)->name();
    n += (in->kind() == ValueKind::kInitializer && in->trainable()) || out.find(".weight.grad") != std::string::npos;
  }
  return n;
}

TEST(FoldTranspose, GptHasNoWeightTransposesAndTheSameGradientsAndLosses) {
  const auto [tok, lab] = testing::gpt_batch(16, 5, 3);
  const testing::PassSwitch set = [](TrainingPipelineOptions& p, bool on) { p.fold_transpose.enabled = on; };
  int64_t transposes[2] = {0, 0}, gemms[2] = {0, 0};
  testing::expect_same_gpt_gradients(set, tok, lab, 1e-6, 1e-5, "fold-transpose", [&](const Graph& g, bool fold) {
    transposes[fold] = weight_transposes(g);
    for (const auto& node : g.nodes()) gemms[fold] += node->op_type() == "Gemm";
  });
  // The GPT's 13 Linear weights (q, k, v, proj, fc, fc_out per block, the head) were transposed
  // forward and their gradients back: 26 Transposes unfolded, none folded.
  EXPECT_EQ(transposes[0], 26);
  EXPECT_EQ(transposes[1], 0);
  EXPECT_GT(gemms[1], gemms[0]);
  testing::expect_same_gpt_losses(set, tok, lab, 1e-5);
}

}  // namespace
}  // namespace otter
