// bfloat16 Conv, ConvGrad, ConvTranspose and GemmAccumulate on the bf16 GEMM (kernels/cpu/gemm_bf16.h) against
// float64 references computed on the same bf16 values, on both paths of the GEMM: the native one
// (AVX512_BF16 dot products; skipped with the reason on a CPU without them) and the widening one.
// The products of bf16 values are exact in float32, so before the final rounding the only error is
// float32 summation, at most (terms - 1) * 2^-24 * sum |terms| in any summation order (to first
// order; the tests allow terms + 2). A bf16 output then adds one rounding, at most 2^-8 of the
// float32 value; an error beyond that bound (a second rounding, a bf16 accumulator, a missed or
// misplaced term) fails. The shapes take every path of the kernels: groups, strides, asymmetric
// padding, dilation, kernel offsets that only see padding, 1x1 pointwise with one image and with
// several, depthwise, 1-D and 3-D (the N-d im2col), chunks of images that split the batch.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/op_table.h"
#include "kernels/common/half.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/isa.h"
#include "kernels/kernel.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

constexpr double kU32 = 1.0 / (1 << 24);  // float32 unit roundoff
constexpr double kU16 = 1.0 / (1 << 8);   // bfloat16 unit roundoff

Tensor random_bf16(std::vector<int64_t> dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Tensor t(DataType::kBFloat16, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<BFloat16>()[i] = BFloat16{float_to_bf16(d(rng))};
  return t;
}

Tensor random_f32(std::vector<int64_t> dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Tensor t(DataType::kFloat32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// Runs one node through the registry's CPU kernel (kernel_test_util.h's run_op, shapes inferred);
// an empty output name leaves that output out.
std::vector<Tensor> run(const std::string& op, const std::string& domain, const std::vector<Tensor>& inputs,
                        const std::map<std::string, Attribute>& attrs, const std::vector<std::string>& outs,
                        bool first_micro_step = true) {
  testing::OpCall c{op, inputs, attrs, static_cast<int>(outs.size()), 17, domain};
  c.first_micro_step = first_micro_step;
  c.infer = true;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].empty()) c.omitted_outputs |= uint64_t{1} << i;
  return testing::run_op(c);
}

// One convolution: X [n, c, in...], W [m, c / group, k...], 1 to 3 spatial axes.
struct ConvCase {
  std::string name;
  std::vector<int64_t> x, w;
  int64_t group = 1;
  std::vector<int64_t> strides, pads, dilations;  // empty: the ONNX defaults
  bool bias = true;
};

std::map<std::string, Attribute> attrs_of(const ConvCase& c) {
  std::map<std::string, Attribute> a{{"group", Attribute(c.group)}};
  if (!c.strides.empty()) a["strides"] = Attribute(c.strides);
  if (!c.pads.empty()) a["pads"] = Attribute(c.pads);
  if (!c.dilations.empty()) a["dilations"] = Attribute(c.dilations);
  return a;
}

// The convolution's index map, padded to three spatial axes: for each (output position, kernel
// offset) pair that reads the input, f(flat output position, flat kernel offset, flat input position).
struct Geometry3 {
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, d{1, 1, 1}, p{0, 0, 0};
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
  template <typename F>
  void for_each(F&& f) const {
    for (int64_t o0 = 0; o0 < out[0]; ++o0)
      for (int64_t o1 = 0; o1 < out[1]; ++o1)
        for (int64_t o2 = 0; o2 < out[2]; ++o2)
          for (int64_t k0 = 0; k0 < k[0]; ++k0)
            for (int64_t k1 = 0; k1 < k[1]; ++k1)
              for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                const int64_t i0 = o0 * s[0] - p[0] + k0 * d[0], i1 = o1 * s[1] - p[1] + k1 * d[1],
                              i2 = o2 * s[2] - p[2] + k2 * d[2];
                if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                f((o0 * out[1] + o1) * out[2] + o2, (k0 * k[1] + k1) * k[2] + k2, (i0 * in[1] + i1) * in[2] + i2);
              }
  }
};

Geometry3 geometry(const ConvCase& c) {
  Geometry3 g;
  const size_t nsp = c.x.size() - 2, off = 3 - nsp;
  for (size_t j = 0; j < nsp; ++j) {
    g.in[off + j] = c.x[2 + j];
    g.k[off + j] = c.w[2 + j];
    if (!c.strides.empty()) g.s[off + j] = c.strides[j];
    if (!c.dilations.empty()) g.d[off + j] = c.dilations[j];
    const int64_t pb = c.pads.empty() ? 0 : c.pads[j], pe = c.pads.empty() ? 0 : c.pads[nsp + j];
    g.p[off + j] = pb;
    g.out[off + j] = (g.in[off + j] + pb + pe - g.d[off + j] * (g.k[off + j] - 1) - 1) / g.s[off + j] + 1;
  }
  return g;
}

double value(const Tensor& t, int64_t i) { return t.get_as_double(i); }

// Sums in float64 with the magnitudes and term counts the bound needs.
struct Ref {
  std::vector<double> sum, mag;
  std::vector<int64_t> terms;
  explicit Ref(int64_t n) : sum(n, 0.0), mag(n, 0.0), terms(n, 0) {}
  void add(int64_t i, double v) {
    sum[i] += v;
    mag[i] += std::fabs(v);
    ++terms[i];
  }
};

// Checks a bf16 (`round`) or float32 output against the float64 reference: float32 summation
// error, plus one bf16 rounding of the float32 value. Returns how many elements differ from the
// reference rounded once to the output's type (the rounding of exact sums).
int64_t check(const Tensor& got, const Ref& ref, const std::string& what) {
  EXPECT_EQ(got.numel(), static_cast<int64_t>(ref.sum.size())) << what;
  const bool round = got.dtype() == DataType::kBFloat16;
  int64_t differ = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double want = ref.sum[i], e32 = (ref.terms[i] + 2) * kU32 * ref.mag[i];
    const double bound = e32 + (round ? kU16 * (std::fabs(want) + e32) : 0.0);
    const double g = value(got, i);
    EXPECT_LE(std::fabs(g - want), bound) << what << " element " << i << ": got " << g << ", float64 " << want;
    if (std::fabs(g - want) > bound) return differ;  // one report per output
    const float once = static_cast<float>(want);
    differ += round ? g != static_cast<double>(bf16_to_float(float_to_bf16(once))) : g != static_cast<double>(once);
  }
  return differ;
}

// Conv's Y against float64 on the same bf16 values.
void check_conv(const ConvCase& c, const std::string& path) {
  const Geometry3 g = geometry(c);
  const int64_t n = c.x[0], cin = c.x[1], cout = c.w[0], cg = c.w[1], mg = cout / c.group;
  const Tensor x = random_bf16(c.x, 1), w = random_bf16(c.w, 2), b = random_bf16({cout}, 3);
  std::vector<Tensor> ins = {x, w};
  if (c.bias) ins.push_back(b);
  const std::vector<Tensor> got = run("Conv", "", ins, attrs_of(c), {"y"});
  std::vector<int64_t> ydims = {n, cout};
  for (size_t j = 3 - (c.x.size() - 2); j < 3; ++j) ydims.push_back(g.out[j]);
  ASSERT_EQ(got[0].dims(), ydims) << c.name;
  ASSERT_EQ(got[0].dtype(), DataType::kBFloat16) << c.name;
  const int64_t L = g.out_plane(), P = g.in_plane(), K = g.k_size();
  Ref y(n * cout * L);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t m = 0; m < cout; ++m) {
      const int64_t yo = (i * cout + m) * L, gi = m / mg;
      if (c.bias)
        for (int64_t l = 0; l < L; ++l) y.add(yo + l, value(b, m));
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t xo = (i * cin + gi * cg + ci) * P, wo = (m * cg + ci) * K;
        g.for_each([&](int64_t o, int64_t k, int64_t p) { y.add(yo + o, value(w, wo + k) * value(x, xo + p)); });
      }
    }
  check(got[0], y, path + " " + c.name + " Y");
}

// ConvGrad's dX, dW and dB (bf16, as the mixed-precision graph types them) against float64.
void check_conv_grad(const ConvCase& c, const std::string& path, bool want_dx = true) {
  const Geometry3 g = geometry(c);
  const int64_t n = c.x[0], cin = c.x[1], cout = c.w[0], cg = c.w[1], mg = cout / c.group;
  const int64_t L = g.out_plane(), P = g.in_plane(), K = g.k_size();
  std::vector<int64_t> ydims = {n, cout};
  for (size_t j = 3 - (c.x.size() - 2); j < 3; ++j) ydims.push_back(g.out[j]);
  const Tensor dy = random_bf16(ydims, 4), x = random_bf16(c.x, 5), w = random_bf16(c.w, 6);
  const std::vector<Tensor> got =
      run("ConvGrad", kOtterDomain, {dy, x, w}, attrs_of(c), {want_dx ? "dx" : "", "dw", "db"});
  Ref dx(x.numel()), dw(w.numel()), db(cout);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t m = 0; m < cout; ++m) {
      const int64_t yo = (i * cout + m) * L, gi = m / mg;
      for (int64_t l = 0; l < L; ++l) db.add(m, value(dy, yo + l));
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t xo = (i * cin + gi * cg + ci) * P, wo = (m * cg + ci) * K;
        g.for_each([&](int64_t o, int64_t k, int64_t p) {
          const double gy = value(dy, yo + o);
          dx.add(xo + p, value(w, wo + k) * gy);
          dw.add(wo + k, gy * value(x, xo + p));
        });
      }
    }
  if (want_dx) {
    ASSERT_EQ(got[0].dtype(), DataType::kBFloat16) << c.name;
    ASSERT_EQ(got[0].dims(), x.dims()) << c.name;
    check(got[0], dx, path + " " + c.name + " dX");
  }
  ASSERT_EQ(got[1].dtype(), DataType::kBFloat16) << c.name;
  ASSERT_EQ(got[1].dims(), w.dims()) << c.name;
  check(got[1], dw, path + " " + c.name + " dW");
  // dB: the sum of bf16 values, exact in float64, rounded once (double_to_float_round_odd keeps
  // the float32 step from rounding it twice).
  for (int64_t m = 0; m < cout; ++m)
    EXPECT_EQ(got[2].get_as_double(m), bf16_to_float(float_to_bf16(double_to_float_round_odd(db.sum[m]))))
        << path << " " << c.name << " dB " << m;
}

// ConvTranspose's Y (bf16), the data gradient of the Conv of case c from its output's shape to its
// input's (ConvTranspose input = that gradient's dY) plus B, against float64; output_padding makes
// Y the Conv's input shape where the stride leaves a remainder.
void check_conv_transpose(const ConvCase& c, const std::string& path) {
  const Geometry3 g = geometry(c);
  const int64_t n = c.x[0], cin = c.x[1], cout = c.w[0], cg = c.w[1], mg = cout / c.group;
  const int64_t L = g.out_plane(), P = g.in_plane(), K = g.k_size();
  const size_t nsp = c.x.size() - 2, off = 3 - nsp;
  std::vector<int64_t> xdims = {n, cout}, out_pad;
  for (size_t j = 0; j < nsp; ++j) {
    xdims.push_back(g.out[off + j]);
    const int64_t pe = c.pads.empty() ? 0 : c.pads[nsp + j];
    out_pad.push_back((g.in[off + j] + g.p[off + j] + pe - g.d[off + j] * (g.k[off + j] - 1) - 1) % g.s[off + j]);
  }
  const Tensor x = random_bf16(xdims, 10), w = random_bf16(c.w, 11), b = random_bf16({cin}, 12);
  std::map<std::string, Attribute> a = attrs_of(c);
  a["output_padding"] = Attribute(out_pad);
  std::vector<Tensor> ins = {x, w};
  if (c.bias) ins.push_back(b);
  const std::vector<Tensor> got = run("ConvTranspose", "", ins, a, {"y"});
  ASSERT_EQ(got[0].dtype(), DataType::kBFloat16) << c.name;
  ASSERT_EQ(got[0].dims(), c.x) << c.name;
  Ref y(n * cin * P);
  if (c.bias)
    for (int64_t i = 0; i < n * cin; ++i)
      for (int64_t p = 0; p < P; ++p) y.add(i * P + p, value(b, i % cin));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t m = 0; m < cout; ++m) {
      const int64_t xo = (i * cout + m) * L, gi = m / mg;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t yo = (i * cin + gi * cg + ci) * P, wo = (m * cg + ci) * K;
        g.for_each([&](int64_t o, int64_t k, int64_t p) { y.add(yo + p, value(w, wo + k) * value(x, xo + o)); });
      }
    }
  check(got[0], y, path + " " + c.name + " ConvTranspose Y");
}

std::vector<ConvCase> cases() {
  return {
      {"3x3 pad 1", {2, 3, 7, 7}, {5, 3, 3, 3}, 1, {}, {1, 1, 1, 1}, {}},
      {"groups, stride 2, asymmetric pads, dilation 2", {3, 4, 9, 8}, {6, 2, 3, 3}, 2, {2, 2}, {1, 0, 2, 1}, {2, 2}},
      {"stride (2, 1) no bias", {2, 6, 8, 5}, {4, 6, 2, 3}, 1, {2, 1}, {0, 1, 0, 1}, {}, false},
      {"1x1 pointwise, 2 images", {2, 16, 5, 5}, {8, 16, 1, 1}, 1, {}, {}, {}},
      {"1x1 pointwise, 1 image", {1, 16, 5, 5}, {8, 16, 1, 1}, 1, {}, {}, {}},
      {"1x1 pointwise, groups 4", {2, 16, 3, 4}, {8, 4, 1, 1}, 4, {}, {}, {}},
      {"1x1 stride 2", {2, 8, 6, 6}, {4, 8, 1, 1}, 1, {2, 2}, {}, {}},
      {"depthwise, multiplier 2", {2, 4, 6, 6}, {8, 1, 3, 3}, 4, {}, {1, 1, 1, 1}, {}},
      {"offsets that only see padding", {2, 8, 1, 2}, {4, 8, 3, 3}, 1, {}, {1, 1, 1, 1}, {}},
      {"1-D, stride 2", {2, 3, 11}, {4, 3, 3}, 1, {2}, {1, 0}, {}},
      {"3-D", {1, 2, 4, 5, 4}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {}},
      // The column budget splits the batch (Conv: chunks of 6 and 2 images, ConvGrad: 7 and 1).
      {"chunks of the batch", {8, 16, 64, 64}, {16, 16, 3, 3}, 1, {}, {1, 1, 1, 1}, {}},
      {"deep: 288 per output", {2, 32, 10, 10}, {48, 32, 3, 3}, 1, {}, {1, 1, 1, 1}, {}},
  };
}

// Runs `body` on the native path (skipped without AVX512_BF16) or the widening path.
template <typename F>
void on_path(bool native, F&& body) {
  const cpu::Isa saved = cpu::active_isa();
  if (native) {
    cpu::set_active_isa(cpu::Isa::kAvx512);
    cpu::set_bf16_gemm_widened(false);
    ASSERT_TRUE(cpu::bf16_gemm_native()) << cpu::describe_bf16_gemm();
  } else {
    cpu::set_bf16_gemm_widened(true);
  }
  body(native ? "native" : "widened");
  cpu::set_bf16_gemm_widened(false);
  cpu::set_active_isa(saved);
}

class ConvBf16 : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !cpu::bf16_gemm_available())
      GTEST_SKIP() << "this CPU has no avx512_bf16: " << cpu::describe_bf16_gemm();
  }
};

TEST_P(ConvBf16, ConvMatchesFloat64) {
  on_path(GetParam(), [](const std::string& path) {
    for (const ConvCase& c : cases()) check_conv(c, path);
  });
}

TEST_P(ConvBf16, ConvGradMatchesFloat64) {
  on_path(GetParam(), [](const std::string& path) {
    for (const ConvCase& c : cases()) check_conv_grad(c, path);
    check_conv_grad(cases()[1], path + " (no dX)", false);
  });
}

TEST_P(ConvBf16, ConvTransposeMatchesFloat64) {
  on_path(GetParam(), [](const std::string& path) {
    for (const ConvCase& c : cases()) check_conv_transpose(c, path);
  });
}

// The weight gradient of a bf16 Gemm accumulates into its float32 accumulator: the first
// micro-step writes it, later ones add.
TEST_P(ConvBf16, GemmAccumulateIntoFloat32) {
  on_path(GetParam(), [](const std::string& path) {
    const int64_t k = 300, m = 17, n = 40;
    const Tensor a = random_bf16({k, m}, 7), b = random_bf16({k, n}, 8), acc0 = random_f32({m, n}, 9);
    for (bool first : {true, false}) {
      Tensor acc = acc0.clone();
      const std::vector<Tensor> got = run("GemmAccumulate", kOtterDomain, {a, b, acc},
                                          {{"transA", Attribute(int64_t{1})}, {"alpha", Attribute(0.5f)}}, {"acc"}, first);
      ASSERT_EQ(got[0].dtype(), DataType::kFloat32);
      EXPECT_EQ(got[0].raw(), acc.raw()) << "the accumulator is updated in place";
      Ref r(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          if (!first) r.add(i * n + j, acc0.data<float>()[i * n + j]);
          for (int64_t p = 0; p < k; ++p) r.add(i * n + j, 0.5 * value(a, p * m + i) * value(b, p * n + j));
        }
      const int64_t differ = check(got[0], r, path + (first ? " first" : " later") + " micro-step");
      EXPECT_GT(differ, 0) << path << ": float32 sums equal float64 everywhere; the bound checks nothing";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Paths, ConvBf16, ::testing::Values(true, false),
                         [](const auto& info) { return std::string(info.param ? "Native" : "Widened"); });

}  // namespace
}  // namespace otter
