// The fuse-attention pass (passes/fuse_attention.h) on the exported GPT and on the patterns it
// must leave alone: probabilities read twice, a Softmax on another axis, Dropout that drops.
#include <gtest/gtest.h>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/verifier.h"
#include "passes/fuse_attention.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"

namespace otter {
namespace {

int64_t count_ops(const Graph& g, const std::string& op) {
  int64_t n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}

TEST(FuseAttention, FusesBothBlocksOfTheGpt) {
  auto g = import_onnx_file(std::string(OTTER_SOURCE_DIR) + "/models/gpt/gpt.onnx");
  run_pipeline(*g, "canonicalize");
  const int64_t softmax = count_ops(*g, "Softmax");
  FuseAttentionStats st = fuse_attention(*g);
  EXPECT_EQ(st.fused, 2);
  EXPECT_EQ(softmax, 2);
  EXPECT_EQ(count_ops(*g, "Softmax"), 0);
  EXPECT_EQ(count_ops(*g, "Attention"), 2);
  EXPECT_TRUE(verify_graph(*g).empty());
  for (const auto& node : g->nodes()) {
    if (node->op_type() != "Attention") continue;
    EXPECT_EQ(node->domain(), kOtterDomain);
    EXPECT_FLOAT_EQ(node->attr_f("scale", 0), 0.25f);  // 1/sqrt(16)
    EXPECT_EQ(node->attr_s("mask_mode", ""), "fill_true");
    EXPECT_EQ(node->output(0)->shape().to_string(), "[N,2,16,16]");
  }
}

const char* kHeader = R"(<ir_version: 8, opset_import: ["" : 17]>
m (float[N, 2, 4, 3] q, float[N, 2, 3, 4] kt, float[N, 2, 4, 3] v) => (float[N, 2, 4, 3] y, float extra)
  <bool train = {1}>
{
  ratio = Constant<value = float {0.1}>()
  s = Constant<value = float {0.5}>()
  a = MatMul(q, kt)
  b = Mul(a, s)
)";

// The text's constants become constants as the training pipeline sees them (canonicalize first).
std::unique_ptr<Graph> model(const std::string& body) {
  auto g = import_onnx_text(std::string(kHeader) + body + "}\n");
  run_pipeline(*g, "canonicalize");
  return g;
}

int64_t fused(const std::string& body) { return fuse_attention(*model(body)).fused; }

TEST(FuseAttention, LeavesOtherPatternsAlone) {
  EXPECT_EQ(fused("p = Softmax<axis = -1>(b)\n y = MatMul(p, v)\n extra = Identity(b)\n"), 0);  // scores read twice
  EXPECT_EQ(fused("p = Softmax<axis = -1>(b)\n y = MatMul(p, v)\n extra = Identity(p)\n"), 0);  // probabilities too
  EXPECT_EQ(fused("p = Softmax<axis = 2>(b)\n y = MatMul(p, v)\n extra = Identity(q)\n"), 0);
  EXPECT_EQ(fused("p = Softmax<axis = -1>(b)\n y = MatMul(p, v)\n extra = Identity(q)\n"), 1);
  // A training-mode Dropout becomes the fused node's dropout, unless its mask is read.
  auto g = model("p = Softmax<axis = -1>(b)\n d = Dropout(p, ratio, train)\n y = MatMul(d, v)\n extra = Identity(q)\n");
  FuseAttentionStats st = fuse_attention(*g);
  EXPECT_EQ(st.fused, 1);
  EXPECT_EQ(st.dropout, 1);
  g = model(
      "p = Softmax<axis = -1>(b)\n d, dm = Dropout(p, ratio, train)\n y = MatMul(d, v)\n dmf = Cast<to = 1>(dm)\n"
      " extra = ReduceSum<keepdims = 0>(dmf)\n");
  st = fuse_attention(*g);
  EXPECT_EQ(st.fused, 0);
  EXPECT_EQ(st.skipped_dropout, 1);
}

TEST(FuseAttention, RunsBeforeAutodiffOnly) {
  auto g = import_onnx_file(std::string(OTTER_SOURCE_DIR) + "/models/gpt/gpt.onnx");
  run_pipeline(*g, "canonicalize,add-loss{type=ce},autodiff");
  FuseAttentionPass p;
  EXPECT_NE(p.unmet_precondition(*g).find("before autodiff"), std::string::npos);
}

}  // namespace
}  // namespace otter
