// ai.otter.Attention against the unfused graph it replaces (passes/fuse_attention.h): outputs and
// gradients of several-block shapes with causal, additive and grouped-query masks in float32 and
// float64, the training losses of the GPT and of gpt_large over 20 steps with and without fusion,
// and the activation peak the fusion saves.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "graph/graph_stats.h"
#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "kernels/common/attention_dropout.h"
#include "passes/autodiff.h"
#include "passes/fuse_attention.h"
#include "passes/pipelines.h"
#include "runtime/constant_eval.h"
#include "runtime/executor.h"
#include "runtime/gradients.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/pipeline_ab_util.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

// How the probabilities are dropped: not at all, by a training-mode Dropout of ratio 0.1, or by a
// product with the graph input f (the factors the fused kernel's hash gives).
enum class Drop { kNone, kDropout, kFactors };

// One attention block over graph inputs q, k (grouped: `hk` heads expanded to `h` as repeat_kv
// does), v, a causal bool mask and a loss sum(y * r). S = T = 130 and D = 40: several blocks.
std::string attention_model(const char* type, int64_t h, int64_t hk, bool additive, Drop drop = Drop::kNone) {
  const int64_t s = 130, d = 40;
  std::string mask = additive ? "am = Where(cmask, ninf, zero)\n  z = Add(x, am)\n" : "z = Where(cmask, ninf, x)\n";
  const std::string f = drop == Drop::kFactors ? str_cat(", ", type, "[2, ", h, ", ", s, ", ", s, "] f") : "";
  const std::string pd = drop == Drop::kNone      ? ""
                         : drop == Drop::kDropout ? str_cat("  ratio = Constant<value = ", type,
                                                            " {0.1}>()\n  train = Constant<value = bool {1}>()\n"
                                                            "  pd = Dropout(p, ratio, train)\n")
                                                  : "  pd = Mul(p, f)\n";
  return str_cat("<ir_version: 8, opset_import: [\"\" : 17]>\nattn (", type, "[2, ", h, ", ", s, ", ", d, "] q, ", type,
                 "[2, ", hk, ", ", s, ", ", d, "] k, ", type, "[2, ", hk, ", ", s, ", ", d, "] v, ", type, "[2, ", h,
                 ", ", s, ", ", d, "] r, bool[", s, ", ", s, "] cmask", f, ") => (", type, " loss)\n",
                 "  <int64[1] ax2 = {2}, int64[5] rep = {1, 1, ", h / hk, ", 1, 1}, int64[4] heads = {2, ", h, ", ", s,
                 ", ", d, "}>\n{\n  scale = Constant<value = ", type, " {0.15}>()\n  zero = Constant<value = ", type,
                 " {0.0}>()\n  ninf = Log(zero)\n",
                 "  ku = Unsqueeze(k, ax2)\n  ke = Expand(ku, rep)\n  kr = Reshape(ke, heads)\n",
                 "  vu = Unsqueeze(v, ax2)\n  ve = Expand(vu, rep)\n  vr = Reshape(ve, heads)\n",
                 "  kt = Transpose<perm = [0, 1, 3, 2]>(kr)\n  sc = MatMul(q, kt)\n  x = Mul(sc, scale)\n  ", mask,
                 "  p = Softmax<axis = -1>(z)\n", pd, "  y = MatMul(", drop == Drop::kNone ? "p" : "pd",
                 ", vr)\n  yr = Mul(y, r)\n  loss = ReduceSum<keepdims = 0>(yr)\n}\n");
}

Tensor random_tensor(DataType t, std::vector<int64_t> dims, std::mt19937_64& rng) {
  Tensor x(DataType::kFloat64, dims);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = u(rng);
  if (t == DataType::kFloat64) return x;
  Tensor f(DataType::kFloat32, dims);
  for (int64_t i = 0; i < x.numel(); ++i) f.data<float>()[i] = static_cast<float>(x.data<double>()[i]);
  return f;
}

// The loss and the gradients of q, k, v of the model, fused or not; `factors` feeds input f
// (Drop::kFactors), `seed` receives the fused node's dropout seed (Drop::kDropout).
std::map<std::string, Tensor> loss_and_grads(const std::string& text, bool fuse, int64_t* attention_nodes,
                                             const Tensor* factors = nullptr, int64_t* seed = nullptr) {
  auto g = import_onnx_text(text);
  run_pipeline(*g, "canonicalize");  // folds -inf = Log(0)
  FuseAttentionStats st;
  if (fuse) st = fuse_attention(*g);
  *attention_nodes = st.fused;
  AutodiffOptions ao;
  ao.wrt = {"q", "k", "v"};
  AutodiffResult ar = autodiff(*g, ao);
  std::mt19937_64 rng(7);
  std::map<std::string, Tensor> feeds;
  for (const char* in : {"q", "k", "v", "r"}) {
    const Value* x = g->value(in);
    feeds[in] = random_tensor(x->dtype(), x->shape().static_dims(), rng);
  }
  Tensor m(DataType::kBool, {130, 130});
  for (int64_t i = 0; i < 130; ++i)
    for (int64_t j = 0; j < 130; ++j) m.data<bool>()[i * 130 + j] = j > i;
  feeds["cmask"] = m;
  if (factors) feeds["f"] = *factors;
  std::vector<std::string> extra;
  for (const auto& n : g->nodes())
    if (seed && n->op_type() == "Attention" && n->num_outputs() > 2) extra.push_back(n->output(2)->name());
  Executor ex(*g);
  auto out = ex.run(feeds, extra);
  if (seed) *seed = extra.empty() ? -1 : out.at(extra[0]).data<int64_t>()[0];
  std::map<std::string, Tensor> r = {{"loss", out.at("loss")}};
  for (size_t i = 0; i < ar.params.size(); ++i) r[ar.params[i]] = out.at(ar.grads[i]);
  return r;
}

struct Case {
  const char* type;
  int64_t h, hk;
  bool additive;
  double tol;
};

TEST(FusedAttention, MatchesUnfusedGraph) {
  // float64 within 1e-7: the scale is a (32-bit) float attribute, 0.15 rounded.
  for (const Case& c : {Case{"double", 2, 2, false, 1e-7}, Case{"double", 4, 2, true, 1e-7},
                        Case{"float", 2, 2, false, 1e-5}, Case{"float", 4, 1, false, 1e-5}}) {
    SCOPED_TRACE(str_cat(c.type, " h=", c.h, " hk=", c.hk, c.additive ? " additive" : " fill"));
    const std::string text = attention_model(c.type, c.h, c.hk, c.additive);
    int64_t fused = 0, unfused = 0;
    auto ref = loss_and_grads(text, false, &unfused);
    auto got = loss_and_grads(text, true, &fused);
    EXPECT_EQ(fused, 1);
    ASSERT_EQ(ref.size(), 4u);
    ASSERT_EQ(got.size(), 4u);
    for (const auto& [name, t] : ref) {
      const Tensor& f = got.at(name);
      ASSERT_EQ(f.dims(), t.dims()) << name;
      double worst = 0;
      for (int64_t i = 0; i < t.numel(); ++i)
        worst = std::max(
            worst, std::abs(f.get_as_double(i) - t.get_as_double(i)) / std::max(1.0, std::abs(t.get_as_double(i))));
      EXPECT_LE(worst, c.tol) << name;
    }
  }
}

// A training-mode Dropout (ratio 0.1) after the Softmax becomes the fused node's dropout; the
// fused loss and gradients equal the unfused graph's with the probabilities multiplied by the
// factors the hash gives for the seed the node drew (kernels/common/attention_dropout.h), so the
// Seed output reaches AttentionGrad and both drop the same probabilities.
TEST(FusedAttention, DropoutMatchesTheUnfusedGraphWithTheSameFactors) {
  for (const char* type : {"double", "float"}) {
    SCOPED_TRACE(type);
    const bool f64 = std::string(type) == "double";
    int64_t fused = 0, unfused = 0, seed = 0;
    auto got = loss_and_grads(attention_model(type, 2, 2, false, Drop::kDropout), true, &fused, nullptr, &seed);
    ASSERT_EQ(fused, 1);
    ASSERT_NE(seed, -1) << "the fused node has no Seed output";
    const attn::Dropout dr = attn::make_dropout(static_cast<double>(0.1f), static_cast<uint64_t>(seed));
    Tensor f(f64 ? DataType::kFloat64 : DataType::kFloat32, {2, 2, 130, 130});
    int64_t dropped = 0;
    for (int64_t e = 0; e < f.numel(); ++e) {
      const float x = dr.factor(static_cast<uint64_t>(e));
      dropped += x == 0;
      f64 ? void(f.data<double>()[e] = x) : void(f.data<float>()[e] = x);
    }
    EXPECT_NEAR(static_cast<double>(dropped) / f.numel(), 0.1, 0.01);
    auto ref = loss_and_grads(attention_model(type, 2, 2, false, Drop::kFactors), false, &unfused, &f);
    ASSERT_EQ(ref.size(), got.size());
    for (const auto& [name, t] : ref) {
      double worst = 0;
      for (int64_t i = 0; i < t.numel(); ++i)
        worst = std::max(worst, std::abs(got.at(name).get_as_double(i) - t.get_as_double(i)) /
                                    std::max(1.0, std::abs(t.get_as_double(i))));
      EXPECT_LE(worst, f64 ? 1e-7 : 1e-5) << name;
    }
  }
}

// The per-step losses of `steps` AdamW steps (fp32, lr 3e-3, batches of `batch` in the loader's seed-0 order) of the
// training session of `model` on (tokens, labels), without ([0]) and with ([1]) fuse-attention; the graphs must
// hold `blocks` ai.otter.Attention nodes and no Softmax with fusion, no Attention and `blocks` Softmax without.
std::array<std::vector<double>, 2> losses_without_and_with_fusion(const std::string& model, const Tensor& tokens,
                                                                  const Tensor& labels, int64_t batch, int steps,
                                                                  int64_t blocks) {
  const testing::PassSwitch set = [](TrainingPipelineOptions& p, bool on) { p.fuse_attention.enabled = on; };
  const testing::TrainedBothWays run =
      testing::train_both_ways(set, tokens, labels, {.steps = steps, .model = model, .batch = batch});
  for (bool fuse : {false, true}) {
    int64_t attention = 0, softmax = 0;
    for (const auto& node : run.sessions[fuse]->graph().nodes()) {
      attention += node->domain() == kOtterDomain && node->op_type() == "Attention";
      softmax += node->op_type() == "Softmax";
    }
    EXPECT_EQ(attention, fuse ? blocks : 0) << (fuse ? "fused" : "unfused");
    EXPECT_EQ(softmax, fuse ? 0 : blocks) << (fuse ? "fused" : "unfused");
  }
  return {run.losses[0], run.losses[1]};
}

// Fails unless every step's loss with fusion is within `tol` (absolute) of the loss without; prints the largest
// difference.
void expect_same_losses(const std::vector<double>& unfused, const std::vector<double>& fused, double tol,
                        const char* tag) {
  ASSERT_EQ(fused.size(), unfused.size());
  double worst = 0;
  for (size_t i = 0; i < unfused.size(); ++i) {
    worst = std::max(worst, std::abs(fused[i] - unfused[i]));
    EXPECT_NEAR(fused[i], unfused[i], tol) << "step " << i;
  }
  std::cout << "[" << tag << "] losses " << unfused.front() << " -> " << unfused.back() << " over " << unfused.size()
            << " steps; largest |fused - unfused| " << worst << "\n";
}

// The GPT (models/gpt/gpt.onnx, two causal attention blocks) trains to the same losses with and
// without fusion: fp32, AdamW, 20 steps.
TEST(FusedAttention, GptTrainsToTheSameLosses) {
  const auto [tokens, labels] = testing::gpt_batch(64, 5, 3);
  const auto [unfused, fused] = losses_without_and_with_fusion(model_file("gpt/gpt.onnx"), tokens, labels, 8, 20, 2);
  ASSERT_EQ(unfused.size(), 20u);
  EXPECT_LT(unfused.back(), unfused.front() - 0.5);  // it does train
  expect_same_losses(unfused, fused, 1e-5, "gpt");
}

// The same on gpt_large (models/bench/gpt_large.onnx: four causal blocks of 4 heads over 128 tokens, vocabulary
// 256), at 2 sequences per step: every step's loss within 1e-5, absolute (the loss falls from 5.7 to 0.06; the
// largest difference measured was 2.4e-7). About 3-4 s on one core.
TEST(FusedAttention, GptLargeTrainsToTheSameLosses) {
  const std::string model = model_file("bench/gpt_large.onnx");
  if (!std::filesystem::exists(model))
    GTEST_SKIP() << model << " is missing: make it with /usr/bin/python3 models/export_models.py --only gpt_large";
  // One OpenMP thread, as the tools tests: under ctest -j2 on a 2-core machine two threads per test took 180 s.
  struct OneThread {
    const int saved = omp_get_max_threads();
    OneThread() { omp_set_num_threads(1); }
    ~OneThread() { omp_set_num_threads(saved); }
  } one_thread;
  const int64_t n = 40, t = 128, vocab = 256;
  std::mt19937_64 rng(11);
  std::vector<int64_t> tok(n * t), lab(n * t);
  for (int64_t i = 0; i < n * t; ++i) tok[i] = static_cast<int64_t>(rng() % vocab);
  // A function of the token, learnt within the 20 steps (the previous token, which needs attention, is
  // not: the loss stays at 5.7).
  for (int64_t i = 0; i < n * t; ++i) lab[i] = (tok[i] * 7 + 3) % vocab;
  const auto [unfused, fused] = losses_without_and_with_fusion(model, Tensor::from_vector<int64_t>({n, t}, tok),
                                                               Tensor::from_vector<int64_t>({n, t}, lab), 2, 20, 4);
  ASSERT_EQ(unfused.size(), 20u);
  EXPECT_LT(unfused.back(), unfused.front() - 0.5);  // it does train
  expect_same_losses(unfused, fused, 1e-5, "gpt_large");
}

// The backward graph keeps Q, K, V, Y and the [.., S] LSE instead of the [.., S, T] scores and
// probabilities: the activation peak drops (gpt_large at b=16: 156 -> 148 MiB, `otter-opt
// models/bench/gpt_large.onnx --passes default-train --stats --batch 16` with and without `--disable
// fuse-attention`; docs/ops.md, "Attention").
TEST(FusedAttention, LowersTheActivationPeak) {
  int64_t peak[2];
  for (bool fuse : {false, true}) {
    auto g = import_onnx_text(attention_model("float", 4, 4, false));
    run_pipeline(*g, "canonicalize");
    if (fuse) {
      EXPECT_EQ(fuse_attention(*g).fused, 1);
    }
    AutodiffOptions ao;
    ao.wrt = {"q", "k", "v"};
    autodiff(*g, ao);
    peak[fuse] = compute_graph_stats(*g).activation_peak_bytes;
  }
  EXPECT_GT(peak[0], 0);
  EXPECT_LT(peak[1], peak[0]);
  std::cout << "[activation peak] unfused " << peak[0] << " B, fused " << peak[1] << " B\n";
}

// The same on gpt_large at b=16 through the default training pipeline, as `otter-opt
// models/bench/gpt_large.onnx --passes default-train --stats --batch 16` (with and without
// `--disable fuse-attention`) reports it: 163,580,932 -> 155,323,396 B on 5 December 2026.
TEST(FusedAttention, LowersGptLargesActivationPeakAtBatch16) {
  const std::string model = model_file("bench/gpt_large.onnx");
  if (!std::filesystem::exists(model))
    GTEST_SKIP() << model << " is missing: make it with /usr/bin/python3 models/export_models.py --only gpt_large";
  int64_t peak[2];
  for (bool fuse : {false, true}) {
    auto g = import_onnx_file(model);
    pin_batch(*g, 16);
    TrainingPipelineOptions o;
    o.fuse_attention.enabled = fuse;
    run_pipeline(*g, training_pipeline(o));
    int64_t attention = 0;
    for (const auto& node : g->nodes()) attention += node->op_type() == "Attention";
    EXPECT_EQ(attention, fuse ? 4 : 0);
    peak[fuse] = compute_graph_stats(*g).activation_peak_bytes;
  }
  std::cout << "[gpt_large b=16 activation peak] unfused " << peak[0] << " B, fused " << peak[1] << " B\n";
  EXPECT_GT(peak[1], 0);
  EXPECT_LT(peak[1], peak[0]);
}

// fuse-bias-gelu (passes/fuse_bias_gelu.h) against the unfused GELU chain on the GPT (two MLP
// blocks): the loss and every parameter's gradient on one batch, then the losses of 5 AdamW steps,
// agree within 1e-5 (fp32; the fused kernel evaluates the same erf formula in another order).
TEST(FusedBiasGelu, GptHasTheSameGradientsAndLosses) {
  const auto [tok, lab] = testing::gpt_batch(32, 7, 5);
  const testing::PassSwitch set = [](TrainingPipelineOptions& p, bool on) { p.fuse_bias_gelu.enabled = on; };
  testing::expect_same_gpt_gradients(set, tok, lab, 1e-5, 0, "bias-gelu", [](const Graph& g, bool fuse) {
    int64_t bias_gelu = 0, erf = 0;
    for (const auto& node : g.nodes()) {
      bias_gelu += node->op_type() == "BiasGelu" || node->op_type() == "BiasGeluGrad";
      erf += node->op_type() == "Erf" || node->op_type() == "ErfGrad";
    }
    EXPECT_EQ(bias_gelu, fuse ? 4 : 0);
    EXPECT_EQ(erf, fuse ? 0 : 4);
  });
  testing::expect_same_gpt_losses(set, tok, lab, 1e-5);
}

}  // namespace
}  // namespace otter
