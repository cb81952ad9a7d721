// cast-elimination in the bf16 and fp16 training pipelines (passes/cast_elimination.h): on the
// shipped GPT its rewrites are exact, so 5 AdamW steps give the same losses and leave every
// parameter, moment and half copy with the same bits as the pipeline without the pass; and the
// pass did rewrite the graph: fewer Casts, no Transpose of float32 data, BiasGelu on the half type,
// the gradient sums of half GEMM gradients without widening Casts.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tests/runtime/pipeline_ab_util.h"

namespace otter {
namespace {

struct GraphCounts {
  int64_t casts = 0, f32_transposes = 0, half_bias_gelu = 0, half_bias_gelu_grad = 0, half_sums = 0;
};

GraphCounts count(const Graph& g) {
  GraphCounts c;
  for (const auto& n : g.nodes()) {
    const std::string& op = n->op_type();
    const bool half = n->input(0) && n->input(0)->dtype() != DataType::kFloat32;
    c.casts += op == "Cast";
    c.f32_transposes += op == "Transpose" && n->output(0)->dtype() == DataType::kFloat32;
    c.half_bias_gelu += op == "BiasGelu" && half;
    c.half_bias_gelu_grad += op == "BiasGeluGrad" && half;
    // A gradient sum taking a half GEMM gradient: BiasAdd with a "bias" of X's whole shape.
    c.half_sums += op == "BiasAdd" && half && n->input(1)->shape().rank() == n->input(0)->shape().rank();
  }
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_exact(Precision precision) {
  const auto [tok, lab] = testing::gpt_batch(16, 5, 3);
  const testing::PassSwitch set = [](TrainingPipelineOptions& p, bool on) { p.cast_elimination.enabled = on; };
  const testing::TrainedBothWays run = testing::train_both_ways(set, tok, lab, {.precision = precision});
  const auto& losses = run.losses;
  const auto& sessions = run.sessions;
  const GraphCounts counts[2] = {count(sessions[0]->graph()), count(sessions[1]->graph())};
  EXPECT_LT(losses[0].back(), losses[0].front());  // it does train
  for (int i = 0; i < 5; ++i) EXPECT_EQ(losses[1][i], losses[0][i]) << "step " << i;
  const std::vector<std::string> names = sessions[0]->state_names();
  ASSERT_EQ(names, sessions[1]->state_names());
  for (const std::string& name : names)
    EXPECT_TRUE(same_bits(sessions[0]->tensor(name), sessions[1]->tensor(name))) << name;
  std::cout << "[cast-elimination " << enum_name(precision) << "] Casts " << counts[0].casts << " -> "
            << counts[1].casts << ", float32 Transposes " << counts[0].f32_transposes << " -> "
            << counts[1].f32_transposes << "; " << names.size() << " state tensors bit-identical after 5 steps\n";
  EXPECT_LT(counts[1].casts, counts[0].casts - 10);
  EXPECT_GT(counts[0].f32_transposes, 0);
  EXPECT_EQ(counts[1].f32_transposes, 0);
  // The GPT's 2 blocks: each BiasGelu and BiasGeluGrad now reads the half GEMM output.
  EXPECT_EQ(counts[0].half_bias_gelu + counts[0].half_bias_gelu_grad, 0);
  EXPECT_EQ(counts[1].half_bias_gelu, 2);
  EXPECT_EQ(counts[1].half_bias_gelu_grad, 2);
  // Each block's LayerNorm output gradient sums the q, k and v GEMMs' half dX: two BiasAdds, the
  // first reading both halves, the second the half q gradient and that float32 sum.
  EXPECT_EQ(counts[0].half_sums, 0);
  EXPECT_EQ(counts[1].half_sums, 4);
}

TEST(CastElimination, Bf16GptTrainsToTheSameBits) { expect_exact(Precision::kBf16); }
TEST(CastElimination, Fp16GptTrainsToTheSameBits) { expect_exact(Precision::kFp16); }

}  // namespace
}  // namespace otter
