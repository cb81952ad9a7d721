// bf16 ai.otter.Attention and AttentionGrad (kernels/cpu/attention_bf16.cc) against a float64
// reference of the same math on the same bf16 inputs: both the native kernels (AVX512_BF16 dot
// products; skipped with the reason on a CPU without them) and the widening fallback
// (OTTER_BF16_GEMM=widen's path: the float32 kernels on widened inputs).
//
// The native kernels round P and dS to bf16 where they enter a product (as flash attention does
// in bf16 on a GPU), and every output once. Each rounding is at most 2^-8 relative, so an output
// is within a few 2^-8 of the reference relative to its largest magnitude; the test allows 1e-2 (measured: at most 5.3e-3)
// and also asserts that the native result differs from the widened one (the roundings happened,
// so the native kernels ran). A misplaced pair, a missed block or a wrong stride is an O(1) error.
// The shapes cross the kernels' edges: several 64 x 64 blocks with remainders, odd query, key and
// head sizes (padded pair words), grouped-query heads, a causal bool mask, an additive mask with
// broadcasting, a bool key mask broadcast over heads and rows that replaces scores by a finite
// fill (fill_true), and head sizes above 64 (smaller key blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cpu/gemm_bf16.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

Tensor random_bf16(std::vector<int64_t> dims, uint64_t seed, float sd = 1.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, sd);
  Tensor t(DataType::kBFloat16, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<BFloat16>()[i] = BFloat16{float_to_bf16(d(rng))};
  return t;
}

double at(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kBFloat16 ? bf16_to_float(t.data<BFloat16>()[i].bits) : t.get_as_double(i);
}

struct Case {
  int64_t lead, h, hk, s, t, d, dv;
  // "none"; "causal" (bool [s, t], fill_false, -inf); "add" ([1, 1, s, t] float, a seventh -inf);
  // "keys" (bool [t], broadcast over heads and rows, fill_true with the finite fill 0.5: the
  // replaced scores keep probability mass but get no gradient)
  std::string mask;
};

struct Inputs {
  Tensor q, kt, v, dy, mask;
  std::map<std::string, Attribute> attrs;
};

Inputs inputs(const Case& c) {
  Inputs in;
  in.q = random_bf16({c.lead, c.h, c.s, c.d}, 1);
  in.kt = random_bf16({c.lead, c.hk, c.d, c.t}, 2);
  in.v = random_bf16({c.lead, c.hk, c.t, c.dv}, 3);
  in.dy = random_bf16({c.lead, c.h, c.s, c.dv}, 4);
  in.attrs["scale"] = Attribute(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d))));
  if (c.mask == "causal") {
    in.mask = Tensor(DataType::kBool, {c.s, c.t});
    for (int64_t i = 0; i < c.s; ++i)
      for (int64_t j = 0; j < c.t; ++j) in.mask.data<bool>()[i * c.t + j] = j <= i + (c.t - c.s);
    in.attrs["mask_mode"] = Attribute(std::string("fill_false"));
  } else if (c.mask == "add") {
    in.mask = Tensor(DataType::kFloat32, {1, 1, c.s, c.t});
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<float> u(-2.f, 0.f);
    for (int64_t i = 0; i < c.s * c.t; ++i)
      in.mask.data<float>()[i] = i % 7 == 0 ? -INFINITY : u(rng);
    in.attrs["mask_mode"] = Attribute(std::string("add"));
  } else if (c.mask == "keys") {
    in.mask = Tensor(DataType::kBool, {c.t});
    for (int64_t j = 0; j < c.t; ++j) in.mask.data<bool>()[j] = j % 5 == 2;
    in.attrs["mask_mode"] = Attribute(std::string("fill_true"));
    in.attrs["fill"] = Attribute(0.5f);
  }
  return in;
}

// The float64 reference: Y, and dQ, dKt, dV for the upstream gradient dY.
struct Reference {
  std::vector<double> y, dq, dkt, dv;
};

Reference reference(const Case& c, const Inputs& in) {
  Reference r;
  r.y.assign(c.lead * c.h * c.s * c.dv, 0);
  r.dq.assign(c.lead * c.h * c.s * c.d, 0);
  r.dkt.assign(c.lead * c.hk * c.d * c.t, 0);
  r.dv.assign(c.lead * c.hk * c.t * c.dv, 0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  for (int64_t b = 0; b < c.lead; ++b)
    for (int64_t h = 0; h < c.h; ++h) {
      const int64_t bh = b * c.h + h, kv = b * c.hk + h / (c.h / c.hk);
      for (int64_t i = 0; i < c.s; ++i) {
        std::vector<double> p(c.t, -INFINITY);
        double mx = -INFINITY;
        std::vector<bool> replaced(c.t, false);
        for (int64_t j = 0; j < c.t; ++j) {
          if (c.mask == "causal" && !in.mask.data<bool>()[i * c.t + j]) continue;
          if (c.mask == "keys" && in.mask.data<bool>()[j]) {
            replaced[j] = true;
            mx = std::max(mx, p[j] = 0.5);
            continue;
          }
          double sc = 0;
          for (int64_t e = 0; e < c.d; ++e) sc += at(in.q, (bh * c.s + i) * c.d + e) * at(in.kt, (kv * c.d + e) * c.t + j);
          p[j] = sc * scale + (c.mask == "add" ? in.mask.data<float>()[i * c.t + j] : 0.0);
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (double& x : p) sum += (x = mx == -INFINITY ? 0 : std::exp(x - mx));
        for (double& x : p) x = sum > 0 ? x / sum : NAN;
        std::vector<double> dp(c.t, 0);
        double dsum = 0;
        for (int64_t j = 0; j < c.t; ++j)
          for (int64_t e = 0; e < c.dv; ++e) {
            const double vv = at(in.v, (kv * c.t + j) * c.dv + e), g = at(in.dy, (bh * c.s + i) * c.dv + e);
            r.y[(bh * c.s + i) * c.dv + e] += p[j] * vv;
            r.dv[(kv * c.t + j) * c.dv + e] += p[j] * g;
            dp[j] += g * vv;
          }
        for (int64_t j = 0; j < c.t; ++j) dsum += p[j] * dp[j];
        for (int64_t j = 0; j < c.t; ++j) {
          const double ds = replaced[j] ? 0.0 : p[j] * (dp[j] - dsum) * scale;
          for (int64_t e = 0; e < c.d; ++e) {
            r.dq[(bh * c.s + i) * c.d + e] += ds * at(in.kt, (kv * c.d + e) * c.t + j);
            r.dkt[(kv * c.d + e) * c.t + j] += ds * at(in.q, (bh * c.s + i) * c.d + e);
          }
        }
      }
    }
  return r;
}

// max |got - ref| / max |ref| over the finite reference entries; NaN where they must agree on NaN.
double relative_error(const Tensor& got, const std::vector<double>& ref) {
  double err = 0, big = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = at(got, static_cast<int64_t>(i));
    if (std::isnan(ref[i])) {
      if (!std::isnan(g)) return NAN;
      continue;
    }
    err = std::max(err, std::abs(g - ref[i]));
    big = std::max(big, std::abs(ref[i]));
  }
  return err / std::max(big, 1e-30);
}

// Y, then dQ, dKt, dV, as the registry's bf16 kernels compute them.
std::vector<Tensor> run_attention(const Case& c, const Inputs& in) {
  std::vector<Tensor> fwd_in = {in.q, in.kt, in.v};
  if (c.mask != "none") fwd_in.push_back(in.mask);
  testing::OpCall f{"Attention", fwd_in, in.attrs, 2, 17, kOtterDomain};
  f.infer = true;
  std::vector<Tensor> y = testing::run_op(f);
  EXPECT_EQ(y[1].dtype(), DataType::kFloat32);
  testing::OpCall g{"AttentionGrad",
                    {in.dy, in.q, in.kt, in.v, c.mask != "none" ? in.mask : Tensor(), y[0], y[1]},
                    in.attrs,
                    3,
                    17,
                    kOtterDomain};
  g.infer = true;
  std::vector<Tensor> grads = testing::run_op(g);
  return {y[0], grads[0], grads[1], grads[2]};
}

class AttentionBf16 : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionBf16, NativeAndWidenedMatchFloat64) {
  const Case c = GetParam();
  const Inputs in = inputs(c);
  const Reference ref = reference(c, in);
  const std::vector<double>* refs[] = {&ref.y, &ref.dq, &ref.dkt, &ref.dv};
  const char* names[] = {"Y", "dQ", "dKt", "dV"};
  cpu::set_bf16_gemm_widened(true);
  const std::vector<Tensor> widened = run_attention(c, in);
  cpu::set_bf16_gemm_widened(false);
  for (int i = 0; i < 4; ++i) EXPECT_LE(relative_error(widened[i], *refs[i]), 1e-2) << "widened " << names[i];
  if (!cpu::bf16_gemm_native()) GTEST_SKIP() << "native path not run: " << cpu::describe_bf16_gemm();
  const std::vector<Tensor> native = run_attention(c, in);
  for (int i = 0; i < 4; ++i) {
    EXPECT_LE(relative_error(native[i], *refs[i]), 1e-2) << "native " << names[i];
    int64_t differ = 0;
    for (int64_t e = 0; e < native[i].numel(); ++e)
      differ += native[i].data<BFloat16>()[e].bits != widened[i].data<BFloat16>()[e].bits;
    EXPECT_GT(differ, 0) << names[i] << ": the native result is the widened one bit for bit";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionBf16,
                         ::testing::Values(Case{2, 4, 4, 128, 128, 64, 64, "causal"},  // gpt_large's heads
                                           Case{1, 4, 2, 130, 150, 32, 48, "none"},    // GQA, block remainders
                                           Case{2, 2, 1, 37, 45, 17, 9, "causal"},     // odd everything
                                           Case{1, 3, 3, 70, 67, 64, 64, "add"},       // additive, broadcast
                                           Case{2, 2, 2, 33, 90, 96, 80, "keys"}),     // fill_true, d > 64
                         [](const auto& info) {
                           const Case& c = info.param;
                           return "s" + std::to_string(c.s) + "t" + std::to_string(c.t) + "d" + std::to_string(c.d) +
                                  "h" + std::to_string(c.h) + "k" + std::to_string(c.hk) + "_" + c.mask;
                         });

}  // namespace
}  // namespace otter
