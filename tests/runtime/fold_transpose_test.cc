// fold-transpose (passes/fold_transpose.h) against the exported MatMul(x, Transpose(W)) on the
// GPT: no Transpose of a weight or of its gradient is left, and the loss, every parameter's
// gradient on one batch and the losses of 5 AdamW steps agree with the unfolded graph's.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/gradients.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

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
  const int64_t n = 16;
  std::vector<int64_t> tokens, labels;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < 16; ++t) {
      tokens.push_back((i * 5 + t * t) % 64);
      labels.push_back((i * 5 + t * t + 3) % 64);
    }
  const Tensor tok = Tensor::from_vector<int64_t>({n, 16}, tokens), lab = Tensor::from_vector<int64_t>({n, 16}, labels);
  std::vector<std::pair<std::string, Tensor>> grads[2];
  int64_t transposes[2] = {0, 0}, gemms[2] = {0, 0};
  for (bool fold : {false, true}) {
    TrainingPipelineOptions p;
    p.fold_transpose.enabled = fold;
    GradientEvaluator ge(model_file("gpt/gpt.onnx"), p, cpu_device(), {.batch = n});
    transposes[fold] = weight_transposes(ge.graph());
    for (const auto& node : ge.graph().nodes()) gemms[fold] += node->op_type() == "Gemm";
    grads[fold] = ge.run({{"tokens", tok}, {"labels", lab}});
  }
  // The GPT's 13 Linear weights (q, k, v, proj, fc, fc_out per block, the head) were transposed
  // forward and their gradients back: 26 Transposes unfolded, none folded.
  EXPECT_EQ(transposes[0], 26);
  EXPECT_EQ(transposes[1], 0);
  EXPECT_GT(gemms[1], gemms[0]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  double worst = 0;
  for (size_t i = 0; i < grads[0].size(); ++i) {
    const auto& [name, a] = grads[0][i];
    const Tensor& b = grads[1][i].second;
    ASSERT_EQ(grads[1][i].first, name);
    ASSERT_EQ(a.dims(), b.dims()) << name;
    for (int64_t k = 0; k < a.numel(); ++k) {
      const double d = std::abs(a.get_as_double(k) - b.get_as_double(k));
      worst = std::max(worst, d);
      ASSERT_LE(d, 1e-6 + 1e-5 * std::abs(a.get_as_double(k))) << name << " element " << k;
    }
  }
  std::cout << "[fold-transpose] largest |unfolded - folded| over the loss and " << grads[0].size() - 1
            << " gradients: " << worst << "\n";
  TempDir dir;
  const std::string data = dir.path + "/seq.npz";
  write_npz(data, {{"tokens", tok}, {"labels", lab}});
  std::vector<double> losses[2];
  for (bool fold : {false, true}) {
    TrainingOptions o;
    o.batch_size = 8;
    o.pipeline.optimizer.lr = 3e-3;
    o.pipeline.fold_transpose.enabled = fold;
    auto s = TrainingSession::create(model_file("gpt/gpt.onnx"), o);
    Dataset train = Dataset::from_npz(data, s->batch_inputs());
    DataLoader loader(train, 8, true, 0);
    for (int i = 0; i < 5; ++i) losses[fold].push_back(s->train_step(loader.next()).loss);
  }
  EXPECT_LT(losses[0].back(), losses[0].front());  // it does train
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(losses[1][i], losses[0][i], 1e-5) << "step " << i;
}

}  // namespace
}  // namespace otter
