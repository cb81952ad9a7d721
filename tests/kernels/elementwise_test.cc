// Tests of the CPU element-wise, reduction and shape kernels, run one node at a time through the
// kernel registry. Expected values are hand-computed, from naive index loops, or from identities.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/common/half.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

using testing::OpCall;
using testing::run_op;
using testing::values;
using Attrs = std::map<std::string, Attribute>;

Tensor f32(std::vector<int64_t> d, std::vector<float> v) { return Tensor::from_vector<float>(std::move(d), v); }
Tensor f64(std::vector<int64_t> d, std::vector<double> v) { return Tensor::from_vector<double>(std::move(d), v); }
Tensor i64(std::vector<int64_t> d, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(std::move(d), v); }
Tensor i32(std::vector<int64_t> d, std::vector<int32_t> v) { return Tensor::from_vector<int32_t>(std::move(d), v); }
Tensor bools(std::vector<int64_t> d, std::vector<bool> v) {
  Tensor t(DataType::kBool, std::move(d));
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}
Tensor i64s(std::vector<int64_t> v) { return i64({static_cast<int64_t>(v.size())}, v); }
Tensor i64scalar(int64_t v) { return Tensor::scalar<int64_t>(v); }

// Any-dtype tensor from doubles (for dtype sweeps).
Tensor make(DataType t, std::vector<int64_t> dims, const std::vector<double>& v) {
  Tensor x(t, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) {
    void* p = x.raw();
    switch (t) {
      case DataType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v[i]); break;
      case DataType::kFloat64: static_cast<double*>(p)[i] = v[i]; break;
      case DataType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v[i])); break;
      case DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v[i])); break;
      case DataType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v[i]); break;
      case DataType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v[i]); break;
      case DataType::kInt8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v[i]); break;
      case DataType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v[i]); break;
      case DataType::kBool: static_cast<bool*>(p)[i] = v[i] != 0; break;
      default: ADD_FAILURE();
    }
  }
  return x;
}
std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.get_as_double(i));
  return out;
}

std::vector<Tensor> run_n(const std::string& op, std::vector<Tensor> in, int n, Attrs attrs = {}, int opset = 17) {
  OpCall c;
  c.op = op;
  c.inputs = std::move(in);
  c.attrs = std::move(attrs);
  c.num_outputs = n;
  c.opset = opset;
  return run_op(c);
}
Tensor run(const std::string& op, std::vector<Tensor> in, Attrs attrs = {}, int opset = 17) {
  return run_n(op, std::move(in), 1, std::move(attrs), opset)[0];
}

const std::vector<DataType> kAllTypes = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                         DataType::kBFloat16, DataType::kInt64, DataType::kInt32,
                                         DataType::kInt8, DataType::kUInt8, DataType::kBool};

// =================================== element-wise ================================================

TEST(ElementwiseTest, AddBroadcastsTrailingRow) {
  Tensor y = run("Add", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  // Broadcast on the left operand as well.
  Tensor z = run("Sub", {f64({3}, {10, 20, 30}), f64({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(values<double>(z), (std::vector<double>{9, 18, 27, 6, 15, 24}));
}

TEST(ElementwiseTest, MulBroadcastsBothWays) {
  std::vector<float> a(8), b = {1, 2, 3};
  for (int i = 0; i < 8; ++i) a[i] = static_cast<float>(i + 1);
  Tensor y = run("Mul", {f32({2, 1, 4}, a), f32({3, 1}, b)});
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 3, 4}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(y.data<float>()[(i * 3 + j) * 4 + k], a[i * 4 + k] * b[j]) << i << j << k;
}

TEST(ElementwiseTest, ScalarOperand) {
  Tensor s = Tensor::scalar<float>(2.0f);
  EXPECT_EQ(values<float>(run("Div", {f32({2, 2}, {2, 4, 6, 8}), s})), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(values<float>(run("Sub", {s, f32({2, 2}, {2, 4, 6, 8})})), (std::vector<float>{0, -2, -4, -6}));
  Tensor both = run("Add", {s, s});
  EXPECT_EQ(both.rank(), 0);
  EXPECT_EQ(values<float>(both), (std::vector<float>{4}));
}

TEST(ElementwiseTest, LargeBroadcastMatchesNaiveLoops) {
  // Big enough for the threaded path; [300,1,50] + [7,1] -> [300,7,50].
  const int A = 300, B = 7, C = 50;
  std::vector<double> a(A * C), b(B);
  for (int i = 0; i < A * C; ++i) a[i] = std::sin(i * 0.1);
  for (int j = 0; j < B; ++j) b[j] = j * 0.5 - 1;
  Tensor y = run("Add", {f64({A, 1, C}, a), f64({B, 1}, b)});
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{A, B, C}));
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < B; ++j)
      for (int k = 0; k < C; ++k)
        ASSERT_EQ(y.data<double>()[(i * B + j) * C + k], a[i * C + k] + b[j]);
  // Same-shape fast path, large.
  Tensor z = run("Mul", {f64({A, C}, a), f64({A, C}, a)});
  for (int i = 0; i < A * C; ++i) ASSERT_EQ(z.data<double>()[i], a[i] * a[i]);
}

TEST(ElementwiseTest, EmptyTensorsFlowThrough) {
  Tensor y = run("Add", {f32({0, 3}, {}), f32({3}, {1, 2, 3})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 3}));
  Tensor z = run("Relu", {f32({2, 0}, {})});
  EXPECT_EQ(z.dims(), (std::vector<int64_t>{2, 0}));
  Tensor w = run("Where", {bools({0}, {}), f32({1}, {1}), f32({1}, {2})});
  EXPECT_EQ(w.dims(), (std::vector<int64_t>{0}));
}

TEST(ElementwiseTest, IncompatibleShapesAreAnError) {
  EXPECT_THROW(run("Add", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2}, {1, 2})}), Error);
  EXPECT_THROW(run("Add", {f32({2}, {1, 2}), f64({2}, {1, 2})}), Error);  // mixed dtypes
}

TEST(ElementwiseTest, IntegerArithmetic) {
  EXPECT_EQ(values<int64_t>(run("Div", {i64({4}, {7, -7, 7, -7}), i64({4}, {2, 2, -2, -2})})),
            (std::vector<int64_t>{3, -3, -3, 3}));  // truncation toward zero
  EXPECT_EQ(values<int32_t>(run("Div", {i32({3}, {9, -1, 5}), i32({1}, {4})})), (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(values<int64_t>(run("Add", {i64({2}, {1, 2}), i64({1}, {10})})), (std::vector<int64_t>{11, 12}));
  EXPECT_EQ(values<int32_t>(run("Mul", {i32({2}, {3, -4}), i32({2}, {5, 6})})), (std::vector<int32_t>{15, -24}));
  EXPECT_EQ(values<int64_t>(run("Neg", {i64({2}, {3, -4})})), (std::vector<int64_t>{-3, 4}));
  EXPECT_EQ(values<int32_t>(run("Abs", {i32({2}, {3, -4})})), (std::vector<int32_t>{3, 4}));
  // The most negative value over -1 wraps instead of trapping.
  int64_t mn = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(values<int64_t>(run("Div", {i64({1}, {mn}), i64({1}, {-1})})), (std::vector<int64_t>{mn}));
}

TEST(ElementwiseTest, IntegerDivisionByZeroIsAnError) {
  try {
    run("Div", {i64({3}, {1, 2, 3}), i64({3}, {1, 0, 1})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
  }
  // Float division by zero is IEEE: inf.
  EXPECT_TRUE(std::isinf(values<float>(run("Div", {f32({1}, {1}), f32({1}, {0})}))[0]));
}

TEST(ElementwiseTest, Pow) {
  EXPECT_EQ(values<float>(run("Pow", {f32({3}, {2, 9, 4}), f32({3}, {3, 0.5f, -1})})),
            (std::vector<float>{8, 3, 0.25f}));
  EXPECT_EQ(values<double>(run("Pow", {f64({2}, {2, -3}), i64({2}, {10, 3})})), (std::vector<double>{1024, -27}));
  EXPECT_EQ(values<int64_t>(run("Pow", {i64({4}, {2, 3, -2, 5}), i64({4}, {10, 0, 3, -1})})),
            (std::vector<int64_t>{1024, 1, -8, 0}));
  EXPECT_EQ(values<int32_t>(run("Pow", {i32({2}, {4, 9}), f32({1}, {0.5f})})), (std::vector<int32_t>{2, 3}));
}

template <typename T>
void check_unary(const std::string& op, const std::vector<T>& x, double (*ref)(double), double tol,
                 Attrs attrs = {}, int opset = 17) {
  Tensor y = run(op, {Tensor::from_vector<T>({static_cast<int64_t>(x.size())}, x)}, attrs, opset);
  ASSERT_EQ(y.dtype(), DataTypeOf<T>::value);
  for (size_t i = 0; i < x.size(); ++i) {
    double want = ref(static_cast<double>(x[i]));
    EXPECT_NEAR(static_cast<double>(y.data<T>()[i]), want, tol * std::max(1.0, std::abs(want)))
        << op << "(" << x[i] << ")";
  }
}

double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double ref_relu(double x) { return x > 0 ? x : 0; }
double ref_neg(double x) { return -x; }
double ref_recip(double x) { return 1 / x; }
double ref_abs(double x) { return std::fabs(x); }
double ref_gelu(double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double ref_softplus(double x) { return std::log(1 + std::exp(x)); }
double ref_leaky(double x) { return x < 0 ? static_cast<double>(0.2f) * x : x; }  // alpha is a float attribute

template <typename T>
void check_all_unary(double tol) {
  std::vector<T> x = {T(-2.5), T(-0.7), T(0.1), T(0.9), T(3.2)};
  std::vector<T> pos = {T(0.01), T(0.5), T(2), T(100)};
  check_unary<T>("Sqrt", pos, [](double v) { return std::sqrt(v); }, tol);
  check_unary<T>("Reciprocal", x, ref_recip, tol);
  check_unary<T>("Exp", x, [](double v) { return std::exp(v); }, tol);
  check_unary<T>("Log", pos, [](double v) { return std::log(v); }, tol);
  check_unary<T>("Neg", x, ref_neg, 0);
  check_unary<T>("Abs", x, ref_abs, 0);
  check_unary<T>("Erf", x, [](double v) { return std::erf(v); }, tol);
  check_unary<T>("Tanh", x, [](double v) { return std::tanh(v); }, tol);
  check_unary<T>("Sigmoid", x, ref_sigmoid, tol);
  check_unary<T>("Relu", x, ref_relu, 0);
  check_unary<T>("LeakyRelu", x, ref_leaky, tol, {{"alpha", 0.2f}});
  check_unary<T>("Softplus", x, ref_softplus, tol);
  check_unary<T>("Gelu", x, ref_gelu, tol, {}, 20);
  check_unary<T>("Gelu", x, ref_gelu_tanh, tol, {{"approximate", "tanh"}}, 20);
}

TEST(ElementwiseTest, UnaryFloat32) { check_all_unary<float>(2e-6); }
TEST(ElementwiseTest, UnaryFloat64) { check_all_unary<double>(1e-13); }

TEST(ElementwiseTest, GeluNeedsOpset20) {
  EXPECT_THROW(run("Gelu", {f32({1}, {1})}, {}, 19), Error);
  EXPECT_THROW(run("Gelu", {f32({1}, {1})}, {{"approximate", "fast"}}, 20), Error);
}

TEST(ElementwiseTest, SoftplusAndSigmoidAtExtremes) {
  Tensor y = run("Softplus", {f32({4}, {1000, -1000, 0, 30})});
  EXPECT_EQ(y.data<float>()[0], 1000.0f);
  EXPECT_EQ(y.data<float>()[1], 0.0f);
  EXPECT_NEAR(y.data<float>()[2], std::log(2.0), 1e-7);
  EXPECT_NEAR(y.data<float>()[3], 30.0, 1e-5);
  Tensor s = run("Sigmoid", {f64({3}, {-1000, 1000, -40})});
  EXPECT_EQ(s.data<double>()[0], 0.0);
  EXPECT_EQ(s.data<double>()[1], 1.0);
  EXPECT_NEAR(s.data<double>()[2], std::exp(-40.0), 1e-30);
  EXPECT_GT(s.data<double>()[2], 0.0);
}

TEST(ElementwiseTest, Clip) {
  Tensor x = f32({5}, {-3, -1, 0, 2, 5});
  EXPECT_EQ(values<float>(run("Clip", {x, Tensor::scalar(-1.5f), Tensor::scalar(2.5f)})),
            (std::vector<float>{-1.5f, -1, 0, 2, 2.5f}));
  EXPECT_EQ(values<float>(run("Clip", {x, Tensor(), Tensor::scalar(1.0f)})), (std::vector<float>{-3, -1, 0, 1, 1}));
  EXPECT_EQ(values<float>(run("Clip", {x})), values<float>(x));
  EXPECT_EQ(values<int64_t>(run("Clip", {i64({3}, {-5, 3, 9}), i64scalar(0), i64scalar(4)})),
            (std::vector<int64_t>{0, 3, 4}));
  EXPECT_EQ(values<double>(run("Clip", {f64({2}, {-2, 2}), Tensor::scalar(0.0)})), (std::vector<double>{0, 2}));
}

TEST(ElementwiseTest, VariadicMinMaxSumMean) {
  Tensor a = f32({2, 1}, {1, 5}), b = f32({3}, {2, 4, 6}), c = Tensor::scalar(3.0f);
  EXPECT_EQ(values<float>(run("Max", {a, b, c})), (std::vector<float>{3, 4, 6, 5, 5, 6}));
  EXPECT_EQ(values<float>(run("Min", {a, b, c})), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(values<float>(run("Sum", {a, b, c})), (std::vector<float>{6, 8, 10, 10, 12, 14}));
  EXPECT_EQ(values<float>(run("Mean", {a, b})), (std::vector<float>{1.5f, 2.5f, 3.5f, 3.5f, 4.5f, 5.5f}));
  EXPECT_EQ(values<float>(run("Max", {a})), (std::vector<float>{1, 5}));
  EXPECT_EQ(values<int64_t>(run("Max", {i64({2}, {1, 7}), i64({2}, {3, 2})})), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(values<double>(run("Min", {f64({2}, {1, 7}), f64({1}, {3})})), (std::vector<double>{1, 3}));
  // NaN propagates, as in numpy.maximum.
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor m = run("Max", {f32({2}, {nan, 1}), f32({2}, {1, nan})});
  EXPECT_TRUE(std::isnan(m.data<float>()[0]));
  EXPECT_TRUE(std::isnan(m.data<float>()[1]));
}

TEST(ElementwiseTest, WhereBroadcasts) {
  Tensor y = run("Where", {bools({2, 1}, {true, false}), f32({1, 3}, {1, 2, 3}), Tensor::scalar(-1.0f)});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  Tensor z = run("Where", {bools({3}, {true, false, true}), i64({3}, {1, 2, 3}), i64({2, 1}, {10, 20})});
  EXPECT_EQ(values<int64_t>(z), (std::vector<int64_t>{1, 10, 3, 1, 20, 3}));
  Tensor w = run("Where", {bools({2}, {false, true}), f64({2}, {1, 2}), f64({2}, {3, 4})});
  EXPECT_EQ(values<double>(w), (std::vector<double>{3, 2}));
}

TEST(ElementwiseTest, ComparisonsGiveBool) {
  Tensor x = f32({4}, {1, 2, 3, 4}), y = f32({1}, {2.5f});
  Tensor lt = run("Less", {x, y});
  ASSERT_EQ(lt.dtype(), DataType::kBool);
  EXPECT_EQ(values<bool>(lt), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(values<bool>(run("Greater", {x, y})), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(values<bool>(run("Equal", {i64({3}, {1, 2, 3}), i64({3}, {1, 0, 3})})), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(values<bool>(run("Equal", {bools({2}, {true, false}), bools({1}, {false})})), (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(run("Greater", {f64({2}, {1, 3}), f64({2}, {2, 2})})), (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(run("LessOrEqual", {i32({3}, {1, 2, 3}), i32({1}, {2})})), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(values<bool>(run("GreaterOrEqual", {i32({3}, {1, 2, 3}), i32({1}, {2})})), (std::vector<bool>{false, true, true}));
}

TEST(ElementwiseTest, Logic) {
  Tensor a = bools({4}, {true, true, false, false}), b = bools({4}, {true, false, true, false});
  EXPECT_EQ(values<bool>(run("And", {a, b})), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(values<bool>(run("Or", {a, b})), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(values<bool>(run("Xor", {a, b})), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(values<bool>(run("Not", {a})), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(values<bool>(run("And", {a, bools({}, {true})})), (std::vector<bool>{true, true, false, false}));
}

TEST(ElementwiseTest, HalfArithmeticRoundsOnce) {
  Tensor a = make(DataType::kFloat16, {3}, {1.0, 2048.0, 0.5});
  Tensor b = make(DataType::kFloat16, {3}, {std::ldexp(1.0, -10), 1.0, 0.25});
  Tensor y = run("Add", {a, b});
  ASSERT_EQ(y.dtype(), DataType::kFloat16);
  EXPECT_EQ(as_doubles(y), (std::vector<double>{1.0 + std::ldexp(1.0, -10), 2048.0, 0.75}));  // 2049 ties to 2048
  Tensor r = run("Relu", {make(DataType::kBFloat16, {2}, {-1.0, 3.0})});
  EXPECT_EQ(as_doubles(r), (std::vector<double>{0.0, 3.0}));
  Tensor e = run("Exp", {make(DataType::kFloat16, {1}, {1.0})});
  EXPECT_EQ(e.get_as_double(0), half_to_float(float_to_half(std::exp(1.0f))));
}

// ---- Cast ---------------------------------------------------------------------------------------
Attrs cast_to(DataType t) { return {{"to", static_cast<int64_t>(dtype_to_onnx(t))}}; }

TEST(ElementwiseTest, CastBetweenEveryPair) {
  for (DataType from : kAllTypes) {
    for (DataType to : kAllTypes) {
      // 0 and 1 exist in every type; 2 and 100 in every type but bool.
      std::vector<double> v = {0, 1};
      if (from != DataType::kBool && to != DataType::kBool) v = {0, 1, 2, 100};
      Tensor y = run("Cast", {make(from, {static_cast<int64_t>(v.size())}, v)}, cast_to(to));
      ASSERT_EQ(y.dtype(), to);
      EXPECT_EQ(as_doubles(y), v) << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(ElementwiseTest, CastRoundingAndTruncation) {
  float tie = 1.0f + std::ldexp(1.0f, -11), tie3 = 1.0f + 3 * std::ldexp(1.0f, -11);
  Tensor h = run("Cast", {f32({3}, {tie, tie3, 70000.0f})}, cast_to(DataType::kFloat16));
  const uint16_t* hb = static_cast<const uint16_t*>(h.raw());
  EXPECT_EQ(hb[0], 0x3c00);  // ties to even: 1.0
  EXPECT_EQ(hb[1], 0x3c02);  // 1 + 2^-9
  EXPECT_EQ(hb[2], 0x7c00);  // overflow: inf
  // From double, rounded once (a double rounding through float would give 0x3c00).
  Tensor hd = run("Cast", {f64({1}, {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)})}, cast_to(DataType::kFloat16));
  EXPECT_EQ(static_cast<const uint16_t*>(hd.raw())[0], 0x3c01);
  Tensor bf = run("Cast", {f32({1}, {1.0f + 3 * std::ldexp(1.0f, -8)})}, cast_to(DataType::kBFloat16));
  EXPECT_EQ(static_cast<const uint16_t*>(bf.raw())[0], 0x3f82);
  // Float to int truncates toward zero.
  EXPECT_EQ(values<int32_t>(run("Cast", {f32({4}, {2.7f, -2.7f, -0.5f, 7.0f})}, cast_to(DataType::kInt32))),
            (std::vector<int32_t>{2, -2, 0, 7}));
  EXPECT_EQ(values<int64_t>(run("Cast", {f64({2}, {-1e10, 3.99})}, cast_to(DataType::kInt64))),
            (std::vector<int64_t>{-10000000000LL, 3}));
  EXPECT_EQ(values<bool>(run("Cast", {f32({3}, {0, 0.5f, -1})}, cast_to(DataType::kBool))),
            (std::vector<bool>{false, true, true}));
  EXPECT_EQ(as_doubles(run("Cast", {make(DataType::kFloat16, {1}, {-2.5})}, cast_to(DataType::kInt8))),
            (std::vector<double>{-2}));
  EXPECT_EQ(as_doubles(run("Cast", {make(DataType::kUInt8, {1}, {200})}, cast_to(DataType::kInt8))),
            (std::vector<double>{-56}));  // modular, as static_cast
  EXPECT_EQ(values<float>(run("Cast", {i64({1}, {16777217})}, cast_to(DataType::kFloat32))),
            (std::vector<float>{16777216.0f}));
}

// =================================== reductions ==================================================

Attrs keep(int k) { return {{"keepdims", static_cast<int64_t>(k)}}; }

// ai.otter.ReduceSumF32 (made by cast-elimination) is ReduceSum of the input widened to float32,
// bit for bit: the same double sums in the same order, one read of the half input. Sums of
// many values of both signs, over inner, outer and all axes, long runs split across threads.
TEST(ReduceTest, SumF32OfAHalfInputIsTheSumOfItsCast) {
  std::vector<double> v(8 * 37 * 600);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i)) * (1 + i % 13);
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const Tensor x = make(t, {8, 37, 600}, v);
    Tensor wide(DataType::kFloat32, x.dims());
    for (int64_t i = 0; i < x.numel(); ++i) wide.data<float>()[i] = static_cast<float>(x.get_as_double(i));
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0, 1}, {2}, {1}, {}}) {
      const Tensor ax = i64({static_cast<int64_t>(axes.size())}, axes);
      OpCall c{"ReduceSumF32", {x, ax}, keep(0), 1, 1, kOtterDomain};
      const Tensor got = run_op(c)[0];
      const Tensor want = run("ReduceSum", {wide, ax}, keep(0));
      ASSERT_EQ(got.dtype(), DataType::kFloat32);
      ASSERT_EQ(got.dims(), want.dims());
      EXPECT_TRUE(got.bitwise_equal(want)) << dtype_name(t) << " over " << axes.size() << " axes";
    }
  }
}

TEST(ReduceTest, SumAxesInput) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = run("ReduceSum", {x, i64s({1})}, keep(0));
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{6, 15}));
  Tensor k = run("ReduceSum", {x, i64s({1})});
  EXPECT_EQ(k.dims(), (std::vector<int64_t>{2, 1}));
  Tensor n = run("ReduceSum", {x, i64s({-2})}, keep(0));
  EXPECT_EQ(values<float>(n), (std::vector<float>{5, 7, 9}));
  Tensor all = run("ReduceSum", {x}, keep(0));
  EXPECT_EQ(all.rank(), 0);
  EXPECT_EQ(values<float>(all), (std::vector<float>{21}));
  Tensor all_k = run("ReduceSum", {x, i64({0}, {})});
  EXPECT_EQ(all_k.dims(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(values<float>(all_k), (std::vector<float>{21}));
  Attrs noop = {{"noop_with_empty_axes", int64_t{1}}};
  EXPECT_TRUE(run("ReduceSum", {x}, noop).bitwise_equal(x));
  EXPECT_EQ(values<int64_t>(run("ReduceSum", {i64({2, 2}, {1, 2, 3, 4}), i64s({0})}, keep(0))),
            (std::vector<int64_t>{4, 6}));
  EXPECT_THROW(run("ReduceSum", {x, i64s({2})}), Error);
}

TEST(ReduceTest, NonContiguousAxesMatchNaiveLoops) {
  const int A = 3, B = 4, C = 5, D = 6;
  std::vector<double> x(A * B * C * D);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.37 * i);
  // Reduce axes {0, 2}: result [B, D].
  Tensor y = run("ReduceSum", {f64({A, B, C, D}, x), i64s({0, -2})}, keep(0));
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{B, D}));
  for (int b = 0; b < B; ++b)
    for (int d = 0; d < D; ++d) {
      double s = 0;
      for (int a = 0; a < A; ++a)
        for (int c = 0; c < C; ++c) s += x[((a * B + b) * C + c) * D + d];
      EXPECT_NEAR(y.data<double>()[b * D + d], s, 1e-12);
    }
  // Reduce axes {1, 3} with keepdims: [A, 1, C, 1], max.
  Tensor m = run("ReduceMax", {f64({A, B, C, D}, x), i64s({1, 3})}, {}, 18);
  ASSERT_EQ(m.dims(), (std::vector<int64_t>{A, 1, C, 1}));
  for (int a = 0; a < A; ++a)
    for (int c = 0; c < C; ++c) {
      double mx = -1e9;
      for (int b = 0; b < B; ++b)
        for (int d = 0; d < D; ++d) mx = std::max(mx, x[((a * B + b) * C + c) * D + d]);
      EXPECT_EQ(m.data<double>()[a * C + c], mx);
    }
}

TEST(ReduceTest, MeanAndMaxAxesAttributeBefore18InputAfter) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Attrs a = {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}};
  EXPECT_EQ(values<float>(run("ReduceMean", {x}, a, 17)), (std::vector<float>{2, 3}));
  EXPECT_EQ(values<float>(run("ReduceMean", {x, i64s({1})}, keep(0), 18)), (std::vector<float>{1.5f, 3.5f}));
  EXPECT_EQ(values<float>(run("ReduceMax", {x}, a, 13)), (std::vector<float>{3, 4}));
  EXPECT_EQ(values<float>(run("ReduceMax", {x, i64s({-1})}, keep(0), 18)), (std::vector<float>{2, 4}));
  EXPECT_EQ(values<float>(run("ReduceMin", {x, i64s({-1})}, keep(0), 18)), (std::vector<float>{1, 3}));
  EXPECT_EQ(values<double>(run("ReduceMean", {f64({3}, {1, 2, 6})}, keep(0), 18)), (std::vector<double>{3}));
  EXPECT_EQ(values<int64_t>(run("ReduceMax", {i64({3}, {-5, 9, 2})}, keep(0), 18)), (std::vector<int64_t>{9}));
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(values<float>(run("ReduceMax", {f32({3}, {1, nan, 2})}, keep(0), 18))[0]));
}

TEST(ReduceTest, SumSquareAndL2) {
  Tensor x = f32({2, 2}, {3, 4, -1, 2});
  Attrs a = {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}};
  EXPECT_EQ(values<float>(run("ReduceSumSquare", {x}, a, 17)), (std::vector<float>{25, 5}));
  Tensor l2 = run("ReduceL2", {x}, a, 17);
  EXPECT_EQ(l2.data<float>()[0], 5.0f);
  EXPECT_NEAR(l2.data<float>()[1], std::sqrt(5.0), 1e-6);
}

TEST(ReduceTest, EmptyInputs) {
  Tensor x = f32({0, 3}, {});
  EXPECT_EQ(values<float>(run("ReduceSum", {x, i64s({0})}, keep(0))), (std::vector<float>{0, 0, 0}));
  Tensor mean = run("ReduceMean", {x, i64s({0})}, keep(0), 18);  // numpy: nan (0/0)
  ASSERT_EQ(mean.numel(), 3);
  EXPECT_TRUE(std::isnan(mean.data<float>()[0]));
  Tensor mx = run("ReduceMax", {x, i64s({0})}, keep(0), 18);  // ONNX 18: -inf for an empty set
  EXPECT_EQ(mx.data<float>()[0], -std::numeric_limits<float>::infinity());
  Tensor none = run("ReduceSum", {x, i64s({1})}, keep(0));
  EXPECT_EQ(none.dims(), (std::vector<int64_t>{0}));
  EXPECT_EQ(values<float>(run("ReduceSum", {x}, keep(0))), (std::vector<float>{0}));
}

TEST(ReduceTest, LongFloat32SumIsAccurate) {
  // 1e6 copies of 0.1f: a float running sum drifts by ~1% here; the double accumulator must not.
  const int n = 1000000;
  std::vector<float> x(n, 0.1f);
  double exact = n * static_cast<double>(0.1f);
  Tensor y = run("ReduceSum", {f32({n}, x)}, keep(0));
  EXPECT_NEAR(y.data<float>()[0], exact, exact * 1e-6);
  // 1e5 values of mixed sign and magnitude, against a double sum, within 1e-5 relative.
  std::vector<float> z(100000);
  double ref = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    z[i] = static_cast<float>(std::sin(i * 0.001) * 1000 + 3);
    ref += z[i];
  }
  Tensor s = run("ReduceSum", {f32({1, 100000}, z), i64s({1})}, keep(0));
  EXPECT_NEAR(s.data<float>()[0], ref, std::abs(ref) * 1e-5);
  // Half input: 4096 ones sum to 4096 (a half running sum sticks at 2048).
  Tensor h = run("ReduceSum", {make(DataType::kFloat16, {4096}, std::vector<double>(4096, 1.0))}, keep(0));
  EXPECT_EQ(h.get_as_double(0), 4096.0);
}

TEST(ReduceTest, ThreadedShapesMatchNaive) {
  // Few long rows (split inside the row), many rows, and a column reduction (inner > 1).
  for (auto [rows, cols] : std::vector<std::pair<int, int>>{{1, 300000}, {3, 70000}, {5000, 40}}) {
    std::vector<double> x(static_cast<size_t>(rows) * cols);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.01 * i) + 0.5;
    Tensor t = f64({rows, cols}, x);
    Tensor r = run("ReduceSum", {t, i64s({1})}, keep(0));
    Tensor c = run("ReduceMax", {t, i64s({0})}, keep(0), 18);
    for (int i = 0; i < rows; ++i) {
      double s = 0;
      for (int j = 0; j < cols; ++j) s += x[static_cast<size_t>(i) * cols + j];
      ASSERT_NEAR(r.data<double>()[i], s, 1e-9 * std::abs(s));
    }
    for (int j = 0; j < cols; ++j) {
      double m = -1e9;
      for (int i = 0; i < rows; ++i) m = std::max(m, x[static_cast<size_t>(i) * cols + j]);
      ASSERT_EQ(c.data<double>()[j], m);
    }
  }
}

// =================================== shape ops ===================================================

std::vector<float> iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(ShapeTest, ReshapeAliasesInput) {
  Tensor x = f32({2, 3, 4}, iota(24));
  Tensor y = run("Reshape", {x, i64s({0, -1})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(y.raw(), x.raw());
  EXPECT_EQ(run("Reshape", {x, i64s({-1, 3, 2})}).dims(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_THROW(run("Reshape", {x, i64s({5, -1})}), Error);
  EXPECT_THROW(run("Reshape", {x, i64s({-1, -1})}), Error);
  // allowzero: a 0 is a real zero-sized dim.
  Tensor e = f32({0, 4}, {});
  EXPECT_EQ(run("Reshape", {e, i64s({4, 0})}, {{"allowzero", int64_t{1}}}, 14).dims(), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(run("Reshape", {e, i64s({0, 2, 2})}, {}, 14).dims(), (std::vector<int64_t>{0, 2, 2}));
}

TEST(ShapeTest, FlattenSqueezeUnsqueezeIdentity) {
  Tensor x = f32({2, 3, 4}, iota(24));
  EXPECT_EQ(run("Flatten", {x}).dims(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(run("Flatten", {x}, {{"axis", int64_t{0}}}).dims(), (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(run("Flatten", {x}, {{"axis", int64_t{-1}}}).dims(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(run("Flatten", {x}, {{"axis", int64_t{3}}}).dims(), (std::vector<int64_t>{24, 1}));
  Tensor s = f32({1, 3, 1, 2}, iota(6));
  EXPECT_EQ(run("Squeeze", {s}).dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(run("Squeeze", {s, i64s({-2})}).dims(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_THROW(run("Squeeze", {s, i64s({1})}), Error);
  Tensor u = run("Unsqueeze", {f32({3}, {1, 2, 3}), i64s({-1, 0})});
  EXPECT_EQ(u.dims(), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(values<float>(u), (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(run("Unsqueeze", {f32({3}, {1, 2, 3}), i64s({0, 0})}), Error);
  Tensor id = run("Identity", {x});
  EXPECT_EQ(id.raw(), x.raw());
  EXPECT_EQ(id.dims(), x.dims());
}

TEST(ShapeTest, Transpose) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor t = run("Transpose", {x});
  EXPECT_EQ(t.dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values<float>(t), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // 3-D with several permutations, against naive indexing.
  const int64_t D[3] = {3, 4, 5};
  std::vector<float> v = iota(60);
  for (auto perm : std::vector<std::vector<int64_t>>{{2, 0, 1}, {1, 0, 2}, {0, 2, 1}, {2, 1, 0}, {0, 1, 2}}) {
    Tensor y = run("Transpose", {f32({3, 4, 5}, v)}, {{"perm", perm}});
    int64_t od[3] = {D[perm[0]], D[perm[1]], D[perm[2]]};
    ASSERT_EQ(y.dims(), (std::vector<int64_t>{od[0], od[1], od[2]}));
    for (int64_t i = 0; i < od[0]; ++i)
      for (int64_t j = 0; j < od[1]; ++j)
        for (int64_t k = 0; k < od[2]; ++k) {
          int64_t idx[3];
          idx[perm[0]] = i;
          idx[perm[1]] = j;
          idx[perm[2]] = k;
          ASSERT_EQ(y.data<float>()[(i * od[1] + j) * od[2] + k], v[(idx[0] * 4 + idx[1]) * 5 + idx[2]]);
        }
  }
  // Large 2-D (tiles with ragged edges), in int64 and in a 2-byte type.
  const int R = 130, C = 77;
  std::vector<int64_t> w(R * C);
  for (int i = 0; i < R * C; ++i) w[i] = i * 7 - 3;
  Tensor big = run("Transpose", {i64({R, C}, w)});
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) ASSERT_EQ(big.data<int64_t>()[j * R + i], w[i * C + j]);
  // 2-byte elements take 8 x 8 blocks (kernels/cpu/movement.cc): ragged 2-D tiles, and the
  // batched perm [0, 2, 3, 1] of attention's K, each against naive indexing.
  std::vector<double> hv(R * C);
  for (int i = 0; i < R * C; ++i) hv[i] = (i * 7) % 256 - 128;  // exact in fp16 and bf16
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    Tensor bh = run("Transpose", {make(t, {R, C}, hv)});
    const std::vector<double> got = as_doubles(bh);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) ASSERT_EQ(got[j * R + i], hv[i * C + j]) << dtype_name(t);
  }
  const int64_t B4 = 3, S4 = 37, H4 = 2, D4 = 41;
  std::vector<double> kv(B4 * S4 * H4 * D4);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<double>((i * 13) % 255) - 127;
  const std::vector<double> kt = as_doubles(
      run("Transpose", {make(DataType::kBFloat16, {B4, S4, H4, D4}, kv)}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}));
  for (int64_t b = 0; b < B4; ++b)
    for (int64_t s = 0; s < S4; ++s)
      for (int64_t h = 0; h < H4; ++h)
        for (int64_t d = 0; d < D4; ++d)
          ASSERT_EQ(kt[((b * H4 + h) * D4 + d) * S4 + s], kv[((b * S4 + s) * H4 + h) * D4 + d]);
  Tensor h = run("Transpose", {make(DataType::kFloat16, {2, 1, 3}, {1, 2, 3, 4, 5, 6})}, {{"perm", std::vector<int64_t>{2, 1, 0}}});
  EXPECT_EQ(h.dims(), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(as_doubles(h), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_THROW(run("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 0}}}), Error);
}

TEST(ShapeTest, Concat) {
  Tensor a = f32({2, 1}, {1, 2}), b = f32({2, 2}, {3, 4, 5, 6}), e = f32({2, 0}, {});
  Tensor y = run("Concat", {a, e, b}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 3, 4, 2, 5, 6}));
  Tensor z = run("Concat", {i64s({1, 2}), i64s({}), i64s({3})}, {{"axis", int64_t{0}}});
  EXPECT_EQ(values<int64_t>(z), (std::vector<int64_t>{1, 2, 3}));
  Tensor d = run("Concat", {f64({1, 2}, {1, 2}), f64({2, 2}, {3, 4, 5, 6})}, {{"axis", int64_t{0}}});
  EXPECT_EQ(values<double>(d), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(run("Concat", {a, f32({3, 1}, {1, 2, 3})}, {{"axis", int64_t{1}}}), Error);
}

TEST(ShapeTest, Split) {
  Tensor x = f32({2, 5}, iota(10));
  auto s = run_n("Split", {x, i64s({2, 3})}, 2, {{"axis", int64_t{1}}});
  EXPECT_EQ(s[0].dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<float>(s[0]), (std::vector<float>{0, 1, 5, 6}));
  EXPECT_EQ(values<float>(s[1]), (std::vector<float>{2, 3, 4, 7, 8, 9}));
  auto eq = run_n("Split", {x}, 2);  // equal split of axis 0
  EXPECT_EQ(values<float>(eq[1]), (std::vector<float>{5, 6, 7, 8, 9}));
  auto n = run_n("Split", {x}, 3, {{"axis", int64_t{-1}}, {"num_outputs", int64_t{3}}}, 18);
  EXPECT_EQ(n[0].dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(n[2].dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values<float>(n[2]), (std::vector<float>{4, 9}));
  EXPECT_THROW(run_n("Split", {x}, 3, {{"axis", int64_t{1}}}), Error);  // uneven without num_outputs
  EXPECT_THROW(run_n("Split", {x, i64s({2, 2})}, 2, {{"axis", int64_t{1}}}), Error);
}

TEST(ShapeTest, Slice) {
  Tensor x = f32({2, 4}, iota(8));
  EXPECT_EQ(values<float>(run("Slice", {x, i64s({0, 1}), i64s({2, 3})})), (std::vector<float>{1, 2, 5, 6}));
  EXPECT_EQ(values<float>(run("Slice", {x, i64s({1}), i64s({1000}), i64s({1}), i64s({2})})),
            (std::vector<float>{1, 3, 5, 7}));
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(values<float>(run("Slice", {x, i64s({-1}), i64s({lo}), i64s({-1}), i64s({-1})})),
            (std::vector<float>{3, 2, 1, 0, 7, 6, 5, 4}));
  EXPECT_EQ(values<float>(run("Slice", {x, i64s({10}), i64s({0}), i64s({1}), i64s({-2})})),
            (std::vector<float>{3, 1, 7, 5}));  // start clamped to dim-1
  EXPECT_EQ(values<float>(run("Slice", {x, i64s({hi, 0}), i64s({lo, 4}), i64s({0, 1}), i64s({-1, 3})})),
            (std::vector<float>{4, 7, 0, 3}));  // hi clamps to dim-1, lo to -1 under a negative step
  Tensor empty = run("Slice", {x, i64s({3}), i64s({1}), i64s({1})});
  EXPECT_EQ(empty.dims(), (std::vector<int64_t>{2, 0}));
  Tensor from_empty = run("Slice", {f32({0, 3}, {}), i64s({1}), i64s({3}), i64s({1})});
  EXPECT_EQ(from_empty.dims(), (std::vector<int64_t>{0, 2}));
  Tensor i32idx = run("Slice", {i64({5}, {1, 2, 3, 4, 5}), i32({1}, {1}), i32({1}, {-1})});
  EXPECT_EQ(values<int64_t>(i32idx), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_THROW(run("Slice", {x, i64s({0}), i64s({1}), i64s({0}), i64s({0})}), Error);
}

TEST(ShapeTest, Gather) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = run("Gather", {x, i64s({-1, 0})}, {{"axis", int64_t{1}}});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{3, 1, 6, 4}));
  Tensor z = run("Gather", {f64({3, 2}, {1, 2, 3, 4, 5, 6}), i32({2, 2}, {1, 0, 1, 2})});
  EXPECT_EQ(z.dims(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(values<double>(z), (std::vector<double>{3, 4, 1, 2, 3, 4, 5, 6}));
  Tensor s = run("Gather", {i64s({10, 20, 30}), i64scalar(-2)});
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(values<int64_t>(s), (std::vector<int64_t>{20}));
  try {
    run("Gather", {x, i64s({0, 5})}, {{"axis", int64_t{1}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 5"), std::string::npos) << e.what();
  }
}

TEST(ShapeTest, ExpandAndTile) {
  Tensor y = run("Expand", {f32({3, 1}, {1, 2, 3}), i64s({2, 1, 4})});
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 3, 4}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(y.data<float>()[(i * 3 + j) * 4 + k], j + 1.0f);
  EXPECT_EQ(run("Expand", {f32({2, 3}, iota(6)), i64s({3})}).dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(run("Expand", {f32({2, 3}, iota(6)), i64s({2})}), Error);
  Tensor t = run("Tile", {f32({2, 2}, {1, 2, 3, 4}), i64s({2, 3})});
  EXPECT_EQ(t.dims(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(values<float>(t), (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                                  1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_EQ(values<int64_t>(run("Tile", {i64s({5, 6}), i64s({2})})), (std::vector<int64_t>{5, 6, 5, 6}));
  EXPECT_EQ(run("Tile", {f32({2, 2}, {1, 2, 3, 4}), i64s({0, 1})}).dims(), (std::vector<int64_t>{0, 2}));
}

TEST(ShapeTest, Pad) {
  Tensor x = f32({3}, {1, 2, 3});
  auto pad = [&](const std::string& mode, std::vector<int64_t> pads) {
    return values<float>(run("Pad", {x, i64s(pads)}, {{"mode", mode}}, 19));
  };
  EXPECT_EQ(pad("reflect", {2, 2}), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(pad("edge", {2, 2}), (std::vector<float>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(pad("wrap", {2, 2}), (std::vector<float>{2, 3, 1, 2, 3, 1, 2}));
  EXPECT_EQ(pad("reflect", {5, 0}), (std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3}));  // repeated reflection
  EXPECT_EQ(values<float>(run("Pad", {x, i64s({2, 1}), Tensor::scalar(9.0f)})), (std::vector<float>{9, 9, 1, 2, 3, 9}));
  EXPECT_EQ(values<float>(run("Pad", {x, i64s({-1, 1})})), (std::vector<float>{2, 3, 0}));  // negative pad crops
  Tensor m = f32({2, 2}, {1, 2, 3, 4});
  Tensor c = run("Pad", {m, i64s({1, 0, 0, 1})});
  EXPECT_EQ(c.dims(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(values<float>(c), (std::vector<float>{0, 0, 0, 1, 2, 0, 3, 4, 0}));
  Tensor r = run("Pad", {f64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), i64s({1, 1, 1, 1})}, {{"mode", "reflect"}});
  EXPECT_EQ(values<double>(r), (std::vector<double>{5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5,
                                                    8, 7, 8, 9, 8, 5, 4, 5, 6, 5}));
  // Opset 18: axes input selects the padded axes.
  Tensor ax = run("Pad", {m, i64s({1, 2}), Tensor::scalar(7.0f), i64s({-1})}, {}, 18);
  EXPECT_EQ(ax.dims(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(values<float>(ax), (std::vector<float>{7, 1, 2, 7, 7, 7, 3, 4, 7, 7}));
  Tensor ip = run("Pad", {i64({2}, {1, 2}), i64s({1, 1}), i64scalar(-1)});
  EXPECT_EQ(values<int64_t>(ip), (std::vector<int64_t>{-1, 1, 2, -1}));
}

TEST(ShapeTest, ShapeSizeConstants) {
  Tensor x = f32({2, 3, 4}, iota(24));
  EXPECT_EQ(values<int64_t>(run("Shape", {x})), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(values<int64_t>(run("Shape", {x}, {{"start", int64_t{-2}}}, 15)), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(values<int64_t>(run("Shape", {x}, {{"start", int64_t{1}}, {"end", int64_t{-1}}}, 15)), (std::vector<int64_t>{3}));
  EXPECT_EQ(values<int64_t>(run("Shape", {x}, {{"start", int64_t{5}}}, 15)), (std::vector<int64_t>{}));
  Tensor sz = run("Size", {x});
  EXPECT_EQ(sz.rank(), 0);
  EXPECT_EQ(values<int64_t>(sz), (std::vector<int64_t>{24}));
  Tensor z = run("ConstantOfShape", {i64s({2, 2})});
  EXPECT_EQ(z.dtype(), DataType::kFloat32);
  EXPECT_EQ(values<float>(z), (std::vector<float>{0, 0, 0, 0}));
  Tensor o = run("ConstantOfShape", {i64s({3})}, {{"value", i64({1}, {7})}});
  EXPECT_EQ(values<int64_t>(o), (std::vector<int64_t>{7, 7, 7}));
  EXPECT_EQ(run("ConstantOfShape", {i64s({0})}).numel(), 0);
  EXPECT_EQ(values<float>(run("Constant", {}, {{"value", f32({2}, {1.5f, 2.5f})}})), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(values<float>(run("Constant", {}, {{"value_floats", std::vector<float>{1, 2}}})), (std::vector<float>{1, 2}));
  Tensor vf = run("Constant", {}, {{"value_float", 3.0f}});
  EXPECT_EQ(vf.rank(), 0);
  EXPECT_EQ(values<float>(vf), (std::vector<float>{3}));
  EXPECT_EQ(values<int64_t>(run("Constant", {}, {{"value_int", int64_t{4}}})), (std::vector<int64_t>{4}));
  EXPECT_EQ(values<int64_t>(run("Constant", {}, {{"value_ints", std::vector<int64_t>{4, 5}}})), (std::vector<int64_t>{4, 5}));
}

TEST(ShapeTest, Range) {
  EXPECT_EQ(values<float>(run("Range", {Tensor::scalar(0.0f), Tensor::scalar(1.0f), Tensor::scalar(0.25f)})),
            (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(values<double>(run("Range", {Tensor::scalar(1.0), Tensor::scalar(-1.0), Tensor::scalar(-0.75)})),
            (std::vector<double>{1, 0.25, -0.5}));
  EXPECT_EQ(values<int64_t>(run("Range", {i64scalar(10), i64scalar(1), i64scalar(-3)})), (std::vector<int64_t>{10, 7, 4}));
  EXPECT_EQ(values<int32_t>(run("Range", {Tensor::scalar<int32_t>(0), Tensor::scalar<int32_t>(5), Tensor::scalar<int32_t>(2)})),
            (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(run("Range", {i64scalar(1), i64scalar(1), i64scalar(1)}).numel(), 0);
  EXPECT_EQ(run("Range", {i64scalar(5), i64scalar(1), i64scalar(1)}).numel(), 0);
  EXPECT_THROW(run("Range", {i64scalar(0), i64scalar(1), i64scalar(0)}), Error);
}

TEST(ShapeTest, Trilu) {
  Tensor x = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(values<float>(run("Trilu", {x})), (std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_EQ(values<float>(run("Trilu", {x, i64scalar(1)})), (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  Attrs lower = {{"upper", int64_t{0}}};
  EXPECT_EQ(values<float>(run("Trilu", {x}, lower)), (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(values<float>(run("Trilu", {x, i64scalar(-1)}, lower)), (std::vector<float>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  // Batched, non-square, int64.
  Tensor b = run("Trilu", {i64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), i64scalar(-1)});
  EXPECT_EQ(values<int64_t>(b), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  Tensor c = run("Trilu", {i64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), i64scalar(2)});
  EXPECT_EQ(values<int64_t>(c), (std::vector<int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 9, 0, 0, 0}));
}

}  // namespace
}  // namespace otter
