// Tests of the CPU GEMM and neural-network kernels: MatMul, Gemm, Conv, pooling, normalisation,
// softmax, dropout and the classification losses, against hand-computed values and naive loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

// OpCall literals leave trailing fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace otter {
namespace {

using testing::max_rel_diff;
using testing::OpCall;
using testing::run_op;
using testing::values;
using Ints = std::vector<int64_t>;

template <typename T = float>
Tensor tensor(Ints dims, std::vector<T> v) { return Tensor::from_vector<T>(std::move(dims), v); }

template <typename T = float>
Tensor random_tensor(Ints dims, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(DataTypeOf<T>::value, dims);
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(u(gen));
  return t;
}

Tensor bool_scalar(bool b) {
  Tensor t(DataType::kBool, {});
  t.data<bool>()[0] = b;
  return t;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << got.describe();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.get_as_double(i), want[i], tol) << "element " << i;
}

// ---- MatMul ---------------------------------------------------------------------------------------

// Naive batched reference: a [batch_a..., M, K], b [batch_b..., K, N] with explicit broadcast maps.
TEST(MatMul, TwoD) {
  // [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]] = [[58,64],[139,154]]
  auto y = run_op({"MatMul", {tensor({2, 3}, {1, 2, 3, 4, 5, 6}), tensor({3, 2}, {7, 8, 9, 10, 11, 12})}});
  EXPECT_EQ(y[0].dims(), (Ints{2, 2}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{58, 64, 139, 154}));
}

TEST(MatMul, VectorTimesMatrixAndBack) {
  // [1,2,3] @ [[7,8],[9,10],[11,12]] = [58, 64]   (A promoted to [1,3], axis dropped)
  auto y = run_op({"MatMul", {tensor({3}, {1, 2, 3}), tensor({3, 2}, {7, 8, 9, 10, 11, 12})}});
  EXPECT_EQ(y[0].dims(), (Ints{2}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{58, 64}));
  // [[1,2,3],[4,5,6]] @ [1,0,-1] = [-2, -2]
  auto z = run_op({"MatMul", {tensor({2, 3}, {1, 2, 3, 4, 5, 6}), tensor({3}, {1, 0, -1})}});
  EXPECT_EQ(z[0].dims(), (Ints{2}));
  EXPECT_EQ(values<float>(z[0]), (std::vector<float>{-2, -2}));
  // vector . vector = scalar: 1*4 + 2*5 + 3*6 = 32
  auto s = run_op({"MatMul", {tensor({3}, {1, 2, 3}), tensor({3}, {4, 5, 6})}});
  EXPECT_EQ(s[0].dims(), Ints{});
  EXPECT_EQ(values<float>(s[0]), (std::vector<float>{32}));
}

template <typename T>
void check_batched_broadcast() {
  // a [2,1,3,4] x b [5,4,2] -> [2,5,3,2]; y[i,j] = a[i,0] @ b[j]
  Tensor a = random_tensor<T>({2, 1, 3, 4}, 1), b = random_tensor<T>({5, 4, 2}, 2);
  auto y = run_op({"MatMul", {a, b}});
  ASSERT_EQ(y[0].dims(), (Ints{2, 5, 3, 2}));
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const T* py = y[0].data<T>();
  double worst = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 2; ++n) {
          double ref = 0;
          for (int k = 0; k < 4; ++k) ref += double(pa[i * 12 + m * 4 + k]) * pb[j * 8 + k * 2 + n];
          worst = std::max(worst, std::abs(ref - py[((i * 5 + j) * 3 + m) * 2 + n]));
        }
  EXPECT_LT(worst, (std::is_same_v<T, float> ? 1e-5 : 1e-13));
}

TEST(MatMul, BatchedBroadcast) { check_batched_broadcast<float>(); }
TEST(MatMul, BatchedBroadcastFloat64) { check_batched_broadcast<double>(); }

TEST(MatMul, BatchedLhsFoldedAgainst2DRhs) {
  // a [2,3,2] x b [2,2]: y[i] = a[i] @ b (one folded GEMM)
  Tensor a = tensor({2, 3, 2}, {1, 2, 3, 4, 5, 6, -1, 0, 0, -1, 2, 2});
  Tensor b = tensor({2, 2}, {1, 1, 0, 2});
  auto y = run_op({"MatMul", {a, b}});
  ASSERT_EQ(y[0].dims(), (Ints{2, 3, 2}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{1, 5, 3, 11, 5, 17, -1, -1, 0, -2, 2, 6}));
}

TEST(MatMul, ErrorsAndEmpty) {
  EXPECT_THROW(run_op({"MatMul", {random_tensor({2, 3}, 1), random_tensor({4, 2}, 2)}}), Error);
  EXPECT_THROW(run_op({"MatMul", {random_tensor({2, 2, 3}, 1), random_tensor({3, 3, 2}, 2)}}), Error);
  // K = 0: a sum over nothing is 0
  auto y = run_op({"MatMul", {Tensor(DataType::kFloat32, {2, 0}), Tensor(DataType::kFloat32, {0, 3})}});
  EXPECT_EQ(y[0].dims(), (Ints{2, 3}));
  for (float v : values<float>(y[0])) EXPECT_EQ(v, 0.0f);
  // empty batch
  auto e = run_op({"MatMul", {Tensor(DataType::kFloat32, {0, 2, 3}), random_tensor({3, 4}, 3)}});
  EXPECT_EQ(e[0].dims(), (Ints{0, 2, 4}));
}

// ---- Gemm -----------------------------------------------------------------------------------------

template <typename T>
void check_gemm(bool ta, bool tb, float alpha, float beta, Ints cdims) {
  const int64_t M = 3, K = 4, N = 5;
  Tensor a = random_tensor<T>(ta ? Ints{K, M} : Ints{M, K}, 11);
  Tensor b = random_tensor<T>(tb ? Ints{N, K} : Ints{K, N}, 12);
  std::vector<Tensor> ins = {a, b};
  Tensor c = random_tensor<T>(cdims, 13);  // cdims {} is a scalar C
  ins.push_back(c);
  auto y = run_op({"Gemm", ins,
                   {{"transA", int64_t(ta)}, {"transB", int64_t(tb)}, {"alpha", alpha}, {"beta", beta}}});
  ASSERT_EQ(y[0].dims(), (Ints{M, N}));
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const T* pc = c.data<T>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(ta ? pa[k * M + i] : pa[i * K + k]) * (tb ? pb[j * K + k] : pb[k * N + j]);
      // C broadcast: index by the aligned-right dims, 1 -> 0
      int64_t ci = 0;
      if (cdims.size() == 2) ci = (cdims[0] == 1 ? 0 : i) * cdims[1] + (cdims[1] == 1 ? 0 : j);
      if (cdims.size() == 1) ci = cdims[0] == 1 ? 0 : j;
      const double ref = alpha * s + beta * double(pc[ci]);
      EXPECT_NEAR(y[0].data<T>()[i * N + j], ref, 1e-5) << i << "," << j;
    }
}

TEST(Gemm, PlainWithMatrixBias) { check_gemm<float>(false, false, 1.0f, 1.0f, {3, 5}); }
TEST(Gemm, TransposesAlphaBeta) { check_gemm<float>(true, true, 0.5f, -2.0f, {3, 5}); }
TEST(Gemm, TransAOnlyRowBias) { check_gemm<float>(true, false, 1.5f, 0.25f, {5}); }
TEST(Gemm, TransBOnlyColumnBias) { check_gemm<float>(false, true, 1.0f, 3.0f, {3, 1}); }
TEST(Gemm, ScalarBias) { check_gemm<float>(false, false, 2.0f, 1.0f, {}); }
TEST(Gemm, Float64) { check_gemm<double>(true, false, 0.75f, 0.5f, {1, 5}); }

TEST(Gemm, NoBiasAndHandValues) {
  // [[1,2],[3,4]]^T @ [[1,0],[0,1]] * 2 = [[2,6],[4,8]]
  auto y = run_op({"Gemm", {tensor({2, 2}, {1, 2, 3, 4}), tensor({2, 2}, {1, 0, 0, 1})},
                   {{"transA", 1}, {"alpha", 2.0f}}});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{2, 6, 4, 8}));
  // C that does not broadcast
  EXPECT_THROW(run_op({"Gemm", {random_tensor({2, 3}, 1), random_tensor({3, 4}, 2), random_tensor({3}, 3)}}),
               Error);
}

// ---- Conv -----------------------------------------------------------------------------------------

struct ConvCase {
  Ints x, w;  // X [N, C, spatial...], W [M, C/group, k...]
  Ints strides, pads, dilations;
  int64_t group = 1;
  bool bias = true;
  std::string auto_pad = "NOTSET";
};

// Direct convolution, test-only: loops over every output element and kernel tap.
template <typename T>
Tensor naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvCase& c, const Ints& pb,
                  const Ints& out) {
  const int nsp = static_cast<int>(x.rank()) - 2;
  const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0), cg = w.dim(1), mg = M / c.group;
  Ints ydims = {N, M};
  ydims.insert(ydims.end(), out.begin(), out.end());
  Tensor y(DataTypeOf<T>::value, ydims);
  int64_t L = 1, K = 1, I = 1;
  for (int j = 0; j < nsp; ++j) { L *= out[j]; K *= w.dim(2 + j); I *= x.dim(2 + j); }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o = 0; o < L; ++o) {
        Ints opos(nsp);
        for (int64_t r = o, j = nsp - 1; j >= 0; --j) { opos[j] = r % out[j]; r /= out[j]; }
        double s = b ? b->data<T>()[m] : 0.0;
        for (int64_t ci = 0; ci < cg; ++ci) {
          const int64_t cin = (m / mg) * cg + ci;
          for (int64_t kk = 0; kk < K; ++kk) {
            Ints kpos(nsp);
            for (int64_t r = kk, j = nsp - 1; j >= 0; --j) { kpos[j] = r % w.dim(2 + j); r /= w.dim(2 + j); }
            int64_t xi = 0;
            bool inside = true;
            for (int j = 0; j < nsp; ++j) {
              const int64_t s_ = c.strides.empty() ? 1 : c.strides[j];
              const int64_t d_ = c.dilations.empty() ? 1 : c.dilations[j];
              const int64_t p = opos[j] * s_ - pb[j] + kpos[j] * d_;
              if (p < 0 || p >= x.dim(2 + j)) inside = false;
              xi = xi * x.dim(2 + j) + p;
            }
            if (!inside) continue;
            s += double(x.data<T>()[(n * C + cin) * I + xi]) * w.data<T>()[(m * cg + ci) * K + kk];
          }
        }
        y.data<T>()[(n * M + m) * L + o] = static_cast<T>(s);
      }
  return y;
}

template <typename T>
void check_conv(const ConvCase& c, const Ints& expect_out, const Ints& pb) {
  Tensor x = random_tensor<T>(c.x, 21), w = random_tensor<T>(c.w, 22), b = random_tensor<T>({c.w[0]}, 23);
  std::map<std::string, Attribute> attrs = {{"group", c.group}, {"auto_pad", c.auto_pad}};
  if (!c.strides.empty()) attrs["strides"] = c.strides;
  if (!c.pads.empty()) attrs["pads"] = c.pads;
  if (!c.dilations.empty()) attrs["dilations"] = c.dilations;
  std::vector<Tensor> ins = {x, w};
  if (c.bias) ins.push_back(b);
  auto y = run_op({"Conv", ins, attrs});
  Tensor ref = naive_conv<T>(x, w, c.bias ? &b : nullptr, c, pb, expect_out);
  ASSERT_EQ(y[0].dims(), ref.dims());
  EXPECT_LT(max_rel_diff(y[0], ref), (std::is_same_v<T, float> ? 1e-5 : 1e-12));
}

TEST(Conv, TwoDPadsStridesDilations) {
  // out = floor((7 + 1 + 2 - (2*3+1)) / 2) + 1 = 2 ; floor((6 + 0 + 1 - (1*1+1))/1)+1 = 6
  ConvCase c{{2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 0, 2, 1}, {3, 1}};
  check_conv<float>(c, {2, 6}, {1, 0});
}

TEST(Conv, TwoDGroups) {
  ConvCase c{{2, 6, 8, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 2};
  check_conv<float>(c, {8, 8}, {1, 1});
}

TEST(Conv, Depthwise) {
  ConvCase c{{2, 4, 9, 7}, {4, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4};
  check_conv<float>(c, {5, 4}, {1, 1});
  ConvCase mult{{1, 3, 6, 6}, {6, 1, 3, 3}, {1, 1}, {0, 0, 0, 0}, {2, 2}, 3};  // channel multiplier 2
  check_conv<float>(mult, {2, 2}, {0, 0});
}

TEST(Conv, SingleInputChannelManyFilters) {
  ConvCase c{{3, 1, 12, 12}, {16, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {}, 1};
  check_conv<float>(c, {12, 12}, {2, 2});
}

TEST(Conv, OneD) {
  ConvCase c{{2, 3, 11}, {5, 3, 3}, {2}, {2, 1}, {2}};
  check_conv<float>(c, {5}, {2});  // floor((11+3-5)/2)+1 = 5
}

TEST(Conv, ThreeD) {
  ConvCase c{{1, 2, 5, 4, 6}, {3, 2, 3, 2, 3}, {1, 2, 2}, {1, 0, 1, 1, 1, 0}, {}};
  check_conv<float>(c, {5, 2, 3}, {1, 0, 1});
}

TEST(Conv, PointwiseNoBias) {
  ConvCase c{{2, 8, 5, 5}, {6, 8, 1, 1}, {}, {}, {}, 1, false};
  check_conv<float>(c, {5, 5}, {0, 0});
}

TEST(Conv, LargeGemmPath) {  // per-image GEMM above the serial threshold: im2col + threaded BLAS
  ConvCase c{{2, 16, 20, 20}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}};
  check_conv<float>(c, {20, 20}, {1, 1});
}

TEST(Conv, AutoPadSame) {
  // SAME_UPPER, stride 2, k 3, in 7: out 4, total pad (4-1)*2+3-7 = 2 -> begin 1
  ConvCase up{{1, 2, 7, 8}, {3, 2, 3, 4}, {2, 2}, {}, {}, 1, true, "SAME_UPPER"};
  check_conv<float>(up, {4, 4}, {1, 1});  // axis 1: total (4-1)*2+4-8 = 2 -> begin 1
  // SAME_LOWER with odd total padding (stride 1, k 4: total 3) puts the extra pad at the beginning
  ConvCase low{{1, 2, 6, 6}, {2, 2, 4, 4}, {1, 1}, {}, {}, 1, true, "SAME_LOWER"};
  check_conv<float>(low, {6, 6}, {2, 2});
  ConvCase upodd{{1, 2, 6, 6}, {2, 2, 4, 4}, {1, 1}, {}, {}, 1, true, "SAME_UPPER"};
  check_conv<float>(upodd, {6, 6}, {1, 1});
}

TEST(Conv, Float64) {
  ConvCase c{{2, 4, 6, 5}, {6, 2, 3, 3}, {1, 2}, {1, 1, 0, 1}, {1, 1}, 2};
  check_conv<double>(c, {5, 3}, {1, 1});
}

TEST(Conv, HandValues) {
  // 1x1x3x3 input 1..9, 2x2 kernel of ones, no padding: window sums 12 16 24 28
  auto y = run_op({"Conv", {tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), tensor({1, 1, 2, 2}, {1, 1, 1, 1})}});
  EXPECT_EQ(y[0].dims(), (Ints{1, 1, 2, 2}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{12, 16, 24, 28}));
}

TEST(Conv, ErrorsAndEmptyBatch) {
  // channel mismatch: X has 3 channels, W expects 2
  try {
    run_op({"Conv", {random_tensor({1, 3, 5, 5}, 1), random_tensor({2, 2, 3, 3}, 2)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channel mismatch"), std::string::npos) << e.what();
  }
  // kernel larger than the padded input
  EXPECT_THROW(run_op({"Conv", {random_tensor({1, 1, 2, 2}, 1), random_tensor({1, 1, 3, 3}, 2)}}), Error);
  auto y = run_op({"Conv", {Tensor(DataType::kFloat32, {0, 2, 5, 5}), random_tensor({3, 2, 3, 3}, 2)}});
  EXPECT_EQ(y[0].dims(), (Ints{0, 3, 3, 3}));
}

// ---- pooling --------------------------------------------------------------------------------------

// x = 0..15 as a 1x1x4x4 image:
//  0  1  2  3
//  4  5  6  7
//  8  9 10 11
// 12 13 14 15
Tensor iota_4x4() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  return tensor({1, 1, 4, 4}, v);
}

TEST(Pool, MaxPoolPadsAndIndices) {
  // k 2x2, stride 2, pads 1 all round: out 3x3, windows rows {-1,0},{1,2},{3,4} likewise cols
  auto y = run_op({"MaxPool", {iota_4x4()},
                   {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, 2});
  EXPECT_EQ(y[0].dims(), (Ints{1, 1, 3, 3}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{0, 2, 3, 8, 10, 11, 12, 14, 15}));
  EXPECT_EQ(values<int64_t>(y[1]), (std::vector<int64_t>{0, 2, 3, 8, 10, 11, 12, 14, 15}));
}

TEST(Pool, MaxPoolCeilModeAndBatchIndices) {
  // 2 planes (N=1, C=2), second plane = first + 100 reversed order; k 3, stride 2, ceil_mode:
  // out = ceil((4-3)/2)+1 = 2; windows rows {0..2},{2..3}
  std::vector<float> v(32);
  for (int i = 0; i < 16; ++i) { v[i] = static_cast<float>(i); v[16 + i] = static_cast<float>(100 - i); }
  auto y = run_op({"MaxPool", {tensor({1, 2, 4, 4}, v)},
                   {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", 1}}, 2});
  EXPECT_EQ(y[0].dims(), (Ints{1, 2, 2, 2}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{10, 11, 14, 15, 100, 98, 92, 90}));
  // indices are flat over the whole tensor (row-major), so the second plane adds 16
  EXPECT_EQ(values<int64_t>(y[1]), (std::vector<int64_t>{10, 11, 14, 15, 16, 18, 24, 26}));
  // floor mode drops the partial window: out 1x1
  auto f = run_op({"MaxPool", {tensor({1, 2, 4, 4}, v)}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}}});
  EXPECT_EQ(f[0].dims(), (Ints{1, 2, 1, 1}));
}

TEST(Pool, MaxPoolStorageOrderAndDilations) {
  // dilation 2, k 2: window {r, r+2} x {c, c+2}; out 2x2: max at (r+2, c+2)
  auto y = run_op({"MaxPool", {iota_4x4()},
                   {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}, {"storage_order", 1}}, 2});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{10, 11, 14, 15}));
  // column-major index of (row, col) in a 4x4 plane is col*4 + row: (2,2)->10 (2,3)->14 (3,2)->11 (3,3)->15
  EXPECT_EQ(values<int64_t>(y[1]), (std::vector<int64_t>{10, 14, 11, 15}));
}

TEST(Pool, MaxPoolCeilModeLastWindowMustStartInside) {
  // in 6, k 2, stride 2, pads 1 / 2, ceil: ceil((6+3-2)/2)+1 = 5 windows, but the fifth would start
  // at 4*2-1 = 7, inside the right padding (>= 6), so it is dropped: 4 windows starting -1, 1, 3, 5.
  auto y = run_op({"MaxPool", {tensor({1, 1, 6}, {1, 5, 2, 4, 3, 6})},
                   {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"pads", Ints{1, 2}}, {"ceil_mode", 1}}});
  EXPECT_EQ(y[0].dims(), (Ints{1, 1, 4}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{1, 5, 4, 6}));
}

TEST(Pool, AveragePoolCountIncludePad) {
  // k 3x3, stride 1, pads 1: out 4x4. Corner (0,0) window covers {0,1,4,5}: sum 10.
  std::map<std::string, Attribute> attrs = {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}};
  auto ex = run_op({"AveragePool", {iota_4x4()}, attrs});
  EXPECT_EQ(ex[0].dims(), (Ints{1, 1, 4, 4}));
  EXPECT_FLOAT_EQ(ex[0].data<float>()[0], 10.0f / 4);  // only the 4 real elements
  EXPECT_FLOAT_EQ(ex[0].data<float>()[1], (0 + 1 + 2 + 4 + 5 + 6) / 6.0f);
  EXPECT_FLOAT_EQ(ex[0].data<float>()[5], 5.0f);  // interior (1,1): mean of 0,1,2,4,5,6,8,9,10 = 5
  attrs["count_include_pad"] = 1;
  auto in = run_op({"AveragePool", {iota_4x4()}, attrs});
  EXPECT_FLOAT_EQ(in[0].data<float>()[0], 10.0f / 9);
  EXPECT_FLOAT_EQ(in[0].data<float>()[1], 18.0f / 9);
  EXPECT_FLOAT_EQ(in[0].data<float>()[5], 5.0f);
}

TEST(Pool, AveragePoolCeilMode) {
  // k 3, stride 2, ceil: out 2x2; window (1,1) covers rows/cols {2,3}: mean(10,11,14,15) = 12.5
  auto y = run_op({"AveragePool", {iota_4x4()},
                   {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", 1}}});
  EXPECT_EQ(y[0].dims(), (Ints{1, 1, 2, 2}));
  // (0,0): rows 0-2, cols 0-2: mean 5; (0,1): rows 0-2, cols 2-3: (2+3+6+7+10+11)/6 = 6.5
  expect_near_all(y[0], {5, 6.5, 11, 12.5}, 1e-6);
  // with count_include_pad the overhanging part past the input (no pad there) does not count
  auto z = run_op({"AveragePool", {iota_4x4()},
                   {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", 1}, {"count_include_pad", 1}}});
  expect_near_all(z[0], {5, 6.5, 11, 12.5}, 1e-6);
}

TEST(Pool, AveragePoolOneDFloat64) {
  auto y = run_op({"AveragePool", {tensor<double>({1, 2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50})},
                   {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}}});
  EXPECT_EQ(y[0].dims(), (Ints{1, 2, 2}));
  EXPECT_EQ(values<double>(y[0]), (std::vector<double>{1.5, 3.5, 15, 35}));
}

TEST(Pool, GlobalAveragePool) {
  auto y = run_op({"GlobalAveragePool", {tensor({1, 2, 2, 2}, {1, 2, 3, 4, -1, -1, 5, 5})}});
  EXPECT_EQ(y[0].dims(), (Ints{1, 2, 1, 1}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{2.5f, 2.0f}));
  auto e = run_op({"GlobalAveragePool", {Tensor(DataType::kFloat64, {0, 3, 4})}});
  EXPECT_EQ(e[0].dims(), (Ints{0, 3, 1}));
}

TEST(Pool, MaxPoolRandomVsNaive3D) {
  // 3-D max pool with pads and strides against direct loops
  Tensor x = random_tensor({2, 3, 5, 6, 7}, 31);
  const Ints k = {2, 3, 2}, s = {2, 2, 3}, p = {1, 0, 1, 0, 1, 1};
  auto y = run_op({"MaxPool", {x}, {{"kernel_shape", k}, {"strides", s}, {"pads", p}}});
  Ints out(3), in = {5, 6, 7};
  for (int j = 0; j < 3; ++j) out[j] = (in[j] + p[j] + p[j + 3] - k[j]) / s[j] + 1;
  ASSERT_EQ(y[0].dims(), (Ints{2, 3, out[0], out[1], out[2]}));
  const float* px = x.data<float>();
  int64_t oi = 0;
  for (int pl = 0; pl < 6; ++pl)
    for (int a = 0; a < out[0]; ++a)
      for (int b = 0; b < out[1]; ++b)
        for (int c = 0; c < out[2]; ++c, ++oi) {
          float best = -INFINITY;
          for (int i = 0; i < k[0]; ++i)
            for (int j = 0; j < k[1]; ++j)
              for (int l = 0; l < k[2]; ++l) {
                const int r0 = a * s[0] - p[0] + i, r1 = b * s[1] - p[1] + j, r2 = c * s[2] - p[2] + l;
                if (r0 < 0 || r0 >= 5 || r1 < 0 || r1 >= 6 || r2 < 0 || r2 >= 7) continue;
                best = std::max(best, px[pl * 210 + (r0 * 6 + r1) * 7 + r2]);
              }
          ASSERT_EQ(y[0].data<float>()[oi], best) << oi;
        }
}

// The 2x2, stride-2 fast path (kernels/cpu/window.h, max_pool_row_2x2: four outputs at a time
// with SSE masks, the rest one by one) against a sequential scan of each window in ONNX order:
// the first maximum wins, a NaN wins over every number, an all -inf window has index -1 in the
// gradient (nothing routed). Many ties (values from a small set), NaN and -inf, widths that leave
// a remainder after the groups of four, float and double; MaxPoolGrad must route every output's
// gradient to the same position.
template <typename T>
void check_max_pool_2x2_against_scan(int64_t h, int64_t w, uint32_t seed) {
  const int64_t planes = 3, oh = h / 2, ow = w / 2;
  std::mt19937 rng(seed);
  std::vector<T> xv(static_cast<size_t>(planes * h * w));
  for (T& v : xv) {
    const uint32_t r = rng() % 16;
    v = r == 0 ? std::numeric_limits<T>::quiet_NaN() : r == 1 ? -std::numeric_limits<T>::infinity() : T(r % 5);
  }
  // one window all -inf, one with two NaNs, one with a tie for the maximum
  for (int64_t i : {int64_t{0}, int64_t{1}, w, w + 1}) xv[i] = -std::numeric_limits<T>::infinity();
  xv[2] = xv[w + 3] = std::numeric_limits<T>::quiet_NaN();
  xv[4] = xv[w + 4] = T(7);
  Tensor x = Tensor::from_vector(Ints{1, planes, h, w}, xv);
  std::vector<T> gv(static_cast<size_t>(planes * oh * ow));
  for (size_t i = 0; i < gv.size(); ++i) gv[i] = T(i + 1);
  const std::map<std::string, Attribute> attrs = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  auto y = run_op({"MaxPool", {x}, attrs, 2});
  auto dx = run_op({"MaxPoolGrad", {Tensor::from_vector(Ints{1, planes, oh, ow}, gv), x}, attrs, 1, 17, kOtterDomain});
  ASSERT_EQ(y[0].dims(), (Ints{1, planes, oh, ow}));
  std::vector<T> want_dx(xv.size(), T(0));
  int64_t oi = 0;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t c = 0; c < ow; ++c, ++oi) {
        T best = -std::numeric_limits<T>::infinity();
        int64_t at = -1;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j) {
            const int64_t k = pl * h * w + (2 * r + i) * w + 2 * c + j;
            const T v = xv[k];
            if (v > best || (std::isnan(v) && !std::isnan(best))) {
              best = v;
              at = k;
            }
          }
        const T got = y[0].data<T>()[oi];
        if (std::isnan(best)) EXPECT_TRUE(std::isnan(got)) << oi;
        else EXPECT_EQ(got, best) << oi;
        if (at >= 0) {
          EXPECT_EQ(y[1].data<int64_t>()[oi], at) << oi;
          want_dx[at] += gv[oi];
        }
      }
  EXPECT_EQ(values<T>(dx[0]), want_dx);
}

TEST(Pool, MaxPool2x2FastPathMatchesScanFloat) {
  check_max_pool_2x2_against_scan<float>(6, 22, 1);  // 11 outputs a row: two groups of 4, then 3
  check_max_pool_2x2_against_scan<float>(9, 8, 2);   // odd height: the last row is left out
  check_max_pool_2x2_against_scan<float>(4, 9, 3);   // odd width
}

TEST(Pool, MaxPool2x2FastPathMatchesScanDouble) { check_max_pool_2x2_against_scan<double>(6, 22, 4); }

// ---- normalisation --------------------------------------------------------------------------------

TEST(Norm, BatchNormInference) {
  // X [1,2,1,2] = [[1,2],[3,4]] per channel; scale [2,1], B [0,1], mean [1,3], var [4,1], eps 0
  auto y = run_op({"BatchNormalization",
                   {tensor({1, 2, 1, 2}, {1, 2, 3, 4}), tensor({2}, {2, 1}), tensor({2}, {0, 1}),
                    tensor({2}, {1, 3}), tensor({2}, {4, 1})},
                   {{"epsilon", 0.0f}},
                   1,
                   15});
  // c0: (x-1)/2*2 = 0, 1 ; c1: (x-3)/1 + 1 = 1, 2
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{0, 1, 1, 2}));
}

template <typename T>
void check_bn_training() {
  // X [2,2,2]: channel 0 values {1,3,5,7}, channel 1 values {2,2,4,4}
  Tensor x = tensor<T>({2, 2, 2}, {1, 3, 2, 2, 5, 7, 4, 4});
  Tensor scale = tensor<T>({2}, {1, 2}), b = tensor<T>({2}, {0, 1});
  Tensor mean = tensor<T>({2}, {0, 10}), var = tensor<T>({2}, {1, 2});
  auto y = run_op({"BatchNormalization", {x, scale, b, mean, var},
                   {{"epsilon", 1e-5f}, {"momentum", 0.8f}, {"training_mode", 1}},
                   3,
                   15});
  // batch mean c0 = 4, biased var = (9+1+1+9)/4 = 5; c1 mean 3, var 1
  const double i0 = 1 / std::sqrt(5 + 1e-5), i1 = 1 / std::sqrt(1 + 1e-5);
  expect_near_all(y[0], {-3 * i0, -1 * i0, 2 * -i1 + 1, 2 * -i1 + 1, 1 * i0, 3 * i0, 2 * i1 + 1, 2 * i1 + 1}, 1e-5);
  // running_mean = mean*0.8 + batch_mean*0.2 ; running_var = var*0.8 + biased_batch_var*0.2
  expect_near_all(y[1], {0 * 0.8 + 4 * 0.2, 10 * 0.8 + 3 * 0.2}, 1e-6);
  expect_near_all(y[2], {1 * 0.8 + 5 * 0.2, 2 * 0.8 + 1 * 0.2}, 1e-6);
}

TEST(Norm, BatchNormTrainingRunningStats) { check_bn_training<float>(); }
TEST(Norm, BatchNormTrainingFloat64) { check_bn_training<double>(); }

TEST(Norm, BatchNormErrors) {
  EXPECT_THROW(run_op({"BatchNormalization",
                       {random_tensor({2, 3, 4}, 1), random_tensor({2}, 2), random_tensor({3}, 3),
                        random_tensor({3}, 4), random_tensor({3}, 5, 0.5, 1)},
                       {},
                       1,
                       15}),
               Error);
  // empty batch in inference mode is fine
  auto y = run_op({"BatchNormalization",
                   {Tensor(DataType::kFloat32, {0, 2, 3}), random_tensor({2}, 2), random_tensor({2}, 3),
                    random_tensor({2}, 4), random_tensor({2}, 5, 0.5, 1)},
                   {},
                   1,
                   15});
  EXPECT_EQ(y[0].dims(), (Ints{0, 2, 3}));
}

// Reference layer norm over the trailing `cols` of rows, in double.
template <typename T>
void check_layer_norm(const Ints& dims, int64_t axis) {
  Tensor x = random_tensor<T>(dims, 41, -3, 5);
  const int64_t r = static_cast<int64_t>(dims.size()), a = axis < 0 ? axis + r : axis;
  Ints norm(dims.begin() + a, dims.end());
  Tensor scale = random_tensor<T>(norm, 42), bias = random_tensor<T>(norm, 43);
  auto y = run_op({"LayerNormalization", {x, scale, bias}, {{"axis", axis}, {"epsilon", 1e-3f}}, 3});
  int64_t cols = 1;
  for (int64_t d : norm) cols *= d;
  const int64_t rows = x.numel() / cols;
  Ints sdims(dims.begin(), dims.begin() + a);
  sdims.resize(r, 1);
  ASSERT_EQ(y[0].dims(), dims);
  ASSERT_EQ(y[1].dims(), sdims);
  ASSERT_EQ(y[2].dims(), sdims);
  EXPECT_EQ(y[1].dtype(), DataType::kFloat32);  // stash_type 1
  const T* px = x.data<T>();
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < cols; ++j) m += px[i * cols + j];
    m /= cols;
    for (int64_t j = 0; j < cols; ++j) v += (px[i * cols + j] - m) * (px[i * cols + j] - m);
    v /= cols;
    const double inv = 1 / std::sqrt(v + 1e-3);
    EXPECT_NEAR(y[1].get_as_double(i), m, 1e-5);
    EXPECT_NEAR(y[2].get_as_double(i), inv, 1e-5);
    for (int64_t j = 0; j < cols; ++j) {
      const double ref = (px[i * cols + j] - m) * inv * scale.data<T>()[j] + bias.data<T>()[j];
      EXPECT_NEAR(y[0].data<T>()[i * cols + j], ref, 1e-5);
    }
  }
}

TEST(Norm, LayerNormLastAxis) { check_layer_norm<float>({3, 4, 5}, -1); }
TEST(Norm, LayerNormAxis1) { check_layer_norm<float>({3, 4, 5}, 1); }
TEST(Norm, LayerNormFloat64) { check_layer_norm<double>({2, 3, 7}, -2); }

TEST(Norm, LayerNormNoBiasScalarScale) {
  // rows [1,3] and [2,2]: mean 2 and 2, var 1 and 0; Scale [1] broadcasts, no B
  auto y = run_op({"LayerNormalization", {tensor({2, 2}, {1, 3, 2, 2}), tensor({1}, {2})}, {{"epsilon", 0.25f}}});
  const double inv0 = 1 / std::sqrt(1.25), inv1 = 1 / std::sqrt(0.25);
  expect_near_all(y[0], {-2 * inv0, 2 * inv0, 0 * inv1, 0 * inv1}, 1e-6);
}

// ---- Softmax / LogSoftmax -------------------------------------------------------------------------

template <typename T>
void check_softmax_axis(const Ints& dims, int64_t axis, bool log, int opset = 13) {
  Tensor x = random_tensor<T>(dims, 51, -4, 4);
  auto y = run_op({log ? "LogSoftmax" : "Softmax", {x}, {{"axis", axis}}, 1, opset});
  const int64_t r = static_cast<int64_t>(dims.size()), a = axis < 0 ? axis + r : axis;
  int64_t outer = 1, d = dims[a], inner = 1;
  for (int64_t i = 0; i < a; ++i) outer *= dims[i];
  for (int64_t i = a + 1; i < r; ++i) inner *= dims[i];
  if (opset < 13) { d *= inner; inner = 1; }
  const T* px = x.data<T>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      double sum = 0;
      for (int64_t i = 0; i < d; ++i) sum += std::exp(double(px[(o * d + i) * inner + in]));
      for (int64_t i = 0; i < d; ++i) {
        const int64_t idx = (o * d + i) * inner + in;
        const double ref = log ? px[idx] - std::log(sum) : std::exp(double(px[idx])) / sum;
        ASSERT_NEAR(y[0].data<T>()[idx], ref, 1e-5) << idx;
      }
    }
}

TEST(Softmax, LastAxis) { check_softmax_axis<float>({3, 4, 10}, -1, false); }
TEST(Softmax, MiddleAxis) { check_softmax_axis<float>({3, 5, 300}, 1, false); }  // strided, > one chunk
TEST(Softmax, FirstAxisLog) { check_softmax_axis<float>({6, 4, 3}, 0, true); }
TEST(Softmax, LogLastAxisFloat64) { check_softmax_axis<double>({4, 33}, -1, true); }
TEST(Softmax, Opset11CoercesTo2D) { check_softmax_axis<float>({2, 3, 4}, 1, false, 11); }

TEST(Softmax, LargeInputsAreStable) {
  // softmax([1000, 1001, 1002]) = softmax([0, 1, 2]) = [0.09003057, 0.24472847, 0.66524096]
  auto y = run_op({"Softmax", {tensor({1, 3}, {1000, 1001, 1002})}});
  expect_near_all(y[0], {0.09003057, 0.24472847, 0.66524096}, 1e-6);
  // log_softmax([10000, 10001, 10002, 10003]) = [0,1,2,3] - 3.4401897 (log-sum-exp of 0..3)
  auto l = run_op({"LogSoftmax", {tensor({4}, {10000, 10001, 10002, 10003})}});
  expect_near_all(l[0], {-3.4401897, -2.4401897, -1.4401897, -0.4401897}, 1e-5);
  // strided path with large values too
  auto s = run_op({"Softmax", {tensor({2, 2}, {1000, -1000, 1001, -999})}, {{"axis", 0}}});
  expect_near_all(s[0], {0.26894142, 0.26894142, 0.73105858, 0.73105858}, 1e-6);
}

// ---- Dropout --------------------------------------------------------------------------------------

TEST(Dropout, SeedIsDeterministicAndMaskConsistent) {
  Tensor x = random_tensor({64, 33}, 61, 0.5, 2);  // no zeros, so a dropped element is exactly 0
  OpCall call{"Dropout", {x, Tensor::scalar<float>(0.3f), bool_scalar(true)}, {{"seed", 7}}, 2};
  auto a = run_op(call);
  call.seed = 99;  // executor generator differs; the seed attribute wins
  auto b = run_op(call);
  EXPECT_TRUE(a[0].bitwise_equal(b[0]));
  EXPECT_TRUE(a[1].bitwise_equal(b[1]));
  ASSERT_EQ(a[1].dtype(), DataType::kBool);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool m = a[1].data<bool>()[i];
    kept += m;
    const float want = m ? x.data<float>()[i] / 0.7f : 0.0f;
    ASSERT_NEAR(a[0].data<float>()[i], want, 1e-6) << i;
  }
  // 2112 elements, keep probability 0.7: expect ~1478, sd ~21
  EXPECT_NEAR(static_cast<double>(kept) / x.numel(), 0.7, 0.05);
  // another seed gives another mask
  auto c = run_op({"Dropout", {x, Tensor::scalar<float>(0.3f), bool_scalar(true)}, {{"seed", 8}}, 2});
  EXPECT_FALSE(a[1].bitwise_equal(c[1]));
}

TEST(Dropout, ExecutorGeneratorWithoutSeed) {
  Tensor x = random_tensor<double>({1000}, 62, 1, 2);
  OpCall call{"Dropout", {x, Tensor::scalar<double>(0.5), bool_scalar(true)}, {}, 2};
  call.seed = 5;
  auto a = run_op(call), b = run_op(call);
  EXPECT_TRUE(a[1].bitwise_equal(b[1]));
  call.seed = 6;
  auto c = run_op(call);
  EXPECT_FALSE(a[1].bitwise_equal(c[1]));
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(a[0].data<double>()[i], a[1].data<bool>()[i] ? x.data<double>()[i] * 2 : 0.0);
}

TEST(Dropout, IdentityWhenNotTrainingOrRatioZero) {
  Tensor x = random_tensor({5, 7}, 63);
  for (auto ins : {std::vector<Tensor>{x}, std::vector<Tensor>{x, Tensor::scalar<float>(0.5f), bool_scalar(false)},
                   std::vector<Tensor>{x, Tensor::scalar<float>(0.0f), bool_scalar(true)}}) {
    auto y = run_op({"Dropout", ins, {}, 2});
    EXPECT_TRUE(y[0].bitwise_equal(x));
    for (bool m : values<bool>(y[1])) EXPECT_TRUE(m);
  }
  EXPECT_THROW(run_op({"Dropout", {x, Tensor::scalar<float>(1.5f), bool_scalar(true)}}), Error);
}

// ---- losses ---------------------------------------------------------------------------------------

// scores [3, 3]: rows [1,2,3], [1,1,1], [3,0,-1]; labels [2, 0, 1]
// log_softmax row 0 = [-2.40760596, -1.40760596, -0.40760596]; row 1 = -log 3 = -1.09861229;
// row 2 = [-0.06588390, -3.06588390, -4.06588390]
const std::vector<float> kScores = {1, 2, 3, 1, 1, 1, 3, 0, -1};
const double kL0 = 0.40760596, kL1 = 1.09861229, kL2 = 3.06588390;

TEST(Loss, SoftmaxCrossEntropyReductions) {
  Tensor s = tensor({3, 3}, kScores);
  Tensor lab = tensor<int64_t>({3}, {2, 0, 1});
  auto none = run_op({"SoftmaxCrossEntropyLoss", {s, lab}, {{"reduction", "none"}}, 2});
  expect_near_all(none[0], {kL0, kL1, kL2}, 1e-6);
  expect_near_all(none[1], {-2.40760596, -1.40760596, -0.40760596, -kL1, -kL1, -kL1, -0.06588390, -3.06588390,
                            -4.06588390}, 1e-6);
  auto sum = run_op({"SoftmaxCrossEntropyLoss", {s, lab}, {{"reduction", "sum"}}});
  EXPECT_EQ(sum[0].dims(), Ints{});
  EXPECT_NEAR(sum[0].get_as_double(0), kL0 + kL1 + kL2, 1e-5);
  auto mean = run_op({"SoftmaxCrossEntropyLoss", {s, lab}});
  EXPECT_NEAR(mean[0].get_as_double(0), (kL0 + kL1 + kL2) / 3, 1e-6);
}

TEST(Loss, SoftmaxCrossEntropyWeightsAndIgnoreIndex) {
  Tensor s = tensor({3, 3}, kScores);
  Tensor w = tensor({3}, {0.5f, 2.0f, 4.0f});
  // weighted mean: (4*L0 + 0.5*L1 + 2*L2) / (4 + 0.5 + 2)
  auto m = run_op({"SoftmaxCrossEntropyLoss", {s, tensor<int64_t>({3}, {2, 0, 1}), w}});
  EXPECT_NEAR(m[0].get_as_double(0), (4 * kL0 + 0.5 * kL1 + 2 * kL2) / 6.5, 1e-6);
  // ignore_index -1 drops row 1 from both sums: (4*L0 + 2*L2) / 6
  auto ii = run_op({"SoftmaxCrossEntropyLoss", {s, tensor<int64_t>({3}, {2, -1, 1}), w}, {{"ignore_index", -1}}});
  EXPECT_NEAR(ii[0].get_as_double(0), (4 * kL0 + 2 * kL2) / 6, 1e-6);
  // unweighted mean with ignore_index divides by the count of kept positions
  auto iu = run_op({"SoftmaxCrossEntropyLoss", {s, tensor<int32_t>({3}, {2, 5, 1})}, {{"ignore_index", 5}}});
  EXPECT_NEAR(iu[0].get_as_double(0), (kL0 + kL2) / 2, 1e-6);
  // a label outside [0, C) that is not ignore_index is an error naming the label
  try {
    run_op({"SoftmaxCrossEntropyLoss", {s, tensor<int64_t>({3}, {2, 3, 1})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3"), std::string::npos) << e.what();
  }
}

TEST(Loss, SoftmaxCrossEntropyNdFloat64) {
  // scores [N=2, C=3, d=2]; reference with explicit loops
  Tensor s = random_tensor<double>({2, 3, 2}, 71, -2, 2);
  Tensor lab = tensor<int64_t>({2, 2}, {0, 2, 1, 1});
  auto y = run_op({"SoftmaxCrossEntropyLoss", {s, lab}, {{"reduction", "none"}}});
  ASSERT_EQ(y[0].dims(), (Ints{2, 2}));
  const double* p = s.data<double>();
  for (int n = 0; n < 2; ++n)
    for (int d = 0; d < 2; ++d) {
      double z = 0;
      for (int c = 0; c < 3; ++c) z += std::exp(p[(n * 3 + c) * 2 + d]);
      const int64_t l = lab.data<int64_t>()[n * 2 + d];
      EXPECT_NEAR(y[0].data<double>()[n * 2 + d], std::log(z) - p[(n * 3 + l) * 2 + d], 1e-12);
    }
}

TEST(Loss, NegativeLogLikelihood) {
  // the ONNX spec's examples: input [2,3,2], target [[2,1],[0,2]], weight [0.2,0.3,0.1]
  Tensor in = tensor({2, 3, 2}, {1, 2, 2, 2, 3, 2, 0, 1, 2, 2, 1, 2});
  Tensor t = tensor<int64_t>({2, 2}, {2, 1, 0, 2});
  Tensor w = tensor({3}, {0.2f, 0.3f, 0.1f});
  auto none = run_op({"NegativeLogLikelihoodLoss", {in, t}, {{"reduction", "none"}}});
  expect_near_all(none[0], {-3, -2, -0, -2}, 1e-6);
  auto sum = run_op({"NegativeLogLikelihoodLoss", {in, t, w}, {{"reduction", "sum"}}});
  EXPECT_NEAR(sum[0].get_as_double(0), -1.1, 1e-6);
  auto mean = run_op({"NegativeLogLikelihoodLoss", {in, t, w}});
  EXPECT_NEAR(mean[0].get_as_double(0), -1.1 / 0.7, 1e-6);  // weights 0.1+0.3+0.2+0.1 = 0.7: -1.5714
  // ignore target 2: remaining (0,1)->-2*0.3, (1,0)->-0*0.2; mean = -0.6 / 0.5
  auto ii = run_op({"NegativeLogLikelihoodLoss", {in, t, w}, {{"ignore_index", 2}}});
  EXPECT_NEAR(ii[0].get_as_double(0), -0.6 / 0.5, 1e-6);
}

TEST(Loss, EmptyBatch) {
  Tensor s(DataType::kFloat32, {0, 4});
  Tensor lab(DataType::kInt64, {0});
  auto none = run_op({"SoftmaxCrossEntropyLoss", {s, lab}, {{"reduction", "none"}}});
  EXPECT_EQ(none[0].dims(), (Ints{0}));
  auto sum = run_op({"SoftmaxCrossEntropyLoss", {s, lab}, {{"reduction", "sum"}}});
  EXPECT_EQ(sum[0].get_as_double(0), 0.0);
  auto mean = run_op({"NegativeLogLikelihoodLoss", {s, lab}});
  EXPECT_TRUE(std::isnan(mean[0].get_as_double(0)));  // 0 / 0, as numpy's and torch's mean of nothing
}

}  // namespace
}  // namespace otter
