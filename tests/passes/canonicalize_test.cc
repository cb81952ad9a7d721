// canonicalize on real exports: it folds what is constant, keeps what must run, and never changes
// what the graph computes (numeric before/after on seeded inputs).
#include <gtest/gtest.h>

#include <random>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/verifier.h"
#include "passes/canonicalize.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"

namespace otter {
namespace {

std::unique_ptr<Graph> load_gpt(std::optional<int64_t> batch) {
  auto g = import_onnx_file(std::string(OTTER_SOURCE_DIR) + "/models/gpt/gpt.onnx");
  if (batch) {
    g->inputs()[0]->set_shape(Shape::of({*batch, 16}));
    infer_graph(*g);
  }
  return g;
}

Tensor tokens(int64_t n) {
  std::mt19937_64 rng(7);
  Tensor t(DataType::kInt64, {n, 16});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 64);
  return t;
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}

// Bitwise: folding runs the same CPU kernels, so nothing may change at all.
void expect_same_logits(const Graph& before, const Graph& after, int64_t n) {
  auto a = Executor(before).run({{"tokens", tokens(n)}});
  auto b = Executor(after).run({{"tokens", tokens(n)}});
  EXPECT_TRUE(a.at("logits").bitwise_equal(b.at("logits")));
}

TEST(Canonicalize, StaticBatchFoldsPyTorchShapeChainsAway) {
  auto before = load_gpt(4);
  auto after = load_gpt(4);
  CpuConstantEvaluator ev;
  CanonicalizeStats st = canonicalize(*after, &ev);
  EXPECT_EQ(verify_graph(*after), std::vector<std::string>{});
  EXPECT_GT(count_ops(*before, "Shape"), 0);
  EXPECT_EQ(count_ops(*after, "Shape"), 0);
  EXPECT_EQ(count_ops(*after, "Concat"), 0);
  EXPECT_EQ(count_ops(*after, "Constant"), 0);
  EXPECT_GT(st.shapes_folded, 0);
  EXPECT_GT(st.constants_folded, 0);
  for (const auto& n : after->nodes()) {
    if (n->op_type() == "Reshape") {
      EXPECT_TRUE(n->output(0)->shape().is_static()) << n->describe();
    }
  }
  expect_same_logits(*before, *after, 4);
}

TEST(Canonicalize, SymbolicBatchKeepsTheChainRunnable) {
  auto before = load_gpt(std::nullopt);
  auto after = load_gpt(std::nullopt);
  CpuConstantEvaluator ev;
  canonicalize(*after, &ev);
  EXPECT_EQ(verify_graph(*after), std::vector<std::string>{});
  EXPECT_GT(count_ops(*after, "Shape"), 0);  // the batch size is only known at run time
  EXPECT_EQ(count_ops(*after, "Constant"), 0);
  EXPECT_EQ(count_ops(*after, "Identity"), 0);
  for (const auto& n : after->nodes()) {
    if (n->op_type() == "Reshape") {
      EXPECT_EQ(n->output(0)->shape().dims[0], Dim("N")) << n->describe();
    }
  }
  for (int64_t n : {1, 3}) expect_same_logits(*before, *after, n);
}

TEST(Canonicalize, WithoutAnEvaluatorOnlyStructuralRewritesRun) {
  auto g = load_gpt(4);
  CanonicalizeStats st = canonicalize(*g, nullptr);
  EXPECT_EQ(verify_graph(*g), std::vector<std::string>{});
  EXPECT_EQ(st.constants_folded, 0);
  EXPECT_EQ(count_ops(*g, "Constant"), 0);
}

}  // namespace
}  // namespace otter
