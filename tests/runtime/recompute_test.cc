// Recomputation (passes/recompute.h) changes no result: the shipped MLP, CNN and GPT, each with
// training-mode Dropout inserted (after ReLU, or after the attention Softmax, where it becomes the
// dropout of the fused ai.otter.Attention, or after the GELU's Erf), trained 20 steps with and without each
// policy in fp32 and bf16 on the CPU, end with bitwise-equal parameters and losses.
#include <gtest/gtest.h>

#include <cstring>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "passes/recompute.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

// `model` with Dropout(ratio 0.25, training) after every node of op `after`, written to `dir`.
std::string with_dropout(const std::string& model, const std::string& after, const std::string& dir) {
  auto g = import_onnx_file(model_file(model));
  Node* first = g->node_list().front();
  Node* ratio = g->add_node("Constant", {}, {"dropout.ratio"}, "", first);
  ratio->set_attr("value", Tensor::scalar<float>(0.25f));
  Tensor on(DataType::kBool, {});
  on.data<bool>()[0] = true;
  Node* mode = g->add_node("Constant", {}, {"dropout.training"}, "", first);
  mode->set_attr("value", on);
  infer_node(*ratio);
  infer_node(*mode);
  int count = 0;
  for (Node* n : g->node_list()) {
    if (n->op_type() != after) continue;
    Value* y = n->output(0);
    std::vector<Node*> order = g->node_list();
    Node* before = nullptr;
    for (size_t i = 0; i + 1 < order.size(); ++i)
      if (order[i] == n) before = order[i + 1];
    Node* d = g->add_node("Dropout", {y, ratio->output(0), mode->output(0)},
                          {g->unique_name(y->name() + ".drop"), g->unique_name(y->name() + ".mask")}, "", before);
    g->replace_all_uses(y, d->output(0));
    d->set_input(0, y);
    infer_node(*d);
    ++count;
  }
  EXPECT_GT(count, 0) << model << " has no " << after;
  const std::string path = dir + "/model.onnx";
  export_onnx_file(*g, path);
  return path;
}

struct TrainRun {
  std::vector<double> losses;
  std::map<std::string, Tensor> params;
  int64_t recomputed = 0;  // nodes named *.recompute
  int64_t attention = 0;   // fused attention nodes (ai.otter.Attention)
};

TrainRun train(const std::string& path, const std::string& data, Precision p, RecomputePolicy policy,
               int64_t budget = 0) {
  TrainingOptions o;
  o.batch_size = 8;
  o.pipeline.accum = 2;
  o.pipeline.precision = p;
  o.pipeline.optimizer.lr = 1e-2;
  o.pipeline.recompute.policy = policy;
  o.pipeline.recompute.budget.bytes = budget;
  o.seed = 3;
  auto s = TrainingSession::create(path, o);
  Dataset d = Dataset::from_npz(model_file(data), s->batch_inputs());
  DataLoader loader(d, s->global_batch(), true, 0);
  TrainRun r;
  for (int i = 0; i < 20; ++i) r.losses.push_back(s->train_step(loader.next()).loss);
  for (const std::string& n : s->parameter_names()) r.params[n] = s->tensor(n);
  for (const auto& n : s->graph().nodes()) {
    r.attention += n->domain() == kOtterDomain && n->op_type() == "Attention";
    if (n->name().size() > 10 && n->name().rfind(".recompute") == n->name().size() - 10) ++r.recomputed;
  }
  return r;
}

void expect_bitwise_equal(const TrainRun& a, const TrainRun& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << "loss of step " << i + 1;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [name, t] : a.params) {
    const Tensor& u = b.params.at(name);
    ASSERT_EQ(t.nbytes(), u.nbytes()) << name;
    EXPECT_EQ(std::memcmp(t.raw(), u.raw(), t.nbytes()), 0) << name << " differs";
  }
}

struct Case {
  const char* model;
  const char* after;
  const char* data;
};

class RecomputeBitwise : public ::testing::TestWithParam<std::tuple<Case, Precision>> {};

TEST_P(RecomputeBitwise, ParametersAfterTwentyStepsEqualWithoutRecompute) {
  const auto& [c, precision] = GetParam();
  TempDir dir;
  const std::string path = with_dropout(c.model, c.after, dir.path);
  const TrainRun base = train(path, c.data, precision, RecomputePolicy::kNone);
  EXPECT_EQ(base.recomputed, 0);
  // Dropout after the Softmax becomes the fused attention's own (passes/fuse_attention.h).
  if (std::string(c.model) == "gpt/gpt.onnx") EXPECT_EQ(base.attention, 2);
  // The loss moves: the runs compared are real training, not a no-op.
  EXPECT_NE(base.losses.front(), base.losses.back());
  for (RecomputePolicy policy : {RecomputePolicy::kCheap, RecomputePolicy::kLayers, RecomputePolicy::kAuto}) {
    SCOPED_TRACE(enum_name(policy));
    // auto with a budget of 0 climbs the whole ladder (cheap, then layers).
    const TrainRun r = train(path, c.data, precision, policy, 0);
    EXPECT_GT(r.recomputed, 0) << "nothing was recomputed";
    expect_bitwise_equal(base, r);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RecomputeBitwise,
                         ::testing::Combine(::testing::Values(Case{"digits/mlp.onnx", "Relu", "digits/train.npz"},
                                                              Case{"digits/cnn.onnx", "Relu", "digits/train_img.npz"},
                                                              Case{"gpt/gpt.onnx", "Softmax", "gpt/count_train.npz"},
                                                              Case{"gpt/gpt.onnx", "Erf", "gpt/count_train.npz"}),
                                            ::testing::Values(Precision::kFp32, Precision::kBf16)),
                         [](const auto& info) {
                           std::string m = std::get<0>(info.param).model;
                           m = m.substr(m.find('/') + 1);
                           m = m.substr(0, m.find('.'));
                           return m + "_" + std::get<0>(info.param).after + "_" + enum_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace otter
