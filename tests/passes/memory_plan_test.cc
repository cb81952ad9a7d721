// memory-plan on real training graphs: the plan is sound (the verifier finds no two live buffers
// overlapping), smaller than freeing after last use, and the executor running on it computes
// bit for bit what it computes without a plan.
#include <gtest/gtest.h>

#include "graph/liveness.h"
#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "graph/printer.h"
#include "graph/verifier.h"
#include "passes/pass_manager.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"
#include "runtime/npz.h"

namespace otter {
namespace {

// The training graph of a shipped model with the batch axis fixed to `batch`.
std::unique_ptr<Graph> training_graph(const std::string& model, int64_t batch, bool plan) {
  auto g = import_onnx_file(std::string(OTTER_SOURCE_DIR) + "/models/" + model);
  for (Value* in : g->inputs()) {
    Shape s = in->shape();
    s.dims[0] = Dim(batch);
    in->set_shape(s);
  }
  infer_graph(*g);
  CpuConstantEvaluator ev;
  PassContext ctx;
  ctx.evaluator = &ev;
  PassManager pm(ctx);
  pm.add_pipeline(std::string("canonicalize,add-loss{type=ce},autodiff,grad-accumulation{steps=2},optimizer") +
                  (plan ? ",memory-plan" : ""));
  pm.run(*g);
  return g;
}

std::map<std::string, Tensor> batch_of(const std::string& data, const std::string& input, int64_t batch,
                                       int64_t start) {
  NpzArchive a = read_npz(std::string(OTTER_SOURCE_DIR) + "/models/" + data);
  std::map<std::string, Tensor> feeds;
  for (const char* name : {input.c_str(), "labels"}) {
    const Tensor& t = a.get(name);
    std::vector<int64_t> dims = t.dims();
    int64_t row = t.nbytes() / dims[0];
    dims[0] = batch;
    Tensor part(t.dtype(), dims);
    std::memcpy(part.raw(), static_cast<const char*>(t.raw()) + start * row, part.nbytes());
    feeds[name] = part;
  }
  return feeds;
}

// Two optimizer steps of K=2 micro-batches; returns every state tensor afterwards.
std::map<std::string, Tensor> train_two_steps(const Graph& g, const std::string& data, const std::string& input,
                                              int64_t batch) {
  ExecutorOptions mo, ao;
  mo.program = Program::kMicroStep;
  ao.program = Program::kApply;
  Executor micro(g, mo), apply(g, ao);
  std::map<std::string, Tensor> state;
  for (const Value* v : g.values())
    if (v->kind() == ValueKind::kState || (v->kind() == ValueKind::kInitializer && v->trainable()))
      state[v->name()] = v->data().clone();
  auto absorb = [&](Executor& ex, const std::map<std::string, Tensor>& out) {
    for (const auto& [s, u] : ex.state_updates()) state[s->name()] = out.at(u->name());
  };
  for (int step = 0; step < 2; ++step) {
    for (int k = 0; k < 2; ++k) {
      auto feeds = batch_of(data, input, batch, (step * 2 + k) * batch);
      for (const auto& [n, t] : state) feeds[n] = t;
      micro.set_first_micro_step(k == 0);
      absorb(micro, micro.run(feeds));
    }
    absorb(apply, apply.run(state));
  }
  return state;
}

struct Case {
  std::string model, data, input;
  int64_t batch;
};

class MemoryPlanModels : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryPlanModels, SoundSmallerThanFreeAfterLastUseAndBitwiseSameTraining) {
  const Case& c = GetParam();
  auto planned = training_graph(c.model, c.batch, true);
  auto plain = training_graph(c.model, c.batch, false);
  EXPECT_EQ(check_memory_plans(*planned), std::vector<std::string>{});
  const MemoryPlan& micro = planned->memory_plans.at(Program::kMicroStep);
  int reused = 0;
  for (const auto& [name, b] : micro.buffers) reused += !b.reuses.empty();
  std::printf("%s (batch %lld): micro-step arena %lld B, free-after-last-use peak %lld B (%.0f%%), %zu buffers, %d "
              "taken over in place\n",
              c.model.c_str(), static_cast<long long>(c.batch), static_cast<long long>(micro.arena_bytes),
              static_cast<long long>(micro.unplanned_peak_bytes),
              100.0 * static_cast<double>(micro.arena_bytes) / static_cast<double>(micro.unplanned_peak_bytes),
              micro.buffers.size(), reused);
  if (getenv("OTTER_PRINT_PLAN")) print_graph(*planned, std::cout);
  EXPECT_GT(reused, 0);
  EXPECT_LT(micro.arena_bytes, micro.unplanned_peak_bytes);

  auto a = train_two_steps(*planned, c.data, c.input, c.batch);
  auto b = train_two_steps(*plain, c.data, c.input, c.batch);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(t.bitwise_equal(b.at(name))) << name;
}

INSTANTIATE_TEST_SUITE_P(Models, MemoryPlanModels,
                         ::testing::Values(Case{"digits/mlp.onnx", "digits/train.npz", "x", 32},
                                           Case{"digits/cnn.onnx", "digits/train_img.npz", "x", 16}),
                         [](const auto& info) { return info.param.model.substr(7, 3); });

TEST(MemoryPlan, VerifierCatchesOverlapsAndStalePlans) {
  auto g = training_graph("digits/mlp.onnx", 8, true);
  MemoryPlan& plan = g->memory_plans.at(Program::kMicroStep);
  // Two buffers live at the same time moved onto each other.
  bool moved = false;
  for (auto& [na, a] : plan.buffers) {
    for (auto& [nb, b] : plan.buffers) {
      if (moved || na == nb || a.offset == b.offset || !b.reuses.empty() || !a.reuses.empty()) continue;
      if (a.first <= b.last && b.first <= a.last && a.bytes <= plan.arena_bytes - b.offset) {
        a.offset = b.offset;
        moved = true;
      }
    }
  }
  ASSERT_TRUE(moved);
  auto problems = verify_graph(*g);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("are live together and overlap"), std::string::npos) << problems[0];

  auto h = training_graph("digits/mlp.onnx", 8, true);
  h->memory_plans.at(Program::kMicroStep).buffers["no.such.value"] = {0, 4, 0, 0, ""};
  problems = verify_graph(*h);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("'no.such.value' is not a value of the program"), std::string::npos) << problems[0];
  EXPECT_THROW(Executor(*h, ExecutorOptions{.program = Program::kMicroStep}), Error);
}

}  // namespace
}  // namespace otter
