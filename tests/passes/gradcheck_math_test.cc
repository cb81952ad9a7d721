// Finite-difference checks of the gradient rules of the math op families (graph/ops/math.cc), in
// the style of gradcheck_test.cc: static and symbolic shapes, one test per op and attribute variant
// that changes the math, inputs kept away from kinks and domain edges.
#include <memory>

#include "tests/passes/gradcheck.h"

namespace otter::testing {
namespace {

auto in_range(double lo, double hi) {
  return [lo, hi](int, std::mt19937_64& rng) { return uniform(rng, lo, hi); };
}

// Values in [lo, hi] at least `gap` away from every kink in `kinks`.
auto away_from(std::vector<double> kinks, double lo, double hi, double gap = 0.05) {
  return [=](int, std::mt19937_64& rng) {
    for (;;) {
      const double v = uniform(rng, lo, hi);
      bool ok = true;
      for (double k : kinks) ok &= std::abs(v - k) >= gap;
      if (ok) return v;
    }
  };
}

TEST(GradCheckMath, Trigonometric) {
  check_gradients_both({.op = "Sin", .shapes = {{3, 4}}, .init = in_range(-3, 3)});
  check_gradients_both({.op = "Cos", .shapes = {{3, 4}}, .init = in_range(-3, 3)});
  check_gradients_both({.op = "Tan", .shapes = {{3, 4}}, .init = in_range(-1.2, 1.2)});
  check_gradients_both({.op = "Asin", .shapes = {{3, 4}}, .init = in_range(-0.9, 0.9)});
  check_gradients_both({.op = "Acos", .shapes = {{3, 4}}, .init = in_range(-0.9, 0.9)});
  check_gradients_both({.op = "Atan", .shapes = {{3, 4}}, .init = in_range(-4, 4)});
}

TEST(GradCheckMath, Hyperbolic) {
  check_gradients_both({.op = "Sinh", .shapes = {{3, 4}}, .init = in_range(-3, 3)});
  check_gradients_both({.op = "Cosh", .shapes = {{3, 4}}, .init = in_range(-3, 3)});
  check_gradients_both({.op = "Asinh", .shapes = {{3, 4}}, .init = in_range(-4, 4)});
  check_gradients_both({.op = "Acosh", .shapes = {{3, 4}}, .init = in_range(1.2, 5)});
  check_gradients_both({.op = "Atanh", .shapes = {{3, 4}}, .init = in_range(-0.9, 0.9)});
}

// Piecewise constant ops: the gradient is zero (no gradient flows; autodiff gives the input a
// zero gradient), which central differences away from the jumps agree with. Static shapes only:
// a zero gradient of a graph input with a symbolic shape has no shape to take.
TEST(GradCheckMath, RoundingIsZero) {
  auto off_jumps = away_from({-2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2}, -2.4, 2.4);
  for (const char* op : {"Ceil", "Floor", "Round", "Sign"})
    check_gradients({.op = op, .shapes = {{3, 4}}, .init = off_jumps});
}

TEST(GradCheckMath, HardSigmoid) {
  check_gradients_both({.op = "HardSigmoid", .shapes = {{3, 5}}, .init = away_from({-2.5, 2.5}, -4, 4)});
  check_gradients_both({.op = "HardSigmoid",
                        .shapes = {{3, 5}},
                        .attrs = {{"alpha", Attribute(1.f / 6)}, {"beta", Attribute(0.3f)}},
                        .init = away_from({-4.8, 4.2}, -6, 6)});
}

TEST(GradCheckMath, HardSwish) {
  check_gradients_both({.op = "HardSwish", .shapes = {{4, 5}}, .opset = 17, .init = away_from({-3, 3}, -5, 5)});
}

TEST(GradCheckMath, EluSeluCelu) {
  auto init = away_from({0}, -3, 3);
  check_gradients_both({.op = "Elu", .shapes = {{3, 5}}, .init = init});
  check_gradients_both({.op = "Elu", .shapes = {{3, 5}}, .attrs = {{"alpha", Attribute(0.4f)}}, .init = init});
  check_gradients_both({.op = "Selu", .shapes = {{3, 5}}, .init = init});
  check_gradients_both({.op = "Selu",
                        .shapes = {{3, 5}},
                        .attrs = {{"alpha", Attribute(2.f)}, {"gamma", Attribute(3.f)}},
                        .init = init});
  check_gradients_both({.op = "Celu", .shapes = {{3, 5}}, .init = init});
  check_gradients_both({.op = "Celu", .shapes = {{3, 5}}, .attrs = {{"alpha", Attribute(2.5f)}}, .init = init});
}

TEST(GradCheckMath, ThresholdedRelu) {
  check_gradients_both({.op = "ThresholdedRelu", .shapes = {{3, 5}}, .init = away_from({1}, -3, 3)});
  check_gradients_both({.op = "ThresholdedRelu",
                        .shapes = {{3, 5}},
                        .attrs = {{"alpha", Attribute(-0.5f)}},
                        .init = away_from({-0.5}, -3, 3)});
}

TEST(GradCheckMath, Mish) {
  check_gradients_both({.op = "Mish", .shapes = {{3, 5}}, .opset = 18, .init = in_range(-5, 5)});
}

TEST(GradCheckMath, Shrink) {
  check_gradients_both({.op = "Shrink", .shapes = {{3, 5}}, .init = away_from({-0.5, 0.5}, -2, 2)});
  check_gradients_both({.op = "Shrink",
                        .shapes = {{3, 5}},
                        .attrs = {{"lambd", Attribute(1.f)}, {"bias", Attribute(0.7f)}},
                        .init = away_from({-1, 1}, -3, 3)});
}

// PRelu with the slope broadcast as PyTorch exports it (one per channel, [C, 1, 1]), a scalar
// slope and a full-shape slope: both X and the slope are differentiated.
TEST(GradCheckMath, PRelu) {
  auto init = away_from({0}, -2, 2);
  check_gradients_both({.op = "PRelu", .shapes = {{2, 3, 4, 2}, {3, 1, 1}}, .init = init});
  check_gradients_both({.op = "PRelu", .shapes = {{5, 3}, {1}}, .init = init});
  check_gradients_both({.op = "PRelu", .shapes = {{5, 3}, {5, 3}}, .init = init});
}

// ---- CumSum and the further reductions --------------------------------------------------------------
Tensor axis_tensor(int64_t a) { return Tensor::from_vector<int64_t>({}, {a}); }

TEST(GradCheckMath, CumSum) {
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1}) {
      check_gradients_both({.op = "CumSum",
                            .shapes = {{3, 4, 2}, {}},
                            .fixed = {{1, axis_tensor(1)}},
                            .attrs = {{"exclusive", Attribute(exclusive)}, {"reverse", Attribute(reverse)}}});
    }
  check_gradients_both({.op = "CumSum", .shapes = {{5, 3}, {}}, .fixed = {{1, axis_tensor(-2)}}});
}

// Values cycling through `pattern` element by element (zeros placed where the test wants them).
std::function<double(int, std::mt19937_64&)> cycle(std::vector<double> pattern) {
  auto k = std::make_shared<size_t>(0);
  return [pattern, k](int, std::mt19937_64&) { return pattern[(*k)++ % pattern.size()]; };
}

TEST(GradCheckMath, ReduceProd) {
  for (int opset : {13, 18}) {
    GradCheck c{.op = "ReduceProd", .shapes = {{3, 4}}, .opset = opset, .init = in_range(0.5, 1.5)};
    if (opset >= 18) {
      c.shapes = {{3, 4}, {}};
      c.fixed = {{1, Tensor::from_vector<int64_t>({1}, {1})}};
    } else {
      c.attrs = {{"axes", Attribute(std::vector<int64_t>{1})}};
    }
    check_gradients_both(c);
  }
  // Rows with no zero, one zero and two zeros: the product's exact subgradient.
  check_gradients({.op = "ReduceProd",
                   .shapes = {{3, 4}},
                   .attrs = {{"axes", Attribute(std::vector<int64_t>{1})}, {"keepdims", Attribute(int64_t{0})}},
                   .opset = 13,
                   .init = cycle({0.7, -1.2, 0.9, 1.3, 0.8, 0, 1.1, -0.6, 0, 1.4, 0, 0.5})});
  check_gradients({.op = "ReduceProd", .shapes = {{2, 3}}, .opset = 13, .init = cycle({0.7, 0, 1.2, -0.9, 1.1, 0.6})});
}

TEST(GradCheckMath, ReduceL1LogSumLogSumExp) {
  const std::map<std::string, Attribute> axes0 = {{"axes", Attribute(std::vector<int64_t>{0})}};
  check_gradients_both(
      {.op = "ReduceL1", .shapes = {{3, 4}}, .attrs = axes0, .opset = 13, .init = away_from({0}, -2, 2)});
  check_gradients_both({.op = "ReduceL1",
                        .shapes = {{3, 4}, {}},
                        .fixed = {{1, Tensor::from_vector<int64_t>({1}, {-1})}},
                        .attrs = {{"keepdims", Attribute(int64_t{0})}},
                        .opset = 18,
                        .init = away_from({0}, -2, 2)});
  check_gradients_both(
      {.op = "ReduceLogSum", .shapes = {{3, 4}}, .attrs = axes0, .opset = 13, .init = in_range(0.2, 2)});
  check_gradients_both({.op = "ReduceLogSum", .shapes = {{3, 4}}, .opset = 18, .init = in_range(0.2, 2)});
  check_gradients_both(
      {.op = "ReduceLogSumExp", .shapes = {{3, 4}}, .attrs = axes0, .opset = 13, .init = in_range(-3, 3)});
  check_gradients_both({.op = "ReduceLogSumExp",
                        .shapes = {{2, 3, 4}, {}},
                        .fixed = {{1, Tensor::from_vector<int64_t>({2}, {0, 2})}},
                        .attrs = {{"keepdims", Attribute(int64_t{0})}},
                        .opset = 18,
                        .init = in_range(-3, 3)});
}

}  // namespace
}  // namespace otter::testing
