// CPU kernels of the math op families (kernels/cpu/math.cc) against outside references: the ONNX
// backend node tests of Debian's libonnx-testdata (numpy's results; tests recorded at opsets below
// 13 run with their opset raised to 13, where these ops' schemas say the same), PyTorch's Mish
// values, and the half types against float32 rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "graph/onnx_io.h"
#include "graph/op_table.h"
#include "kernels/common/elementwise.h"
#include "kernels/common/half.h"
#include "kernels/cpu/avx512_lanes.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/isa.h"
#include "onnx/onnx_pb.h"
#include "runtime/executor.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

namespace fs = std::filesystem;
const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

// Runs one ONNX node test; returns the number of outputs compared.
int run_node_test(const std::string& name) {
  const fs::path dir = kNodeTests / name;
  onnx::ModelProto m;
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  EXPECT_TRUE(in && m.ParseFromIstream(&in)) << name;
  for (auto& o : *m.mutable_opset_import())
    if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() < 13) o.set_version(13);
  std::unique_ptr<Graph> g = import_onnx_bytes(m.SerializeAsString(), dir.string());
  Executor ex(*g);
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < g->inputs().size(); ++i)
    feeds[g->inputs()[i]->name()] =
        read_tensor_pb_file((dir / "test_data_set_0" / str_cat("input_", i, ".pb")).string());
  auto out = ex.run(feeds);
  int compared = 0;
  for (size_t i = 0; i < g->outputs().size(); ++i) {
    const Tensor want = read_tensor_pb_file((dir / "test_data_set_0" / str_cat("output_", i, ".pb")).string());
    const Tensor& got = out.at(g->outputs()[i]->name());
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(got.dims(), want.dims()) << name;
    if (got.dims() != want.dims() || got.dtype() != want.dtype()) continue;
    for (int64_t k = 0; k < want.numel(); ++k) {
      const double a = got.get_as_double(k), b = want.get_as_double(k);
      if (std::isnan(b)) {
        EXPECT_TRUE(std::isnan(a)) << name << "[" << k << "]";
        continue;
      }
      EXPECT_NEAR(a, b, 1e-6 + 1e-5 * std::abs(b)) << name << "[" << k << "]";
    }
    ++compared;
  }
  return compared;
}

TEST(MathKernels, OnnxNodeTests) {
  if (!fs::is_directory(kNodeTests)) GTEST_SKIP() << kNodeTests << " not found (install Debian's libonnx-testdata)";
  const char* tests[] = {"test_sin",
                         "test_sin_example",
                         "test_cos",
                         "test_cos_example",
                         "test_tan",
                         "test_tan_example",
                         "test_asin",
                         "test_asin_example",
                         "test_acos",
                         "test_acos_example",
                         "test_atan",
                         "test_atan_example",
                         "test_sinh",
                         "test_sinh_example",
                         "test_cosh",
                         "test_cosh_example",
                         "test_asinh",
                         "test_asinh_example",
                         "test_acosh",
                         "test_acosh_example",
                         "test_atanh",
                         "test_atanh_example",
                         "test_ceil",
                         "test_ceil_example",
                         "test_floor",
                         "test_floor_example",
                         "test_round",
                         "test_sign",
                         "test_isnan",
                         "test_isinf",
                         "test_isinf_negative",
                         "test_isinf_positive",
                         "test_hardsigmoid",
                         "test_hardsigmoid_default",
                         "test_hardsigmoid_example",
                         "test_hardswish",
                         "test_hardswish_expanded",
                         "test_elu",
                         "test_elu_default",
                         "test_elu_example",
                         "test_selu",
                         "test_selu_default",
                         "test_selu_example",
                         "test_celu",
                         "test_celu_expanded",
                         "test_thresholdedrelu",
                         "test_thresholdedrelu_default",
                         "test_thresholdedrelu_example",
                         "test_shrink_hard",
                         "test_shrink_soft",
                         "test_prelu_broadcast",
                         "test_prelu_example"};
  int compared = 0;
  for (const char* t : tests) compared += run_node_test(t);
  EXPECT_EQ(compared, static_cast<int>(std::size(tests)));
}

// One-node graph of op on a float tensor x of dtype t.
Tensor run_op(const std::string& op, const Tensor& x, std::map<std::string, Attribute> attrs = {}, int opset = 18) {
  Graph g;
  g.opset_imports[""] = opset;
  Value* in = g.add_input("x", x.dtype(), Shape::of(x.dims()));
  Node* n = g.add_node(op, {in}, {"y"});
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  infer_node(*n);
  g.add_output(n->output(0));
  Executor ex(g);
  return ex.run({{"x", x}}).at("y");
}

// PyTorch 1.13's torch.nn.functional.mish in float64.
TEST(MathKernels, MishMatchesPyTorch) {
  const std::vector<double> x = {-20, -3.5, -1, -0.25, 0, 0.3, 1, 2.5, 10, 30};
  const std::vector<double> want = {
      -4.122307240628762e-08, -0.10409575448637122, -0.30340146137410895, -0.12992696367914103, 0.0,
      0.20800137234811503,    0.8650983882673103,   2.471392304557881,    9.999999958780672,    30.0};
  const int64_t n = static_cast<int64_t>(x.size());
  Tensor y64 = run_op("Mish", Tensor::from_vector<double>({n}, x));
  std::vector<float> xf(x.begin(), x.end());
  Tensor y32 = run_op("Mish", Tensor::from_vector<float>({n}, xf));
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_NEAR(y64.data<double>()[k], want[k], 1e-15 + 1e-13 * std::abs(want[k])) << k;
    EXPECT_NEAR(y32.data<float>()[k], want[k], 1e-7 + 1e-6 * std::abs(want[k])) << k;
  }
}

// Every float op in float16 and bfloat16: the float32 result of the same (exactly widened) inputs,
// rounded once, within one unit in the last place.
TEST(MathKernels, HalfTypesRoundTheFloatResult) {
  const std::vector<std::pair<std::string, std::pair<double, double>>> ops = {
      {"Sin", {-3, 3}},         {"Cos", {-3, 3}},        {"Tan", {-1.2, 1.2}},
      {"Asin", {-0.95, 0.95}},  {"Acos", {-0.95, 0.95}}, {"Atan", {-5, 5}},
      {"Sinh", {-4, 4}},        {"Cosh", {-4, 4}},       {"Asinh", {-5, 5}},
      {"Acosh", {1.1, 6}},      {"Atanh", {-0.9, 0.9}},  {"Ceil", {-5, 5}},
      {"Floor", {-5, 5}},       {"Round", {-5, 5}},      {"Sign", {-2, 2}},
      {"HardSigmoid", {-4, 4}}, {"HardSwish", {-5, 5}},  {"Elu", {-3, 3}},
      {"Selu", {-3, 3}},        {"Celu", {-3, 3}},       {"ThresholdedRelu", {-3, 3}},
      {"Mish", {-4, 4}},        {"Shrink", {-2, 2}}};
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    for (const auto& [op, range] : ops) {
      const int64_t n = 101;
      Tensor x(t, {n});
      Tensor xf(DataType::kFloat32, {n});
      for (int64_t k = 0; k < n; ++k) {
        const float v = static_cast<float>(range.first + (range.second - range.first) * k / (n - 1));
        const uint16_t bits = t == DataType::kFloat16 ? float_to_half(v) : float_to_bf16(v);
        static_cast<uint16_t*>(x.raw())[k] = bits;
        xf.data<float>()[k] = t == DataType::kFloat16 ? half_to_float(bits) : bf16_to_float(bits);
      }
      Tensor y = run_op(op, x), yf = run_op(op, xf);
      ASSERT_EQ(y.dtype(), t) << op;
      const double ulp = t == DataType::kFloat16 ? 1.0 / 1024 : 1.0 / 128;
      for (int64_t k = 0; k < n; ++k) {
        const double want = yf.data<float>()[k];
        EXPECT_NEAR(y.get_as_double(k), want, ulp * std::max(std::abs(want), 6.1e-5))
            << op << " " << dtype_name(t) << " [" << k << "]";
      }
    }
  }
}

// ---- otter's float erf and exp (kernels/common/elementwise.h) against float64's -----------------

// Distance of the float `got` from the exact value `want`, in units of the float spacing at want.
double ulps(float got, double want) {
  const double spacing = std::nextafter(static_cast<float>(std::fabs(want)), INFINITY) - std::fabs(static_cast<float>(want));
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

TEST(MathKernels, ErfPolynomialWithinOneAndAHalfUlp) {
  // Every 61st float bit pattern of each sign up to |x| = 5: about 35 million values, each region
  // of the polynomials and both edges between them covered densely.
  double worst = 0, worst_at = 0;
  const uint32_t end = float_bits(5.0f);
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b = 0; b <= end; b += 61) {
      const float x = bits_float(b | sign);
      const double u = ulps(math::erf(x), std::erf(static_cast<double>(x)));
      if (u > worst) worst = u, worst_at = x;
    }
  }
  for (float x : {0.875f, std::nextafter(0.875f, 0.f), 2.2f, std::nextafter(2.2f, 0.f), 3.92f, 1e-40f, -1e-40f}) {
    const double u = ulps(math::erf(x), std::erf(static_cast<double>(x)));
    if (u > worst) worst = u, worst_at = x;
  }
  EXPECT_LE(worst, 1.5) << "at x = " << worst_at;
  std::printf("erf: at most %.3f ulp (at x = %.9g)\n", worst, worst_at);
  EXPECT_EQ(math::erf(INFINITY), 1.f);
  EXPECT_EQ(math::erf(-INFINITY), -1.f);
  EXPECT_TRUE(std::isnan(math::erf(NAN)));
  EXPECT_TRUE(std::signbit(math::erf(-0.f)));
}

TEST(MathKernels, ExpOfNonPositiveWithinOneAndAHalfUlp) {
  double worst = 0, worst_at = 0;
  for (uint32_t b = 0; b <= float_bits(87.0f); b += 37) {
    const float z = -bits_float(b);
    const double u = ulps(math::exp_nonpositive(z), std::exp(static_cast<double>(z)));
    if (u > worst) worst = u, worst_at = z;
  }
  EXPECT_LE(worst, 1.5) << "at z = " << worst_at;
  std::printf("exp: at most %.3f ulp on [-87, 0] (at z = %.9g)\n", worst, worst_at);
  EXPECT_EQ(math::exp_nonpositive(0.f), 1.f);
  EXPECT_EQ(math::exp_nonpositive(-100.f), 0.f);
  EXPECT_EQ(math::exp_nonpositive(-INFINITY), 0.f);
  EXPECT_TRUE(std::isnan(math::exp_nonpositive(NAN)));
}

#if defined(__x86_64__) && defined(__GNUC__)
// The 16-lane forms of kernels/cpu/avx512_lanes.h (the bf16 attention and GEMM) on 16 inputs: bf16
// rounding of x, exp_nonpositive of -|x|, the bf16 -> double widening of the first 8 rounded
// values. Only the lane functions run in this AVX-512 function; the scalar references run outside
// it (inlined here, GCC would contract their a * b + c into FMAs).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target(OTTER_TARGET_LANES), noinline)) void lane_outputs(const float* x, uint16_t* rounded,
                                                                        float* exps, double* wide, float* erfs) {
  const __m512 v = _mm512_loadu_ps(x);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded), cpu::lanes::round_to_bf16(v));
  _mm512_storeu_ps(exps, cpu::lanes::exp_nonpositive(_mm512_abs_ps(v) * -1.f));
  _mm512_storeu_pd(wide, cpu::lanes::widen_bf16_8(rounded));
  _mm512_storeu_ps(erfs, cpu::lanes::erf(v));
}
__attribute__((target(OTTER_TARGET_LANES), noinline)) float lane_row_max(const float* x, int64_t n) {
  return cpu::lanes::row_max(x, n);
}
__attribute__((target(OTTER_TARGET_LANES), noinline)) void lane_exp_fma(const float* z, float* e) {
  _mm512_storeu_ps(e, cpu::lanes::exp_nonpositive_fma(_mm512_loadu_ps(z)));
}
#pragma GCC diagnostic pop

// Bit for bit the scalar functions, on a sample of every float (NaN, infinities and subnormals
// included): erf and bf16 rounding on any float, exp_nonpositive on z <= 0 (and NaN), the
// widening; and the row maximum, which passes a NaN over.
TEST(MathKernels, Avx512LanesMatchTheScalarFunctions) {
  if (cpu::best_isa() < cpu::Isa::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512";
  float in[16], exps[16], erfs[16];
  uint16_t rounded[16];
  double wide[8];
  int64_t checked = 0;
  auto check = [&] {
    lane_outputs(in, rounded, exps, wide, erfs);
    for (int l = 0; l < 16; ++l) {
      ASSERT_EQ(rounded[l], float_to_bf16(in[l])) << "round_to_bf16 of " << in[l];
      ASSERT_EQ(float_bits(erfs[l]), float_bits(math::erf(in[l]))) << "erf of " << in[l];
      const float z = -std::fabs(in[l]);
      ASSERT_EQ(float_bits(exps[l]), float_bits(math::exp_nonpositive(z))) << "exp_nonpositive of " << z;
    }
    for (int l = 0; l < 8; ++l) {
      const double want = bf16_to_float(rounded[l]);
      ASSERT_TRUE(wide[l] == want || (std::isnan(wide[l]) && std::isnan(want))) << "widening of " << rounded[l];
    }
    checked += 16;
  };
  for (uint64_t b = 0; b <= 0xffffffffu; b += 16 * 4099) {
    for (int l = 0; l < 16; ++l) in[l] = bits_float(static_cast<uint32_t>(b + l * 4099));
    check();
  }
  const float edges[16] = {0.f, -0.f, -1e-40f, -87.f, -87.5f, -100.f, -INFINITY, NAN, 1.f, 0.5f, -88.f, 3e38f,
                           -1e-7f, 65504.f, 1.00390625f, 1.01171875f};
  std::copy(edges, edges + 16, in);
  check();
  const float row[19] = {1, NAN, -3, 7, 2, -INFINITY, 0, 5, 6.5f, 7.25f, 1, 1, 1, 1, 1, 1, 1, 8, NAN};
  EXPECT_EQ(lane_row_max(row, 17), 7.25f);
  EXPECT_EQ(lane_row_max(row, 19), 8.f);  // a masked tail load, and a NaN passed over
  EXPECT_EQ(lane_row_max(row, 0), -INFINITY);
  std::printf("avx512 lanes: %lld floats, bit for bit\n", static_cast<long long>(checked));
}

// The fused-multiply-add exp of the bf16 attention: within 1.5 ulp of e^z on [-87, 0] (as the
// scalar exp_nonpositive), 1 at 0, 0 below -87 and at -inf, NaN for NaN.
TEST(MathKernels, Avx512FmaExpWithinOneAndAHalfUlp) {
  if (cpu::best_isa() < cpu::Isa::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512";
  double worst = 0, worst_at = 0;
  float z[16], e[16];
  int fill = 0;
  auto flush = [&] {
    lane_exp_fma(z, e);
    for (int l = 0; l < fill; ++l) {
      const double u = ulps(e[l], std::exp(static_cast<double>(z[l])));
      if (u > worst) worst = u, worst_at = z[l];
    }
    fill = 0;
  };
  for (uint32_t b = 0; b <= float_bits(87.0f); b += 37) {
    z[fill++] = -bits_float(b);
    if (fill == 16) flush();
  }
  flush();
  EXPECT_LE(worst, 1.5) << "at z = " << worst_at;
  std::printf("fma exp: at most %.3f ulp on [-87, 0] (at z = %.9g)\n", worst, worst_at);
  const float special[16] = {0.f, -0.f, -87.5f, -100.f, -INFINITY, NAN, -1e-30f, -1.f,
                             0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  std::copy(special, special + 16, z);
  lane_exp_fma(z, e);
  EXPECT_EQ(e[0], 1.f);
  EXPECT_EQ(e[1], 1.f);
  EXPECT_EQ(e[2], 0.f);
  EXPECT_EQ(e[3], 0.f);
  EXPECT_EQ(e[4], 0.f);
  EXPECT_TRUE(std::isnan(e[5]));
  EXPECT_EQ(e[6], 1.f);
  EXPECT_NEAR(e[7], std::exp(-1.0), 1e-7);
}
#endif

TEST(MathKernels, SigmoidWithinThreeUlp) {
  // SigmoidOp (kernels/common/elementwise.h) on every 97th float of each sign up to |x| = 87,
  // against the sigmoid in double; its limits and NaN.
  const SigmoidOp sig;
  double worst = 0, worst_at = 0;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t b = 0; b <= float_bits(87.0f); b += 97) {
      const float x = bits_float(b | sign);
      const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
      const double u = ulps(sig(x), want);
      if (u > worst) worst = u, worst_at = x;
    }
  EXPECT_LE(worst, 3.0) << "at x = " << worst_at;
  std::printf("sigmoid: at most %.3f ulp on [-87, 87] (at x = %.9g)\n", worst, worst_at);
  EXPECT_EQ(sig(0.f), 0.5f);
  EXPECT_EQ(sig(INFINITY), 1.f);
  EXPECT_EQ(sig(-INFINITY), 0.f);
  EXPECT_EQ(sig(100.f), 1.f);
  EXPECT_TRUE(std::isnan(sig(NAN)));
  EXPECT_EQ(sig(0.5), 1.0 / (1.0 + std::exp(-0.5)));  // double: exp itself
}

TEST(MathKernels, TanhWithinOneAndSixTenthsUlp) {
  // math::tanh (kernels/common/elementwise.h) on every 53rd float of each sign up to |x| = 10, both
  // sides of the 0.625 switch from the series to the exponential form, limits, -0 and NaN.
  double worst = 0, worst_at = 0;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t b = 0; b <= float_bits(10.0f); b += 53) {
      const float x = bits_float(b | sign);
      const double u = ulps(math::tanh(x), std::tanh(static_cast<double>(x)));
      if (u > worst) worst = u, worst_at = x;
    }
  for (float x : {0.625f, std::nextafter(0.625f, 0.f), -0.625f, 1e-40f, 9.01f}) {
    const double u = ulps(math::tanh(x), std::tanh(static_cast<double>(x)));
    if (u > worst) worst = u, worst_at = x;
  }
  EXPECT_LE(worst, 1.6) << "at x = " << worst_at;
  std::printf("tanh: at most %.3f ulp on [-10, 10] (at x = %.9g)\n", worst, worst_at);
  EXPECT_EQ(math::tanh(INFINITY), 1.f);
  EXPECT_EQ(math::tanh(-INFINITY), -1.f);
  EXPECT_EQ(math::tanh(20.f), 1.f);
  EXPECT_TRUE(std::signbit(math::tanh(-0.f)));
  EXPECT_EQ(math::tanh(0.f), 0.f);
  EXPECT_TRUE(std::isnan(math::tanh(NAN)));
}

TEST(MathKernels, PowOfAConstantTwoOrThreeIsPowOp) {
  // Pow with a one-element exponent of 2 or 3 runs a unary loop (elementwise.cc); it must give
  // PowOp's values, which the same Pow with the exponent broadcast to every element also runs:
  // bit for bit, with inf, NaN, -0, overflow and subnormal cubes. A float cube is the double
  // product rounded once.
  Tensor x(DataType::kFloat32, {70});
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 3.f);
  for (int64_t i = 0; i < 70; ++i) x.data<float>()[i] = d(rng);
  const float special[] = {INFINITY, -INFINITY, NAN, -0.f, 0.f, 1e13f, -1e13f, 1e-15f, 3.4e38f};
  for (int i = 0; i < 9; ++i) x.data<float>()[i] = special[i];
  for (float e : {2.f, 3.f}) {
    Tensor one(DataType::kFloat32, {}), all(DataType::kFloat32, {70});
    one.data<float>()[0] = e;
    for (int64_t i = 0; i < 70; ++i) all.data<float>()[i] = e;
    const Tensor a = testing::run_op({"Pow", {x, one}})[0], b = testing::run_op({"Pow", {x, all}})[0];
    for (int64_t i = 0; i < 70; ++i) {
      const float v = x.data<float>()[i];
      const float want = e == 2.f ? v * v : static_cast<float>(static_cast<double>(v) * v * v);
      EXPECT_EQ(float_bits(a.data<float>()[i]), float_bits(b.data<float>()[i])) << v << "^" << e;
      if (!std::isnan(want)) EXPECT_EQ(a.data<float>()[i], want) << v << "^" << e;
      else EXPECT_TRUE(std::isnan(a.data<float>()[i]));
    }
  }
  // A bf16 base with an int64 exponent: the same bits as the broadcast exponent's general path.
  Tensor h(DataType::kBFloat16, {70});
  for (int64_t i = 0; i < 70; ++i) h.data<BFloat16>()[i] = BFloat16{float_to_bf16(x.data<float>()[i])};
  for (int64_t e : {2, 3}) {
    Tensor one(DataType::kInt64, {}), all(DataType::kInt64, {70});
    one.data<int64_t>()[0] = e;
    for (int64_t i = 0; i < 70; ++i) all.data<int64_t>()[i] = e;
    const Tensor a = testing::run_op({"Pow", {h, one}})[0], b = testing::run_op({"Pow", {h, all}})[0];
    for (int64_t i = 0; i < 70; ++i)
      EXPECT_EQ(a.data<BFloat16>()[i].bits, b.data<BFloat16>()[i].bits) << "bf16 " << x.data<float>()[i] << "^" << e;
  }
}

}  // namespace
}  // namespace otter
