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

// ---- activations used by the digits models --------------------------------------------------------
TEST(GradCheck, Relu) { check_gradients_both({.op = "Relu", .shapes = {{3, 5}}, .init = away_from_zero()}); }

// ---- views ----------------------------------------------------------------------------------------
TEST(GradCheck, Reshape) {
  check_gradients_both({.op = "Reshape", .shapes = {{2, 3, 4}, {}}, .fixed = {{1, i64({2}, {0, -1})}}});
}
TEST(GradCheck, Flatten) {
  check_gradients_both({.op = "Flatten", .shapes = {{2, 3, 2, 2}}});
  check_gradients_both({.op = "Flatten", .shapes = {{2, 3, 2, 2}}, .attrs = {{"axis", Attribute(int64_t{2})}}});
}
TEST(GradCheck, Identity) { check_gradients_both({.op = "Identity", .shapes = {{2, 3}}}); }

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
TEST(GradCheck, GlobalAveragePool) { check_gradients_both({.op = "GlobalAveragePool", .shapes = {{2, 3, 4, 5}}}); }

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

// ---- losses -----------------------------------------------------------------------------------------
TEST(GradCheck, SoftmaxCrossEntropyMean) {
  check_gradients_both({.op = "SoftmaxCrossEntropyLoss",
                        .shapes = {{4, 5}, {}},
                        .fixed = {{1, i64({4}, {1, 0, 4, 2})}},
                        .attrs = {{"reduction", Attribute("mean")}}});
}

}  // namespace
}  // namespace otter::testing
