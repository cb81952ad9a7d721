// fuse-softmax-ce (passes/fuse_softmax_ce.h): a model that carries its own loss as
// NegativeLogLikelihoodLoss of LogSoftmax (or of Log(Softmax)) trains on SoftmaxCrossEntropyLoss.
// - Before/after: small classifiers (onnxtxt, every reduction, class weights that are themselves
//   trained, ignore_index, [N,C] and [N,C,T] scores) through the gradient pipeline (the model's
//   loss, autodiff) with the pass on and off: the loss and every gradient agree within 2e-6 of the
//   tensor's largest magnitude, and the fused graph has no LogSoftmax, Log or NLL left.
// - Against PyTorch: models/sce/*.onnx (torch.onnx.export of F.nll_loss(F.log_softmax(...)) and of
//   torch.log(torch.softmax(...))) and PyTorch's float32 loss and gradients (models/sce/sce_refs.npz,
//   models/sce/make_nll_model.py), within 1e-5 relative, with the pass on and off.
// - otter's training step (TrainingSession, --loss model:loss): 5 SGD steps agree on and off.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/gradients.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

using Arrays = std::vector<std::pair<std::string, Tensor>>;

struct Case {
  std::string reduction = "mean";
  bool weights = false;         // class weights, a trained initializer (their gradient is compared too)
  bool ignore = false;          // ignore_index=2, which some labels hit
  bool log_of_softmax = false;  // Log(Softmax(x)) instead of LogSoftmax(x)
  bool spatial = false;         // scores [N,5,3] (class axis 1), labels [N,3]; else [N,5], labels [N]
};

std::string list(int64_t n, double a, double b) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(std::sin(a * i + b) * 1.5);
  return s;
}

// logits = x W + b over 5 classes; the loss is the NLL, or for reduction none the sum of its squares
// (an upstream gradient that differs per element).
std::string model_text(const Case& c) {
  const std::string x = c.spatial ? "float[N, 3, 6] x, int64[N, 3] y" : "float[N, 6] x, int64[N] y";
  const std::string softmax_axis = c.spatial ? "1" : "-1";
  std::string t = "<ir_version: 8, opset_import: [\"\" : 17]>\nclassifier (" + x +
                  ") => (float loss)\n  <float[6, 5] w = {" + list(30, 0.7, 0.1) + "}, float[5] b = {" +
                  list(5, 1.3, 0.4) + "}" + (c.weights ? ", float[5] cw = {0.5, 1.5, 2, 0.25, 1}" : "") +
                  ">\n{\n  h = MatMul(x, w)\n  s0 = Add(h, b)\n";
  t += c.spatial ? "  s = Transpose<perm = [0, 2, 1]>(s0)\n" : "  s = Identity(s0)\n";
  if (c.log_of_softmax)
    t += "  p = Softmax<axis = " + softmax_axis + ">(s)\n  lp = Log(p)\n";
  else
    t += "  lp = LogSoftmax<axis = " + softmax_axis + ">(s)\n";
  const bool none = c.reduction == "none";
  t += std::string(none ? "  nll" : "  loss") + " = NegativeLogLikelihoodLoss<reduction = \"" + c.reduction + "\"" +
       (c.ignore ? ", ignore_index = 2" : "") + ">(lp, y" + (c.weights ? ", cw" : "") + ")\n";
  if (none) t += "  sq = Mul(nll, nll)\n  loss = ReduceSum<keepdims = 0>(sq)\n";
  return t + "}\n";
}

std::map<std::string, Tensor> batch(const Case& c) {
  const int64_t n = 8, t = c.spatial ? 3 : 1;
  std::vector<float> x;
  for (int64_t i = 0; i < n * t * 6; ++i) x.push_back(static_cast<float>(std::cos(0.37 * i + 0.2) * 2));
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n * t; ++i) y.push_back((i * 3 + 1) % 5);  // 1, 4, 2, 0, 3, ...: class 2 every 5th
  std::vector<int64_t> xd = c.spatial ? std::vector<int64_t>{n, 3, 6} : std::vector<int64_t>{n, 6};
  std::vector<int64_t> yd = c.spatial ? std::vector<int64_t>{n, 3} : std::vector<int64_t>{n};
  return {{"x", Tensor::from_vector<float>(xd, x)}, {"y", Tensor::from_vector<int64_t>(yd, y)}};
}

int64_t count_ops(const Graph& g, const std::vector<std::string>& ops) {
  int64_t k = 0;
  for (const auto& n : g.nodes())
    for (const std::string& op : ops) k += n->op_type() == op;
  return k;
}

// The loss and gradients of `model` on `feeds` through the gradient pipeline with its own loss;
// checks what the fusion left in the graph.
Arrays gradients(const std::string& model, const std::map<std::string, Tensor>& feeds, bool fuse) {
  TrainingPipelineOptions p;
  p.loss = LossSpec::parse("model:loss");
  p.fuse_softmax_ce.enabled = fuse;
  GradientEvaluator ge(model, p, cpu_device());
  const Graph& g = ge.graph();
  EXPECT_EQ(count_ops(g, {"SoftmaxCrossEntropyLoss"}), fuse ? 1 : 0) << model;
  EXPECT_EQ(count_ops(g, {"SoftmaxCrossEntropyLossGrad"}), fuse ? 1 : 0) << model;
  EXPECT_EQ(count_ops(g, {"NegativeLogLikelihoodLoss"}), fuse ? 0 : 1) << model;
  EXPECT_EQ(count_ops(g, {"NegativeLogLikelihoodLossGrad"}), fuse ? 0 : 1) << model;
  if (fuse) {
    EXPECT_EQ(count_ops(g, {"LogSoftmax", "Log", "Softmax", "LogSoftmaxGrad", "SoftmaxGrad"}), 0) << model;
  }
  return ge.run(feeds);
}

// max |a - b| over the elements, and the largest |b|.
std::pair<double, double> diff(const Tensor& a, const Tensor& b) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    d = std::max(d, std::abs(a.get_as_double(i) - b.get_as_double(i)));
    m = std::max(m, std::abs(b.get_as_double(i)));
  }
  return {d, m};
}

class FuseSoftmaxCe : public ::testing::TestWithParam<Case> {};

TEST_P(FuseSoftmaxCe, SameLossAndGradientsOnAndOff) {
  const Case& c = GetParam();
  TempDir dir;
  const std::string path = dir.path + "/classifier.onnxtxt";
  std::ofstream(path) << model_text(c);
  const auto feeds = batch(c);
  Arrays off = gradients(path, feeds, false), on = gradients(path, feeds, true);
  ASSERT_EQ(on.size(), off.size());
  EXPECT_EQ(off.size(), c.weights ? 4u : 3u);  // loss, w, b (and cw)
  double worst = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    ASSERT_EQ(on[i].first, off[i].first);
    ASSERT_EQ(on[i].second.dims(), off[i].second.dims()) << off[i].first;
    auto [d, m] = diff(on[i].second, off[i].second);
    EXPECT_GT(m, 0) << off[i].first << " is zero: the case checks nothing";
    EXPECT_LE(d, 2e-6 * m) << off[i].first;
    worst = std::max(worst, d / m);
  }
  std::cout << "[fuse-softmax-ce] largest |on - off| / max|off| over loss and gradients: " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FuseSoftmaxCe,
    ::testing::Values(Case{}, Case{.reduction = "sum"}, Case{.reduction = "none"},
                      Case{.weights = true, .ignore = true}, Case{.reduction = "sum", .weights = true, .ignore = true},
                      Case{.reduction = "none", .weights = true, .ignore = true}, Case{.log_of_softmax = true},
                      Case{.reduction = "sum", .ignore = true, .log_of_softmax = true},
                      Case{.weights = true, .spatial = true},
                      Case{.reduction = "none", .ignore = true, .log_of_softmax = true, .spatial = true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return c.reduction + (c.weights ? "_weights" : "") + (c.ignore ? "_ignore" : "") +
             (c.log_of_softmax ? "_log_of_softmax" : "_log_softmax") + (c.spatial ? "_spatial" : "");
    });

// otter's loss and gradients against PyTorch's (models/sce/make_nll_model.py), fused and unfused.
void check_against_torch(const std::string& model, const std::string& prefix) {
  NpzArchive ref = read_npz(model_file("sce/sce_refs.npz"));
  const std::map<std::string, Tensor> feeds{{"x", ref.get(prefix + "x")}, {"y", ref.get(prefix + "y")}};
  for (bool fuse : {false, true}) {
    Arrays got = gradients(model_file(model), feeds, fuse);
    double worst = 0;
    size_t compared = 0;
    for (const auto& [name, t] : got) {
      const Tensor& want = ref.get(prefix + name);
      ASSERT_EQ(t.dims(), want.dims()) << name;
      auto [d, m] = diff(t, want);
      EXPECT_LE(d, 1e-5 * m) << model << " " << name << (fuse ? " (fused)" : " (unfused)");
      worst = std::max(worst, d / m);
      ++compared;
    }
    size_t in_ref = 0;
    for (const auto& [name, t] : ref.arrays) in_ref += name.rfind(prefix + "grad/", 0) == 0;
    EXPECT_EQ(compared, in_ref + 1) << "otter and PyTorch differ in the set of parameters";
    std::cout << "[sce-torch] " << model << (fuse ? " fused" : " unfused") << ": loss "
              << got[0].second.get_as_double(0) << " (torch " << ref.get(prefix + "loss").get_as_double(0)
              << "), largest |otter - torch| / max|torch| over loss and " << compared - 1 << " gradients: " << worst
              << "\n";
  }
}

TEST(FuseSoftmaxCeTorch, LogSoftmaxNllWithWeightsAndIgnoreIndex) {
  check_against_torch("sce/nll_log_softmax.onnx", "log_softmax/");
}

TEST(FuseSoftmaxCeTorch, LogOfSoftmaxNllSpatialSum) {
  check_against_torch("sce/nll_log_of_softmax.onnx", "log_of_softmax/");
}

// The training session on the model's own loss (otter-train --loss model:loss): 5 SGD steps agree
// on and off, and the loss goes down.
TEST(FuseSoftmaxCeTraining, SameLossesOverSgdSteps) {
  NpzArchive ref = read_npz(model_file("sce/sce_refs.npz"));
  TempDir dir;
  const std::string data = dir.path + "/data.npz";
  write_npz(data, {{"x", ref.get("log_softmax/x")}, {"y", ref.get("log_softmax/y")}});
  std::vector<double> losses[2];
  for (bool on : {false, true}) {
    TrainingOptions o;
    o.batch_size = 16;
    o.pipeline.loss = LossSpec::parse("model:loss");
    o.pipeline.optimizer.type = OptimizerType::kSgd;
    o.pipeline.optimizer.lr = 0.5;
    o.pipeline.fuse_softmax_ce.enabled = on;
    auto s = TrainingSession::create(model_file("sce/nll_log_softmax.onnx"), o);
    EXPECT_EQ(count_ops(s->graph(), {"LogSoftmax"}), on ? 0 : 1);
    Dataset train = Dataset::from_npz(data, s->batch_inputs());
    DataLoader loader(train, 16, false, 0);
    for (int i = 0; i < 5; ++i) losses[on].push_back(s->train_step(loader.next()).loss);
  }
  EXPECT_LT(losses[0].back(), losses[0].front());
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(losses[1][i], losses[0][i], 1e-6 * std::abs(losses[0][i])) << "step " << i;
}

}  // namespace
}  // namespace otter
