// GridSample's CPU kernels (kernels/cpu/grid_sample.cc: GridSample and ai.otter.GridSampleGrad)
// against PyTorch's torch.nn.functional.grid_sample and its autograd gradients, recorded by
// models/grid_sample/make_grid_sample_refs.py: 4-D bilinear, nearest and bicubic, 5-D bilinear and
// nearest, every padding and align_corners, in float64 and float32. Also half inputs, mixed X and
// Grid types, grid values far outside or NaN, and the attribute and shape errors of inference and
// of the kernels. ONNX's own data (the 8 test_gridsample* node tests) runs in
// tests/conformance; the gradient rule's finite-difference checks are in
// tests/passes/gradcheck_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "graph/op_table.h"
#include "kernels/common/half.h"
#include "runtime/executor.h"
#include "runtime/npz.h"
#include "tests/kernels/kernel_test_util.h"

namespace otter {
namespace {

using testing::infer_error;
using testing::max_rel_diff;
using testing::OpCall;
using testing::run_error;
using testing::run_op;

const NpzArchive& refs() {
  static const NpzArchive a = read_npz(std::string(OTTER_SOURCE_DIR) + "/models/grid_sample/grid_sample_refs.npz");
  return a;
}

struct Case {
  int rank;
  const char* mode;  // PyTorch's (and ONNX 16's) name
  const char* padding;
  int align_corners;
  std::string name() const { return str_cat(rank, "d_", mode, "_", padding, "_ac", align_corners); }
};

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  for (int rank : {4, 5})
    for (const char* mode : {"bilinear", "nearest", "bicubic"})
      for (const char* pad : {"zeros", "border", "reflection"})
        for (int ac : {0, 1})
          if (rank == 4 || std::string(mode) != "bicubic") cs.push_back({rank, mode, pad, ac});
  return cs;
}

// A copy of t in dtype `to` (rounded to nearest).
Tensor cast_to(const Tensor& t, DataType to) {
  Tensor out(to, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get_as_double(i);
    if (to == DataType::kFloat64)
      out.data<double>()[i] = v;
    else if (to == DataType::kFloat32)
      out.data<float>()[i] = static_cast<float>(v);
    else if (to == DataType::kFloat16)
      out.data<Half>()[i] = Half{float_to_half(static_cast<float>(v))};
    else
      out.data<BFloat16>()[i] = BFloat16{float_to_bf16(static_cast<float>(v))};
  }
  return out;
}

// The opset 20 name of a mode.
std::string onnx20(const std::string& mode) {
  return mode == "bilinear" ? "linear" : mode == "bicubic" ? "cubic" : mode;
}

// GridSample at opset 16 (4-D, PyTorch's mode names) or 20 (5-D, the new names).
OpCall forward(const Case& c, Tensor x, Tensor grid) {
  const bool v16 = c.rank == 4;
  return {"GridSample",
          {std::move(x), std::move(grid)},
          {{"mode", Attribute(v16 ? std::string(c.mode) : onnx20(c.mode))},
           {"padding_mode", Attribute(c.padding)},
           {"align_corners", Attribute(int64_t{c.align_corners})}},
          1,
          v16 ? 16 : 20};
}

OpCall backward(const Case& c, Tensor dy, Tensor x, Tensor grid) {
  return {"GridSampleGrad",
          {std::move(dy), std::move(x), std::move(grid)},
          {{"mode", Attribute(onnx20(c.mode))},
           {"padding_mode", Attribute(c.padding)},
           {"align_corners", Attribute(int64_t{c.align_corners})}},
          2,
          1,
          kOtterDomain};
}

class GridSampleRef : public ::testing::TestWithParam<Case> {};

TEST_P(GridSampleRef, ForwardAndGradientsMatchPyTorch) {
  const Case& c = GetParam();
  const NpzArchive& a = refs();
  const std::string n = c.name();
  const Tensor &x = a.get(n + "/x"), &grid = a.get(n + "/grid"), &dy = a.get(n + "/dy");
  for (DataType t : {DataType::kFloat64, DataType::kFloat32}) {
    SCOPED_TRACE(dtype_name(t));
    const double tol = t == DataType::kFloat64 ? 1e-12 : 1e-5;
    auto y = run_op(forward(c, cast_to(x, t), cast_to(grid, t)));
    ASSERT_EQ(y[0].dtype(), t);
    EXPECT_LT(max_rel_diff(y[0], a.get(n + "/y")), tol);
    auto g = run_op(backward(c, cast_to(dy, t), cast_to(x, t), cast_to(grid, t)));
    ASSERT_EQ(g[0].dtype(), t);
    ASSERT_EQ(g[1].dtype(), t);
    EXPECT_LT(max_rel_diff(g[0], a.get(n + "/dx")), tol) << "dX";
    EXPECT_LT(max_rel_diff(g[1], a.get(n + "/dgrid")), tol) << "dGrid";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GridSampleRef, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name(); });

// The references are not degenerate: some points fall outside X (the padding matters) and nearest's
// grid gradient is zero while the others' is not.
TEST(GridSample, ReferencesExerciseThePadding) {
  const NpzArchive& a = refs();
  for (const Case& c : all_cases()) {
    const Tensor& grid = a.get(c.name() + "/grid");
    double far = 0, dgrid = 0;
    for (int64_t i = 0; i < grid.numel(); ++i) far = std::max(far, std::abs(grid.get_as_double(i)));
    const Tensor& dg = a.get(c.name() + "/dgrid");
    for (int64_t i = 0; i < dg.numel(); ++i) dgrid = std::max(dgrid, std::abs(dg.get_as_double(i)));
    const bool cubic_pad = std::string(c.mode) == "bicubic" && std::string(c.padding) != "zeros";
    EXPECT_GT(far, cubic_pad ? 0.9 : 1.1) << c.name();
    if (std::string(c.mode) == "nearest")
      EXPECT_EQ(dgrid, 0) << c.name();
    else
      EXPECT_GT(dgrid, 0.1) << c.name();
  }
}

// Half X and Grid widen to float32 (kernels/cpu/half.cc): within the inputs' rounding of PyTorch.
TEST(GridSample, HalfInputsNearTheReference) {
  const Case c{4, "bilinear", "reflection", 0};
  const NpzArchive& a = refs();
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    // Through the executor: the half wrapper rounds to the dtype that inference gives the output.
    Graph g;
    g.opset_imports[""] = 16;
    Value* x = g.add_input("x", t, Shape::of(a.get(c.name() + "/x").dims()));
    Value* grid = g.add_input("grid", t, Shape::of(a.get(c.name() + "/grid").dims()));
    Node* n = g.add_node("GridSample", {x, grid}, {"y"});
    n->set_attr("padding_mode", Attribute(c.padding));
    infer_node(*n);
    g.add_output(n->output(0));
    Executor ex(g);
    auto out = ex.run({{"x", cast_to(a.get(c.name() + "/x"), t)}, {"grid", cast_to(a.get(c.name() + "/grid"), t)}});
    ASSERT_EQ(out.at("y").dtype(), t);
    EXPECT_LT(max_rel_diff(out.at("y"), a.get(c.name() + "/y")), t == DataType::kFloat16 ? 5e-3 : 4e-2)
        << dtype_name(t);
  }
}

// X and Grid of different float types (the spec types them separately).
TEST(GridSample, GridMayHaveAnotherFloatType) {
  const Case c{5, "bilinear", "border", 1};
  const NpzArchive& a = refs();
  auto y = run_op(forward(c, cast_to(a.get(c.name() + "/x"), DataType::kFloat32), a.get(c.name() + "/grid")));
  ASSERT_EQ(y[0].dtype(), DataType::kFloat32);
  EXPECT_LT(max_rel_diff(y[0], a.get(c.name() + "/y")), 1e-6);
  auto g = run_op(backward(c, cast_to(a.get(c.name() + "/dy"), DataType::kFloat32),
                           cast_to(a.get(c.name() + "/x"), DataType::kFloat32), a.get(c.name() + "/grid")));
  ASSERT_EQ(g[1].dtype(), DataType::kFloat64);
  EXPECT_LT(max_rel_diff(g[1], a.get(c.name() + "/dgrid")), 1e-5);
}

// Grid values far outside (1e30) and NaN: zeros padding reads zeros, border reads X's edge.
TEST(GridSample, FarAndNanCoordinatesReadThePadding) {
  Tensor x = Tensor::from_vector<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor grid = Tensor::from_vector<float>({1, 1, 3, 2}, {1e30f, 0, -1e30f, -1e30f, nan, 0});
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    SCOPED_TRACE(mode);
    auto y = run_op(forward({4, mode, "zeros", 0}, x, grid));
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(y[0].data<float>()[i], 0.f) << i;
    y = run_op(forward({4, mode, "border", 1}, x, grid));
    EXPECT_FLOAT_EQ(y[0].data<float>()[1], 1.f);  // (-inf, -inf): the top-left pixel
    for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(y[0].data<float>()[i])) << i;
    y = run_op(forward({4, mode, "reflection", 0}, x, grid));
    for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(y[0].data<float>()[i])) << i;
  }
}

// ---- errors ------------------------------------------------------------------------------------

constexpr DataType kF = DataType::kFloat32;

TEST(GridSample, InferenceNamesTheNodeAndTheProblem) {
  auto attrs = [](const char* mode, const char* pad) {
    return std::map<std::string, Attribute>{{"mode", Attribute(mode)}, {"padding_mode", Attribute(pad)}};
  };
  std::string e = infer_error("GridSample", {{kF, {2, 3, 4, 5}}, {kF, {2, 6, 7, 2}}}, attrs("linear", "zeros"), 1, 16);
  EXPECT_NE(e.find("GridSample 'the_node'"), std::string::npos) << e;
  EXPECT_NE(e.find("attribute 'mode' must be \"bilinear\""), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 4, 5}}, {kF, {2, 6, 7, 2}}}, attrs("bicubic", "zeros"), 1, 20);
  EXPECT_NE(e.find("got \"bicubic\""), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 4, 5}}, {kF, {2, 6, 7, 2}}}, attrs("nearest", "mirror"), 1, 16);
  EXPECT_NE(e.find("attribute 'padding_mode' must be"), std::string::npos) << e;
  EXPECT_NE(e.find("\"mirror\""), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 4, 5}}, {kF, {2, 6, 7, 3}}}, {}, 1, 16);
  EXPECT_NE(e.find("the last axis of Grid [2,6,7,3]"), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 4, 5}}, {kF, {3, 6, 7, 2}}}, {}, 1, 16);
  EXPECT_NE(e.find("batch sizes"), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 4, 5}}, {kF, {2, 6, 2}}}, {}, 1, 16);
  EXPECT_NE(e.find("must have X's rank"), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 2, 4, 5}}, {kF, {2, 1, 6, 7, 3}}}, {}, 1, 16);
  EXPECT_NE(e.find("must be 4-D"), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 2, 2, 4, 5}}, {kF, {2, 1, 1, 6, 7, 4}}}, {}, 1, 20);
  EXPECT_NE(e.find("1 to 3 spatial axes"), std::string::npos) << e;
  e = infer_error("GridSample", {{kF, {2, 3, 4, 5}}, {kF, {2, 6, 7, 2}}}, {{"align_corners", Attribute(int64_t{2})}}, 1,
                  16);
  EXPECT_NE(e.find("'align_corners' must be 0 or 1"), std::string::npos) << e;
  e = infer_error("GridSample", {{DataType::kInt64, {2, 3, 4, 5}}, {kF, {2, 6, 7, 2}}}, {}, 1, 16);
  EXPECT_NE(e.find("GridSample 'the_node'"), std::string::npos) << e;
}

TEST(GridSample, InferenceGivesTheSampledShape) {
  Graph g;
  g.opset_imports[""] = 20;
  Value* x = g.add_input("x", kF, Shape({Dim("N"), Dim(3), Dim(4), Dim(5), Dim(6)}));
  Value* grid = g.add_input("grid", kF, Shape({Dim("N"), Dim(2), Dim(7), Dim(8), Dim(3)}));
  Node* n = g.add_node("GridSample", {x, grid}, {"y"});
  infer_node(*n);
  EXPECT_EQ(n->output(0)->shape(), Shape({Dim("N"), Dim(3), Dim(2), Dim(7), Dim(8)}));
  EXPECT_EQ(n->output(0)->dtype(), kF);
  EXPECT_EQ(OpTable::instance().find("", "GridSample", 15), nullptr);
  EXPECT_NE(OpTable::instance().find("", "GridSample", 16), OpTable::instance().find("", "GridSample", 20));
}

TEST(GridSample, KernelsRefuseBadShapesAndAttributes) {
  const Case c{4, "bilinear", "zeros", 0};
  Tensor x(kF, {2, 3, 4, 5});
  std::string e = run_error(forward(c, x, Tensor(kF, {2, 6, 7, 3})));
  EXPECT_NE(e.find("Grid f32[2,6,7,3] must be [N, H1, ..., Hr, r]"), std::string::npos) << e;
  e = run_error(backward(c, Tensor(kF, {2, 3, 6, 6}), x, Tensor(kF, {2, 6, 7, 2})));
  EXPECT_NE(e.find("dY f32[2,3,6,6] does not match GridSample's output [2,3,6,7]"), std::string::npos) << e;
  OpCall bad = backward(c, Tensor(kF, {2, 3, 6, 7}), x, Tensor(kF, {2, 6, 7, 2}));
  bad.attrs["padding_mode"] = Attribute("wrap");
  e = run_error(bad);
  EXPECT_NE(e.find("unknown padding_mode \"wrap\""), std::string::npos) << e;
}

}  // namespace
}  // namespace otter
