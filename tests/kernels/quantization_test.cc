// CPU kernels of the quantization ops (kernels/cpu/quantization.cc) on the edge cases the ONNX node
// tests (tests/conformance) leave out: saturation at the int8/uint8 bounds, ties rounding to even,
// per-axis parameters, per-row/per-column zero points, padding that reads as the zero point, and
// clear errors for mismatched parameter shapes. Every expected value is worked out by hand from the
// ONNX formulas, y = saturate(round_half_even(x / scale) + zero_point) and
// x = (q - zero_point) * scale, in the comments next to it.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "graph/op_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

using testing::OpCall;
using testing::run_error;
using testing::run_op;
using testing::values;

template <typename T>
Tensor T_(std::vector<int64_t> dims, std::vector<T> v) {
  return Tensor::from_vector<T>(std::move(dims), v);
}


TEST(QuantizeLinear, SaturatesAtUint8Bounds) {
  // zero point 128, scale 1: 127 + 128 = 255; 128 + 128 = 256 -> 255; -128 + 128 = 0;
  // -129 + 128 = -1 -> 0; 1e9 -> 255; -inf -> 0; +inf -> 255.
  const float inf = std::numeric_limits<float>::infinity();
  auto y = run_op({"QuantizeLinear",
                   {T_<float>({7}, {127, 128, -128, -129, 1e9f, -inf, inf}), Tensor::scalar<float>(1.0f),
                    Tensor::scalar<uint8_t>(128)},
                   {},
                   1,
                   13});
  EXPECT_EQ(y[0].dtype(), DataType::kUInt8);
  EXPECT_EQ(values<uint8_t>(y[0]), (std::vector<uint8_t>{255, 255, 0, 0, 255, 0, 255}));
}

TEST(QuantizeLinear, SaturatesAtInt8Bounds) {
  // zero point 10, scale 1: 117 + 10 = 127; 117.5 -> 118 (even) + 10 = 128 -> 127;
  // -138 + 10 = -128; -138.5 -> -138 (even) + 10 = -128; -139 + 10 = -129 -> -128; 300 -> 127.
  auto y = run_op({"QuantizeLinear",
                   {T_<float>({6}, {117, 117.5f, -138, -138.5f, -139, 300}), Tensor::scalar<float>(1.0f),
                    Tensor::scalar<int8_t>(10)},
                   {},
                   1,
                   13});
  EXPECT_EQ(y[0].dtype(), DataType::kInt8);
  EXPECT_EQ(values<int8_t>(y[0]), (std::vector<int8_t>{127, 127, -128, -128, -128, 127}));
}

TEST(QuantizeLinear, TiesRoundToEven) {
  // scale 2, zero point 10: x / 2 = 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4, -0.5 -> 0, -1.5 -> -2,
  // -2.5 -> -2; plus 10.
  auto y = run_op({"QuantizeLinear",
                   {T_<float>({7}, {1, 3, 5, 7, -1, -3, -5}), Tensor::scalar<float>(2.0f), Tensor::scalar<int8_t>(10)},
                   {},
                   1,
                   13});
  EXPECT_EQ(values<int8_t>(y[0]), (std::vector<int8_t>{10, 12, 12, 14, 10, 8, 8}));
  // Without a zero point the output is uint8 with zero point 0: 0.5 -> 0, 1.5 -> 2, 254.5 -> 254.
  auto u = run_op({"QuantizeLinear", {T_<float>({3}, {0.5f, 1.5f, 254.5f}), Tensor::scalar<float>(1.0f)}, {}, 1, 13});
  EXPECT_EQ(u[0].dtype(), DataType::kUInt8);
  EXPECT_EQ(values<uint8_t>(u[0]), (std::vector<uint8_t>{0, 2, 254}));
}

TEST(QuantizeLinear, PerAxis) {
  // x [2, 3], axis 1 (the default): column j uses scale {1, 2, 4}[j], zero point {0, 1, 2}[j].
  // Row 0: 1/1 + 0 = 1, 2/2 + 1 = 2, 4/4 + 2 = 3. Row 1: 3/1 + 0 = 3, -2/2 + 1 = 0, 10/4 = 2.5 -> 2, + 2 = 4.
  auto y = run_op({"QuantizeLinear",
                   {T_<float>({2, 3}, {1, 2, 4, 3, -2, 10}), T_<float>({3}, {1, 2, 4}), T_<uint8_t>({3}, {0, 1, 2})},
                   {},
                   1,
                   13});
  EXPECT_EQ(values<uint8_t>(y[0]), (std::vector<uint8_t>{1, 2, 3, 3, 0, 4}));
  // axis 0: row i uses scale {1, 10}[i]: 5 6 7 | 50/10 = 5, 60/10 = 6, 75/10 = 7.5 -> 8.
  auto r = run_op({"QuantizeLinear",
                   {T_<float>({2, 3}, {5, 6, 7, 50, 60, 75}), T_<float>({2}, {1, 10}), T_<uint8_t>({2}, {0, 0})},
                   {{"axis", Attribute(int64_t{0})}},
                   1,
                   13});
  EXPECT_EQ(values<uint8_t>(r[0]), (std::vector<uint8_t>{5, 6, 7, 5, 6, 8}));
  // axis -2 is axis 0 of a 2-D x: the same result.
  auto n = run_op({"QuantizeLinear",
                   {T_<float>({2, 3}, {5, 6, 7, 50, 60, 75}), T_<float>({2}, {1, 10}), T_<uint8_t>({2}, {0, 0})},
                   {{"axis", Attribute(int64_t{-2})}},
                   1,
                   13});
  EXPECT_EQ(values<uint8_t>(n[0]), (std::vector<uint8_t>{5, 6, 7, 5, 6, 8}));
}

TEST(DequantizeLinear, PerAxisAndInt32) {
  // x int8 [2, 2], axis 0: row 0 scale 0.5 zero -1: (1 + 1) * 0.5 = 1, (-1 + 1) * 0.5 = 0;
  // row 1 scale 2 zero 3: (3 - 3) * 2 = 0, (5 - 3) * 2 = 4.
  auto y = run_op({"DequantizeLinear",
                   {T_<int8_t>({2, 2}, {1, -1, 3, 5}), T_<float>({2}, {0.5f, 2}), T_<int8_t>({2}, {-1, 3})},
                   {{"axis", Attribute(int64_t{0})}},
                   1,
                   13});
  EXPECT_EQ(y[0].dtype(), DataType::kFloat32);
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{1, 0, 0, 4}));
  // uint8 extremes, zero point 128, scale 0.25: (0 - 128) / 4 = -32, (255 - 128) / 4 = 31.75.
  auto u = run_op({"DequantizeLinear",
                   {T_<uint8_t>({2}, {0, 255}), Tensor::scalar<float>(0.25f), Tensor::scalar<uint8_t>(128)},
                   {},
                   1,
                   13});
  EXPECT_EQ(values<float>(u[0]), (std::vector<float>{-32, 31.75f}));
  // int32 input without a zero point: 1000000 * 0.5 = 500000, -3 * 0.5 = -1.5.
  auto i = run_op({"DequantizeLinear", {T_<int32_t>({2}, {1000000, -3}), Tensor::scalar<float>(0.5f)}, {}, 1, 13});
  EXPECT_EQ(values<float>(i[0]), (std::vector<float>{500000, -1.5f}));
}

TEST(QuantizeLinear, MismatchedParameterShapesFail) {
  // 4 scales for an axis of 3.
  std::string e =
      run_error({"QuantizeLinear",
                {T_<float>({2, 3}, {0, 0, 0, 0, 0, 0}), T_<float>({4}, {1, 1, 1, 1}), T_<uint8_t>({4}, {0, 0, 0, 0})},
                {},
                1,
                13});
  EXPECT_NE(e.find("input 1 ('in1') is f32[4]; expected one element or one per index of axis 1 (3)"), std::string::npos)
      << e;
  // A zero point whose shape differs from the scale's.
  e = run_error({"DequantizeLinear",
                {T_<uint8_t>({2, 3}, {0, 0, 0, 0, 0, 0}), T_<float>({3}, {1, 1, 1}), Tensor::scalar<uint8_t>(0)},
                {},
                1,
                13});
  EXPECT_NE(e.find("the zero point must have the scale's shape"), std::string::npos) << e;
  // A blocked (2-D) scale.
  e = run_error({"DequantizeLinear", {T_<uint8_t>({2, 2}, {0, 0, 0, 0}), T_<float>({2, 2}, {1, 1, 1, 1})}, {}, 1, 13});
  EXPECT_NE(e.find("not blocked ones"), std::string::npos) << e;
}

TEST(QuantizationOps, BadOperandsFail) {
  // A float zero point would make y a float: otter quantizes to i8 / u8 only.
  std::string e = run_error({"QuantizeLinear",
                            {T_<float>({2}, {1, 2}), Tensor::scalar<float>(1.0f), Tensor::scalar<float>(0.0f)},
                            {},
                            1,
                            13});
  EXPECT_NE(e.find("output type f32 is not supported (i8 or u8)"), std::string::npos) << e;
  // axis 2 of a 2-D x.
  e = run_error({"DequantizeLinear",
                {T_<uint8_t>({2, 2}, {0, 0, 0, 0}), T_<float>({2}, {1, 1}), T_<uint8_t>({2}, {0, 0})},
                {{"axis", Attribute(int64_t{2})}},
                1,
                13});
  EXPECT_NE(e.find("axis 2 is out of range for rank 2"), std::string::npos) << e;
  // A zero point of another type than its operand.
  e = run_error({"MatMulInteger",
                {T_<int8_t>({1, 2}, {1, 2}), T_<int8_t>({2, 1}, {1, 2}), Tensor::scalar<uint8_t>(0)},
                {},
                1,
                13});
  EXPECT_NE(e.find("input 2 ('in2') is u8[]"), std::string::npos) << e;
  EXPECT_NE(e.find("(the types must match)"), std::string::npos) << e;
  // y's scale must be per tensor.
  e = run_error({"QLinearMatMul",
                {T_<uint8_t>({1, 1}, {1}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
                 T_<uint8_t>({1, 2}, {1, 1}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
                 T_<float>({2}, {1, 1}), Tensor::scalar<uint8_t>(0)},
                {},
                1,
                13});
  EXPECT_NE(e.find("input 6 ('in6') is f32[2]; expected one element (per tensor)"), std::string::npos) << e;
  // QLinearConv's bias must be i32 with one element per output channel (here 1).
  e = run_error({"QLinearConv",
                {T_<uint8_t>({1, 1, 1, 1}, {4}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
                 T_<uint8_t>({1, 1, 1, 1}, {3}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
                 Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0), T_<int32_t>({2}, {1, 1})},
                {},
                1,
                13});
  EXPECT_NE(e.find("input 8 ('in8') is i32[2]; expected i32[1]"), std::string::npos) << e;
}

TEST(QuantizeLinear, ShapeInferenceRejectsUnsupportedOutputType) {
  // output_dtype 17 is ONNX's FLOAT8E4M3FN, which otter does not have.
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2}));
  Value* s = g.add_input("s", DataType::kFloat32, Shape::of({}));
  Node* n = g.add_node("QuantizeLinear", {x, s}, {"y"});
  n->set_attr("output_dtype", Attribute(int64_t{17}));
  try {
    infer_node(*n);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attribute 'output_dtype' = 17 is not int8 or uint8"), std::string::npos)
        << e.what();
  }
}

TEST(QuantizeLinear, ShapeInferenceRejectsMismatchedScale) {
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.add_input("x", DataType::kFloat32, Shape::of({2, 3}));
  Value* s = g.add_input("s", DataType::kFloat32, Shape::of({4}));
  Node* n = g.add_node("QuantizeLinear", {x, s}, {"y"});
  try {
    infer_node(*n);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must have one element per index of axis 1"), std::string::npos) << e.what();
  }
}

TEST(DynamicQuantizeLinear, RangeIncludesZero) {
  // min -1, max 254: scale (254 + 1) / 255 = 1, zero point round(0 - (-1) / 1) = 1; y = x + 1.
  auto y = run_op({"DynamicQuantizeLinear", {T_<float>({4}, {-1, 0, 1, 254})}, {}, 3, 13});
  EXPECT_EQ(values<uint8_t>(y[0]), (std::vector<uint8_t>{0, 1, 2, 255}));
  EXPECT_EQ(values<float>(y[1]), (std::vector<float>{1}));
  EXPECT_EQ(values<uint8_t>(y[2]), (std::vector<uint8_t>{1}));
  // Positive x: the range starts at 0: scale 510 / 255 = 2, zero point 0; 3 / 2 = 1.5 -> 2.
  auto p = run_op({"DynamicQuantizeLinear", {T_<float>({3}, {2, 3, 510})}, {}, 3, 13});
  EXPECT_EQ(values<uint8_t>(p[0]), (std::vector<uint8_t>{1, 2, 255}));
  EXPECT_EQ(values<float>(p[1]), (std::vector<float>{2}));
  EXPECT_EQ(values<uint8_t>(p[2]), (std::vector<uint8_t>{0}));
  // All zeros: scale 0, zero point 0, y 0 (no division by zero).
  auto z = run_op({"DynamicQuantizeLinear", {T_<float>({2}, {0, 0})}, {}, 3, 13});
  EXPECT_EQ(values<uint8_t>(z[0]), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(values<float>(z[1]), (std::vector<float>{0}));
}

TEST(MatMulInteger, PerRowAndPerColumnZeroPoints) {
  // A - a_zero (per row {10, 20}) = [[0, 10], [10, 20]]; B - b_zero (per column {1, 2}) =
  // [[0, 1], [1, 0]]. Y = [[10, 0], [20, 10]].
  auto y = run_op({"MatMulInteger",
                   {T_<uint8_t>({2, 2}, {10, 20, 30, 40}), T_<uint8_t>({2, 2}, {1, 3, 2, 2}),
                    T_<uint8_t>({2}, {10, 20}), T_<uint8_t>({2}, {1, 2})},
                   {},
                   1,
                   13});
  EXPECT_EQ(y[0].dtype(), DataType::kInt32);
  EXPECT_EQ(values<int32_t>(y[0]), (std::vector<int32_t>{10, 0, 20, 10}));
  // int8 extremes: (-128)(-128) + (127)(127) = 16384 + 16129 = 32513.
  auto e = run_op({"MatMulInteger", {T_<int8_t>({1, 2}, {-128, 127}), T_<int8_t>({2, 1}, {-128, 127})}, {}, 1, 13});
  EXPECT_EQ(values<int32_t>(e[0]), (std::vector<int32_t>{32513}));
}

TEST(QLinearMatMul, RequantizeSaturatesAndRoundsToEven) {
  // a = [5], b = [1, 3, 100]: int32 products 5, 15, 500; multiplier 1 * 1 / 2 = 0.5:
  // 2.5 -> 2, 7.5 -> 8, 250; plus y's zero point 10: 12, 18, 260 -> 255.
  auto y = run_op({"QLinearMatMul",
                   {T_<uint8_t>({1, 1}, {5}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
                    T_<uint8_t>({1, 3}, {1, 3, 100}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
                    Tensor::scalar<float>(2), Tensor::scalar<uint8_t>(10)},
                   {},
                   1,
                   13});
  EXPECT_EQ(values<uint8_t>(y[0]), (std::vector<uint8_t>{12, 18, 255}));
}

TEST(QLinearMatMul, PerRowAndPerColumnScales) {
  // a [2, 1] = {1, 2} with per-row scales {1, 2}; b [1, 2] = {3, 5} with per-column scales
  // {1, 0.5}; zero points 0, y_scale 1. Int products [[3, 5], [6, 10]]; multipliers
  // a_scale[i] * b_scale[j] = [[1, 0.5], [2, 1]]: [[3, 2.5 -> 2 (even)], [12, 10]].
  auto y = run_op({"QLinearMatMul",
                   {T_<uint8_t>({2, 1}, {1, 2}), T_<float>({2}, {1, 2}), T_<uint8_t>({2}, {0, 0}),
                    T_<uint8_t>({1, 2}, {3, 5}), T_<float>({2}, {1, 0.5f}), T_<uint8_t>({2}, {0, 0}),
                    Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0)},
                   {},
                   1,
                   13});
  EXPECT_EQ(values<uint8_t>(y[0]), (std::vector<uint8_t>{3, 2, 12, 10}));
}

TEST(ConvInteger, PaddingReadsAsZeroPoint) {
  // x - 1 = [[0, 1], [2, 3]], w = 2 (1x1), pads 1: a 4x4 output, 0 on the border (padding is
  // x's zero point, so x - zero = 0 there), 2 * (x - 1) inside.
  auto y =
      run_op({"ConvInteger",
              {T_<uint8_t>({1, 1, 2, 2}, {1, 2, 3, 4}), T_<uint8_t>({1, 1, 1, 1}, {2}), Tensor::scalar<uint8_t>(1)},
              {{"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}},
              1,
              13});
  EXPECT_EQ(values<int32_t>(y[0]), (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 2, 0, 0, 4, 6, 0, 0, 0, 0, 0}));
}

TEST(QLinearConv, PerChannelWeightsAndBias) {
  // x = [4] (1x1 image), x_zero 0, x_scale 1; two output channels, w = [3, 5] with zero points
  // {1, 0} and scales {1, 0.5}; B = [1, -2]; y_scale 1, y_zero 0 (int8).
  // channel 0: (4 * (3 - 1) + 1) * 1 * 1 / 1 = 9; channel 1: (4 * 5 - 2) * 0.5 = 9.
  auto y = run_op({"QLinearConv",
                   {T_<uint8_t>({1, 1, 1, 1}, {4}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
                    T_<uint8_t>({2, 1, 1, 1}, {3, 5}), T_<float>({2}, {1, 0.5f}), T_<uint8_t>({2}, {1, 0}),
                    Tensor::scalar<float>(1), Tensor::scalar<int8_t>(0), T_<int32_t>({2}, {1, -2})},
                   {},
                   1,
                   13});
  EXPECT_EQ(y[0].dtype(), DataType::kInt8);
  EXPECT_EQ(values<int8_t>(y[0]), (std::vector<int8_t>{9, 9}));
}

TEST(QuantizationOps, NotDifferentiable) {
  for (const char* op : {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                         "QLinearMatMul", "QLinearConv"}) {
    const OpDef* d = OpTable::instance().find("", op, 13);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_EQ(d->grad_kind, GradKind::kNotDifferentiable) << op;
    EXPECT_EQ(d->precision, PrecisionClass::kNone) << op;
  }
}

}  // namespace
}  // namespace otter
