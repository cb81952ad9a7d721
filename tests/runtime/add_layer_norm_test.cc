// fuse-add-layernorm (passes/fuse_add_layernorm.h) against the unfused residual Add and
// LayerNormalization on the shipped GPT (2 pre-LN blocks and a final LayerNorm): the loss and every
// parameter's gradient on one batch agree, and 5 AdamW steps give the same losses and leave every
// state tensor (parameters, moments, half copies) with the same values, in fp32 and in the bf16
// mixed-precision pipeline. The fused kernel runs LayerNormalization's own row code on the sum and
// LayerNormalizationGrad adds dResidual in the type the Add used, so the comparisons are exact
// (tolerance 0); a kernel that normalised in another order or summed the gradient elsewhere
// would differ in the last bits (in the bf16 pipeline such a float32 difference in Y mostly
// vanishes when the GEMMs round Y to bf16: there the test catches larger errors, such as a lost
// dResidual).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "tests/runtime/pipeline_ab_util.h"

namespace otter {
namespace {

struct Counts {
  int64_t fused = 0, with_sum = 0, grads_with_residual = 0, layer_norms = 0, adds = 0;
};

Counts count(const Graph& g) {
  Counts c;
  for (const auto& n : g.nodes()) {
    const std::string& op = n->op_type();
    c.fused += op == "AddLayerNorm";
    c.with_sum += op == "AddLayerNorm" && n->num_outputs() > 1 && n->output(1);
    c.grads_with_residual += op == "LayerNormalizationGrad" && n->num_inputs() > 3;
    c.layer_norms += op == "LayerNormalization";
    c.adds += op == "Add";
  }
  return c;
}

// The largest |off - on| over two tensors (fails on a shape or type mismatch).
double largest_difference(const Tensor& a, const Tensor& b, const std::string& name) {
  EXPECT_EQ(a.dtype(), b.dtype()) << name;
  EXPECT_EQ(a.dims(), b.dims()) << name;
  if (a.dims() != b.dims()) return INFINITY;
  double worst = 0;
  for (int64_t k = 0; k < a.numel(); ++k) {
    const double x = a.get_as_double(k), y = b.get_as_double(k);
    worst = std::max(worst, std::isnan(x) || std::isnan(y) ? INFINITY : std::abs(x - y));
  }
  return worst;
}

void expect_same_training(Precision precision) {
  const auto [tok, lab] = testing::gpt_batch(16, 5, 3);
  const testing::PassSwitch set = [](TrainingPipelineOptions& p, bool on) { p.fuse_add_layernorm.enabled = on; };
  const testing::TrainedBothWays run = testing::train_both_ways(set, tok, lab, {.precision = precision});
  const auto& losses = run.losses;
  const auto& sessions = run.sessions;
  const Counts counts[2] = {count(sessions[0]->graph()), count(sessions[1]->graph())};
  EXPECT_LT(losses[0].back(), losses[0].front());  // it does train
  double loss_diff = 0;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(losses[1][i], losses[0][i]) << "step " << i;
    loss_diff = std::max(loss_diff, std::abs(losses[1][i] - losses[0][i]));
  }
  const std::vector<std::string> names = sessions[0]->state_names();
  ASSERT_EQ(names, sessions[1]->state_names());
  double worst = 0;
  for (const std::string& name : names) {
    const double d = largest_difference(sessions[0]->tensor(name), sessions[1]->tensor(name), name);
    EXPECT_EQ(d, 0) << name;
    worst = std::max(worst, d);
  }
  std::cout << "[add-layernorm " << enum_name(precision) << "] AddLayerNorm " << counts[1].fused << " ("
            << counts[1].with_sum << " with S), LayerNormalization " << counts[0].layer_norms << " -> "
            << counts[1].layer_norms << ", Add " << counts[0].adds << " -> " << counts[1].adds
            << "; largest loss difference over 5 steps " << loss_diff << ", largest state difference after them "
            << worst << " over " << names.size() << " tensors\n";
  // The GPT: block 0's second LayerNorm, block 1's two and the final one read a residual sum (block
  // 0's first reads the embedding sum, whose position table broadcasts over the batch: left alone).
  EXPECT_EQ(counts[0].fused, 0);
  EXPECT_EQ(counts[1].fused, 4);
  EXPECT_EQ(counts[1].with_sum, 3);  // the final LayerNorm's sum has no other reader
  EXPECT_EQ(counts[1].layer_norms, counts[0].layer_norms - 4);
  // Each sum read elsewhere takes its other gradient inside LayerNormalizationGrad.
  EXPECT_EQ(counts[0].grads_with_residual, 0);
  EXPECT_EQ(counts[1].grads_with_residual, 3);
}

TEST(FusedAddLayerNorm, GptHasTheSameGradients) {
  const auto [tok, lab] = testing::gpt_batch(32, 7, 5);
  const testing::PassSwitch set = [](TrainingPipelineOptions& p, bool on) { p.fuse_add_layernorm.enabled = on; };
  testing::expect_same_gpt_gradients(set, tok, lab, 0, 0, "add-layernorm");
}

TEST(FusedAddLayerNorm, Fp32GptTrainsToTheSameValues) { expect_same_training(Precision::kFp32); }
TEST(FusedAddLayerNorm, Bf16GptTrainsToTheSameValues) { expect_same_training(Precision::kBf16); }

}  // namespace
}  // namespace otter
