// Finite-difference checks of every gradient rule (static and symbolic shapes), one test per rule
// and attribute variant that changes the math. Inputs that are indices, shapes, axes, labels or
// running statistics are constants (`fixed`); every float input that can carry a gradient is checked.
#include "tests/passes/gradcheck.h"

namespace otter::testing {
namespace {

using Ints = std::vector<int64_t>;

Attribute ints(Ints v) { return Attribute(std::move(v)); }
Tensor i64(Ints dims, Ints v) { return Tensor::from_vector<int64_t>(std::move(dims), v); }
Tensor f64(Ints dims, std::vector<double> v) { return Tensor::from_vector<double>(std::move(dims), v); }
Tensor boolean(Ints dims, std::vector<int> v) {
  Tensor t(DataType::kBool, std::move(dims));
  for (size_t k = 0; k < v.size(); ++k) t.data<bool>()[k] = v[k] != 0;
  return t;
}
Attribute int_attr(int64_t v) { return Attribute(v); }

// Uniform values in [lo, hi] for every input.
auto in_range(double lo, double hi) {
  return [lo, hi](int, std::mt19937_64& rng) { return uniform(rng, lo, hi); };
}

// Values in [-1, -lo] U [lo, 1]: away from the kink at 0 of Relu, Abs, LeakyRelu.
auto away_from_zero(double lo = 0.1) {
  return [lo](int, std::mt19937_64& rng) {
    double v = uniform(rng, lo, 1.0);
    return uniform(rng, 0, 1) < 0.5 ? -v : v;
  };
}

// ---- binary arithmetic ---------------------------------------------------------------------------
TEST(GradCheck, Add) { check_gradients_both({.op = "Add", .shapes = {{3, 4}, {4}}}); }
TEST(GradCheck, AddBothBroadcast) { check_gradients_both({.op = "Add", .shapes = {{3, 1, 4}, {2, 1}}}); }
TEST(GradCheck, Sub) { check_gradients_both({.op = "Sub", .shapes = {{3, 4}, {3, 1}}}); }
TEST(GradCheck, SubScalar) { check_gradients_both({.op = "Sub", .shapes = {{}, {2, 3}}}); }
TEST(GradCheck, Mul) { check_gradients_both({.op = "Mul", .shapes = {{3, 4}, {3, 1}}}); }
TEST(GradCheck, MulSame) { check_gradients_both({.op = "Mul", .shapes = {{2, 3, 4}, {2, 3, 4}}}); }
TEST(GradCheck, Div) {
  check_gradients_both({.op = "Div", .shapes = {{3, 4}, {4}}, .init = [](int i, std::mt19937_64& rng) {
    return i == 1 ? uniform(rng, 0.5, 2.0) : uniform(rng, -1, 1);
  }});
}

TEST(GradCheck, Pow) {
  check_gradients_both({.op = "Pow", .shapes = {{3, 4}, {4}}, .init = in_range(0.5, 2.0)});
}
TEST(GradCheck, PowIntegerExponent) {  // an int64 exponent carries no gradient
  check_gradients_both({.op = "Pow", .shapes = {{3, 4}, {}}, .fixed = {{1, i64({}, {3})}}});
}

// ---- unary math and activations -------------------------------------------------------------------
TEST(GradCheck, Sqrt) { check_gradients_both({.op = "Sqrt", .shapes = {{3, 4}}, .init = in_range(0.2, 2.0)}); }
TEST(GradCheck, Reciprocal) {
  check_gradients_both({.op = "Reciprocal", .shapes = {{3, 4}}, .init = away_from_zero(0.3)});
}
TEST(GradCheck, Exp) { check_gradients_both({.op = "Exp", .shapes = {{3, 4}}}); }
TEST(GradCheck, Log) { check_gradients_both({.op = "Log", .shapes = {{3, 4}}, .init = in_range(0.2, 2.0)}); }
TEST(GradCheck, Neg) { check_gradients_both({.op = "Neg", .shapes = {{3, 4}}}); }
TEST(GradCheck, Abs) { check_gradients_both({.op = "Abs", .shapes = {{3, 4}}, .init = away_from_zero()}); }
TEST(GradCheck, Erf) { check_gradients_both({.op = "Erf", .shapes = {{3, 4}}, .init = in_range(-2, 2)}); }
TEST(GradCheck, Tanh) { check_gradients_both({.op = "Tanh", .shapes = {{3, 4}}, .init = in_range(-2, 2)}); }
TEST(GradCheck, Sigmoid) { check_gradients_both({.op = "Sigmoid", .shapes = {{3, 4}}, .init = in_range(-3, 3)}); }
TEST(GradCheck, LeakyRelu) {
  check_gradients_both({.op = "LeakyRelu", .shapes = {{3, 4}}, .init = away_from_zero()});
  check_gradients_both({.op = "LeakyRelu", .shapes = {{3, 4}}, .attrs = {{"alpha", Attribute(0.3f)}},
                        .init = away_from_zero()});
}
TEST(GradCheck, GeluExact) {
  check_gradients_both({.op = "Gelu", .shapes = {{3, 4}}, .opset = 20, .init = in_range(-3, 3)});
}
TEST(GradCheck, GeluTanh) {
  check_gradients_both({.op = "Gelu", .shapes = {{3, 4}}, .attrs = {{"approximate", Attribute("tanh")}}, .opset = 20,
                        .init = in_range(-3, 3)});
}
TEST(GradCheck, Softplus) { check_gradients_both({.op = "Softplus", .shapes = {{3, 4}}, .init = in_range(-4, 4)}); }
TEST(GradCheck, Softsign) { check_gradients_both({.op = "Softsign", .shapes = {{3, 4}}, .init = in_range(-4, 4)}); }
// Clip with its bounds as differentiated inputs: values below min feed min's gradient, above max
// max's. Values stay 0.05 away from the bounds.
TEST(GradCheck, Clip) {
  auto init = [](int i, std::mt19937_64& rng) {
    if (i == 1) return -0.3;
    if (i == 2) return 0.4;
    double v = uniform(rng, -1, 1);
    return std::abs(v + 0.3) < 0.05 || std::abs(v - 0.4) < 0.05 ? v + 0.11 : v;
  };
  check_gradients_both({.op = "Clip", .shapes = {{4, 5}, {}, {}}, .init = init});
  check_gradients_both({.op = "Clip", .shapes = {{4, 5}, {}}, .init = init});
  check_gradients_both({.op = "Clip", .shapes = {{4, 5}}});
}
TEST(GradCheck, MinMax) {
  for (const char* op : {"Min", "Max"}) {
    check_gradients_both({.op = op, .shapes = {{3, 4}, {4}}});
    check_gradients_both({.op = op, .shapes = {{2, 3}, {2, 1}, {3}}});
    check_gradients_both({.op = op, .shapes = {{2, 3}}});
  }
}
TEST(GradCheck, SumMean) {
  for (const char* op : {"Sum", "Mean"}) {
    check_gradients_both({.op = op, .shapes = {{3, 4}, {4}}});
    check_gradients_both({.op = op, .shapes = {{2, 3}, {2, 1}, {3}}});
    check_gradients_both({.op = op, .shapes = {{2, 3}}});
  }
}
TEST(GradCheck, Where) {
  check_gradients_both({.op = "Where",
                        .shapes = {{}, {2, 3}, {3}},
                        .fixed = {{0, boolean({2, 3}, {1, 0, 1, 0, 0, 1})}}});
  check_gradients_both({.op = "Where", .shapes = {{}, {2, 1}, {2, 3}}, .fixed = {{0, boolean({3}, {0, 1, 1})}}});
}
// f64 -> f32: the gradient is cast back; differences in float32 need a wide step.
TEST(GradCheck, Cast) {
  check_gradients_both({.op = "Cast", .shapes = {{3, 4}}, .attrs = {{"to", int_attr(1)}}, .eps = 1e-2, .tol = 1e-4});
}

// ---- GEMM ---------------------------------------------------------------------------------------
TEST(GradCheck, Gemm) { check_gradients_both({.op = "Gemm", .shapes = {{3, 4}, {4, 5}, {5}}}); }
TEST(GradCheck, GemmTransB) {
  check_gradients_both({.op = "Gemm", .shapes = {{3, 4}, {5, 4}, {5}}, .attrs = {{"transB", Attribute(int64_t{1})}}});
}
TEST(GradCheck, GemmTransA) {
  check_gradients_both({.op = "Gemm", .shapes = {{4, 3}, {4, 5}, {3, 5}}, .attrs = {{"transA", Attribute(int64_t{1})}}});
}
TEST(GradCheck, GemmTransBothAlphaBeta) {
  check_gradients_both({.op = "Gemm",
                        .shapes = {{4, 3}, {5, 4}, {3, 1}},
                        .attrs = {{"transA", Attribute(int64_t{1})},
                                  {"transB", Attribute(int64_t{1})},
                                  {"alpha", Attribute(0.5f)},
                                  {"beta", Attribute(2.0f)}}});
}
TEST(GradCheck, GemmScalarCNoC) {
  check_gradients_both({.op = "Gemm", .shapes = {{3, 4}, {4, 2}, {}}, .attrs = {{"beta", Attribute(-1.5f)}}});
  check_gradients_both({.op = "Gemm", .shapes = {{3, 4}, {4, 2}}, .attrs = {{"alpha", Attribute(3.0f)}}});
}

// ---- MatMul -------------------------------------------------------------------------------------
TEST(GradCheck, MatMul2D) { check_gradients_both({.op = "MatMul", .shapes = {{3, 4}, {4, 5}}}); }
TEST(GradCheck, MatMulLinear3D) { check_gradients_both({.op = "MatMul", .shapes = {{2, 3, 4}, {4, 5}}}); }
TEST(GradCheck, MatMulBatched) { check_gradients_both({.op = "MatMul", .shapes = {{2, 3, 4, 5}, {2, 3, 5, 2}}}); }
TEST(GradCheck, MatMulBroadcastBatch) { check_gradients_both({.op = "MatMul", .shapes = {{2, 1, 3, 4}, {5, 4, 2}}}); }
TEST(GradCheck, MatMulVectorLeft) { check_gradients_both({.op = "MatMul", .shapes = {{4}, {2, 4, 3}}}); }
TEST(GradCheck, MatMulVectorRight) { check_gradients_both({.op = "MatMul", .shapes = {{2, 3, 4}, {4}}}); }
TEST(GradCheck, MatMulVectors) { check_gradients_both({.op = "MatMul", .shapes = {{4}, {4}}}); }

// ---- Einsum (graph/ops/einsum.cc): dY with the other operands; letters only one operand has expand --
Attribute eq(const char* e) { return Attribute(e); }
TEST(GradCheck, EinsumMatMul) { check_gradients_both({.op = "Einsum", .shapes = {{3, 4}, {4, 5}}, .attrs = {{"equation", eq("ij,jk->ik")}}}); }
TEST(GradCheck, EinsumBatchImplicit) { check_gradients_both({.op = "Einsum", .shapes = {{2, 3, 4}, {2, 4, 5}}, .attrs = {{"equation", eq("bij,bjk")}}}); }
TEST(GradCheck, EinsumSumAndTranspose) { check_gradients_both({.op = "Einsum", .shapes = {{3, 4, 2}}, .attrs = {{"equation", eq("ijk->ki")}}}); }
TEST(GradCheck, EinsumThreeOperands) { check_gradients_both({.op = "Einsum", .shapes = {{3, 4}, {4}, {4, 2}}, .attrs = {{"equation", eq("ij,j,jk->ik")}}}); }
TEST(GradCheck, EinsumEllipsis) { check_gradients({.op = "Einsum", .shapes = {{2, 3, 4}, {2, 3, 4, 5}}, .attrs = {{"equation", eq("...j,...jk->...k")}}}); }
// A batched operand against a shared one (the weight's gradient sums over the ellipsis dims).
TEST(GradCheck, EinsumSharedWeight) { check_gradients({.op = "Einsum", .shapes = {{2, 3, 4}, {4, 5}}, .attrs = {{"equation", eq("...ij,jk->...ik")}}}); }
TEST(GradCheck, EinsumOuterSummed) { check_gradients_both({.op = "Einsum", .shapes = {{3, 2}, {4}}, .attrs = {{"equation", eq("ij,k->i")}}}); }
// Equations the rule refuses: a diagonal, and ellipsis dims summed away; autodiff names the node.
TEST(GradCheck, EinsumRefusedEquations) {
  for (const auto& [e, why] : std::vector<std::pair<const char*, const char*>>{
           {"ii->i", "term 'ii' repeats letter 'i' (a diagonal)"}, {"...i->i", "term '...i' sums its ellipsis dims"}}) {
    try {
      check_gradients({.op = "Einsum", .shapes = {{3, 3}}, .attrs = {{"equation", eq(e)}}});
      ADD_FAILURE() << e << ": expected an error";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(str_cat("no gradient for this equation: ", why)), std::string::npos)
          << err.what();
    }
  }
}

// ---- activations used by the digits models --------------------------------------------------------
TEST(GradCheck, Relu) { check_gradients_both({.op = "Relu", .shapes = {{3, 5}}, .init = away_from_zero()}); }

// ---- softmax ------------------------------------------------------------------------------------
TEST(GradCheck, Softmax) {
  check_gradients_both({.op = "Softmax", .shapes = {{3, 5}}});
  check_gradients_both({.op = "Softmax", .shapes = {{2, 3, 4}}, .attrs = {{"axis", int_attr(1)}}});
  check_gradients_both({.op = "Softmax", .shapes = {{2, 3, 4}}, .attrs = {{"axis", int_attr(0)}}});
}
TEST(GradCheck, LogSoftmax) {
  check_gradients_both({.op = "LogSoftmax", .shapes = {{3, 5}}});
  check_gradients_both({.op = "LogSoftmax", .shapes = {{2, 3, 4}}, .attrs = {{"axis", int_attr(-2)}}});
}

// ---- views ----------------------------------------------------------------------------------------
TEST(GradCheck, Reshape) {
  check_gradients_both({.op = "Reshape", .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({2}, {0, -1})}}});
}
TEST(GradCheck, Flatten) {
  check_gradients_both({.op = "Flatten", .shapes = {{2, 3, 2, 2}}});
  check_gradients_both({.op = "Flatten", .shapes = {{2, 3, 2, 2}}, .attrs = {{"axis", Attribute(int64_t{2})}}});
}
TEST(GradCheck, Identity) { check_gradients_both({.op = "Identity", .shapes = {{2, 3}}}); }
TEST(GradCheck, Squeeze) {
  check_gradients_both({.op = "Squeeze", .shapes = {{3, 1, 4, 1}, {}}, .fixed = {{1, i64({2}, {1, -1})}}});
}
TEST(GradCheck, Unsqueeze) {
  check_gradients_both({.op = "Unsqueeze", .shapes = {{3, 4}, {}}, .fixed = {{1, i64({2}, {0, 3})}}});
}
TEST(GradCheck, Transpose) {
  check_gradients_both({.op = "Transpose", .shapes = {{2, 3, 4}}, .attrs = {{"perm", ints({1, 2, 0})}}});
  check_gradients_both({.op = "Transpose", .shapes = {{2, 3, 4}}});
}

// ---- data movement ---------------------------------------------------------------------------------
TEST(GradCheck, Concat) {
  check_gradients_both({.op = "Concat", .shapes = {{2, 3}, {2, 1}, {2, 2}}, .attrs = {{"axis", int_attr(1)}}});
  check_gradients_both({.op = "Concat", .shapes = {{2, 3}, {1, 3}}, .attrs = {{"axis", int_attr(0)}}});
  check_gradients_both({.op = "Concat", .shapes = {{2, 3}}, .attrs = {{"axis", int_attr(-1)}}});
}
TEST(GradCheck, Split) {
  check_gradients_both({.op = "Split", .shapes = {{2, 6}, {}}, .fixed = {{1, i64({3}, {1, 2, 3})}},
                        .attrs = {{"axis", int_attr(1)}}, .num_outputs = 3});
  // Only two of three outputs reach the loss: the third's part of the gradient is zero.
  check_gradients_both({.op = "Split", .shapes = {{6, 2}}, .num_outputs = 3, .checked_outputs = {0, 2}});
  check_gradients_both({.op = "Split", .shapes = {{2, 5}}, .attrs = {{"axis", int_attr(-1)}, {"num_outputs", int_attr(2)}},
                        .num_outputs = 2, .opset = 18});
}
TEST(GradCheck, Slice) {
  check_gradients_both({.op = "Slice", .shapes = {{4, 6}, {}, {}, {}, {}},
                        .fixed = {{1, i64({2}, {1, 0})}, {2, i64({2}, {3, 100})}, {3, i64({2}, {0, 1})},
                                  {4, i64({2}, {1, 2})}}});
  // Negative starts/ends and a negative step (reversal).
  check_gradients_both({.op = "Slice", .shapes = {{3, 7}, {}, {}, {}, {}},
                        .fixed = {{1, i64({1}, {-2})}, {2, i64({1}, {-100})}, {3, i64({1}, {-1})},
                                  {4, i64({1}, {-2})}}});
  check_gradients_both({.op = "Slice", .shapes = {{5, 2}, {}, {}},
                        .fixed = {{1, i64({1}, {1})}, {2, i64({1}, {-1})}}});
}
TEST(GradCheck, Gather) {
  // Embedding rows with repeated indices (the gradient adds up) and a negative index.
  check_gradients_both({.op = "Gather", .shapes = {{5, 3}, {}}, .fixed = {{1, i64({2, 3}, {0, 4, 0, -1, 2, 0})}}});
  check_gradients_both({.op = "Gather", .shapes = {{2, 4, 3}, {}}, .fixed = {{1, i64({2}, {3, 1})}},
                        .attrs = {{"axis", int_attr(1)}}});
  check_gradients_both({.op = "Gather", .shapes = {{2, 4}, {}}, .fixed = {{1, i64({}, {2})}},
                        .attrs = {{"axis", int_attr(-1)}}});
}
TEST(GradCheck, Expand) {
  check_gradients_both({.op = "Expand", .shapes = {{3, 1}, {}}, .fixed = {{1, i64({3}, {2, 3, 4})}}});
  check_gradients_both({.op = "Expand", .shapes = {{2, 3}, {}}, .fixed = {{1, i64({2}, {1, 3})}}});
}
TEST(GradCheck, Tile) {
  check_gradients_both({.op = "Tile", .shapes = {{2, 3}, {}}, .fixed = {{1, i64({2}, {2, 3})}}});
  check_gradients_both({.op = "Tile", .shapes = {{2, 1, 2}, {}}, .fixed = {{1, i64({3}, {1, 4, 1})}}});
}
TEST(GradCheck, Pad) {
  auto pads = i64({4}, {1, 0, 2, 2});
  check_gradients_both({.op = "Pad", .shapes = {{3, 4}, {}}, .fixed = {{1, pads}}});
  for (const char* mode : {"reflect", "edge"})
    check_gradients_both({.op = "Pad", .shapes = {{3, 4}, {}}, .fixed = {{1, pads}}, .attrs = {{"mode", Attribute(mode)}}});
  check_gradients_both({.op = "Pad", .shapes = {{3, 4}, {}}, .fixed = {{1, i64({4}, {2, 1, 1, 5})}},
                        .attrs = {{"mode", Attribute("wrap")}}, .opset = 19});
  // Negative pads crop; an axes input pads only the named axes.
  check_gradients_both({.op = "Pad", .shapes = {{3, 5}, {}}, .fixed = {{1, i64({4}, {-1, 1, 0, -2})}}});
  check_gradients_both({.op = "Pad", .shapes = {{2, 3, 4}, {}, {}, {}},
                        .fixed = {{1, i64({2}, {1, 2})}, {2, Tensor()}, {3, i64({1}, {-1})}}, .opset = 18});
}
TEST(GradCheck, Trilu) {
  check_gradients_both({.op = "Trilu", .shapes = {{2, 3, 4}}});
  check_gradients_both({.op = "Trilu", .shapes = {{3, 4}, {}}, .fixed = {{1, i64({}, {1})}},
                        .attrs = {{"upper", int_attr(0)}}});
}

// ---- reductions --------------------------------------------------------------------------------------
TEST(GradCheck, ReduceSum) {
  check_gradients_both({.op = "ReduceSum", .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({2}, {0, -1})}}});
  check_gradients_both({.op = "ReduceSum", .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({1}, {1})}},
                        .attrs = {{"keepdims", int_attr(0)}}});
  check_gradients_both({.op = "ReduceSum", .shapes = {{2, 3}}, .attrs = {{"keepdims", int_attr(0)}}});
  check_gradients_both({.op = "ReduceSum", .shapes = {{2, 3}, {}}, .fixed = {{1, i64({0}, {})}},
                        .attrs = {{"noop_with_empty_axes", int_attr(1)}}});
}
TEST(GradCheck, ReduceMean) {
  check_gradients_both({.op = "ReduceMean", .shapes = {{2, 3, 4}}, .attrs = {{"axes", ints({1, 2})}}});
  check_gradients_both({.op = "ReduceMean", .shapes = {{2, 3, 4}}, .attrs = {{"keepdims", int_attr(0)}}});
  check_gradients_both({.op = "ReduceMean", .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({1}, {0})}},
                        .attrs = {{"keepdims", int_attr(0)}}, .opset = 18});
}
TEST(GradCheck, ReduceMax) {
  check_gradients_both({.op = "ReduceMax", .shapes = {{2, 3, 4}}, .attrs = {{"axes", ints({1})}}});
  check_gradients_both({.op = "ReduceMax", .shapes = {{2, 3, 4}}, .attrs = {{"keepdims", int_attr(0)}}});
  check_gradients_both({.op = "ReduceMax", .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({2}, {-1, 0})}},
                        .attrs = {{"keepdims", int_attr(0)}}, .opset = 18});
}

TEST(GradCheck, ReduceMin) {
  check_gradients_both({.op = "ReduceMin", .shapes = {{2, 3, 4}}, .attrs = {{"axes", ints({1})}}});
  check_gradients_both({.op = "ReduceMin", .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({2}, {-1, 0})}},
                        .attrs = {{"keepdims", int_attr(0)}}, .opset = 18});
}
TEST(GradCheck, ReduceSumSquareAndL2) {
  for (const char* op : {"ReduceSumSquare", "ReduceL2"}) {
    check_gradients_both({.op = op, .shapes = {{2, 3, 4}}, .attrs = {{"axes", ints({1})}}});
    check_gradients_both({.op = op, .shapes = {{2, 3, 4}}, .attrs = {{"keepdims", int_attr(0)}}});
    check_gradients_both({.op = op, .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({2}, {-1, 0})}},
                          .attrs = {{"keepdims", int_attr(0)}}, .opset = 18});
  }
}

// ---- convolution and pooling ------------------------------------------------------------------------
TEST(GradCheck, Conv) {
  check_gradients_both({.op = "Conv", .shapes = {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}});
}
TEST(GradCheck, ConvPadsStrides) {
  check_gradients_both({.op = "Conv",
                        .shapes = {{2, 2, 6, 5}, {3, 2, 3, 2}, {3}},
                        .attrs = {{"pads", ints({1, 0, 2, 1})}, {"strides", ints({2, 1})}}});
}
TEST(GradCheck, ConvDilations) {
  check_gradients_both({.op = "Conv",
                        .shapes = {{1, 2, 7, 6}, {2, 2, 2, 3}},
                        .attrs = {{"dilations", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}});
}
TEST(GradCheck, ConvGroups) {
  check_gradients_both({.op = "Conv",
                        .shapes = {{2, 4, 5, 5}, {6, 2, 3, 3}, {6}},
                        .attrs = {{"group", Attribute(int64_t{2})}, {"pads", ints({1, 1, 1, 1})}}});
}
TEST(GradCheck, ConvDepthwiseSamePad) {
  check_gradients_both({.op = "Conv",
                        .shapes = {{2, 3, 5, 4}, {3, 1, 3, 3}},
                        .attrs = {{"group", Attribute(int64_t{3})}, {"auto_pad", Attribute("SAME_UPPER")},
                                  {"strides", ints({2, 2})}}});
}
TEST(GradCheck, Conv1DAnd3D) {
  check_gradients_both({.op = "Conv", .shapes = {{2, 2, 7}, {3, 2, 3}, {3}}, .attrs = {{"strides", ints({2})}}});
  check_gradients_both({.op = "Conv", .shapes = {{1, 2, 4, 3, 3}, {2, 2, 2, 2, 2}, {2}}});
}
// ConvTranspose: dX through Conv, dW through ConvGrad's filter pass, dB a ReduceSum.
TEST(GradCheck, ConvTranspose) {
  check_gradients_both({.op = "ConvTranspose", .shapes = {{2, 3, 4, 4}, {3, 2, 3, 3}, {2}}});
}
TEST(GradCheck, ConvTransposeStridesPadsOutputPadding) {
  check_gradients_both(
      {.op = "ConvTranspose",
       .shapes = {{2, 2, 3, 4}, {2, 3, 3, 2}, {3}},
       .attrs = {{"strides", ints({2, 3})}, {"pads", ints({1, 0, 0, 1})}, {"output_padding", ints({1, 2})}}});
}
TEST(GradCheck, ConvTransposeGroupsDilations) {
  check_gradients_both({.op = "ConvTranspose",
                        .shapes = {{1, 4, 3, 3}, {4, 1, 2, 3}, {2}},
                        .attrs = {{"group", Attribute(int64_t{2})}, {"dilations", ints({2, 1})}}});
}
TEST(GradCheck, ConvTransposeSameAndOutputShape) {
  check_gradients_both({.op = "ConvTranspose",
                        .shapes = {{1, 2, 3, 3}, {2, 2, 3, 3}},
                        .attrs = {{"auto_pad", Attribute("SAME_UPPER")}, {"strides", ints({2, 2})}}});
  // output_shape past the full output (one bias-only row and column) and inside it (pads 1, 0).
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{10, 8}, std::vector<int64_t>{8, 6}})
    check_gradients_both({.op = "ConvTranspose",
                          .shapes = {{1, 1, 3, 3}, {1, 2, 3, 3}, {2}},
                          .attrs = {{"strides", ints({3, 2})}, {"output_shape", ints(shape)}}});
}
TEST(GradCheck, ConvTranspose1DAnd3D) {
  check_gradients_both(
      {.op = "ConvTranspose", .shapes = {{2, 2, 5}, {2, 3, 3}, {3}}, .attrs = {{"strides", ints({2})}}});
  check_gradients_both({.op = "ConvTranspose", .shapes = {{1, 2, 3, 2, 3}, {2, 2, 2, 2, 2}, {2}}});
}
TEST(GradCheck, MaxPool) {
  check_gradients_both({.op = "MaxPool", .shapes = {{2, 3, 4, 4}}, .attrs = {{"kernel_shape", ints({2, 2})},
                                                                              {"strides", ints({2, 2})}}});
}
TEST(GradCheck, MaxPoolOverlapPadsCeil) {
  check_gradients_both({.op = "MaxPool",
                        .shapes = {{2, 2, 5, 6}},
                        .attrs = {{"kernel_shape", ints({3, 2})},
                                  {"strides", ints({2, 1})},
                                  {"pads", ints({1, 0, 1, 1})},
                                  {"ceil_mode", Attribute(int64_t{1})}}});
}
TEST(GradCheck, MaxPoolWithIndicesDilated) {
  check_gradients_both({.op = "MaxPool",
                        .shapes = {{1, 2, 7}},
                        .attrs = {{"kernel_shape", ints({2})}, {"dilations", ints({2})}},
                        .num_outputs = 2});
}
TEST(GradCheck, AveragePool) {
  check_gradients_both({.op = "AveragePool", .shapes = {{2, 2, 5, 5}}, .attrs = {{"kernel_shape", ints({3, 3})},
                                                                                  {"strides", ints({2, 2})}}});
  for (int64_t include : {0, 1})
    check_gradients_both({.op = "AveragePool",
                          .shapes = {{1, 2, 5, 4}},
                          .attrs = {{"kernel_shape", ints({2, 3})},
                                    {"pads", ints({1, 1, 0, 1})},
                                    {"count_include_pad", int_attr(include)},
                                    {"ceil_mode", int_attr(1)}}});
  check_gradients_both({.op = "AveragePool", .shapes = {{2, 3, 6}}, .attrs = {{"kernel_shape", ints({2})}}});
}
TEST(GradCheck, GlobalAveragePool) { check_gradients_both({.op = "GlobalAveragePool", .shapes = {{2, 3, 4, 5}}}); }
TEST(GradCheck, GlobalMaxPool) { check_gradients_both({.op = "GlobalMaxPool", .shapes = {{2, 3, 4, 5}}}); }
// ReverseSequence is its own inverse: dX is dY reversed over the same lengths (graph/ops/detect.cc).
TEST(GradCheck, ReverseSequence) {
  check_gradients_both({.op = "ReverseSequence", .shapes = {{4, 3, 2}, {}}, .fixed = {{1, i64({3}, {4, 1, 3})}}});
  check_gradients({.op = "ReverseSequence", .shapes = {{3, 5}, {}}, .fixed = {{1, i64({3}, {2, 5, 0})}},
                   .attrs = {{"batch_axis", int_attr(0)}, {"time_axis", int_attr(1)}}});
}
// MaxUnpool: dX is dY gathered at the flat indices I, with and without output_shape.
TEST(GradCheck, MaxUnpool) {
  const std::map<std::string, Attribute> attrs = {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}};
  check_gradients_both({.op = "MaxUnpool", .shapes = {{1, 2, 2, 2}, {}},
                        .fixed = {{1, i64({1, 2, 2, 2}, {5, 7, 13, 15, 16, 19, 25, 30})}}, .attrs = attrs});
  check_gradients({.op = "MaxUnpool", .shapes = {{1, 1, 2, 2}, {}, {}},
                   .fixed = {{1, i64({1, 1, 2, 2}, {6, 8, 16, 24})}, {2, i64({4}, {1, 1, 5, 5})}}, .attrs = attrs});
}

// ---- normalisation ----------------------------------------------------------------------------------
// Training mode: the batch statistics are differentiated through; the running statistics (outputs
// 1, 2) are state updates the loss does not read.
TEST(GradCheck, BatchNormTraining) {
  check_gradients_both({.op = "BatchNormalization",
                        .shapes = {{4, 3, 2, 3}, {3}, {3}, {3}, {3}},
                        .fixed = {{3, f64({3}, {0.1, -0.2, 0.3})}, {4, f64({3}, {1.0, 0.5, 2.0})}},
                        .attrs = {{"training_mode", Attribute(int64_t{1})}, {"epsilon", Attribute(1e-3f)}},
                        .num_outputs = 3,
                        .checked_outputs = {0},
                        .opset = 15});
}
TEST(GradCheck, BatchNormTraining2D) {
  check_gradients_both({.op = "BatchNormalization",
                        .shapes = {{5, 4}, {4}, {4}, {4}, {4}},
                        .fixed = {{3, f64({4}, {0, 0, 0, 0})}, {4, f64({4}, {1, 1, 1, 1})}},
                        .attrs = {{"training_mode", Attribute(int64_t{1})}},
                        .num_outputs = 3,
                        .checked_outputs = {0},
                        .opset = 15});
}
// Inference mode: the given statistics are inputs too (trainable when a model makes them so).
TEST(GradCheck, BatchNormInference) {
  check_gradients_both({.op = "BatchNormalization",
                        .shapes = {{3, 2, 2, 2}, {2}, {2}, {2}, {2}},
                        .opset = 15,
                        .init = [](int i, std::mt19937_64& rng) {
                          return i == 4 ? uniform(rng, 0.5, 2) : uniform(rng, -1, 1);
                        }});
}

// LRN across channels (graph/ops/lrn_det.cc: LRNGrad), even and odd window sizes.
TEST(GradCheck, LrnOddSize) {
  check_gradients_both({.op = "LRN", .shapes = {{2, 5, 2, 3}}, .attrs = {{"size", int_attr(3)}, {"alpha", Attribute(0.5f)}, {"beta", Attribute(0.75f)}, {"bias", Attribute(2.f)}}});
}
TEST(GradCheck, LrnEvenSize) {
  check_gradients_both({.op = "LRN", .shapes = {{3, 6, 4}}, .attrs = {{"size", int_attr(4)}, {"alpha", Attribute(0.9f)}, {"beta", Attribute(0.6f)}}});
}

// GridSample (graph/ops/grid_sample.cc: GridSampleGrad, one op for dX and dGrid). Grid values in
// [-1.3, 1.3] put some points outside X, where the padding decides the taps (border's clamp and
// reflection's mirror both carry into dGrid). Linear and cubic: dX and dGrid for every padding and
// align_corners; nearest: dX, and dGrid zero, as the differences of a piecewise-constant function.
std::map<std::string, Attribute> grid_sample_attrs(const char* mode, const char* pad, int64_t ac) {
  return {{"mode", Attribute(mode)}, {"padding_mode", Attribute(pad)}, {"align_corners", int_attr(ac)}};
}
void check_grid_sample(const char* mode, int opset, std::vector<std::vector<int64_t>> shapes) {
  for (const char* pad : {"zeros", "border", "reflection"})
    for (int64_t ac : {0, 1}) {
      SCOPED_TRACE(str_cat(mode, " ", pad, " align_corners=", ac));
      check_gradients_both({.op = "GridSample", .shapes = shapes, .attrs = grid_sample_attrs(mode, pad, ac),
                            .opset = opset, .init = in_range(-1.3, 1.3)});
    }
}
TEST(GradCheck, GridSampleBilinear) { check_grid_sample("bilinear", 16, {{2, 2, 3, 4}, {2, 3, 2, 2}}); }
TEST(GradCheck, GridSampleNearest) { check_grid_sample("nearest", 16, {{2, 2, 3, 4}, {2, 3, 2, 2}}); }
TEST(GradCheck, GridSampleBicubic) { check_grid_sample("bicubic", 16, {{1, 2, 4, 3}, {1, 2, 3, 2}}); }
TEST(GradCheck, GridSampleVolumetric) {  // opset 20: 5-D X, the opset 20 mode names
  check_grid_sample("linear", 20, {{2, 2, 2, 3, 4}, {2, 2, 1, 2, 3}});
  check_grid_sample("nearest", 20, {{1, 2, 2, 3, 2}, {1, 2, 2, 1, 3}});
  check_grid_sample("cubic", 20, {{1, 1, 3, 2, 4}, {1, 1, 2, 2, 3}});
}
TEST(GradCheck, GridSampleOneSpatialAxis) {  // opset 20: 3-D X [N, C, W], Grid [N, W_out, 1]
  check_grid_sample("linear", 20, {{2, 2, 5}, {2, 4, 1}});
}

// ---- losses -----------------------------------------------------------------------------------------
TEST(GradCheck, SoftmaxCrossEntropyMean) {
  check_gradients_both({.op = "SoftmaxCrossEntropyLoss",
                        .shapes = {{4, 5}, {}},
                        .fixed = {{1, i64({4}, {1, 0, 4, 2})}},
                        .attrs = {{"reduction", Attribute("mean")}}});
}

TEST(GradCheck, LayerNorm) {
  check_gradients_both({.op = "LayerNormalization", .shapes = {{2, 3, 4}, {4}, {4}}});
  check_gradients_both({.op = "LayerNormalization", .shapes = {{2, 3, 4}, {3, 4}, {3, 4}},
                        .attrs = {{"axis", int_attr(1)}, {"epsilon", Attribute(1e-3f)}}});
  // Scale broadcast over the normalised axes; no bias; Mean and InvStdDev outputs unread.
  check_gradients_both({.op = "LayerNormalization", .shapes = {{2, 3, 4}, {1, 4}}, .attrs = {{"axis", int_attr(-2)}},
                        .num_outputs = 3, .checked_outputs = {0}});
}

// ---- dropout -----------------------------------------------------------------------------------------
TEST(GradCheck, DropoutTraining) {
  check_gradients_both({.op = "Dropout",
                        .shapes = {{4, 5}, {}, {}},
                        .fixed = {{1, f64({}, {0.3})}, {2, boolean({}, {1})}},
                        .num_outputs = 2});
}
TEST(GradCheck, DropoutInference) {
  check_gradients_both({.op = "Dropout", .shapes = {{4, 5}}});
  check_gradients_both({.op = "Dropout", .shapes = {{4, 5}, {}, {}},
                        .fixed = {{1, f64({}, {0.3})}, {2, boolean({}, {0})}}, .num_outputs = 2});
}

// ---- more losses ----------------------------------------------------------------------------------------
TEST(GradCheck, SoftmaxCrossEntropySumNoneWeights) {
  Tensor labels = i64({4}, {1, 0, 4, 2});
  Tensor weights = f64({5}, {0.5, 1.0, 2.0, 1.5, 0.25});
  for (const char* red : {"sum", "none"})
    check_gradients_both({.op = "SoftmaxCrossEntropyLoss", .shapes = {{4, 5}, {}},
                          .fixed = {{1, labels}}, .attrs = {{"reduction", Attribute(red)}}});
  for (const char* red : {"mean", "sum", "none"})
    check_gradients_both({.op = "SoftmaxCrossEntropyLoss", .shapes = {{4, 5}, {}, {}},
                          .fixed = {{1, labels}, {2, weights}}, .attrs = {{"reduction", Attribute(red)}}});
}
// Class weights that are parameters get their gradient too (the loss's mean divides by their sum).
TEST(GradCheck, LossClassWeightsGradient) {
  auto init = [](int i, std::mt19937_64& rng) { return i == 2 ? uniform(rng, 0.5, 2.0) : uniform(rng, -1, 1); };
  Tensor labels = i64({2, 3}, {1, 0, 4, 2, 4, -1});
  for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    for (const char* red : {"mean", "sum", "none"})
      check_gradients_both({.op = op, .shapes = {{2, 5, 3}, {}, {5}}, .fixed = {{1, labels}},
                            .attrs = {{"reduction", Attribute(red)}, {"ignore_index", int_attr(-1)}}, .init = init});
}
TEST(GradCheck, SoftmaxCrossEntropyIgnoreIndexSpatial) {
  // [N, C, d1, d2] scores; positions labelled ignore_index get no gradient and leave the mean.
  Tensor labels = i64({2, 2, 3}, {1, -100, 0, 2, 2, 1, 0, 0, -100, 1, 2, 2});
  check_gradients_both({.op = "SoftmaxCrossEntropyLoss", .shapes = {{2, 3, 2, 3}, {}},
                        .fixed = {{1, labels}}, .attrs = {{"ignore_index", int_attr(-100)}}});
  check_gradients_both({.op = "SoftmaxCrossEntropyLoss", .shapes = {{2, 3, 2, 3}, {}, {}},
                        .fixed = {{1, labels}, {2, f64({3}, {0.2, 1.0, 3.0})}},
                        .attrs = {{"ignore_index", int_attr(-100)}}});
}
TEST(GradCheck, SoftmaxCrossEntropyLogProb) {
  // Both outputs reach the loss: the log_prob output's gradient adds through LogSoftmaxGrad.
  check_gradients_both({.op = "SoftmaxCrossEntropyLoss", .shapes = {{3, 4, 2}, {}},
                        .fixed = {{1, i64({3, 2}, {0, 3, 1, 1, 2, 0})}}, .num_outputs = 2});
}
TEST(GradCheck, NegativeLogLikelihood) {
  Tensor labels = i64({4}, {1, 0, 4, 2});
  for (const char* red : {"mean", "sum", "none"}) {
    check_gradients_both({.op = "NegativeLogLikelihoodLoss", .shapes = {{4, 5}, {}},
                          .fixed = {{1, labels}}, .attrs = {{"reduction", Attribute(red)}}});
    check_gradients_both({.op = "NegativeLogLikelihoodLoss", .shapes = {{4, 5}, {}, {}},
                          .fixed = {{1, labels}, {2, f64({5}, {0.5, 1.0, 2.0, 1.5, 0.25})}},
                          .attrs = {{"reduction", Attribute(red)}}});
  }
  check_gradients_both({.op = "NegativeLogLikelihoodLoss", .shapes = {{2, 3, 4}, {}},
                        .fixed = {{1, i64({2, 4}, {0, 2, 1, 2, 1, 1, 0, 2})}}, .attrs = {{"ignore_index", int_attr(1)}}});
}

// GroupNormalization (graph/ops/normalization.cc): X viewed as [N, G, M]; scale and bias per
// channel at opset 21, per group at opset 18; ranks 3 to 5 and X of rank 2.
TEST(GradCheck, GroupNormalizationPerChannel) {
  check_gradients_both({.op = "GroupNormalization", .shapes = {{2, 6, 3}, {6}, {6}},
                        .attrs = {{"num_groups", int_attr(3)}}, .opset = 21, .tol = 1e-5});
  check_gradients({.op = "GroupNormalization", .shapes = {{2, 4, 2, 3}, {4}, {4}},
                   .attrs = {{"num_groups", int_attr(2)}, {"epsilon", Attribute(0.01f)}}, .opset = 21, .tol = 1e-5});
  check_gradients({.op = "GroupNormalization", .shapes = {{3, 4}, {4}, {4}}, .attrs = {{"num_groups", int_attr(2)}},
                   .opset = 21, .tol = 1e-5});
}
TEST(GradCheck, GroupNormalizationPerGroup) {
  check_gradients_both({.op = "GroupNormalization", .shapes = {{2, 6, 2, 2}, {3}, {3}},
                        .attrs = {{"num_groups", int_attr(3)}}, .opset = 18, .tol = 1e-5});
  check_gradients({.op = "GroupNormalization", .shapes = {{2, 4, 2, 1, 3}, {2}, {2}},
                   .attrs = {{"num_groups", int_attr(2)}}, .opset = 18, .tol = 1e-5});
}

// ai.otter.BiasGelu (graph/ops/elementwise.cc, made by the fuse-bias-gelu pass): BiasGeluGrad
// recomputes X + bias; the bias gradient is dX summed over the leading axes. Inputs in [-3, 3]
// cover both tails of the GELU and its minimum near -0.75.
TEST(GradCheck, BiasGelu) {
  check_gradients_both({.op = "BiasGelu", .domain = kOtterDomain, .shapes = {{2, 3, 5}, {5}},
                        .init = in_range(-3, 3)});
  check_gradients({.op = "BiasGelu", .domain = kOtterDomain, .shapes = {{4, 3}, {3}}, .init = in_range(-3, 3),
                   .seed = 2});
}
TEST(GradCheck, BiasGeluWithoutBias) {
  check_gradients_both({.op = "BiasGelu", .domain = kOtterDomain, .shapes = {{3, 4}}, .init = in_range(-3, 3)});
}
TEST(GradCheck, BiasGeluBiasOnly) {  // X a constant: only the bias takes a gradient
  check_gradients({.op = "BiasGelu", .domain = kOtterDomain, .shapes = {{2, 4}, {4}},
                   .fixed = {{0, f64({2, 4}, {-2.5, -1, -0.5, 0, 0.3, 0.8, 1.7, 2.9})}}, .init = in_range(-1, 1)});
}

// ai.otter.AddLayerNorm (graph/ops/add_layer_norm.cc, made by the fuse-add-layernorm pass): Y =
// LayerNorm(X + R), S = X + R. With the loss reading both outputs, LayerNormalizationGrad adds S's
// gradient as dResidual; reading only Y, S is recomputed (no S output) or its gradient is absent;
// reading only S, no LayerNormalizationGrad runs and dX = dR = dS.
TEST(GradCheck, AddLayerNorm) {
  check_gradients_both({.op = "AddLayerNorm",
                        .domain = kOtterDomain,
                        .shapes = {{2, 3, 5}, {2, 3, 5}, {5}, {5}},
                        .num_outputs = 2,
                        .tol = 1e-5});
  check_gradients({.op = "AddLayerNorm",
                   .domain = kOtterDomain,
                   .shapes = {{4, 6}, {4, 6}, {6}, {6}},
                   .attrs = {{"epsilon", Attribute(0.1f)}},
                   .num_outputs = 2,
                   .tol = 1e-5,
                   .seed = 3});
}
TEST(GradCheck, AddLayerNormWithoutTheSum) {
  check_gradients_both(
      {.op = "AddLayerNorm", .domain = kOtterDomain, .shapes = {{2, 3, 5}, {2, 3, 5}, {5}, {5}}, .tol = 1e-5});
  check_gradients({.op = "AddLayerNorm", .domain = kOtterDomain, .shapes = {{3, 4}, {3, 4}, {4}}, .tol = 1e-5});
}
TEST(GradCheck, AddLayerNormOneOutputRead) {
  check_gradients({.op = "AddLayerNorm",
                   .domain = kOtterDomain,
                   .shapes = {{2, 3, 5}, {2, 3, 5}, {5}, {5}},
                   .num_outputs = 2,
                   .checked_outputs = {0},
                   .tol = 1e-5});
  check_gradients({.op = "AddLayerNorm",
                   .domain = kOtterDomain,
                   .shapes = {{2, 3, 5}, {2, 3, 5}, {5}, {5}},
                   .num_outputs = 2,
                   .checked_outputs = {1},
                   .tol = 1e-5});
}
// ai.otter.BiasAdd (graph/ops/elementwise.cc, made by cast-elimination): dX = dY, dbias = dY summed
// over the leading axes; a bias of X's trailing 2 axes, and of X's whole shape (no sum).
TEST(GradCheck, BiasAdd) {
  check_gradients_both({.op = "BiasAdd", .domain = kOtterDomain, .shapes = {{2, 3, 5}, {5}}});
  check_gradients_both({.op = "BiasAdd", .domain = kOtterDomain, .shapes = {{2, 3, 5}, {3, 5}}});
  check_gradients_both({.op = "BiasAdd", .domain = kOtterDomain, .shapes = {{2, 3, 5}, {2, 3, 5}}});
}

}  // namespace
}  // namespace otter::testing
