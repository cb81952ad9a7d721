// CPU kernels of the ai.otter gradient ops beyond what the float64 gradient checks reach: the
// derivative functors in float32, float16 and bfloat16 against closed forms evaluated in double,
// ClipGrad's bound gradients, DropoutGrad's modes, GatherGrad's scatter-add with int32 indices, and
// ConvGrad on images large enough to be processed in several chunks, against a direct sum.
#include <cmath>
#include <functional>
#include <random>

#include "kernels/common/half.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter::testing {
namespace {

Tensor random_f32(std::vector<int64_t> dims, uint64_t seed, double lo = -3, double hi = 3) {
  Tensor t(DataType::kFloat32, std::move(dims));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(u(rng));
  return t;
}

// The tensor rounded to `t` (f32 -> f16 / bf16 / f32).
Tensor rounded(const Tensor& x, DataType t) {
  if (t == DataType::kFloat32) return x;
  Tensor out(t, x.dims());
  auto* p = static_cast<uint16_t*>(out.raw());
  for (int64_t i = 0; i < x.numel(); ++i)
    p[i] = t == DataType::kFloat16 ? float_to_half(x.data<float>()[i]) : float_to_bf16(x.data<float>()[i]);
  return out;
}

// The tensor widened exactly to float32 or float64.
Tensor widened(const Tensor& x, DataType t) {
  Tensor out(t, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == DataType::kFloat64)
      out.data<double>()[i] = x.get_as_double(i);
    else
      out.data<float>()[i] = static_cast<float>(x.get_as_double(i));
  }
  return out;
}

struct Derivative {
  const char* op;
  std::map<std::string, Attribute> attrs;
  bool reads_output;                          // the op reads Y = f(X) instead of X
  std::function<double(double)> forward;      // f, to make Y
  std::function<double(double)> derivative;   // f'(x)
};

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST(GradKernels, DerivativesMatchClosedFormsInEveryFloatType) {
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  const std::vector<Derivative> cases = {
      {"ReluGrad", {}, true, [](double x) { return x > 0 ? x : 0; }, [](double x) { return x > 0 ? 1.0 : 0.0; }},
      {"LeakyReluGrad", {{"alpha", Attribute(0.2f)}}, false, nullptr, [](double x) { return x >= 0 ? 1.0 : 0.2; }},
      {"SigmoidGrad", {}, true, sigmoid, [=](double x) { return sigmoid(x) * (1 - sigmoid(x)); }},
      {"TanhGrad", {}, true, [](double x) { return std::tanh(x); }, [](double x) { return 1 - std::tanh(x) * std::tanh(x); }},
      {"ErfGrad", {}, false, nullptr, [](double x) { return 2 / std::sqrt(M_PI) * std::exp(-x * x); }},
      {"SoftplusGrad", {}, false, nullptr, sigmoid},
      {"AbsGrad", {}, false, nullptr, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
      {"GeluGrad", {}, false, nullptr,
       [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }},
      {"GeluGrad", {{"approximate", Attribute("tanh")}}, false, nullptr,
       [](double x) { return (gelu_tanh(x + 1e-6) - gelu_tanh(x - 1e-6)) / 2e-6; }},
  };
  const Tensor x = random_f32({257}, 1);
  const Tensor dy = random_f32({257}, 2, -1, 1);
  for (const Derivative& d : cases) {
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
      // Inputs rounded to t; the reference works on those rounded values in double.
      Tensor xt = rounded(x, t), dyt = rounded(dy, t), vt = xt;
      if (d.reads_output) {
        Tensor y(DataType::kFloat32, x.dims());
        for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = static_cast<float>(d.forward(xt.get_as_double(i)));
        vt = rounded(y, t);
      }
      Tensor got = run_op({.op = d.op, .inputs = {dyt, vt}, .attrs = d.attrs, .domain = "ai.otter"})[0];
      ASSERT_EQ(got.dtype(), t);
      double worst = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        double want = dyt.get_as_double(i) * d.derivative(xt.get_as_double(i));
        worst = std::max(worst, std::abs(got.get_as_double(i) - want));
      }
      // One rounding of the result (and of Y where the op reads it) in the storage type.
      double tol = t == DataType::kFloat32 ? 2e-6 : t == DataType::kFloat16 ? 4e-3 : 3e-2;
      EXPECT_LE(worst, tol) << d.op << " in " << dtype_name(t);
    }
  }
}

TEST(GradKernels, ClipGradSumsWhatFellOutsideTheBounds) {
  Tensor x = Tensor::from_vector<float>({5}, {-2, -0.5f, 0, 0.7f, 3});
  Tensor dy = Tensor::from_vector<float>({5}, {1, 2, 3, 4, 5});
  Tensor lo = Tensor::scalar<float>(-1), hi = Tensor::scalar<float>(0.5f);
  auto out = run_op({.op = "ClipGrad", .inputs = {dy, x, lo, hi}, .num_outputs = 3, .domain = "ai.otter"});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 2, 3, 0, 0}));
  EXPECT_EQ(out[1].get_as_double(0), 1.0);  // -2 < min
  EXPECT_EQ(out[2].get_as_double(0), 9.0);  // 0.7 and 3 > max
}

TEST(GradKernels, DropoutGradScalesKeptElementsInTrainingOnly) {
  Tensor dy = Tensor::from_vector<float>({4}, {1, 2, 3, 4});
  Tensor mask(DataType::kBool, {4});
  mask.data<bool>()[0] = mask.data<bool>()[2] = true;
  Tensor ratio = Tensor::scalar<float>(0.75f);
  Tensor on(DataType::kBool, {}), off(DataType::kBool, {});
  on.data<bool>()[0] = true;
  auto train = run_op({.op = "DropoutGrad", .inputs = {dy, mask, ratio, on}, .domain = "ai.otter"});
  EXPECT_EQ(values<float>(train[0]), (std::vector<float>{4, 0, 12, 0}));
  auto eval = run_op({.op = "DropoutGrad", .inputs = {dy, mask, ratio, off}, .domain = "ai.otter"});
  EXPECT_EQ(values<float>(eval[0]), (std::vector<float>{1, 2, 3, 4}));
}

TEST(GradKernels, GatherGradAddsRepeatedIndices) {
  Tensor dy = Tensor::from_vector<float>({2, 3, 2}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
  Tensor idx = Tensor::from_vector<int32_t>({3}, {2, 0, -1});  // -1 is row 2 again
  Tensor shape = Tensor::from_vector<int64_t>({3}, {2, 3, 2});
  auto out = run_op({.op = "GatherGrad", .inputs = {dy, shape, idx}, .attrs = {{"axis", Attribute(int64_t{1})}},
                     .domain = "ai.otter"});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{3, 4, 0, 0, 6, 8, 30, 40, 0, 0, 60, 80}));
}

// A direct evaluation of the convolution's gradients (stride 1, padding 1, 3x3, one group).
void direct_conv_grads(const Tensor& dy, const Tensor& x, const Tensor& w, std::vector<double>& dx,
                       std::vector<double>& dw) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3), m = w.dim(0);
  dx.assign(static_cast<size_t>(x.numel()), 0);
  dw.assign(static_cast<size_t>(w.numel()), 0);
  const float *px = x.data<float>(), *pw = w.data<float>(), *pg = dy.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < wd; ++j) {
          const double g = pg[((b * m + o) * h + i) * wd + j];
          for (int64_t k = 0; k < c; ++k)
            for (int64_t u = 0; u < 3; ++u)
              for (int64_t v = 0; v < 3; ++v) {
                const int64_t ii = i + u - 1, jj = j + v - 1;
                if (ii < 0 || ii >= h || jj < 0 || jj >= wd) continue;
                const int64_t xi = ((b * c + k) * h + ii) * wd + jj, wi = ((o * c + k) * 3 + u) * 3 + v;
                dx[xi] += g * pw[wi];
                dw[wi] += g * px[xi];
              }
        }
}

TEST(GradKernels, ConvGradOverSeveralImageChunks) {
  // 576 columns x 4096 positions per image: the column buffer holds one image at a time, so the
  // three images are three chunks accumulating into dW.
  Tensor x = random_f32({3, 64, 64, 64}, 3, -1, 1), w = random_f32({2, 64, 3, 3}, 4, -1, 1);
  Tensor dy = random_f32({3, 2, 64, 64}, 5, -1, 1);
  auto out = run_op({.op = "ConvGrad", .inputs = {dy, x, w},
                     .attrs = {{"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}}, .num_outputs = 3,
                     .domain = "ai.otter"});
  std::vector<double> dx, dw;
  direct_conv_grads(dy, x, w, dx, dw);
  auto rel = [](const Tensor& got, const std::vector<double>& want) {
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      diff = std::max(diff, std::abs(got.get_as_double(i) - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    return diff / scale;
  };
  EXPECT_LE(rel(out[0], dx), 1e-5);
  EXPECT_LE(rel(out[1], dw), 1e-5);
  double db0 = 0;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 64 * 64; ++k) db0 += dy.data<float>()[(i * 2) * 4096 + k];
  EXPECT_NEAR(out[2].get_as_double(0), db0, 1e-3);
}

// Planes smaller than the 3x3 window: some kernel offsets only ever see padding (over a 1x1 plane
// all but the centre), and Conv / ConvGrad leave them out of im2col and the GEMMs. Forward,
// dX, dW (zero at the dead offsets) against the direct sums; then dW accumulating into an
// accumulator (ConvGrad's fourth input) on a later micro-step.
TEST(GradKernels, ConvOverPlanesSmallerThanTheWindow) {
  const Attribute pads(std::vector<int64_t>{1, 1, 1, 1});
  for (std::vector<int64_t> plane : {std::vector<int64_t>{1, 1}, {2, 1}, {1, 3}}) {
    const int64_t h = plane[0], wd = plane[1];
    Tensor x = random_f32({4, 5, h, wd}, 6, -1, 1), w = random_f32({3, 5, 3, 3}, 7, -1, 1);
    Tensor dy = random_f32({4, 3, h, wd}, 8, -1, 1);
    auto y = run_op({.op = "Conv", .inputs = {x, w}, .attrs = {{"pads", pads}}});
    // Forward by the direct sum.
    double worst = 0;
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t o = 0; o < 3; ++o)
        for (int64_t i = 0; i < h; ++i)
          for (int64_t j = 0; j < wd; ++j) {
            double s = 0;
            for (int64_t k = 0; k < 5; ++k)
              for (int64_t u = 0; u < 3; ++u)
                for (int64_t v = 0; v < 3; ++v) {
                  const int64_t ii = i + u - 1, jj = j + v - 1;
                  if (ii < 0 || ii >= h || jj < 0 || jj >= wd) continue;
                  s += static_cast<double>(x.data<float>()[((b * 5 + k) * h + ii) * wd + jj]) *
                       w.data<float>()[((o * 5 + k) * 3 + u) * 3 + v];
                }
            worst = std::max(worst, std::abs(y[0].data<float>()[((b * 3 + o) * h + i) * wd + j] - s));
          }
    EXPECT_LT(worst, 1e-5) << h << "x" << wd;
    std::vector<double> dx, dw;
    direct_conv_grads(dy, x, w, dx, dw);
    auto g = run_op({.op = "ConvGrad", .inputs = {dy, x, w}, .attrs = {{"pads", pads}}, .num_outputs = 2,
                     .domain = "ai.otter"});
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(g[0].get_as_double(i), dx[i], 1e-5) << h << "x" << wd;
    for (int64_t i = 0; i < w.numel(); ++i) EXPECT_NEAR(g[1].get_as_double(i), dw[i], 1e-5) << h << "x" << wd;
    // Into an accumulator: overwritten on the first micro-step, added to after.
    Tensor acc = random_f32({3, 5, 3, 3}, 9, -1, 1);
    const Tensor before = acc.clone();
    auto first = run_op({.op = "ConvGrad", .inputs = {dy, x, w, acc}, .attrs = {{"pads", pads}}, .num_outputs = 2,
                         .domain = "ai.otter"});
    EXPECT_EQ(first[1].storage(), acc.storage());  // in place
    for (int64_t i = 0; i < w.numel(); ++i) EXPECT_NEAR(acc.get_as_double(i), dw[i], 1e-5);
    acc = before.clone();
    run_op({.op = "ConvGrad", .inputs = {dy, x, w, acc}, .attrs = {{"pads", pads}}, .num_outputs = 2,
            .domain = "ai.otter", .first_micro_step = false});
    for (int64_t i = 0; i < w.numel(); ++i) EXPECT_NEAR(acc.get_as_double(i), before.get_as_double(i) + dw[i], 1e-5);
  }
}

// ai.otter.BiasGelu and BiasGeluGrad (kernels/cpu/bias_gelu.cc) against the closed forms in double,
// in every float type. 7*11*67 elements with a 67-long bias: enough for the loop to split over
// threads (kernels/cpu/broadcast.h) at ranges that start inside a row, where the bias index wraps.
TEST(GradKernels, BiasGeluMatchesClosedFormsInEveryFloatType) {
  auto phi_cdf = [](double z) { return 0.5 * (1 + std::erf(z / std::sqrt(2.0))); };
  auto gelu = [&](double z) { return z * phi_cdf(z); };
  auto gelu_grad = [&](double z) { return phi_cdf(z) + z * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); };
  const Tensor x = random_f32({7, 11, 67}, 3, -4, 4), b = random_f32({67}, 4, -1, 1);
  const Tensor dy = random_f32({7, 11, 67}, 5, -1, 1);
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const Tensor xt = rounded(x, t), bt = rounded(b, t), dyt = rounded(dy, t);
    for (bool bias : {true, false}) {
      std::vector<Tensor> fwd_in = {xt}, grad_in = {dyt, xt};
      if (bias) {
        fwd_in.push_back(bt);
        grad_in.push_back(bt);
      }
      Tensor y = run_op({.op = "BiasGelu", .inputs = fwd_in, .domain = "ai.otter"})[0];
      Tensor dx = run_op({.op = "BiasGeluGrad", .inputs = grad_in, .domain = "ai.otter"})[0];
      ASSERT_EQ(y.dtype(), t);
      ASSERT_EQ(dx.dtype(), t);
      ASSERT_EQ(dx.dims(), x.dims());
      double worst_y = 0, worst_dx = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double z = xt.get_as_double(i) + (bias ? bt.get_as_double(i % 67) : 0.0);
        worst_y = std::max(worst_y, std::abs(y.get_as_double(i) - gelu(z)) / std::max(1.0, std::abs(gelu(z))));
        worst_dx = std::max(worst_dx, std::abs(dx.get_as_double(i) - dyt.get_as_double(i) * gelu_grad(z)));
      }
      // One rounding of the result (and, in half types, of x + b computed in float) in the storage type.
      const double tol = t == DataType::kFloat32 ? 2e-6 : t == DataType::kFloat16 ? 4e-3 : 3e-2;
      EXPECT_LE(worst_y, tol) << "BiasGelu in " << dtype_name(t) << (bias ? "" : " without bias");
      EXPECT_LE(worst_dx, tol) << "BiasGeluGrad in " << dtype_name(t) << (bias ? "" : " without bias");
    }
  }
  // A bias that is not 1-D of X's last-axis length is refused, naming it.
  bool refused = false;
  try {
    run_op({.op = "BiasGelu", .inputs = {x, random_f32({11}, 6)}, .domain = "ai.otter"});
  } catch (const Error& e) {
    refused = std::string(e.what()).find("bias") != std::string::npos;
  }
  EXPECT_TRUE(refused);
}

// A half X with a float32 bias (the form cast-elimination gives the float32 BiasGelu and bias Add
// between Casts, passes/cast_elimination.h) computes what the Casts around the float32 op did, bit
// for bit: Y is Cast(BiasGelu(Cast(x, f32), b), half) and dX = BiasGeluGrad(Cast(dy), Cast(x), b)
// in float32; BiasAdd is Add(b, Cast(x, f32)), or that cast back.
TEST(GradKernels, BiasGeluAndBiasAddOnAHalfXWithAFloat32BiasAreTheCastFloat32Ops) {
  const Tensor x = random_f32({7, 11, 67}, 3, -4, 4), b = random_f32({67}, 4, -1, 1);
  const Tensor dy = random_f32({7, 11, 67}, 5, -1, 1);
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const Tensor xt = rounded(x, t), dyt = rounded(dy, t);
    const Tensor xw = widened(xt, DataType::kFloat32), dyw = widened(dyt, DataType::kFloat32);
    const Tensor y = run_op({.op = "BiasGelu", .inputs = {xt, b}, .domain = "ai.otter"})[0];
    const Tensor dx = run_op({.op = "BiasGeluGrad", .inputs = {dyt, xt, b}, .domain = "ai.otter"})[0];
    const Tensor y_ref = rounded(run_op({.op = "BiasGelu", .inputs = {xw, b}, .domain = "ai.otter"})[0], t);
    const Tensor dx_ref = run_op({.op = "BiasGeluGrad", .inputs = {dyw, xw, b}, .domain = "ai.otter"})[0];
    ASSERT_EQ(y.dtype(), t);
    ASSERT_EQ(dx.dtype(), DataType::kFloat32);
    int64_t y_differ = 0, dx_differ = 0, y_nonzero = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      y_differ += y.get_as_double(i) != y_ref.get_as_double(i);
      dx_differ += dx.get_as_double(i) != dx_ref.get_as_double(i);
      y_nonzero += y.get_as_double(i) != 0;
    }
    EXPECT_EQ(y_differ, 0) << dtype_name(t);
    EXPECT_EQ(dx_differ, 0) << dtype_name(t);
    EXPECT_GT(y_nonzero, x.numel() / 2);
  }
  // BiasAdd: Add(b, Cast(x, f32)), and that sum cast back to x's type, bit for bit.
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const Tensor xt = rounded(x, t), xw = widened(xt, DataType::kFloat32);
    const Tensor sum = run_op({.op = "Add", .inputs = {b, xw}})[0];
    const Tensor to_f32 =
        run_op({.op = "BiasAdd", .inputs = {xt, b}, .attrs = {{"to", Attribute(int64_t{1})}}, .domain = "ai.otter"})[0];
    const Tensor to_half = run_op({.op = "BiasAdd", .inputs = {xt, b}, .domain = "ai.otter"})[0];
    const Tensor half_ref = rounded(sum, t);
    ASSERT_EQ(to_f32.dtype(), DataType::kFloat32);
    ASSERT_EQ(to_half.dtype(), t);
    int64_t differ = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
      differ +=
          to_f32.get_as_double(i) != sum.get_as_double(i) || to_half.get_as_double(i) != half_ref.get_as_double(i);
    EXPECT_EQ(differ, 0) << "BiasAdd in " << dtype_name(t);
  }
  // BiasAdd with a "bias" of X's trailing shape beyond one axis (cast-elimination's gradient sums):
  // [11, 67] and X's whole shape, float32 or X's own half type; Add of the widened operands, bit for bit.
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const Tensor xt = rounded(x, t), xw = widened(xt, DataType::kFloat32);
    const Tensor whole = random_f32({7, 11, 67}, 6, -3, 3), rows = random_f32({11, 67}, 7, -3, 3);
    const Tensor whole_half = rounded(whole, t);
    for (const Tensor& b2 : {whole, rows, whole_half}) {
      const Tensor bw = b2.dtype() == t ? widened(b2, DataType::kFloat32) : b2;
      const Tensor sum = run_op({.op = "Add", .inputs = {xw, bw}})[0];
      const Tensor got = run_op({.op = "BiasAdd",
                                 .inputs = {xt, b2},
                                 .attrs = {{"to", Attribute(int64_t{1})}},
                                 .domain = "ai.otter",
                                 .infer = true})[0];
      ASSERT_EQ(got.dtype(), DataType::kFloat32);
      int64_t differ = 0;
      for (int64_t i = 0; i < x.numel(); ++i) differ += got.get_as_double(i) != sum.get_as_double(i);
      EXPECT_EQ(differ, 0) << "BiasAdd in " << dtype_name(t) << " with bias " << b2.describe();
    }
    // Both operands half, the sum rounded back to their type (BiasAdd without `to`).
    const Tensor half_sum =
        run_op({.op = "BiasAdd", .inputs = {xt, whole_half}, .domain = "ai.otter", .infer = true})[0];
    const Tensor want = rounded(run_op({.op = "Add", .inputs = {xw, widened(whole_half, DataType::kFloat32)}})[0], t);
    ASSERT_EQ(half_sum.dtype(), t);
    int64_t half_differ = 0;
    for (int64_t i = 0; i < x.numel(); ++i) half_differ += half_sum.get_as_double(i) != want.get_as_double(i);
    EXPECT_EQ(half_differ, 0) << "BiasAdd of two " << dtype_name(t) << " values";
    // A bias that does not have X's trailing shape: broadcast along the last axis, more axes than X.
    for (const Tensor& bad : {random_f32({7, 11, 1}, 8, -1, 1), random_f32({2, 7, 11, 67}, 9, -1, 1)}) {
      EXPECT_THROW(run_op({.op = "BiasAdd", .inputs = {xt, bad}, .domain = "ai.otter", .infer = true}), Error)
          << bad.describe();
      EXPECT_THROW(run_op({.op = "BiasAdd", .inputs = {xt, bad}, .domain = "ai.otter"}), Error) << bad.describe();
    }
  }
  // The type rules refuse what the kernels do not compute: float32 output of a float64 X, BiasAdd
  // without its bias, ReduceSumF32 of float64.
  const Tensor x64 = widened(x, DataType::kFloat64), b64 = widened(b, DataType::kFloat64);
  EXPECT_THROW(run_op({.op = "BiasAdd", .inputs = {x64, b64}, .attrs = {{"to", Attribute(int64_t{1})}},
                       .domain = "ai.otter", .infer = true}),
               Error);
  EXPECT_THROW(run_op({.op = "BiasAdd", .inputs = {x, Tensor()}, .domain = "ai.otter", .infer = true}), Error);
  EXPECT_THROW(run_op({.op = "ReduceSumF32", .inputs = {x64}, .domain = "ai.otter", .infer = true}), Error);
  // float64 X takes no float32 bias.
  EXPECT_THROW(run_op({.op = "BiasGelu", .inputs = {widened(x, DataType::kFloat64), b}, .domain = "ai.otter"}), Error);
}

}  // namespace
}  // namespace otter::testing
