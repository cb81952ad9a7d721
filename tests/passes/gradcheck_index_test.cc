// Finite-difference checks of the gradient rules of the indexing ops (graph/ops/indexing.cc:
// GatherElements, ScatterElements, GatherND, ScatterND), Mod (graph/ops/integer.cc) and the
// normalisations (graph/ops/normalization.cc), in the
// style of gradcheck_math_test.cc. Scatter tests without a reduction use distinct indices (a
// repeated index makes the overwritten value depend on order, not on the inputs smoothly).
#include "tests/passes/gradcheck.h"

namespace otter::testing {
namespace {

Tensor i64(std::vector<int64_t> dims, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(dims, v); }

TEST(GradCheckIndex, GatherElements) {
  // Repeated indices: their gradients add up.
  check_gradients_both({.op = "GatherElements",
                        .shapes = {{3, 4}, {}},
                        .fixed = {{1, i64({3, 2}, {0, 3, 3, 1, 2, 2})}},
                        .attrs = {{"axis", Attribute(int64_t{1})}}});
  check_gradients({.op = "GatherElements",
                   .shapes = {{3, 2, 2}, {}},
                   .fixed = {{1, i64({2, 2, 2}, {0, 2, -1, 1, 1, 0, 2, 2})}},
                   .attrs = {{"axis", Attribute(int64_t{0})}}});
}

TEST(GradCheckIndex, ScatterElements) {
  const Tensor idx = i64({2, 3}, {1, 0, 2, 0, 2, 1});
  check_gradients_both({.op = "ScatterElements", .shapes = {{3, 3}, {}, {2, 3}}, .fixed = {{1, idx}}});
  check_gradients({.op = "ScatterElements",
                   .shapes = {{3, 3}, {}, {2, 3}},
                   .fixed = {{1, i64({2, 3}, {1, 1, 2, 1, 1, 1})}},
                   .attrs = {{"reduction", Attribute(std::string("add"))}},
                   .opset = 16});
  check_gradients({.op = "ScatterElements",
                   .shapes = {{2, 4}, {}, {2, 2}},
                   .fixed = {{1, i64({2, 2}, {3, -4, 0, 2})}},
                   .attrs = {{"axis", Attribute(int64_t{-1})}}});
}

TEST(GradCheckIndex, GatherND) {
  check_gradients_both({.op = "GatherND", .shapes = {{3, 4, 2}, {}}, .fixed = {{1, i64({3, 2}, {0, 1, 2, 3, 0, 1})}}});
  check_gradients({.op = "GatherND", .shapes = {{3, 4}, {}}, .fixed = {{1, i64({2, 2, 1}, {2, 0, 1, 2})}}});
}

TEST(GradCheckIndex, ScatterND) {
  check_gradients_both({.op = "ScatterND", .shapes = {{4, 3}, {}, {2, 3}}, .fixed = {{1, i64({2, 1}, {3, 1})}}});
  check_gradients({.op = "ScatterND",
                   .shapes = {{4, 3}, {}, {3}},
                   .fixed = {{1, i64({3, 2}, {0, 0, 0, 0, 3, 2})}},
                   .attrs = {{"reduction", Attribute(std::string("add"))}},
                   .opset = 16});
}

// TopK's values: dY lands at the selected positions (distinct random values: no ties).
TEST(GradCheckIndex, TopK) {
  check_gradients_both(
      {.op = "TopK", .shapes = {{3, 6}, {}}, .fixed = {{1, i64({1}, {3})}}, .num_outputs = 2, .checked_outputs = {0}});
  check_gradients({.op = "TopK",
                   .shapes = {{4, 3, 2}, {}},
                   .fixed = {{1, i64({1}, {2})}},
                   .attrs = {{"axis", Attribute(int64_t{0})}, {"largest", Attribute(int64_t{0})}},
                   .num_outputs = 2,
                   .checked_outputs = {0}});
}

// Mod with fmod = 1: A in [3.3, 4.2] and B in [1.5, 1.6] keep trunc(A / B) = 2, away from jumps.
TEST(GradCheckIndex, Mod) {
  auto init = [](int input, std::mt19937_64& rng) {
    return input == 0 ? uniform(rng, 3.3, 4.2) : uniform(rng, 1.5, 1.6);
  };
  check_gradients_both(
      {.op = "Mod", .shapes = {{3, 4}, {3, 4}}, .attrs = {{"fmod", Attribute(int64_t{1})}}, .init = init});
  check_gradients({.op = "Mod", .shapes = {{3, 4}, {4}}, .attrs = {{"fmod", Attribute(int64_t{1})}}, .init = init});
}

TEST(GradCheckIndex, DepthToSpaceSpaceToDepth) {
  const Attribute b2(int64_t{2});
  check_gradients_both({.op = "DepthToSpace", .shapes = {{2, 8, 2, 3}}, .attrs = {{"blocksize", b2}}});
  check_gradients({.op = "DepthToSpace",
                   .shapes = {{1, 8, 2, 3}},
                   .attrs = {{"blocksize", b2}, {"mode", Attribute(std::string("CRD"))}}});
  check_gradients_both({.op = "SpaceToDepth", .shapes = {{2, 2, 4, 6}}, .attrs = {{"blocksize", b2}}});
}

TEST(GradCheckIndex, InstanceNormalization) {
  check_gradients_both({.op = "InstanceNormalization", .shapes = {{2, 3, 4}, {3}, {3}}, .tol = 1e-5});
  check_gradients({.op = "InstanceNormalization",
                   .shapes = {{2, 2, 3, 2}, {2}, {2}},
                   .attrs = {{"epsilon", Attribute(0.1f)}},
                   .tol = 1e-5});
}

TEST(GradCheckIndex, MeanVarianceNormalization) {
  check_gradients({.op = "MeanVarianceNormalization", .shapes = {{2, 3, 2, 2}}, .tol = 1e-5});
  check_gradients({.op = "MeanVarianceNormalization",
                   .shapes = {{3, 4}},
                   .attrs = {{"axes", Attribute(std::vector<int64_t>{1})}},
                   .tol = 1e-5});
}

// Inputs away from 0, where the L1 norm has a kink.
TEST(GradCheckIndex, LpNormalization) {
  auto init = [](int, std::mt19937_64& rng) {
    const double v = uniform(rng, 0.2, 1.5);
    return uniform(rng, 0, 1) < 0.5 ? -v : v;
  };
  check_gradients_both({.op = "LpNormalization", .shapes = {{3, 4}}, .init = init});
  check_gradients({.op = "LpNormalization",
                   .shapes = {{3, 4}},
                   .attrs = {{"p", Attribute(int64_t{1})}, {"axis", Attribute(int64_t{0})}},
                   .init = init});
}

// Resize is linear in X for a fixed geometry; roi is an empty tensor (absent), scales fixed.
TEST(GradCheckIndex, Resize) {
  const Tensor roi = Tensor::from_vector<float>({0}, {});
  const Tensor up = Tensor::from_vector<float>({4}, {1, 1, 2, 1.5f});
  const Tensor down = Tensor::from_vector<float>({4}, {1, 1, 0.6f, 0.5f});
  auto str = [](const char* s) { return Attribute(std::string(s)); };
  for (const Tensor& scales : {up, down}) {
    check_gradients({.op = "Resize", .shapes = {{1, 2, 3, 4}, {}, {}}, .fixed = {{1, roi}, {2, scales}}});
    check_gradients({.op = "Resize",
                     .shapes = {{1, 2, 3, 4}, {}, {}},
                     .fixed = {{1, roi}, {2, scales}},
                     .attrs = {{"mode", str("linear")}}});
    check_gradients({.op = "Resize",
                     .shapes = {{1, 2, 3, 4}, {}, {}},
                     .fixed = {{1, roi}, {2, scales}},
                     .attrs = {{"mode", str("linear")}, {"coordinate_transformation_mode", str("align_corners")}}});
  }
  const Tensor sizes = Tensor::from_vector<int64_t>({4}, {2, 2, 5, 7});
  check_gradients({.op = "Resize",
                   .shapes = {{2, 2, 3, 4}, {}, {}, {}},
                   .fixed = {{1, roi}, {2, roi}, {3, sizes}},
                   .attrs = {{"mode", str("linear")}, {"coordinate_transformation_mode", str("pytorch_half_pixel")}}});
  check_gradients_both({.op = "Resize",
                        .shapes = {{2, 2, 3, 4}, {}, {}},
                        .fixed = {{1, roi}, {2, up}},
                        .attrs = {{"mode", str("nearest")},
                                  {"nearest_mode", str("floor")},
                                  {"coordinate_transformation_mode", str("asymmetric")}}});
}

}  // namespace
}  // namespace otter::testing
