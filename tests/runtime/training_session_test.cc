// TrainingSession against torch.optim trajectories (models/make_train_refs.py), the accumulation
// contract (K micro-batches of b = one batch of K*b; GEMM fusion), skipped steps, evaluation and
// export.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph/onnx_io.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

// ---- torch.optim trajectories --------------------------------------------------------------------

struct RefConfig {
  const char* name;
  const char* type;
  const char* schedule;
};

void PrintTo(const RefConfig& c, std::ostream* os) { *os << c.name; }

class TorchTrajectory : public ::testing::TestWithParam<RefConfig> {};

TEST_P(TorchTrajectory, ParametersMatchAfterEveryStep) {
  static const NpzArchive refs = read_npz(model_file("digits/mlp_train_refs.npz"));
  const RefConfig& c = GetParam();
  auto hp = [&](const std::string& k) { return refs.get(str_cat(c.name, "/hp/", k)).get_as_double(0); };
  TrainingOptions o;
  o.batch_size = static_cast<int64_t>(hp("batch"));
  o.pipeline.accum = static_cast<int64_t>(hp("accum"));
  OptimizerOptions& opt = o.pipeline.optimizer;
  opt.type = parse_enum<OptimizerType>(c.type, "type");
  opt.lr = hp("lr");
  opt.momentum = hp("momentum");
  opt.weight_decay = hp("weight_decay");
  opt.clip_norm = hp("clip_norm");
  opt.schedule = parse_enum<LrSchedule>(c.schedule, "schedule");
  opt.warmup = static_cast<int64_t>(hp("warmup"));
  opt.total = static_cast<int64_t>(hp("total"));
  auto s = TrainingSession::create(model_file("digits/mlp.onnx"), o);
  Dataset train = Dataset::from_npz(model_file("digits/train.npz"), s->batch_inputs());
  DataLoader loader(train, s->global_batch(), /*shuffle=*/false, 0);
  const Tensor& losses = refs.get(str_cat(c.name, "/loss"));
  const Tensor& lrs = refs.get(str_cat(c.name, "/lr"));
  double worst_param = 0, worst_loss = 0;
  for (int64_t step = 1; step <= losses.numel(); ++step) {
    StepResult r = s->train_step(loader.next());
    ASSERT_FALSE(r.skipped);
    worst_loss = std::max(worst_loss, std::fabs(r.loss - losses.get_as_double(step - 1)) / losses.get_as_double(step - 1));
    EXPECT_NEAR(r.lr, lrs.get_as_double(step - 1), 1e-7 * lrs.get_as_double(step - 1)) << "step " << step;
    const std::string prefix = str_cat(c.name, "/step", step, "/");
    int params = 0;
    for (const auto& [name, want] : refs.arrays) {
      if (name.rfind(prefix, 0) != 0) continue;
      double e = rel_err(s->tensor(name.substr(prefix.size())), want);
      worst_param = std::max(worst_param, e);
      EXPECT_LT(e, 1e-5) << name;
      ++params;
    }
    EXPECT_EQ(params, 4);
  }
  std::printf("[ %s ] worst relative error: parameters %.2e, loss %.2e\n", c.name, worst_param, worst_loss);
  EXPECT_LT(worst_loss, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Mlp, TorchTrajectory,
                         ::testing::Values(RefConfig{"sgd_momentum", "sgd", "constant"},
                                           RefConfig{"adam", "adam", "constant"},
                                           RefConfig{"adamw", "adamw", "constant"},
                                           RefConfig{"adamw_clip", "adamw", "constant"},
                                           RefConfig{"adamw_accum2", "adamw", "constant"},
                                           RefConfig{"adamw_accum4", "adamw", "constant"},
                                           RefConfig{"adamw_warmup_linear", "adamw", "linear-warmup"},
                                           RefConfig{"adamw_cosine", "adamw", "cosine"}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- accumulation --------------------------------------------------------------------------------

TEST(Accumulation, KMicroBatchesEqualOneBatchOfKb) {
  auto make = [](int64_t b, int64_t k) {
    TrainingOptions o;
    o.batch_size = b;
    o.pipeline.accum = k;
    o.pipeline.optimizer.type = OptimizerType::kMomentum;
    o.pipeline.optimizer.lr = 0.05;
    return TrainingSession::create(model_file("digits/mlp.onnx"), o);
  };
  auto big = make(32, 1), micro = make(8, 4);
  Dataset train = Dataset::from_npz(model_file("digits/train.npz"), big->batch_inputs());
  DataLoader l1(train, 32, false, 0), l2(train, 32, false, 0);
  double worst_grad = 0, worst_param = 0;
  for (int step = 0; step < 5; ++step) {
    StepResult a = big->train_step(l1.next()), b = micro->train_step(l2.next());
    EXPECT_NEAR(a.loss, b.loss, 1e-6 * a.loss);
    for (const std::string& name : big->state_names()) {
      double e = rel_err(micro->tensor(name), big->tensor(name));
      bool acc = name.find(".grad.acc") != std::string::npos;
      (acc ? worst_grad : worst_param) = std::max(acc ? worst_grad : worst_param, e);
      EXPECT_LT(e, 1e-6) << name << " after step " << step + 1;
    }
  }
  std::printf("K=4 x b=8 vs K=1 x b=32: worst relative error gradients %.2e, parameters %.2e\n", worst_grad,
              worst_param);
}

// Runs the micro-step programs of two graphs over the same three micro-batches of 8 samples of
// `data` (x, labels); returns each graph's state afterwards.
std::pair<std::map<std::string, Tensor>, std::map<std::string, Tensor>> run_three_micro_steps(
    const Graph& a, const Graph& b, const std::string& data_file) {
  NpzArchive data = read_npz(model_file(data_file));
  ExecutorOptions eo;
  eo.program = Program::kMicroStep;
  Executor ea(a, eo), eb(b, eo);
  std::map<std::string, Tensor> state_a, state_b;
  for (int k = 0; k < 3; ++k) {
    std::map<std::string, Tensor> feeds{{"x", rows_copy(data.get("x"), 8 * k, 8)},
                                        {"labels", rows_copy(data.get("labels"), 8 * k, 8)}};
    auto run = [&](Executor& ex, std::map<std::string, Tensor>& state) {
      std::map<std::string, Tensor> f = state;
      f.insert(feeds.begin(), feeds.end());
      ex.set_first_micro_step(k == 0);
      auto out = ex.run(f);
      for (const auto& [s, u] : ex.state_updates()) state[s->name()] = out.at(u->name());
    };
    run(ea, state_a);
    run(eb, state_b);
  }
  return {state_a, state_b};
}

TEST(Accumulation, FusedGemmEqualsUnfusedPath) {
  auto build = [](bool fused) {
    auto g = import_onnx_file(model_file("digits/mlp.onnx"));
    for (Value* in : g->inputs()) in->set_shape(Shape({Dim(8), in->shape().dims[1]}));
    run_passes(*g, "canonicalize,add-loss,autodiff");
    GradAccumulationStats st = grad_accumulation(*g, {3});
    EXPECT_EQ(st.grads_fused, 2);  // fc1.weight and fc2.weight: their gradient GEMMs accumulate
    if (!fused) unfuse_gemm_accumulate(*g);
    return g;
  };
  auto fused = build(true), plain = build(false);
  int fused_nodes = 0, plain_nodes = 0;
  for (const auto& n : fused->nodes()) fused_nodes += n->op_type() == "GemmAccumulate";
  for (const auto& n : plain->nodes()) plain_nodes += n->op_type() == "GemmAccumulate";
  EXPECT_EQ(fused_nodes, 2);
  EXPECT_EQ(plain_nodes, 0);
  auto [state_f, state_p] = run_three_micro_steps(*fused, *plain, "digits/train.npz");
  for (const char* acc : {"fc1.weight.grad.acc", "fc2.weight.grad.acc", "fc1.bias.grad.acc"}) {
    EXPECT_TRUE(state_f.at(acc).bitwise_equal(state_p.at(acc))) << acc << ": " << rel_err(state_f.at(acc), state_p.at(acc));
    EXPECT_GT(max_abs(state_f.at(acc)), 0) << acc;
  }
}

// The CNN's weight gradients accumulate inside ConvGrad (beta 0 on the first micro-step, 1 after):
// the same sums as ConvGrad then AccumulateGrad over three micro-steps.
TEST(Accumulation, FusedConvGradEqualsUnfusedPath) {
  auto build = [](bool fused) {
    auto g = import_onnx_file(model_file("digits/cnn.onnx"));
    for (Value* in : g->inputs()) {
      std::vector<Dim> d = in->shape().dims;
      d[0] = Dim(8);
      in->set_shape(Shape(d));
    }
    run_passes(*g, "canonicalize,add-loss,autodiff");
    GradAccumulationStats st = grad_accumulation(*g, {3});
    EXPECT_EQ(st.grads_fused, 3);  // conv1.weight, conv2.weight and the fc GEMM
    if (!fused) unfuse_conv_grad(*g);
    return g;
  };
  auto fused = build(true), plain = build(false);
  auto count = [](const Graph& g) {
    int n = 0;
    for (const auto& node : g.nodes()) n += node->op_type() == "ConvGrad" && node->num_inputs() == 4;
    return n;
  };
  EXPECT_EQ(count(*fused), 2);
  EXPECT_EQ(count(*plain), 0);
  auto [state_f, state_p] = run_three_micro_steps(*fused, *plain, "digits/train_img.npz");
  for (const char* acc : {"conv1.weight.grad.acc", "conv2.weight.grad.acc", "conv1.bias.grad.acc"}) {
    ASSERT_TRUE(state_f.count(acc)) << acc;
    // GEMM with beta 1 adds its product to the accumulator in its own order: equal up to rounding.
    EXPECT_LT(rel_err(state_f.at(acc), state_p.at(acc)), 1e-6) << acc;
    EXPECT_GT(max_abs(state_f.at(acc)), 0) << acc;
  }
}

// ---- skipped steps -------------------------------------------------------------------------------

TEST(SkippedStep, NonFiniteGradientChangesNothing) {
  TrainingOptions o;
  o.batch_size = 16;
  o.pipeline.accum = 2;
  auto s = TrainingSession::create(model_file("digits/mlp.onnx"), o);
  Dataset train = Dataset::from_npz(model_file("digits/train.npz"), s->batch_inputs());
  DataLoader loader(train, 32, false, 0);
  ASSERT_FALSE(s->train_step(loader.next()).skipped);
  std::map<std::string, Tensor> before;
  for (const std::string& n : s->state_names()) before[n] = s->tensor(n);
  auto bad = loader.next();
  bad.at("x").data<float>()[20 * 64 + 3] = INFINITY;  // a sample of the second micro-batch
  StepResult r = s->train_step(bad);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(std::isnan(r.loss) || std::isinf(r.loss));
  int checked = 0;
  for (const std::string& n : s->state_names()) {
    if (n.find(".grad.acc") != std::string::npos) continue;
    EXPECT_TRUE(s->tensor(n).bitwise_equal(before.at(n))) << n << " changed on a skipped step";
    ++checked;
  }
  EXPECT_EQ(checked, 4 + 8 + 1);  // parameters, exp_avg and exp_avg_sq, the step counter
  EXPECT_EQ(s->tensor("optimizer.step").get_as_double(0), 1);
  StepResult next = s->train_step(loader.next());
  EXPECT_FALSE(next.skipped);
  EXPECT_EQ(s->tensor("optimizer.step").get_as_double(0), 2);
  EXPECT_EQ(next.step, 3);
}

// ---- evaluation and export -----------------------------------------------------------------------

TEST(Evaluate, MatchesPyTorchLogits) {
  // make_forward_refs.py ran the MLP (no BatchNorm or Dropout: train and eval mode agree) on these
  // 16 samples; the loss and accuracy follow from its logits.
  const std::string ref = model_file("digits/mlp_forward_ref.npz");
  NpzArchive a = read_npz(ref);
  const Tensor& logits = a.get("logits");
  const Tensor& labels = a.get("labels");
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < labels.numel(); ++i) {
    double mx = -INFINITY, sum = 0;
    int64_t arg = 0;
    for (int c = 0; c < 10; ++c) {
      double v = logits.get_as_double(i * 10 + c);
      if (v > mx) { mx = v; arg = c; }
    }
    for (int c = 0; c < 10; ++c) sum += std::exp(logits.get_as_double(i * 10 + c) - mx);
    int64_t y = static_cast<int64_t>(labels.get_as_double(i));
    loss += -(logits.get_as_double(i * 10 + y) - mx - std::log(sum));
    correct += arg == y;
  }
  loss /= static_cast<double>(labels.numel());
  Evaluator ev(model_file("digits/mlp.onnx"), LossSpec{}, cpu_device());
  Dataset d = Dataset::from_npz(ref, ev.data_inputs());
  EvalResult r = ev.run(d, 5);  // batches of 5, 5, 5, 1
  EXPECT_EQ(r.samples, 16);
  EXPECT_NEAR(r.loss, loss, 1e-6 * loss);
  ASSERT_TRUE(r.has_accuracy);
  EXPECT_DOUBLE_EQ(r.accuracy, static_cast<double>(correct) / 16);
}

TEST(Export, TrainedWeightsAndRunningStatisticsReachTheOnnxFile) {
  TrainingOptions o;
  o.batch_size = 32;
  o.pipeline.optimizer.lr = 0.01;
  auto s = TrainingSession::create(model_file("digits/cnn.onnx"), o);
  Dataset train = Dataset::from_npz(model_file("digits/train_img.npz"), s->batch_inputs());
  Dataset test = Dataset::from_npz(model_file("digits/test_img.npz"), s->batch_inputs());
  DataLoader loader(train, 32, true, 1);
  for (int i = 0; i < 5; ++i) s->train_step(loader.next());
  TempDir dir;
  const std::string path = dir.path + "/cnn_trained.onnx";
  s->export_inference(path);
  auto g = import_onnx_file(path);
  for (const char* name : {"conv1.weight", "bn1.weight", "bn1.running_mean", "bn1.running_var", "fc.bias"})
    EXPECT_TRUE(g->value(name)->data().bitwise_equal(s->tensor(name))) << name;
  EXPECT_GT(max_abs(s->tensor("bn1.running_mean")), 0);  // moved from its initial zeros
  Evaluator ev(path, o.pipeline.loss, cpu_device());
  EvalResult from_file = ev.run(test, o.eval_batch_size), in_session = s->evaluate(test);
  EXPECT_EQ(from_file.loss, in_session.loss);
  EXPECT_EQ(from_file.accuracy, in_session.accuracy);
}

TEST(Freeze, FrozenParametersKeepTheirValues) {
  TrainingOptions o;
  o.pipeline.freeze = {"fc1.*"};
  o.pipeline.optimizer.lr = 0.01;
  auto s = TrainingSession::create(model_file("digits/mlp.onnx"), o);
  auto names = s->state_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "fc1.weight"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "fc2.weight"), 1);
  Dataset train = Dataset::from_npz(model_file("digits/train.npz"), s->batch_inputs());
  DataLoader loader(train, 32, false, 0);
  Tensor fc2_before = s->tensor("fc2.weight");
  for (int i = 0; i < 3; ++i) s->train_step(loader.next());
  TempDir dir;
  s->export_inference(dir.path + "/mlp.onnx");
  auto original = import_onnx_file(model_file("digits/mlp.onnx"));
  auto trained = import_onnx_file(dir.path + "/mlp.onnx");
  EXPECT_TRUE(trained->value("fc1.weight")->data().bitwise_equal(original->value("fc1.weight")->data()));
  EXPECT_TRUE(trained->value("fc1.bias")->data().bitwise_equal(original->value("fc1.bias")->data()));
  EXPECT_GT(rel_err(trained->value("fc2.weight")->data(), fc2_before), 1e-4);
}

TEST(Gpt, PinnedBatchFoldsTheShapeArithmeticAndTrains) {
  // Next-token prediction on counting sequences (t, t+1, ... mod 64): a task the GPT learns fast.
  const int64_t n = 64;
  std::vector<int64_t> tokens, labels;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < 16; ++t) {
      tokens.push_back((i * 7 + t) % 64);
      labels.push_back((i * 7 + t + 1) % 64);
    }
  TempDir dir;
  const std::string data = dir.path + "/seq.npz";
  write_npz(data, {{"tokens", Tensor::from_vector<int64_t>({n, 16}, tokens)},
                   {"labels", Tensor::from_vector<int64_t>({n, 16}, labels)}});
  TrainingOptions o;
  o.batch_size = 4;
  o.pipeline.accum = 2;
  o.pipeline.optimizer.lr = 1e-2;
  auto s = TrainingSession::create(model_file("gpt/gpt.onnx"), o);
  for (const auto& node : s->graph().nodes()) EXPECT_NE(node->op_type(), "Shape") << node->describe();
  for (const Value* v : s->graph().values()) EXPECT_TRUE(v->shape().is_static()) << v->name() << " " << v->type_string();
  Dataset train = Dataset::from_npz(data, s->batch_inputs());
  DataLoader loader(train, 8, true, 0);
  double first = s->train_step(loader.next()).loss, last = 0;
  for (int i = 0; i < 24; ++i) last = s->train_step(loader.next()).loss;
  EXPECT_NEAR(first, std::log(64.0), 0.5);  // about uniform over 64 tokens at the start
  EXPECT_LT(last, 0.6 * first);
  EvalResult e = s->evaluate(train);
  EXPECT_GT(e.accuracy, 0.5);
}

TEST(TrainStep, RejectsBadBatches) {
  TrainingOptions o;
  o.batch_size = 8;
  o.pipeline.accum = 2;
  auto s = TrainingSession::create(model_file("digits/mlp.onnx"), o);
  NpzArchive data = read_npz(model_file("digits/train.npz"));
  std::map<std::string, Tensor> batch{{"x", rows_copy(data.get("x"), 0, 16)}};
  EXPECT_NE(error_of([&] { s->train_step(batch); }).find("no array 'labels'"), std::string::npos);
  batch["labels"] = rows_copy(data.get("labels"), 0, 8);
  EXPECT_NE(error_of([&] { s->train_step(batch); }).find("K*b = 2*8 = 16"), std::string::npos);
}

TEST(TrainingSession, BadOptionsFailClearly) {
  TrainingOptions o;
  o.pipeline.optimizer.lr = -1;
  EXPECT_NE(error_of([&] { TrainingSession::create(model_file("digits/mlp.onnx"), o); })
                .find("pass 'optimizer': option 'lr' must be > 0, got '-1'"),
            std::string::npos);
  o = TrainingOptions();
  o.pipeline.loss = LossSpec::parse("model:nope");
  EXPECT_NE(error_of([&] { TrainingSession::create(model_file("digits/mlp.onnx"), o); }).find("'nope'"),
            std::string::npos);
  o = TrainingOptions();
  EXPECT_NE(error_of([&] { TrainingSession::create(model_file("digits/missing.onnx"), o); }).find("missing.onnx"),
            std::string::npos);
}

}  // namespace
}  // namespace otter
