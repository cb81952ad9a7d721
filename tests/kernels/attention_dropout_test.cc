// Dropout inside ai.otter.Attention (graph/ops/attention.cc, kernels/common/attention_dropout.h):
// the CPU kernel's output against a float64 computation written out here, which drops the
// probabilities the hash says (softmax, then P * factor, then the product with V), over shapes of
// several query and key blocks; the dropped fraction; the seed (input, output, drawn per run from
// the training generator); bf16 through the widening kernel. The gradient against finite
// differences: tests/passes/gradcheck_attention_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/half.h"
#include "kernels/common/attention_dropout.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

constexpr int64_t kB = 2, kH = 2, kS = 130, kT = 150, kD = 40, kDv = 5;
constexpr double kRatio = 0.25, kScale = 0.15;

Tensor random(DataType t, std::vector<int64_t> dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor x(t, dims);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double r = u(rng);
    if (t == DataType::kFloat64) x.data<double>()[i] = r;
    if (t == DataType::kFloat32) x.data<float>()[i] = static_cast<float>(r);
    if (t == DataType::kBFloat16) static_cast<uint16_t*>(x.raw())[i] = float_to_bf16(static_cast<float>(r));
  }
  return x;
}

Tensor seed_tensor(int64_t s) {
  Tensor t(DataType::kInt64, {});
  t.data<int64_t>()[0] = s;
  return t;
}

testing::OpCall attention(const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor& seed) {
  return {
      .op = "Attention",
      .inputs = {q, kt, v, Tensor(), seed},
      .attrs = {{"scale", Attribute(static_cast<float>(kScale))}, {"dropout", Attribute(static_cast<float>(kRatio))}},
      .num_outputs = 3,
      .domain = kOtterDomain,
      .infer = true};
}

// Y in float64 with the probabilities the hash drops under `seed`; *dropped counts them.
std::vector<double> reference(const Tensor& q, const Tensor& kt, const Tensor& v, uint64_t seed, int64_t* dropped) {
  const attn::Dropout dr = attn::make_dropout(kRatio, seed);
  std::vector<double> y(kB * kH * kS * kDv), p(kT);
  *dropped = 0;
  for (int64_t bh = 0; bh < kB * kH; ++bh)
    for (int64_t i = 0; i < kS; ++i) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < kT; ++j) {
        double s = 0;
        for (int64_t c = 0; c < kD; ++c)
          s += q.get_as_double((bh * kS + i) * kD + c) * kt.get_as_double((bh * kD + c) * kT + j);
        p[j] = s * static_cast<float>(kScale);  // the attribute is a float
        mx = std::max(mx, p[j]);
      }
      for (int64_t j = 0; j < kT; ++j) sum += p[j] = std::exp(p[j] - mx);
      for (int64_t j = 0; j < kT; ++j) {
        const double f = dr.factor(static_cast<uint64_t>((bh * kS + i) * kT + j));
        *dropped += f == 0;
        for (int64_t c = 0; c < kDv; ++c)
          y[(bh * kS + i) * kDv + c] += p[j] / sum * f * v.get_as_double((bh * kT + j) * kDv + c);
      }
    }
  return y;
}

double max_error(const Tensor& got, const std::vector<double>& want) {
  double e = 0;
  for (int64_t i = 0; i < got.numel(); ++i) e = std::max(e, std::fabs(got.get_as_double(i) - want[i]));
  return e;
}

TEST(AttentionDropout, DropsWhatTheHashSaysInFloat32AndFloat64) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64}) {
    const Tensor q = random(t, {kB, kH, kS, kD}, 1), kt = random(t, {kB, kH, kD, kT}, 2),
                 v = random(t, {kB, kH, kT, kDv}, 3);
    const std::vector<Tensor> out = testing::run_op(attention(q, kt, v, seed_tensor(12345)));
    int64_t dropped = 0;
    const std::vector<double> want = reference(q, kt, v, 12345, &dropped);
    const double e = max_error(out[0], want);
    std::printf("%s: max |Y - reference| %.3g, dropped %.4f\n", std::string(dtype_name(t)).c_str(), e,
                static_cast<double>(dropped) / (kB * kH * kS * kT));
    EXPECT_LE(e, t == DataType::kFloat64 ? 1e-12 : 2e-6) << dtype_name(t);
    EXPECT_EQ(out[2].data<int64_t>()[0], 12345);
    // 78,000 draws: the fraction's standard deviation is 0.0016.
    EXPECT_NEAR(static_cast<double>(dropped) / (kB * kH * kS * kT), kRatio, 0.01);
  }
}

TEST(AttentionDropout, ASeedDrawnPerRunFromTheTrainingGenerator) {
  const Tensor q = random(DataType::kFloat32, {kB, kH, kS, kD}, 1),
               kt = random(DataType::kFloat32, {kB, kH, kD, kT}, 2),
               v = random(DataType::kFloat32, {kB, kH, kT, kDv}, 3);
  testing::OpCall c = attention(q, kt, v, Tensor());
  c.seed = 7;
  const std::vector<Tensor> a = testing::run_op(c), a2 = testing::run_op(c);
  c.seed = 8;
  const std::vector<Tensor> b = testing::run_op(c);
  const int64_t sa = a[2].data<int64_t>()[0], sb = b[2].data<int64_t>()[0];
  EXPECT_EQ(sa, a2[2].data<int64_t>()[0]);
  EXPECT_NE(sa, sb);
  int64_t dropped = 0;
  EXPECT_LE(max_error(a[0], reference(q, kt, v, static_cast<uint64_t>(sa), &dropped)), 2e-6);
  EXPECT_GT(max_error(a[0], reference(q, kt, v, static_cast<uint64_t>(sb), &dropped)), 1e-2);  // another mask
}

// bf16 Q, K, V run the float32 kernel widened (the bf16 dot-product kernel has no dropout).
TEST(AttentionDropout, Bf16RoundsTheWidenedResult) {
  const Tensor q = random(DataType::kBFloat16, {kB, kH, kS, kD}, 1),
               kt = random(DataType::kBFloat16, {kB, kH, kD, kT}, 2),
               v = random(DataType::kBFloat16, {kB, kH, kT, kDv}, 3);
  const std::vector<Tensor> out = testing::run_op(attention(q, kt, v, seed_tensor(99)));
  ASSERT_EQ(out[0].dtype(), DataType::kBFloat16);
  int64_t dropped = 0;
  EXPECT_LE(max_error(out[0], reference(q, kt, v, 99, &dropped)), 1e-2);
}

TEST(AttentionDropout, RefusesARatioOfOne) {
  const Tensor q = random(DataType::kFloat32, {1, 1, 2, 2}, 1), kt = random(DataType::kFloat32, {1, 1, 2, 3}, 2),
               v = random(DataType::kFloat32, {1, 1, 3, 2}, 3);
  testing::OpCall c = attention(q, kt, v, seed_tensor(1));
  c.attrs["dropout"] = Attribute(1.0f);
  EXPECT_NE(testing::run_error(c).find("'dropout' must be in [0, 1)"), std::string::npos) << testing::run_error(c);
}

}  // namespace
}  // namespace otter
