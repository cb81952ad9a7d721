// Mixed-precision training through TrainingSession: dynamic loss scaling on overflow (skipped
// steps change nothing, the scale halves; after `interval` good steps it doubles; training then
// converges), the reason for loss scaling (a model whose fp16 gradients underflow learns nothing
// without it and learns with it), and the half copies of the weights staying the rounded master
// weights.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/common/half.h"
#include "runtime/npz.h"
#include "runtime/training_session.h"
#include "tests/runtime/training_test_util.h"

namespace otter {
namespace {

std::map<std::string, Tensor> snapshot(const TrainingSession& s) {
  std::map<std::string, Tensor> out;
  for (const std::string& n : s.state_names()) out[n] = s.tensor(n);
  return out;
}

bool is_accumulator(const std::string& n) { return n.find(".grad.acc") != std::string::npos; }

// Every half copy `<w>.f16` equals its fp32 master weight rounded to nearest even.
void expect_half_copies_match(const TrainingSession& s) {
  int copies = 0;
  for (const std::string& n : s.state_names()) {
    if (n.size() < 4 || n.substr(n.size() - 4) != ".f16") continue;
    Tensor half = s.tensor(n), master = s.tensor(n.substr(0, n.size() - 4));
    for (int64_t i = 0; i < master.numel(); ++i)
      ASSERT_EQ(static_cast<const uint16_t*>(half.raw())[i], float_to_half(master.data<float>()[i])) << n << " " << i;
    ++copies;
  }
  EXPECT_GT(copies, 0);
}

// fp16 with an initial scale of 1e9 (clamped to 2^24): the first steps overflow. Each is skipped
// and halves the scale, changing no weight, moment, half copy or step counter; once the gradients
// fit, steps apply, and after `interval` good steps in a row the scale doubles. Training converges.
TEST(DynamicLossScale, OverflowSkipsAndHalvesThenGrowsAfterIntervalAndConverges) {
  TrainingOptions o;
  o.batch_size = 16;
  o.pipeline.accum = 2;
  o.pipeline.precision = Precision::kFp16;
  o.pipeline.loss_scale = LossScaleOptions{};
  o.pipeline.loss_scale->init = 1e9;
  o.pipeline.loss_scale->interval = 5;
  o.pipeline.optimizer.lr = 0.01;
  auto s = TrainingSession::create(model_file("digits/mlp.onnx"), o);
  EXPECT_EQ(s->tensor("loss_scale").get_as_double(0), 16777216.0);  // 1e9 clamped to 2^24
  Dataset train = Dataset::from_npz(model_file("digits/train.npz"), s->batch_inputs());
  Dataset test = Dataset::from_npz(model_file("digits/test.npz"), s->batch_inputs());
  DataLoader loader(train, 32, true, 0);
  int skipped = 0, grew = 0, good_run = 0;
  bool seen_good = false;
  for (int step = 0; step < 200; ++step) {
    auto before = snapshot(*s);
    const double scale = before.at("loss_scale").get_as_double(0);
    StepResult r = s->train_step(loader.next());
    const double after = s->tensor("loss_scale").get_as_double(0);
    EXPECT_EQ(r.loss_scale, after);
    if (r.skipped) {
      ++skipped;
      good_run = 0;
      EXPECT_EQ(after, scale / 2) << "step " << r.step;
      EXPECT_EQ(s->tensor("loss_scale.good_steps").get_as_double(0), 0);
      for (const auto& [n, t] : before) {
        if (!is_accumulator(n) && n.rfind("loss_scale", 0) != 0) {
          EXPECT_TRUE(s->tensor(n).bitwise_equal(t)) << n << " changed on skipped step " << r.step;
        }
      }
      if (!seen_good) {
        EXPECT_EQ(r.step, skipped) << "the first steps overflow";
      }
      continue;
    }
    seen_good = true;
    ++good_run;
    EXPECT_FALSE(s->tensor("fc1.weight").bitwise_equal(before.at("fc1.weight"))) << "step " << r.step;
    if (good_run % 5 == 0) {
      EXPECT_EQ(after, scale * 2) << "after 5 good steps the scale doubles (step " << r.step << ")";
      ++grew;
    } else {
      EXPECT_EQ(after, scale) << "step " << r.step;
    }
  }
  expect_half_copies_match(*s);
  EXPECT_GE(skipped, 4) << "2^24 overflows fp16 gradients for several halvings";
  EXPECT_GE(grew, 2);
  EXPECT_EQ(s->tensor("optimizer.step").get_as_double(0), 200 - skipped) << "skipped steps are not counted";
  EvalResult e = s->evaluate(test);
  std::printf("  200 steps: %d skipped, scale grew %d times, final scale %g, test accuracy %.2f%%\n", skipped, grew,
              s->tensor("loss_scale").get_as_double(0), 100 * e.accuracy);
  EXPECT_GT(e.accuracy, 0.9);
}

// Numeric before/after of loss-scale: in fp32, seeding the backward pass with a power of two S and
// unscaling by 1/S scales every gradient exactly (no overflow or underflow at these magnitudes),
// so the weights after training with dynamic or static scaling equal those without, bit for bit.
TEST(LossScalePass, PowerOfTwoScaleChangesNoBitInFp32) {
  auto train = [](const std::string& scaling) {
    TrainingOptions o;
    o.batch_size = 8;
    o.pipeline.accum = 2;
    o.pipeline.loss_scale = LossScaleOptions{parse_enum<LossScaleMode>(scaling, "mode"), 1024};
    o.pipeline.optimizer.type = OptimizerType::kSgd;
    o.pipeline.optimizer.lr = 0.1;
    auto s = TrainingSession::create(model_file("digits/cnn.onnx"), o);
    Dataset train = Dataset::from_npz(model_file("digits/train_img.npz"), s->batch_inputs());
    DataLoader loader(train, 16, false, 0);
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(s->train_step(loader.next()).skipped);
    return s;
  };
  auto plain = train("off"), fixed = train("static"), dynamic = train("dynamic");
  EXPECT_FALSE(plain->graph().loss_scale);
  ASSERT_TRUE(fixed->graph().loss_scale && dynamic->graph().loss_scale);
  int params = 0;
  for (const std::string& n : plain->state_names()) {
    if (is_accumulator(n)) continue;
    EXPECT_TRUE(fixed->tensor(n).bitwise_equal(plain->tensor(n))) << n << " (static)";
    EXPECT_TRUE(dynamic->tensor(n).bitwise_equal(plain->tensor(n))) << n << " (dynamic)";
    ++params;
  }
  EXPECT_GE(params, 8);
  // The accumulators hold the scaled gradients: exactly 1024 times the unscaled ones.
  Tensor a = plain->tensor("conv1.weight.grad.acc"), b = fixed->tensor("conv1.weight.grad.acc");
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(b.data<float>()[i], 1024 * a.data<float>()[i]);
}

// A linear model whose loss is multiplied by 1e-8 in fp32 (its own loss output, so the loss
// subgraph stays fp32): the gradient reaching the fp16 MatMul is below half of fp16's smallest
// subnormal (2^-24, about 6e-8) and rounds to zero. Without loss scaling fp16 learns nothing (not
// one bit of the weights moves); with dynamic scaling it learns as fp32 does. Adam (no weight
// decay) makes the step size independent of the gradient's scale, so fp32 learns too.
class Underflow : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.path + "/tiny.onnxtxt";
    std::FILE* f = std::fopen(model_.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs(R"(<ir_version: 8, opset_import: ["" : 17]>
tiny (float[N, 4] x, float[N, 1] t) => (float l, float[N, 1] y) <float[4, 1] w = {0, 0, 0, 0}>
{
  y = MatMul(x, w)
  d = Sub(y, t)
  sq = Mul(d, d)
  m = ReduceMean<keepdims = 0>(sq)
  k = Constant<value = float {1e-8}>()
  l = Mul(m, k)
}
)",
               f);
    std::fclose(f);
    // Targets t = x . (1, -2, 0.5, 3).
    std::mt19937_64 rng(3);
    std::normal_distribution<float> normal;
    const int64_t n = 256;
    Tensor x(DataType::kFloat32, {n, 4}), t(DataType::kFloat32, {n, 1});
    const float w[4] = {1, -2, 0.5f, 3};
    for (int64_t i = 0; i < n; ++i) {
      float y = 0;
      for (int j = 0; j < 4; ++j) y += w[j] * (x.data<float>()[i * 4 + j] = normal(rng));
      t.data<float>()[i] = y;
    }
    data_ = dir_.path + "/tiny.npz";
    write_npz(data_, {{"x", x}, {"t", t}});
  }

  // Trains 100 steps; returns the first and last loss and whether the weights moved.
  struct Run {
    double first, last;
    bool moved;
    double scale;
  };
  Run train(const std::string& precision, const std::string& scaling) {
    TrainingOptions o;
    o.batch_size = 32;
    o.pipeline.loss = LossSpec::parse("model:l");
    o.pipeline.precision = parse_enum<Precision>(precision, "precision");
    o.pipeline.loss_scale = LossScaleOptions{parse_enum<LossScaleMode>(scaling, "mode")};
    o.pipeline.optimizer.type = OptimizerType::kAdam;
    o.pipeline.optimizer.lr = 0.05;
    auto s = TrainingSession::create(model_, o);
    Dataset d = Dataset::from_npz(data_, s->batch_inputs());
    DataLoader loader(d, 32, true, 0);
    Tensor w0 = s->tensor("w");
    Run r{s->train_step(loader.next()).loss, 0, false, 0};
    for (int i = 1; i < 100; ++i) r.last = s->train_step(loader.next()).loss;
    r.moved = !s->tensor("w").bitwise_equal(w0);
    r.scale = s->graph().loss_scale ? s->tensor("loss_scale").get_as_double(0) : 1;
    std::printf("  %s, loss scale %s: loss %.4g -> %.4g, weights %s (final scale %g)\n", precision.c_str(),
                scaling.c_str(), r.first, r.last, r.moved ? "moved" : "unchanged", r.scale);
    return r;
  }

  TempDir dir_;
  std::string model_, data_;
};

TEST_F(Underflow, Fp16LearnsOnlyWithLossScaling) {
  Run fp32 = train("fp32", "off");
  Run plain = train("fp16", "off");
  Run scaled = train("fp16", "dynamic");
  EXPECT_LT(fp32.last, 0.1 * fp32.first) << "fp32 learns";
  EXPECT_FALSE(plain.moved) << "fp16 without scaling: every gradient underflowed to zero";
  EXPECT_GT(plain.last, 0.5 * plain.first) << "fp16 without scaling: the loss stays";
  EXPECT_LT(scaled.last, 0.1 * scaled.first) << "fp16 with loss scaling learns";
  EXPECT_LT(scaled.last, 1.5 * fp32.last) << "as well as fp32";
}

}  // namespace
}  // namespace otter
